// base/process.h, the one way seqbench starts a program. RunChild leaves nothing behind:
// what a child starts (a wrapper script's program, a background job) dies with it, on a
// timeout, on an interruption and on a plain exit. Its input, captured output (bounded at
// both ends), PATH lookup and output file behave as ChildSpec says.
#include "base/process.h"

#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/files.h"

namespace seqbench {
namespace {

// The process `pid` has ended: gone, or a zombie waiting for a reaper that may never come
// (a container's init), which computes nothing.
bool Ended(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return true;
  std::string line;
  std::getline(stat, line);
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
}

// The pid a script wrote to `path` ("" until it has).
pid_t PidIn(const std::string& path) {
  std::ifstream file(path);
  long pid = 0;
  return (file >> pid) ? static_cast<pid_t>(pid) : 0;
}

struct Orphans {
  std::string pid_file;
  Orphans() {
    pid_file = (std::filesystem::temp_directory_path() /
                ("seqbench-child-test-" + std::to_string(getpid()) + ".pid"))
                   .string();
    std::filesystem::remove(pid_file);
  }
  ~Orphans() { std::filesystem::remove(pid_file); }
  // sh starting a background sleep, writing its pid, then `then`.
  std::vector<std::string> Script(const std::string& then) const {
    return {"/bin/sh", "-c", "sleep 300 & echo $! > '" + pid_file + "'; " + then};
  }
  // Waits up to 5 s for the background job to be gone.
  bool BackgroundEnded() const {
    const pid_t pid = PidIn(pid_file);
    if (pid <= 0) return false;
    for (int i = 0; i < 250 && !Ended(pid); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const bool ended = Ended(pid);
    if (!ended) kill(pid, SIGKILL);  // never leave the test's own stray behind
    return ended;
  }
};

ChildSpec Spec(std::vector<std::string> argv, double timeout_s,
               std::function<bool()> should_stop = nullptr) {
  ChildSpec spec;
  spec.argv = std::move(argv);
  spec.timeout_s = timeout_s;
  spec.should_stop = std::move(should_stop);
  return spec;
}

TEST_CASE("a child's own children die with it when its time runs out", "[child_process]") {
  Orphans orphans;
  const ChildOutcome outcome = RunChild(Spec(orphans.Script("sleep 300"), 1.0));
  CHECK(outcome.end == ChildOutcome::End::kTimedOut);
  CHECK(orphans.BackgroundEnded());
}

TEST_CASE("a child's own children die with it when it is interrupted", "[child_process]") {
  Orphans orphans;
  const auto written = [&] { return PidIn(orphans.pid_file) > 0; };
  const ChildOutcome outcome = RunChild(Spec(orphans.Script("sleep 300"), 60, written));
  CHECK(outcome.end == ChildOutcome::End::kInterrupted);
  CHECK(orphans.BackgroundEnded());
}

TEST_CASE("a child's own children die with it when it exits", "[child_process]") {
  Orphans orphans;
  const ChildOutcome outcome = RunChild(Spec(orphans.Script("exit 3"), 60));
  CHECK(outcome.end == ChildOutcome::End::kExited);
  CHECK(outcome.exit_code == 3);
  CHECK(orphans.BackgroundEnded());
  // A crash is a signal, with its number, never an exit.
  const ChildOutcome crashed = RunChild(Spec({"/bin/sh", "-c", "kill -SEGV $$"}, 60));
  CHECK(crashed.end == ChildOutcome::End::kSignaled);
  CHECK(crashed.signal == SIGSEGV);
  CHECK_FALSE(crashed.Succeeded());
}

TEST_CASE("on_poll runs while the child does; a poll that throws leaves no child behind",
          "[child_process]") {
  ChildSpec spec = Spec({"/bin/sh", "-c", "sleep 0.3"}, 60);
  int polls = 0;
  spec.on_poll = [&] { ++polls; };
  CHECK(RunChild(spec).Succeeded());
  CHECK(polls >= 5);  // every 20 ms over 300 ms: about 15
  Orphans orphans;
  ChildSpec failing = Spec(orphans.Script("sleep 300"), 60);
  failing.on_poll = [&] {
    if (PidIn(orphans.pid_file) > 0) throw std::runtime_error("progress failed");
  };
  CHECK_THROWS_WITH(RunChild(failing), "progress failed");
  CHECK(orphans.BackgroundEnded());
}

TEST_CASE("a child reads the spec's input and its output comes back captured", "[child_process]") {
  ChildSpec spec = Spec({"/bin/sh", "-c", "tr a-z A-Z; echo complaint >&2; exit 4"}, 60);
  spec.input = std::string("first line\nsecond\0byte", 23);
  spec.output = ChildSpec::Output::kCaptureStdout;
  spec.discard_stderr = true;
  const ChildOutcome only_stdout = RunChild(spec);
  CHECK(only_stdout.end == ChildOutcome::End::kExited);
  CHECK(only_stdout.exit_code == 4);
  CHECK_FALSE(only_stdout.Succeeded());
  CHECK(only_stdout.output == std::string("FIRST LINE\nSECOND\0BYTE", 23));
  CHECK_FALSE(only_stdout.output_truncated);
  spec.output = ChildSpec::Output::kCaptureBoth;
  CHECK(RunChild(spec).output == std::string("FIRST LINE\nSECOND\0BYTE", 23) + "complaint\n");
  // An empty input is an input: the child reads end-of-file, not the test's terminal.
  spec.input = std::string();
  CHECK(RunChild(spec).output == "complaint\n");
}

TEST_CASE("captured output stops at max_output, at both ends", "[child_process]") {
  ChildSpec spec = Spec({"/bin/sh", "-c", "printf 0123456789"}, 60);
  spec.output = ChildSpec::Output::kCaptureStdout;
  for (const size_t limit : {size_t{0}, size_t{1}, size_t{9}, size_t{10}, size_t{11}}) {
    spec.max_output = limit;
    const ChildOutcome outcome = RunChild(spec);
    INFO("max_output " << limit);
    // printf's own end (exit 0) stands, its output cut; a poll that caught it between
    // its write and its exit stops it instead (a loaded machine's race, either is right).
    CHECK((outcome.Succeeded() || (limit < 10 && outcome.end == ChildOutcome::End::kInterrupted)));
    CHECK(outcome.output == std::string("0123456789").substr(0, limit));
    CHECK(outcome.output_truncated == (limit < 10));
  }
  // A flood is bounded while it runs, not only cut when read back: yes(1) writes forever,
  // and is stopped (within a poll of 20 ms) rather than left to its 60 s limit.
  ChildSpec flooding = Spec({"yes"}, 60);
  flooding.search_path = true;
  flooding.output = ChildSpec::Output::kCaptureStdout;
  flooding.max_output = 1000;
  const ChildOutcome flood = RunChild(flooding);
  CHECK(flood.end == ChildOutcome::End::kInterrupted);
  CHECK_THAT(flood.Describe(), Catch::Contains("output past 1000 bytes"));
  CHECK(flood.output.size() == 1000);
  CHECK(flood.output.rfind("y\ny\n", 0) == 0);
  CHECK(flood.output_truncated);
  // More than one read's worth (64 KiB) arrives whole; a path with search_path is taken
  // as is (as execvp takes it), not looked for on PATH.
  spec.search_path = true;
  spec.argv = {"/bin/sh", "-c", "head -c 200000 /dev/zero"};
  spec.max_output = size_t{1} << 20;
  const ChildOutcome large = RunChild(spec);
  CHECK(large.output.size() == 200000);
  CHECK_FALSE(large.output_truncated);
}

TEST_CASE("output is captured where TMPDIR cannot be written", "[child_process]") {
  // Captured output lives in memory, not in the temporary directory: git's branch and
  // sbatch's job id are read back even where TMPDIR is missing (or full, or read-only).
  const char* before = std::getenv("TMPDIR");
  const std::string saved = before != nullptr ? before : "";
  setenv("TMPDIR", "/nonexistent/seqbench-tmp", 1);
  ChildSpec spec = Spec({"/bin/sh", "-c", "cat; echo done"}, 60);
  spec.input = "in\n";
  spec.output = ChildSpec::Output::kCaptureStdout;
  const ChildOutcome outcome = RunChild(spec);
  if (before != nullptr) {
    setenv("TMPDIR", saved.c_str(), 1);
  } else {
    unsetenv("TMPDIR");
  }
  CHECK(outcome.message.empty());
  CHECK(outcome.Succeeded());
  CHECK(outcome.output == "in\ndone\n");
}

// Runs `spec` with this process's descriptor `stream` (0 or 1) closed, as seqbench runs
// under a caller that closed it; the stream is back before anything is checked or printed.
ChildOutcome RunWithStreamClosed(const ChildSpec& spec, int stream) {
  std::fflush(stdout);
  const int saved = dup(stream);
  REQUIRE(saved > STDERR_FILENO);
  close(stream);
  const ChildOutcome outcome = RunChild(spec);
  dup2(saved, stream);
  close(saved);
  return outcome;
}

TEST_CASE("a child keeps its streams where seqbench's own stdin or stdout is closed",
          "[child_process]") {
  // The input's and the capture's files are then the lowest free descriptors, 0 or 1: the
  // child must still read the one and write the other.
  ChildSpec reads = Spec({"/bin/sh", "-c", "tr a-z A-Z"}, 60);
  reads.input = "abc";  // its file becomes descriptor 0
  reads.output = ChildSpec::Output::kCaptureStdout;
  ChildSpec writes = Spec({"/bin/sh", "-c", "printf ABC"}, 60);
  writes.output = ChildSpec::Output::kCaptureStdout;  // its file becomes descriptor 1
  const ChildOutcome without_stdin = RunWithStreamClosed(reads, STDIN_FILENO);
  CHECK(without_stdin.Succeeded());
  CHECK(without_stdin.output == "ABC");
  const ChildOutcome without_stdout = RunWithStreamClosed(writes, STDOUT_FILENO);
  CHECK(without_stdout.Succeeded());
  CHECK(without_stdout.output == "ABC");
}

TEST_CASE("a program is looked up on PATH only when the spec says so", "[child_process]") {
  ChildSpec spec = Spec({"sh", "-c", "exit 7"}, 60);
  const ChildOutcome as_path = RunChild(spec);  // "sh" as a path: no such file here
  CHECK(as_path.end == ChildOutcome::End::kExited);
  CHECK(as_path.exit_code == 127);
  spec.search_path = true;
  const ChildOutcome found = RunChild(spec);
  CHECK(found.end == ChildOutcome::End::kExited);
  CHECK(found.exit_code == 7);
  spec.argv = {"seqbench-no-such-program-on-path"};
  const ChildOutcome missing = RunChild(spec);
  CHECK(missing.end == ChildOutcome::End::kNotStarted);
  CHECK_THAT(missing.Describe(), Catch::Contains("not on PATH"));
  CHECK_FALSE(AllOnPath("sh").empty());
  CHECK(AllOnPath("sh").front().rfind("/sh") == AllOnPath("sh").front().size() - 3);
  CHECK(AllOnPath("/bin/sh").empty());  // a path is not a name to look up
  REQUIRE(FirstOnPath("sh"));
  CHECK(*FirstOnPath("sh") == AllOnPath("sh").front());
  CHECK_FALSE(FirstOnPath("seqbench-no-such-program"));
}

TEST_CASE("a program found through a relative PATH entry runs from another working folder",
          "[child_process]") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("seqbench-path-test-" + std::to_string(getpid()));
  const std::filesystem::path elsewhere = dir / "elsewhere";
  std::filesystem::create_directories(dir / "bin");
  std::filesystem::create_directories(elsewhere / "bin");
  const auto write_script = [](const std::filesystem::path& path, int code) {
    std::ofstream(path) << "#!/bin/sh\nexit " << code << "\n";
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  };
  write_script(dir / "bin" / "seqbench-path-probe", 5);
  write_script(elsewhere / "bin" / "seqbench-path-probe", 9);  // the same relative name there
  const char* path_variable = std::getenv("PATH");
  const std::string saved_path = path_variable != nullptr ? path_variable : "/usr/bin:/bin";
  const std::filesystem::path saved_cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir);
  setenv("PATH", ("bin::" + saved_path).c_str(), 1);  // a relative entry, then an empty one
  const std::vector<std::string> found = AllOnPath("seqbench-path-probe");
  ChildSpec spec = Spec({"seqbench-path-probe"}, 60);
  spec.search_path = true;
  spec.working_dir = elsewhere.string();
  const ChildOutcome outcome = RunChild(spec);
  setenv("PATH", saved_path.c_str(), 1);
  std::filesystem::current_path(saved_cwd);
  REQUIRE(found.size() == 1);
  CHECK(std::filesystem::equivalent(found[0], dir / "bin" / "seqbench-path-probe"));
  CHECK(std::filesystem::path(found[0]).is_absolute());
  CHECK(outcome.end == ChildOutcome::End::kExited);
  CHECK(outcome.exit_code == 5);  // what was found here, not elsewhere's
  RemoveTree(dir.string());
}

TEST_CASE("an output file is never written through a link planted at its path", "[child_process]") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("seqbench-process-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::filesystem::path victim = dir / "victim", link = dir / "out";
  std::ofstream(victim) << "kept";
  std::filesystem::create_symlink(victim, link);
  ChildSpec spec = Spec({"/bin/sh", "-c", "echo overwritten"}, 60);
  spec.output = ChildSpec::Output::kFile;
  spec.output_path = link.string();
  const ChildOutcome refused = RunChild(spec);
  CHECK(refused.end == ChildOutcome::End::kNotStarted);
  std::string text;
  std::getline(std::ifstream(victim), text);
  CHECK(text == "kept");
  std::filesystem::remove(link);
  CHECK(RunChild(spec).Succeeded());
  std::getline(std::ifstream(link), text);
  CHECK(text == "overwritten");
  std::filesystem::remove(link);
  std::filesystem::remove(victim);
  std::filesystem::remove(dir);
}

}  // namespace
}  // namespace seqbench
