// A child process supervised to the end: started by fork-exec, waited for with a time
// limit, killed when the limit passes or the caller asks it to stop. `run --isolate` runs
// each case this way, so that a variant that crashes, aborts, calls exit() or hangs costs
// that case only.
//
// Thread-safety: RunChild() blocks the calling thread until the child is gone; several
// threads may each supervise their own child.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace seqbench {

struct ChildOutcome {
  enum class End {
    kExited,       // exit_code is its status
    kSignaled,     // killed by `signal` (a crash, an abort, the OOM killer)
    kTimedOut,     // past the time limit: killed by the supervisor
    kInterrupted,  // `should_stop` returned true: killed by the supervisor
    kNotStarted,   // fork or exec failed; `message` says why
  };
  End end = End::kNotStarted;
  int exit_code = 0;
  int signal = 0;
  double wall_s = 0;
  std::string message;

  // One line for a case's message, e.g. "crashed: signal 11 (Segmentation fault)".
  std::string Describe() const;
};

// Runs argv[0] (a path, not looked up in PATH) with `argv`, inheriting stdout, stderr and
// the environment, to which `extra_environment` ("NAME=value") adds or overrides; with
// `inherit_environment` false, `extra_environment` is the child's whole environment. With
// `output_path`, the child's stdout and stderr go to that file (created or truncated; a
// symbolic link there is refused);
// with `working_dir`, the child starts there.
// timeout_s <= 0: no limit. `should_stop` is polled about every 20 ms (it may read a flag
// set by a signal handler). The child dies with its supervisor (PR_SET_PDEATHSIG). It runs
// in a process group of its own, which is killed whole when it ends, however it ends: no
// process it started outlives it.
ChildOutcome RunChild(const std::vector<std::string>& argv, double timeout_s,
                      const std::function<bool()>& should_stop,
                      const std::vector<std::string>& extra_environment = {},
                      const std::string& output_path = "", bool inherit_environment = true,
                      const std::string& working_dir = "");

// This executable's path (/proc/self/exe), to start another seqbench.
std::string SelfExecutable();

}  // namespace seqbench
