#include "base/process.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>

namespace seqbench {

std::string ChildOutcome::Describe() const {
  switch (end) {
    case End::kExited:
      return "exited with status " + std::to_string(exit_code) +
             (message.empty() ? "" : " (" + message + ")");
    case End::kSignaled:
      return std::string("crashed: signal ") + std::to_string(signal) + " (" + strsignal(signal) +
             ")" + (signal == SIGKILL ? ", e.g. by the out-of-memory killer" : "");
    case End::kTimedOut:
      return "killed after " + std::to_string(static_cast<int64_t>(wall_s)) +
             " s, past its time limit";
    case End::kInterrupted:
      return message.empty() ? "interrupted" : message;
    case End::kNotStarted:
      return "could not start: " + message;
  }
  return message;
}

// The link itself, not its target: exec through it still works after the binary file was
// replaced (rebuilt) while the run goes on, where the target path would name a new binary
// or "... (deleted)".
std::string SelfExecutable() { return "/proc/self/exe"; }

std::vector<std::string> AllOnPath(const std::string& name) {
  std::vector<std::string> found;
  const char* path = std::getenv("PATH");
  if (path == nullptr || name.empty() || name.find('/') != std::string::npos) return found;
  std::string_view rest(path);
  while (true) {
    const size_t colon = rest.find(':');
    const std::string_view dir = rest.substr(0, colon);
    // An empty entry is the working directory, as for a shell. A relative entry's find is
    // made absolute now: a child started in another folder (ChildSpec::working_dir) must
    // run what was found here, not whatever that folder holds under the same relative name.
    std::string candidate = (dir.empty() ? std::string(".") : std::string(dir)) + "/" + name;
    struct stat info {};
    if (stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
        access(candidate.c_str(), X_OK) == 0) {
      // Not normalised: "link/.." is the link's target's parent, which only the file
      // system knows. A working directory gone keeps the relative name.
      std::error_code no_cwd;
      const std::filesystem::path absolute = std::filesystem::absolute(candidate, no_cwd);
      if (!no_cwd) candidate = absolute.string();
      if (std::find(found.begin(), found.end(), candidate) == found.end())
        found.push_back(candidate);
    }
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  return found;
}

std::optional<std::string> FirstOnPath(const std::string& name) {
  std::vector<std::string> found = AllOnPath(name);
  if (found.empty()) return std::nullopt;
  return std::move(found.front());
}

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

// An anonymous file: it has no name, so nothing can be planted at it, and it is gone with
// its last descriptor. In memory first (memfd_create: no file system needed, so an
// unwritable or full TMPDIR does not stop git or sbatch being read back); where the kernel
// lacks it, O_TMPFILE in the temporary directory, else a name of its own (mkstemp: O_EXCL)
// unlinked at once. -1 with errno on failure.
int AnonymousFile() {
  const int in_memory = memfd_create("seqbench-child", MFD_CLOEXEC);
  // Out of descriptors or memory: a file would not help. Any other failure (ENOSYS on an
  // old kernel, EPERM under a seccomp filter that forbids it): a file.
  if (in_memory >= 0 || errno == EMFILE || errno == ENFILE || errno == ENOMEM) return in_memory;
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  const int fd = open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)) return fd;
  std::string name = dir + "/seqbench-child-XXXXXX";
  const int named = mkostemp(name.data(), O_CLOEXEC);
  if (named >= 0) unlink(name.c_str());
  return named;
}

// `fd` moved above the standard streams (close-on-exec), so that the child's dup2 onto 0,
// 1 or 2 always copies it: where seqbench itself runs with a standard stream closed, a new
// descriptor lands on 0-2, and dup2 of a descriptor onto itself keeps its close-on-exec
// flag, so the child would lose that stream. -1 (errno set) stays -1.
int AboveStandardStreams(int fd) {
  if (fd < 0 || fd > STDERR_FILENO) return fd;
  const int moved = fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
  const int saved = errno;
  close(fd);
  errno = saved;
  return moved;
}

// The descriptors the child's stdin, stdout and stderr come from (-1: inherited), opened
// before the fork; closed by the destructor in the parent.
struct ChildFiles {
  int input = -1;
  int output = -1;
  int error = -1;  // the same descriptor as output, /dev/null's, or -1
  ~ChildFiles() {
    if (input >= 0) close(input);
    if (output >= 0) close(output);
    if (error >= 0 && error != output) close(error);
  }
};

