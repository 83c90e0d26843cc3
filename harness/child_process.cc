#include "harness/child_process.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <string_view>
#include <thread>

namespace seqbench {

std::string ChildOutcome::Describe() const {
  switch (end) {
    case End::kExited:
      return "the case's process exited with status " + std::to_string(exit_code) +
             (exit_code == 0 ? " without storing a result (did the variant call exit()?)" : "") +
             (message.empty() ? "" : " (" + message + ")");
    case End::kSignaled:
      return "the case's process crashed: signal " + std::to_string(signal) + " (" +
             strsignal(signal) + ")" +
             (signal == SIGKILL ? ", e.g. by the out-of-memory killer" : "");
    case End::kTimedOut:
      return "killed after " + std::to_string(static_cast<int64_t>(wall_s)) +
             " s, past the case timeout (run --case-timeout)";
    case End::kInterrupted:
      return "interrupted";
    case End::kNotStarted:
      return "could not start the case's process: " + message;
  }
  return message;
}

// The link itself, not its target: exec through it still works after the binary file was
// replaced (rebuilt) while the run goes on, where the target path would name a new binary
// or "... (deleted)".
std::string SelfExecutable() { return "/proc/self/exe"; }

namespace {

// The child's environment: `extra` ("NAME=value"), then the inherited entries it does not
// override. Pointers into `extra` and environ: built before fork(), since after it, in a
// process with other threads (LibTorch's pools), only async-signal-safe calls are allowed.
std::vector<char*> ChildEnvironment(const std::vector<std::string>& extra, bool inherit) {
  std::vector<char*> environment;
  for (const std::string& entry : extra) environment.push_back(const_cast<char*>(entry.c_str()));
  for (char** entry = environ; inherit && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const auto name = text.substr(0, text.find('=') + 1);  // "NAME="
    const bool overridden = std::any_of(extra.begin(), extra.end(), [&](const std::string& e) {
      return std::string_view(e).substr(0, name.size()) == name;
    });
    if (!overridden) environment.push_back(*entry);
  }
  environment.push_back(nullptr);
  return environment;
}

// In the forked child: its own process group (a terminal's Ctrl-C reaches the supervisor
// only, which then kills the child and records an interruption rather than a crash), death
// with the supervisor, its output, its folder, then exec. Async-signal-safe calls only.
[[noreturn]] void BecomeChild(pid_t parent, int output, const std::string& working_dir,
                              std::vector<char*>& args, std::vector<char*>& environment) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);  // the supervisor died before prctl
  if (output >= 0 && (dup2(output, STDOUT_FILENO) < 0 || dup2(output, STDERR_FILENO) < 0))
    _exit(127);
  if (!working_dir.empty() && chdir(working_dir.c_str()) != 0) _exit(127);
  execve(args[0], args.data(), environment.data());
  _exit(127);
}

// How the child ended, from waitpid's status; `should_stop` true: an interruption (a
// signal sent to the whole group, kill -- -PGID, reaches the child as well).
void RecordEnd(int status, const std::string& program, const std::function<bool()>& should_stop,
               ChildOutcome& outcome) {
  if (should_stop && should_stop()) {
    outcome.end = ChildOutcome::End::kInterrupted;
  } else if (WIFEXITED(status)) {
    outcome.end = ChildOutcome::End::kExited;
    outcome.exit_code = WEXITSTATUS(status);
    if (outcome.exit_code == 127) outcome.message = "exec " + program + " failed";
  } else {
    outcome.end = ChildOutcome::End::kSignaled;
    outcome.signal = WTERMSIG(status);
  }
}

// Kills what the child left in its process group (its group id is its pid): a wrapper
// script's program, a probe's subprocess, anything it started in the background. Called
// once the child is reaped: the kernel keeps a group's id from being reused while any
// member lives, so the signal reaches nothing else; ESRCH when nothing was left.
void KillGroup(pid_t pid) { kill(-pid, SIGKILL); }

// Waits for child `pid`, polling every 20 ms; kills it past `timeout_s` or when
// `should_stop` says so.
ChildOutcome Supervise(pid_t pid, const std::string& program, double timeout_s,
                       const std::function<bool()>& should_stop) {
  ChildOutcome outcome;
  const auto started = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  const auto kill_child = [&](ChildOutcome::End why) {
    kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    KillGroup(pid);
    outcome.end = why;
    outcome.wall_s = elapsed();
    return outcome;
  };
  while (true) {
    int status = 0;
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) {
      KillGroup(pid);
      outcome.wall_s = elapsed();
      RecordEnd(status, program, should_stop, outcome);
      return outcome;
    }
    if (done < 0 && errno != EINTR) {
      outcome.message = std::string("waitpid: ") + std::strerror(errno);
      return kill_child(ChildOutcome::End::kNotStarted);
    }
    if (should_stop && should_stop()) return kill_child(ChildOutcome::End::kInterrupted);
    if (timeout_s > 0 && elapsed() > timeout_s) return kill_child(ChildOutcome::End::kTimedOut);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

ChildOutcome RunChild(const std::vector<std::string>& argv, double timeout_s,
                      const std::function<bool()>& should_stop,
                      const std::vector<std::string>& extra_environment,
                      const std::string& output_path, bool inherit_environment,
                      const std::string& working_dir) {
  ChildOutcome outcome;
  if (argv.empty()) {
    outcome.message = "no command";
    return outcome;
  }
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  std::vector<char*> environment = ChildEnvironment(extra_environment, inherit_environment);
  int output = -1;
  if (!output_path.empty()) {
    // Never through a link planted at the path: the output would land in its target.
    output = open(output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (output < 0) {
      outcome.message = "cannot write " + output_path + ": " + std::strerror(errno);
      return outcome;
    }
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) BecomeChild(parent, output, working_dir, args, environment);
  // The child does the same before exec; here too, so that the group exists before any
  // kill of it, whichever of the two runs first (EACCES once the child has exec'd).
  if (pid > 0) setpgid(pid, pid);
  if (output >= 0) close(output);
  if (pid < 0) {
    outcome.message = std::string("fork: ") + std::strerror(errno);
    return outcome;
  }
  return Supervise(pid, argv[0], timeout_s, should_stop);
}

}  // namespace seqbench
