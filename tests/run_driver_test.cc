// The run driver (harness/run_driver.h) without the command line: a new run, an
// interrupted one resumed, a group's shard found again, and the refusals that must leave
// the database as it was.
#include "harness/run_driver.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "harness/benchmark_run.h"
#include "harness/suite.h"
#include "results/records.h"
#include "results/store.h"
#include "tests/scratch_folder.h"

namespace seqbench {
namespace {

// The test's database, in a folder of its own.
struct DatabaseFolder {
  testing::ScratchFolder folder{"run-driver"};
  std::string Database() const { return folder.path() + "/runs.db"; }
};

// Three cases of two variants, fast enough to run a few times in a test.
RunRequest TinyRequest(const std::string& db_path, int64_t repetitions = 2) {
  RunRequest request;
  request.suite_path = "driver.toml";
  request.db_path = db_path;
  request.suite = ParseSuite(R"toml(
name = "driver"
description = "the run driver's test"
family = "simple_rnn"
baseline = "baseline"
[model]
vocab_size = 16
width = 8
layers = 1
heads = 2
[measure]
repetitions = )toml" + std::to_string(repetitions) +
                                 R"toml(
warmup = 0
[[variants]]
key = "baseline"
[[variants]]
key = "batched"
[grid]
threads = 1
mode = "forward"
batch = [1, 2]
seq_len = 6
)toml",
                             "driver.toml");
  request.cases = request.suite.Expand();
  request.command_line = "seqbench run driver.toml";
  return request;
}

// Every call, as "Event arguments", in order.
struct RecordingObserver : RunObserver {
  std::vector<std::string> events;
  void LimitsKnown(const std::string&) override { events.push_back("limits"); }
  void ShardComplete(int64_t run_id, const RunRecord&) override {
    events.push_back("complete " + std::to_string(run_id));
  }
  void ResumingShard(int64_t run_id, const RunRecord&) override {
    events.push_back("resuming " + std::to_string(run_id));
  }
  void Started(int64_t run_id, size_t cases, size_t finished) override {
    events.push_back("started " + std::to_string(run_id) + " " + std::to_string(cases) + " " +
                     std::to_string(finished));
  }
  void Progress(const CaseProgress& progress) override {
    if (progress.record != nullptr) events.push_back("case " + progress.record->key());
  }
};

bool NeverStop() { return false; }

std::string StatusOf(const std::string& db_path, int64_t run_id) {
  const Store store(db_path, StoreAccess::kReadOnly);
  return store.FindRun(run_id)->status;
}

}  // namespace

TEST_CASE("run driver: a new run measures the limits, starts, runs each case, completes",
          "[run_driver]") {
  DatabaseFolder folder;
  RunRequest request = TinyRequest(folder.Database());
  REQUIRE(request.cases.size() == 4);
  RecordingObserver observer;
  const RunOutcome outcome = DriveRun(request, observer, NeverStop);
  CHECK(outcome.run_id == 1);
  CHECK_FALSE(outcome.already_complete);
  CHECK(ExitStatusOf(outcome) == 0);
  CHECK(outcome.summary.status_counts.at(kStatusOk) == 4);
  REQUIRE(observer.events.size() == 6);
  CHECK(observer.events[0] == "limits");
  CHECK(observer.events[1] == "started 1 4 0");
  for (size_t i = 0; i < 4; ++i) CHECK(observer.events[2 + i] == "case " + request.cases[i].Key());
  CHECK(StatusOf(request.db_path, 1) == "complete");
  const Store store(request.db_path, StoreAccess::kReadOnly);
  CHECK(store.Cases(1).size() == 4);
  CHECK(store.FindRun(1)->Environment("isolation") == "none: every case in one process");
}

TEST_CASE("run driver: an interrupted run is resumable and its resume runs only the rest",
          "[run_driver]") {
  DatabaseFolder folder;
  RunRequest request = TinyRequest(folder.Database());
  request.stop_after = 1;
  RecordingObserver first;
  const RunOutcome stopped = DriveRun(request, first, NeverStop);
  CHECK(stopped.summary.interrupted);
  CHECK(ExitStatusOf(stopped) == 1);
  CHECK(StatusOf(request.db_path, stopped.run_id) == "interrupted");

  request.stop_after = 0;
  request.resume = stopped.run_id;
  RecordingObserver second;
  const RunOutcome finished = DriveRun(request, second, NeverStop);
  CHECK(finished.run_id == stopped.run_id);
  CHECK(ExitStatusOf(finished) == 0);
  // A resumed run keeps the limits it started with: none measured, none announced.
  REQUIRE(second.events.size() == 4);
  CHECK(second.events[0] == "started 1 4 1");
  CHECK(StatusOf(request.db_path, finished.run_id) == "complete");
  const Store store(request.db_path, StoreAccess::kReadOnly);
  CHECK(store.Runs().size() == 1);
  CHECK(store.Cases(finished.run_id).size() == 4);
}

TEST_CASE("run driver: a group's shard finds its own run, and refuses another measurement",
          "[run_driver]") {
  DatabaseFolder folder;
  RunRequest request = TinyRequest(folder.Database());
  request.group = "g1";
  request.selection.shard = {1, 1};
  request.stop_after = 2;
  RecordingObserver observer;
  const int64_t run_id = DriveRun(request, observer, NeverStop).run_id;

  request.stop_after = 0;  // the requeued task: the same command, no --resume
  RecordingObserver requeued;
  CHECK(DriveRun(request, requeued, NeverStop).run_id == run_id);
  CHECK(std::find(requeued.events.begin(), requeued.events.end(),
                  "resuming " + std::to_string(run_id)) != requeued.events.end());

  RecordingObserver again;
  const RunOutcome nothing = DriveRun(request, again, NeverStop);
  CHECK(nothing.already_complete);
  CHECK(again.events.back() == "complete " + std::to_string(run_id));

  RecordingObserver other;
  RunRequest remeasured = TinyRequest(request.db_path, 3);
  remeasured.group = "g1";
  remeasured.selection.shard = {1, 1};
  CHECK_THROWS_AS(DriveRun(remeasured, other, NeverStop), RunRefused);
  const Store store(request.db_path, StoreAccess::kReadOnly);
  CHECK(store.Runs().size() == 1);
  CHECK(store.Cases(run_id).size() == 4);
}

TEST_CASE("run driver: a resume of a run that is not there makes nothing", "[run_driver]") {
  DatabaseFolder folder;
  RunRequest request = TinyRequest(folder.Database());
  request.resume = 7;
  RecordingObserver observer;
  CHECK_THROWS_AS(DriveRun(request, observer, NeverStop), RunRefused);
  CHECK_FALSE(std::filesystem::exists(request.db_path));
  CHECK(observer.events.empty());
}

TEST_CASE("run driver: the exit status is 1 for any failed case or an interruption",
          "[run_driver]") {
  RunOutcome outcome;
  CHECK(ExitStatusOf(outcome) == 0);
  outcome.summary.status_counts = {{kStatusOk, 3}, {kStatusSkipped, 1}, {kStatusMismatch, 0}};
  CHECK(ExitStatusOf(outcome) == 0);
  for (const char* failed : {kStatusMismatch, kStatusError, kStatusTimeout}) {
    RunOutcome bad = outcome;
    bad.summary.status_counts[failed] = 1;
    CHECK(ExitStatusOf(bad) == 1);
  }
  outcome.summary.interrupted = true;
  CHECK(ExitStatusOf(outcome) == 1);
}

}  // namespace seqbench