bool WriteAll(int fd, const std::string& text) {
  for (size_t written = 0; written < text.size();) {
    const ssize_t n = write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    written += static_cast<size_t>(n);
  }
  return lseek(fd, 0, SEEK_SET) == 0;
}

// Opens what `spec` asks for; an empty string, or why not.
std::string OpenChildFiles(const ChildSpec& spec, ChildFiles& files) {
  if (spec.input) {
    files.input = AboveStandardStreams(AnonymousFile());
    if (files.input < 0 || !WriteAll(files.input, *spec.input))
      return std::string("cannot hold the child's input: ") + std::strerror(errno);
  }
  switch (spec.output) {
    case ChildSpec::Output::kInherit:
      return "";
    case ChildSpec::Output::kFile:
      // Never through a link planted at the path: the output would land in its target.
      files.output = AboveStandardStreams(open(
          spec.output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
      if (files.output < 0) return "cannot write " + spec.output_path + ": " + std::strerror(errno);
      break;
    case ChildSpec::Output::kCaptureStdout:
    case ChildSpec::Output::kCaptureBoth:
      files.output = AboveStandardStreams(AnonymousFile());
      if (files.output < 0)
        return std::string("cannot hold the child's output: ") + std::strerror(errno);
      break;
  }
  if (spec.output != ChildSpec::Output::kCaptureStdout) {
    files.error = files.output;
  } else if (spec.discard_stderr) {
    files.error = AboveStandardStreams(open("/dev/null", O_WRONLY | O_CLOEXEC));
    if (files.error < 0) return std::string("cannot open /dev/null: ") + std::strerror(errno);
  }
  return "";
}

// In the forked child: its own process group (a terminal's Ctrl-C reaches the supervisor
// only, which then kills the child and records an interruption rather than a crash), death
// with the supervisor, its files, its folder, then exec. Async-signal-safe calls only.
[[noreturn]] void BecomeChild(pid_t parent, const ChildFiles& files, const char* working_dir,
                              std::vector<char*>& args, std::vector<char*>& environment) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);  // the supervisor died before prctl
  if (files.input >= 0 && dup2(files.input, STDIN_FILENO) < 0) _exit(127);
  if (files.output >= 0 && dup2(files.output, STDOUT_FILENO) < 0) _exit(127);
  if (files.error >= 0 && dup2(files.error, STDERR_FILENO) < 0) _exit(127);
  if (*working_dir != '\0' && chdir(working_dir) != 0) _exit(127);
  execve(args[0], args.data(), environment.data());
  _exit(127);
}

// How the child ended, from waitpid's status; `should_stop` true: an interruption (a
// signal sent to the whole group, kill -- -PGID, reaches the child as well).
void RecordEnd(const siginfo_t& ended, const std::string& program,
               const std::function<bool()>& should_stop, ChildOutcome& outcome) {
  if (should_stop && should_stop()) {
    outcome.end = ChildOutcome::End::kInterrupted;
  } else if (ended.si_code == CLD_EXITED) {
    outcome.end = ChildOutcome::End::kExited;
    outcome.exit_code = ended.si_status;
    if (outcome.exit_code == 127) outcome.message = "exec " + program + " failed";
  } else {  // CLD_KILLED or CLD_DUMPED
    outcome.end = ChildOutcome::End::kSignaled;
    outcome.signal = ended.si_status;
  }
}

// Kills what the child left in its process group (its group id is its pid): a wrapper
// script's program, a probe's subprocess, anything it started in the background. Called
// before the leader is reaped: the kernel keeps a group's id from being reused while any
// member lives, the leader's zombie included, so the signal reaches nothing else.
void KillGroup(pid_t pid) { kill(-pid, SIGKILL); }

