// The rules a benchmark run's command line is held to: shards parse strictly and
// partition, resume refuses a run measured differently (naming what differs and the fix),
// and pending cases are those the run has not stored.
#include "harness/benchmark_run.h"

#include <catch2/catch.hpp>
#include <functional>

namespace seqbench {
namespace {

RunRecord Measured(int64_t repetitions) {
  RunRecord run;
  run.suite_hash = "0123456789abcdef";
  run.shard = "1/2";
  run.settings.repetitions = repetitions;
  run.settings.warmup = 2;
  run.settings.min_time_s = 0;
  run.threads = 1;
  run.settings.check_policy = "full";
  run.environment = {{"git_sha", "0123456789abcdef0123"},
                     {"git_dirty", "false"},
                     {"build_type", "Release"},
                     {"case_filter", "none"}};
  return run;
}

TEST_CASE("shards: i/n with 1 <= i <= n, nothing else", "[run]") {
  const auto two_of_four = ParseShard("2/4");
  REQUIRE(two_of_four);
  CHECK(two_of_four->index == 2);
  CHECK(two_of_four->count == 4);
  CHECK(two_of_four->Text() == "2/4");
  CHECK(ParseShard("1/1")->Text().empty());  // the whole suite
  for (const char* bad : {"0/4", "5/4", "4", "1/0", "a/b", "-1/2", "1/2/3", " 1/2",
                          "99999999999999999999/1", "1/99999999"}) {
    INFO(bad);
    CHECK_FALSE(ParseShard(bad));
  }
}

TEST_CASE("resume: the same measurement continues, any difference is refused", "[run]") {
  const RunRecord stored = Measured(10);
  CHECK(ResumeConflicts(stored, Measured(10)).empty());

  const auto repetitions = ResumeConflicts(stored, Measured(5));
  REQUIRE(repetitions.size() == 1);
  CHECK_THAT(repetitions[0], Catch::Contains("repetitions: the run has 10, this command 5") &&
                                 Catch::Contains("--repetitions 10"));

  RunRecord other_shard = Measured(10);
  other_shard.shard = "";
  const auto shard = ResumeConflicts(stored, other_shard);
  REQUIRE(shard.size() == 1);
  CHECK_THAT(shard[0], Catch::Contains("--shard 1/2"));

  RunRecord changed = Measured(10);
  changed.suite_hash = "fedcba9876543210";
  changed.settings.warmup = 0;
  changed.threads = 2;
  changed.settings.min_time_s = 0.5;
  changed.settings.check_policy = "sample";
  CHECK(ResumeConflicts(stored, changed).size() == 5);

  // Each further fact alone, with the flag that would match.
  const auto one = [&](const std::function<void(RunRecord&)>& change) {
    RunRecord requested = Measured(10);
    change(requested);
    const auto conflicts = ResumeConflicts(stored, requested);
    CHECK(conflicts.size() == 1);
    return conflicts.empty() ? std::string() : conflicts.front();
  };
  CHECK_THAT(one([](RunRecord& r) { r.settings.warmup = 5; }), Catch::Contains("--warmup 2"));
  CHECK_THAT(one([](RunRecord& r) { r.settings.min_time_s = 0.01; }),
             Catch::Contains("--min-time 0ms"));
  CHECK_THAT(one([](RunRecord& r) { r.settings.max_noise = 0.02, r.settings.max_time_s = 30; }),
             Catch::Contains("drop --max-noise"));
  CHECK_THAT(one([](RunRecord& r) { r.environment[3].second = "^fused"; }),
             Catch::Contains("drop --filter"));
  CHECK_THAT(one([](RunRecord& r) { r.environment[0].second = "fedcba"; }),
             Catch::Contains("build"));
  CHECK_THAT(one([](RunRecord& r) { r.label = "nightly"; }), Catch::Contains("drop --label"));
  // A run stored before the filter was recorded is not judged on it.
  RunRecord old = Measured(10);
  old.environment.pop_back();
  RunRecord filtered = Measured(10);
  filtered.environment[3].second = "^fused";
  CHECK(ResumeConflicts(old, filtered).empty());
}

TEST_CASE("pending cases: those whose key the run has not stored", "[run]") {
  std::vector<CaseSpec> cases(3);
  cases[0].variant.name = "a";
  cases[1].variant.name = "b";
  cases[2].variant.name = "c";
  cases[2].variant.options = {{"chunk_size", 8}};
  const auto pending = PendingCases(cases, {cases[1].Key()});
  REQUIRE(pending.size() == 2);
  CHECK(pending[0].variant.name == "a");
  CHECK(pending[1].Key() == cases[2].Key());
  CHECK(pending[1].Key().find("{chunk_size=8}") != std::string::npos);
  CHECK(PendingCases(cases, {cases[0].Key(), cases[1].Key(), cases[2].Key()}).empty());
}

}  // namespace
}  // namespace seqbench
