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
  // Everything the child needs is built before fork(): after it, in a process with other
  // threads (LibTorch's pools), only async-signal-safe calls are allowed.
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  std::vector<char*> environment;
  for (const std::string& entry : extra_environment) {
    environment.push_back(const_cast<char*>(entry.c_str()));
  }
  for (char** entry = environ; inherit_environment && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const auto name = text.substr(0, text.find('=') + 1);  // "NAME="
    const bool overridden = std::any_of(
        extra_environment.begin(), extra_environment.end(), [&](const std::string& extra) {
          return std::string_view(extra).substr(0, name.size()) == name;
        });
    if (!overridden) environment.push_back(*entry);
  }
  environment.push_back(nullptr);
  int output = -1;
  if (!output_path.empty()) {
    output = open(output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (output < 0) {
      outcome.message = "cannot write " + output_path + ": " + std::strerror(errno);
      return outcome;
    }
  }
  const pid_t parent = getpid();
  const auto started = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid < 0) {
    outcome.message = std::string("fork: ") + std::strerror(errno);
    if (output >= 0) close(output);
    return outcome;
  }
  if (pid == 0) {
    // Its own process group: a terminal's Ctrl-C reaches the supervisor only, which then
    // kills the child and records an interruption rather than a crash.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the supervisor died before prctl
    if (output >= 0 && (dup2(output, STDOUT_FILENO) < 0 || dup2(output, STDERR_FILENO) < 0))
      _exit(127);
    if (!working_dir.empty() && chdir(working_dir.c_str()) != 0) _exit(127);
    execve(args[0], args.data(), environment.data());
    _exit(127);
  }
  if (output >= 0) close(output);
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  const auto kill_child = [&](ChildOutcome::End why) {
    kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    outcome.end = why;
    outcome.wall_s = elapsed();
    return outcome;
  };
  while (true) {
    int status = 0;
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) {
      outcome.wall_s = elapsed();
      // A signal sent to the whole group (kill -- -PGID) reaches the child as well.
      if (should_stop && should_stop()) {
        outcome.end = ChildOutcome::End::kInterrupted;
        return outcome;
      }
      if (WIFEXITED(status)) {
        outcome.end = ChildOutcome::End::kExited;
        outcome.exit_code = WEXITSTATUS(status);
        if (outcome.exit_code == 127) outcome.message = "exec " + argv[0] + " failed";
      } else {
        outcome.end = ChildOutcome::End::kSignaled;
        outcome.signal = WTERMSIG(status);
      }
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

}  // namespace seqbench