// Reaps child `pid` (it has ended, or has been killed). Its status was read before.
void Reap(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

// Whether child `pid` has ended, leaving it unreaped (a zombie keeps its pid, and so its
// process group's id, from being reused until the group is killed); how, in `ended`
// (from this call, not from the later reap); -1 on error.
int HasEnded(pid_t pid, siginfo_t& ended) {
  ended = siginfo_t{};
  if (waitid(P_PID, pid, &ended, WEXITED | WNOHANG | WNOWAIT) < 0) return errno == EINTR ? 0 : -1;
  return ended.si_pid == pid ? 1 : 0;
}

// The bytes a capture holds so far (0 if it cannot be read).
size_t CapturedBytes(int fd) {
  struct stat held {};
  return fstat(fd, &held) == 0 ? static_cast<size_t>(held.st_size) : 0;
}

// Waits for child `pid`, polling every 20 ms (calling spec.on_poll each time); kills it
// past spec.timeout_s, when spec.should_stop says so, or when its capture (`capture_fd`,
// -1: none) passes spec.max_output while it runs: held in memory (or a temporary file)
// until read back, a runaway's output would otherwise take what the machine has. The
// bound is checked at each poll, so what the child writes within one poll still lands.
// A child that ends on its own keeps its own end, its output marked truncated when read
// back. The group is always killed before the leader is reaped.
ChildOutcome Supervise(pid_t pid, const ChildSpec& spec, int capture_fd) {
  ChildOutcome outcome;
  const auto started = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  const auto kill_child = [&](ChildOutcome::End why) {
    KillGroup(pid);
    kill(pid, SIGKILL);
    Reap(pid);
    outcome.end = why;
    outcome.wall_s = elapsed();
    return outcome;
  };
  while (true) {
    siginfo_t how{};
    const int ended = HasEnded(pid, how);
    if (ended == 1) {
      KillGroup(pid);
      Reap(pid);
      outcome.wall_s = elapsed();
      RecordEnd(how, spec.argv[0], spec.should_stop, outcome);
      if (spec.on_poll) spec.on_poll();  // a last look: what it finished after the last one
      return outcome;
    }
    if (ended < 0) {
      outcome.message = std::string("waitid: ") + std::strerror(errno);
      return kill_child(ChildOutcome::End::kNotStarted);
    }
    bool stop = false;
    try {
      if (spec.on_poll) spec.on_poll();
      stop = spec.should_stop && spec.should_stop();
    } catch (...) {  // the caller's poll failed: the child must not outlive the call
      kill_child(ChildOutcome::End::kInterrupted);
      throw;
    }
    if (stop) return kill_child(ChildOutcome::End::kInterrupted);
    if (capture_fd >= 0 && CapturedBytes(capture_fd) > spec.max_output) {
      outcome.message = "stopped: output past " + std::to_string(spec.max_output) + " bytes";
      return kill_child(ChildOutcome::End::kInterrupted);
    }
    if (spec.timeout_s > 0 && elapsed() > spec.timeout_s) {
      return kill_child(ChildOutcome::End::kTimedOut);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Reads a capturing child's output back, up to `limit` bytes.
void ReadCaptured(int fd, size_t limit, ChildOutcome& outcome) {
  if (lseek(fd, 0, SEEK_SET) != 0) {
    outcome.output_truncated = true;
    return;
  }
  char buffer[65536];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) outcome.output_truncated = true;  // what could not be read back is missing
    if (n <= 0) return;
    const size_t room = limit - outcome.output.size();
    outcome.output.append(buffer, std::min(room, static_cast<size_t>(n)));
    if (static_cast<size_t>(n) > room) {
      outcome.output_truncated = true;
      return;
    }
  }
}

}  // namespace

ChildOutcome RunChild(const ChildSpec& spec) {
  ChildOutcome outcome;
  if (spec.argv.empty() || spec.argv[0].empty()) {
    outcome.message = "no command";
    return outcome;
  }
  std::string program = spec.argv[0];
  if (spec.search_path &&
      program.find('/') == std::string::npos) {  // as execvp: a path is used as is
    std::optional<std::string> found = FirstOnPath(program);
    if (!found) {
      outcome.message = program + " is not on PATH";
      return outcome;
    }
    program = std::move(*found);
  }
  std::vector<char*> args{const_cast<char*>(program.c_str())};
  for (size_t i = 1; i < spec.argv.size(); ++i)
    args.push_back(const_cast<char*>(spec.argv[i].c_str()));
  args.push_back(nullptr);
  std::vector<char*> environment = ChildEnvironment(spec.environment, spec.inherit_environment);
  ChildFiles files;
  outcome.message = OpenChildFiles(spec, files);
  if (!outcome.message.empty()) return outcome;
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) BecomeChild(parent, files, spec.working_dir.c_str(), args, environment);
  // The child does the same before exec; here too, so that the group exists before any
  // kill of it, whichever of the two runs first (EACCES once the child has exec'd).
  if (pid > 0) setpgid(pid, pid);
  if (pid < 0) {
    outcome.message = std::string("fork: ") + std::strerror(errno);
    return outcome;
  }
  const bool captured = spec.output == ChildSpec::Output::kCaptureStdout ||
                        spec.output == ChildSpec::Output::kCaptureBoth;
  outcome = Supervise(pid, spec, captured ? files.output : -1);
  if (captured) ReadCaptured(files.output, spec.max_output, outcome);
  return outcome;
}

}  // namespace seqbench
