// The one way seqbench starts another program: a child process supervised to the end.
// It is started by fork-exec (no shell between us and it), runs in a process group of its
// own that is killed whole when it ends however it ends (no process it started outlives
// it), dies with its supervisor (PR_SET_PDEATHSIG), and is waited for with a time limit.
// `run --isolate`'s cases, the counting child, `ab`'s sides, the peers, the training
// ranks, Slurm's tools, gnuplot and git all start this way.
//
// Thread-safety: RunChild() blocks the calling thread until the child is gone; several
// threads may each supervise their own child. The spec is read, never written.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace seqbench {

// What to start and how. Only `argv` is required.
struct ChildSpec {
  // argv[0] is a path, or with `search_path` a name without a slash looked up on the
  // parent's PATH (as a shell would, but before the fork: after it only async-signal-safe
  // calls are allowed); a path is used as it is, as execvp uses it.
  std::vector<std::string> argv;
  bool search_path = false;
  double timeout_s = 0;  // <= 0: no limit
  // Polled about every 20 ms; true kills the child (it may read a flag a signal handler set).
  std::function<bool()> should_stop;
  // Called at each poll, before should_stop, and once more after the child has ended:
  // progress while it runs. If either throws, the child is killed and reaped first, then
  // the exception goes on.
  std::function<void()> on_poll;
  // "NAME=value" entries added to, or overriding, the inherited environment; with
  // `inherit_environment` false they are the child's whole environment.
  std::vector<std::string> environment;
  bool inherit_environment = true;
  std::string working_dir;  // empty: the parent's
  // The child's standard input; unset: inherited.
  std::optional<std::string> input;
  // Where stdout and stderr go: inherited; into `output_path` (created or truncated, never
  // through a symbolic link planted there); or captured into ChildOutcome::output (stdout
  // alone, or both), at most `max_output` bytes of it: a running child whose capture
  // passes that is stopped at the next poll (kInterrupted, output_truncated), so that a
  // runaway's output is bounded in memory, not only cut when read back; one that ends
  // first keeps its own end, its output truncated.
  enum class Output { kInherit, kFile, kCaptureStdout, kCaptureBoth };
  Output output = Output::kInherit;
  std::string output_path;
  size_t max_output = size_t{16} << 20;
  // With kCaptureStdout: stderr to /dev/null rather than inherited (a probe's complaints).
  bool discard_stderr = false;
};

struct ChildOutcome {
  enum class End {
    kExited,       // exit_code is its status
    kSignaled,     // killed by `signal` (a crash, an abort, the OOM killer)
    kTimedOut,     // past the time limit: killed by the supervisor
    kInterrupted,  // `should_stop` returned true, or the running child's capture passed
                   // max_output (`message` says so): killed by the supervisor
    kNotStarted,   // fork or exec failed, or no such program; `message` says why
  };
  End end = End::kNotStarted;
  int exit_code = 0;
  int signal = 0;
  double wall_s = 0;
  std::string message;
  std::string output;  // what a capturing spec caught
  // More than max_output was written, or the rest could not be read back.
  bool output_truncated = false;

  // Exited with status 0.
  bool Succeeded() const { return end == End::kExited && exit_code == 0; }
  // One line for a case's message, e.g. "crashed: signal 11 (Segmentation fault)".
  std::string Describe() const;
};

ChildOutcome RunChild(const ChildSpec& spec);

// Every executable file named `name` in the directories of PATH, in PATH's order, each an
// absolute path (an empty or relative entry is taken from the working directory now).
std::vector<std::string> AllOnPath(const std::string& name);
// The first of them (what a shell would run), or nothing.
std::optional<std::string> FirstOnPath(const std::string& name);

// This executable's path (/proc/self/exe), to start another seqbench.
std::string SelfExecutable();

}  // namespace seqbench
