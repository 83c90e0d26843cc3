// `seqbench run`'s flags: every flag as given (RunFlags), parsed, then checked against
// each other and their bounds before anything is read or run (CheckedFlags), and the
// suite they select. The run itself is harness/run_driver.h's; cli/run.cc joins them.
//
// Thread-safety: values and functions of the calling thread; CheckRunFlags may switch
// tracing on (--nvtx), a process-wide setting.
#pragma once

#include <boost/program_options.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/benchmark_run.h"
#include "harness/child_run.h"
#include "harness/runner.h"
#include "harness/suite.h"

namespace seqbench::cli {

// Every flag of `seqbench run` as given; `values` says which were.
struct RunFlags {
  std::string suite_path, db_path, device, filter, shard_text, check_text;
  int64_t repetitions = 0, resume = 0, stop_after = 0, threads = 0;
  double case_timeout_s = 0;
  std::string label, min_time_text, max_noise_text, max_time_text;
  std::string group;  // --group: the run group this shard belongs to
  int64_t warmup = 0, count_steps = 0;
  std::string count_kind;
  std::string lockstep;  // run --lockstep PREFIX: a worker of seqbench ab
  // The hidden flags: this process's role when seqbench started it (the --isolate or
  // --count child), and the test hooks. Test-only (run --test-slowdown): each timed step
  // of the cases whose key matches `test_slowdown_filter` does test_slowdown times its
  // work, by running whole extra steps (never a sleep), so that the gate's power can be
  // measured against a known factor. 0: off.
  ChildRun role;
  boost::program_options::variables_map values;
  bool Given(const char* flag) const { return values.count(flag) > 0; }
};

// What the flags mean once checked.
struct CheckedFlags {
  std::optional<double> min_time_s, max_noise, max_time_s;
  std::vector<std::string> count_kinds;
  CheckPolicy check = CheckPolicy::kFull;
  CaseSelection selection;
};

// Parses `args` into `f`; false when --help was answered. Throws UsageError (and
// boost::program_options::error) for a flag it does not know or a value of the wrong type.
bool ParseRunFlags(const std::vector<std::string>& args, RunFlags& f);

// Every check of the flags on their own and against each other, before the suite is read;
// throws UsageError naming the flag. With --nvtx, switches tracing on.
CheckedFlags CheckRunFlags(const RunFlags& f);

// The suite file with the flags' overrides of its [measure] table; UsageError for a
// suite error (file:line:column) or an override the suite contradicts.
Suite SuiteFor(const RunFlags& f, const CheckedFlags& checked);

// Whether each case runs in a child of its own; refuses --check sample there.
bool IsolatesCases(const RunFlags& f, const CheckedFlags& checked);

}  // namespace seqbench::cli
