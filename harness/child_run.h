// ChildRun: one seqbench process that seqbench starts itself, as a value. Every way it
// does (the --isolate child, the --count child, ab's two sides and lockstep workers, a
// Slurm array task, a training rank) fills one of these and starts ToArgv(); the child's
// own `run` reads its protocol flags back with FromArgv(). One table of flags in
// child_run.cc serves both directions, so a renamed flag is one row, and the round-trip
// test (tests/child_run_test.cc) covers every field.
//
// Each field's default means "not given": the child then takes the suite's value or its
// own default, exactly as when a user leaves the flag out. So a field holds only values
// already checked (a --repetitions 0 in one would vanish); the user's own words, not yet
// checked, travel in user_flags.
//
// Thread-safety: a plain value; the functions are pure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace seqbench {

struct ChildRun {
  std::string binary;                // argv[0]: this seqbench, or ab's base or new build
  std::vector<std::string> plugins;  // --plugin LIB, each loaded before the command
  std::string command = "run";       // "run", or "train" for a training rank
  std::string suite_path;            // run's positional argument ("" for train)

  // What every child of `run` is told as its parent was.
  std::string db_path, device, filter, check;
  int64_t threads = 0, repetitions = 0;
  int64_t warmup = -1;                        // 0 is a warmup given
  std::string min_time, max_noise, max_time;  // as typed ("10ms", "2%", "30s")
  std::string count;                          // run --count's kinds, or "none"
  int64_t count_steps = 0;
  bool in_process = false, nvtx = false;

  // The child's role; the hidden flags `run --help` does not list.
  std::string run_case, run_uuid;       // the --isolate child: this case, into this run...
  int64_t into_run = 0, position = -1;  // ...of this id, at this position
  std::string count_out;                // the --count child: its folder
  std::string lockstep;                 // ab's worker: its pipes' prefix
  std::string shard, group;             // a Slurm task's shard of the run group
  // Test-only hooks (run --test-slowdown, --test-extra-head-passes).
  double test_slowdown = 0;
  std::string test_slowdown_filter = ".*";
  int64_t test_extra_head_passes = 0;

  // The user's own flags, passed on as given, after the fields' (train's whole command
  // line, minus --nproc).
  std::vector<std::string> user_flags;

  // [binary, --plugin P..., command, suite, the given fields' flags in table order,
  // user_flags...]: every value its own word, never through a shell.
  std::vector<std::string> ToArgv() const;
  // ToArgv() after the command: what `run`'s own parser receives.
  std::vector<std::string> Arguments() const;
  // Sets the field of flag `name` (without dashes) from its text, as FromArgv() does.
  // Throws std::invalid_argument for a name that is no field's, or a value of the wrong
  // type.
  void Set(const std::string& name, const std::string& text);
  // The inverse of ToArgv() over a whole command line (argv[0] first). A flag of the
  // table takes "--flag value" or "--flag=value"; any other word goes to user_flags in
  // order (every word after the command, for a command other than run). Throws
  // std::invalid_argument naming the flag for a value of the wrong type or a missing one.
  static ChildRun FromArgv(const std::vector<std::string>& argv);
  // "--flag" for a field, so that a command written for a shell (a Slurm script, whose
  // shard and database come from the task's environment) names flags as ToArgv does.
  // Throws std::invalid_argument for a name that is no field's.
  static std::string Flag(const std::string& name);

  bool operator==(const ChildRun& other) const;
  bool operator!=(const ChildRun& other) const { return !(*this == other); }
};

// Every flag of the table, for `run`'s parser: it declares the hidden ones (the role's
// and the test hooks', which `run --help` does not list) and checks that it knows the
// rest, so that the two cannot drift apart.
struct ChildRunFlag {
  std::string name;        // without the dashes
  bool hidden = false;     // not in `run --help`
  bool is_switch = false;  // takes no value
};
std::vector<ChildRunFlag> ChildRunFlags();

}  // namespace seqbench
