// Two builds in one job: the A/B runner's order is seeded and alternates, its rounds gather
// into one run per side with the runtime metrics over every round, the paired analysis
// covers the true ratio under drift that moves whole rounds 1.5x, and a lockstep
// conversation loses no line.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <random>
#include <thread>

#include "harness/ab_run.h"
#include "harness/lockstep.h"
#include "reports/compare.h"
#include "reports/gate.h"
#include "stats/statistics.h"
#include "tests/scratch_folder.h"

namespace seqbench {
namespace {

TEST_CASE("the A/B order is seeded and alternates which side runs first", "[ab]") {
  const std::vector<bool> order = AbOrder(40, 7);
  CHECK(order == AbOrder(40, 7));  // the same on every machine for one seed
  CHECK(order != AbOrder(40, 8));
  const auto base_first = std::count(order.begin(), order.end(), true);
  // A fair coin per round: both orders occur (P(all alike) = 2^-39).
  CHECK(base_first > 0);
  CHECK(base_first < 40);
  CHECK(AbOrder(0, 7).empty());
}

CaseRecord RoundCase(const std::string& variant, double seconds) {
  CaseRecord c;
  c.identity.variant_name = c.identity.variant_key = variant;
  c.status = kStatusOk;
  c.tokens_per_step = 100;
  c.samples_s = {seconds};
  c.metrics = {{"runtime_median_s", seconds, "s"},
               {"peak_bytes", 4096, "bytes"},
               {"step_flops", 2e6, "FLOP"}};
  return c;
}

TEST_CASE("a side's rounds gather into one run, samples in round order", "[ab]") {
  const std::vector<std::vector<CaseRecord>> rounds = {
      {RoundCase("fused", 0.010), RoundCase("baseline", 0.050)},
      {RoundCase("fused", 0.030), RoundCase("baseline", 0.040)},
      {RoundCase("fused", 0.011)}};  // baseline missing from round 3
  const std::vector<CaseRecord> gathered = GatherRounds(rounds);
  REQUIRE(gathered.size() == 2);
  CHECK(gathered[0].samples_s == std::vector<double>{0.010, 0.030, 0.011});
  // Missing from round 3: its samples could not be paired round by round.
  CHECK(gathered[1].samples_s.empty());
  CHECK_THAT(gathered[1].message, Catch::Contains("not paired"));
  // Timed twice in round 2 (adaptive stopping would): not paired either.
  CaseRecord twice = RoundCase("fused", 0.02);
  twice.samples_s.push_back(0.03);
  CHECK(GatherRounds({{RoundCase("fused", 0.01)}, {twice}}).at(0).samples_s.empty());
  // The runtime metrics are over all rounds (median 0.011, not round 1's 0.010; the mean
  // 0.017 differs), the others kept once.
  CHECK(gathered[0].MetricValue("runtime_median_s") == Approx(0.011));
  CHECK(gathered[0].MetricValue("runtime_mean_s") == Approx(0.017));
  CHECK(gathered[0].MetricValue("tokens_per_s") == Approx(100 / 0.011));
  CHECK(gathered[0].MetricValue("gflops_per_s") == Approx(2e6 / 0.011 / 1e9));
  CHECK(gathered[0].MetricValue("peak_bytes") == Approx(4096));
  const auto named = std::count_if(gathered[0].metrics.begin(), gathered[0].metrics.end(),
                                   [](const Metric& m) { return m.name == "runtime_median_s"; });
  CHECK(named == 1);
}

TEST_CASE("the paired analysis covers the true ratio under round-to-round drift", "[ab]") {
  // Each round the machine runs both sides at a speed drawn from 1x-1.5x (the drift
  // between CI jobs here); within a round, 3% noise. 200 seeded draws of 10 rounds.
  std::mt19937_64 generator(42);
  std::uniform_real_distribution<double> drift(1.0, 1.5);
  std::lognormal_distribution<double> noise(0.0, 0.03);
  for (const double truth : {1.0, 1.3}) {
    int covered = 0, caught = 0;
    for (int draw = 0; draw < 200; ++draw) {
      std::vector<double> base, next;
      for (int round = 0; round < 10; ++round) {
        const double machine = drift(generator);
        base.push_back(0.01 * machine * noise(generator));
        next.push_back(0.01 * truth * machine * noise(generator));
      }
      const auto interval = stats::PairedRatioInterval(base, next);
      REQUIRE(interval.has_value());
      covered += interval->low <= truth && truth <= interval->high;
      caught += interval->low > 1.05;
    }
    CHECK(covered >= 180);  // >= 90% of the draws
    if (truth > 1) CHECK(caught >= 190);
  }
  // The estimate is the median of the round ratios (1.0, 1.3, 1.0, 1.1, 1.1, 1.0 -> 1.05),
  // not the ratio of the medians (3.7 / 3.5 = 1.057); 6 rounds at 95%: [min, max].
  const auto rounds =
      stats::PairedRatioInterval({1, 2, 3, 4, 5, 6}, {1.0, 2.6, 3.0, 4.4, 5.5, 6.0});
  REQUIRE(rounds.has_value());
  CHECK(rounds->estimate == Approx(1.05));
  CHECK(rounds->low == Approx(1.0));
  CHECK(rounds->high == Approx(1.3));
  CHECK_FALSE(stats::PairedRatioInterval({1, 1, 1, 1, 1}, {1, 1, 1, 1, 1}).has_value());
  CHECK_THROWS_AS(stats::PairedRatioInterval({1, 2}, {1}), std::invalid_argument);
}

TEST_CASE("compare judges an A/B pair on its rounds", "[ab]") {
  RunRecord base, next;
  base.uuid = "b";
  next.uuid = "n";
  base.environment = {{"ab_side", "base"}, {"ab_pair", "n"}};
  next.environment = {{"ab_side", "new"}, {"ab_pair", "b"}};
  CHECK(IsAbPair(base, next));
  CHECK_FALSE(IsAbPair(next, base));
  next.environment[1].second = "another";
  CHECK_FALSE(IsAbPair(base, next));

  // Rounds that drift 1.5x alike on both sides, the new side 10% slower in each: the
  // unpaired bootstrap cannot see it through the drift, the paired analysis can.
  CaseRecord b = RoundCase("fused", 0), n = RoundCase("fused", 0);
  b.samples_s.clear();
  n.samples_s.clear();
  for (const double machine : {1.0, 1.5, 1.1, 1.4, 1.2, 1.45, 1.05, 1.3}) {
    b.samples_s.push_back(0.01 * machine);
    n.samples_s.push_back(0.011 * machine);
  }
  CompareSettings settings;
  CHECK(CompareCases({b}, {n}, settings).at(0).verdict != "slower");
  settings.paired = true;
  const CaseComparison paired = CompareCases({b}, {n}, settings).at(0);
  CHECK(paired.verdict == "slower");
  CHECK(paired.ratio == Approx(1.1));

  // Round ratios that differ (1.0 to 1.3): the ratio shown is their median, 1.05, not the
  // ratio of the sides' medians (1.375 / 1.25 = 1.1).
  const std::vector<double> machines = {1.0, 1.5, 1.1, 1.4, 1.2, 1.45, 1.05, 1.3};
  const std::vector<double> per_round = {1.0, 1.1, 1.0, 1.1, 1.3, 1.0, 1.2, 1.0};
  b.samples_s.clear();
  n.samples_s.clear();
  for (size_t r = 0; r < machines.size(); ++r) {
    b.samples_s.push_back(0.01 * machines[r]);
    n.samples_s.push_back(0.01 * machines[r] * per_round[r]);
  }
  const double of_medians = stats::Median(n.samples_s) / stats::Median(b.samples_s);
  REQUIRE(std::abs(of_medians - 1.05) > 0.01);
  CHECK(CompareCases({b}, {n}, settings).at(0).ratio == Approx(1.05));
}

TEST_CASE("the paired gate's power counts A/A pairs apart from slowed ones", "[ab]") {
  Store store(":memory:");
  std::mt19937_64 generator(3);
  std::uniform_real_distribution<double> drift(1.0, 1.5);
  const auto add_pair = [&](double slowdown, const std::string& ab_started_at = "") {
    const std::string base_uuid = "b" + std::to_string(store.Runs().size());
    const std::string new_uuid = "n" + std::to_string(store.Runs().size());
    std::vector<double> machine;
    for (int round = 0; round < 8; ++round) machine.push_back(drift(generator));
    for (const bool is_base : {true, false}) {
      RunRecord run;
      run.uuid = is_base ? base_uuid : new_uuid;
      run.suite_name = "demo";
      run.label = is_base ? "ab base" : "ab new";
      run.status = "running";
      run.started_at = "2026-11-26T00:00:00Z";
      run.environment = {{"ab_side", is_base ? "base" : "new"},
                         {"ab_pair", is_base ? new_uuid : base_uuid}};
      if (!is_base && slowdown > 1)
        run.environment.push_back({"test_slowdown", "1.3x on cases matching .*"});
      if (!ab_started_at.empty()) run.environment.push_back({"ab_started_at", ab_started_at});
      const int64_t run_id = store.CreateRun(run);
      CaseRecord c = RoundCase("fused", 0);
      c.samples_s.clear();
      for (const double m : machine) c.samples_s.push_back(0.01 * m * (is_base ? 1 : slowdown));
      store.AddCase(run_id, c);
      store.SetRunStatus(run_id, "complete", "2026-11-26T00:00:01Z");
    }
  };
  add_pair(1.0);
  add_pair(1.3);
  add_pair(1.0, "2026-11-25T23:59:56Z");  // ab began 4 s before its base side's run
  const std::vector<GateRow> rows = MeasureAbGate(store, "demo", "ab", CompareSettings{});
  REQUIRE(rows.size() == 2);
  CHECK_THAT(rows[0].what, Catch::StartsWith("no change"));
  CHECK(rows[0].compares == 2);
  CHECK(rows[0].flagged == 0);
  CHECK_THAT(rows[1].what, Catch::StartsWith("new side 1.3x"));
  CHECK(rows[1].compares == 1);
  CHECK(rows[1].flagged == 1);
  // Each pair from its base run's start to the later finish, as stored (1 s), or from ab's
  // own start where the pair records it (5 s).
  CHECK(rows[0].pair_wall_s == std::vector<double>{1, 5});
  CHECK_THROWS_AS(MeasureAbGate(store, "demo", "nosuch", CompareSettings{}), std::invalid_argument);
  // The suite run alone, what a pair's cost is set against: a complete run's start to
  // finish across a minute's boundary (59 s -> 1:10 is 11 s); a running one is left out.
  for (const char* status : {"complete", "running"}) {
    RunRecord solo;
    solo.uuid = std::string("solo-") + status;
    solo.suite_name = "demo";
    solo.label = "ab solo";
    solo.status = "running";
    solo.started_at = "2026-11-26T00:00:59Z";
    const int64_t id = store.CreateRun(solo);
    if (std::string(status) == "complete") store.SetRunStatus(id, status, "2026-11-26T00:01:10Z");
  }
  CHECK(RunWallTimes(store, "demo", "ab solo") == std::vector<double>{11});
  CHECK(RunWallTimes(store, "demo", "ab new").size() == 3);
}

TEST_CASE("a lockstep conversation carries lines both ways and loses none", "[ab]") {
  testing::ScratchFolder folder("ab-test");
  const std::string prefix = folder.path() + "/base";
  MakeLockstepPipes(prefix);
  CHECK_THROWS_AS(MakeLockstepPipes(prefix), std::runtime_error);  // they exist already
  std::optional<LineChannel> controller;
  controller.emplace(LineChannel::Controller(prefix));
  std::string worker_error;  // an exception must not escape the thread (std::terminate)
  std::thread worker([&] {
    try {
      LineChannel channel = LineChannel::Worker(prefix);
      channel.Send("ready a b");
      channel.Send("prepared");
      const std::string line = channel.Receive(5, nullptr, "the controller");
      channel.Send("got " + line);
      channel.Receive(5, nullptr, "the controller");  // "bye": the last line comes apart
      channel.Send("done");
    } catch (const std::exception& error) {
      worker_error = error.what();
    }
  });  // the worker's end closes when it returns
  // Joined on every path, also when a CHECK below throws (REQUIRE) or Receive does.
  struct Joiner {
    std::thread& thread;
    ~Joiner() {
      if (thread.joinable()) thread.join();
    }
  } joiner{worker};
  CHECK(controller->Receive(5, nullptr, "the worker") == "ready a b");
  CHECK(controller->Receive(5, nullptr, "the worker") == "prepared");
  controller->Send("time x");
  CHECK(controller->Receive(5, nullptr, "the worker") == "got time x");
  controller->Send("bye");
  worker.join();
  CHECK(worker_error.empty());
  // The worker has ended and the controller is told so: a line it sent first still arrives.
  CHECK(controller->Receive(
            5, [] { return true; }, "the worker") == "done");
  CHECK_THROWS_WITH(controller->Receive(
                        5, [] { return true; }, "the base side"),
                    Catch::Contains("the base side stopped"));
  CHECK_THROWS_WITH(controller->Receive(0.2, nullptr, "the base side"),
                    Catch::Contains("no answer from the base side"));
  // A worker whose controller is gone reads the end of the conversation, not silence.
  LineChannel orphan = LineChannel::Worker(prefix);
  controller.reset();
  CHECK_THROWS_WITH(orphan.Receive(5, nullptr, "the controller"), Catch::Contains("closed"));
}

}  // namespace
}  // namespace seqbench
