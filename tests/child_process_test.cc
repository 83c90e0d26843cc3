// RunChild leaves nothing behind: what a child starts (a wrapper script's program, a
// background job) dies with it, on a timeout, on an interruption and on a plain exit.
#include "harness/child_process.h"

#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

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

TEST_CASE("a child's own children die with it when its time runs out", "[child_process]") {
  Orphans orphans;
  const ChildOutcome outcome = RunChild(orphans.Script("sleep 300"), 1.0, nullptr);
  CHECK(outcome.end == ChildOutcome::End::kTimedOut);
  CHECK(orphans.BackgroundEnded());
}

TEST_CASE("a child's own children die with it when it is interrupted", "[child_process]") {
  Orphans orphans;
  const auto written = [&] { return PidIn(orphans.pid_file) > 0; };
  const ChildOutcome outcome = RunChild(orphans.Script("sleep 300"), 60, written);
  CHECK(outcome.end == ChildOutcome::End::kInterrupted);
  CHECK(orphans.BackgroundEnded());
}

TEST_CASE("a child's own children die with it when it exits", "[child_process]") {
  Orphans orphans;
  const ChildOutcome outcome = RunChild(orphans.Script("exit 3"), 60, nullptr);
  CHECK(outcome.end == ChildOutcome::End::kExited);
  CHECK(outcome.exit_code == 3);
  CHECK(orphans.BackgroundEnded());
}

}  // namespace
}  // namespace seqbench
