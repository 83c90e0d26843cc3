// A suite's history (reports/history.h): series per case and machine over the suite's
// complete runs in start order, a step found where it was planted, another machine's
// runs never joined to the series, and the three renderings agreeing on the points.
#include "reports/history.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

namespace seqbench {
namespace {

// A complete run of `suite` started at minute `minute`, on `cpu`, whose cases "fast" and
// "flat" take `fast_s` and 1 s a step (five samples each, spread by the run's index).
RunRecord AddRun(Store& store, const std::string& suite, int minute, const std::string& cpu,
                 double fast_s, const std::string& status = "complete",
                 const std::vector<std::pair<std::string, std::string>>& extra = {}) {
  RunRecord run;
  run.uuid = suite + cpu + std::to_string(minute);
  run.suite_name = suite;
  run.suite_path = suite + ".toml";
  run.status = status;
  char started[32];
  std::snprintf(started, sizeof(started), "2026-11-27T10:%02d:00Z", minute);
  run.started_at = started;
  run.environment = {{"cpu_model", cpu}, {"git_sha", "sha" + std::to_string(minute)}};
  run.environment.insert(run.environment.end(), extra.begin(), extra.end());
  const int64_t id = store.CreateRun(run);
  const double wobble = 1 + 0.004 * ((minute * 7) % 5 - 2);  // ±0.8%, no trend
  int position = 0;
  for (const auto& [name, seconds] : {std::pair<std::string, double>{"fast", fast_s},
                                      std::pair<std::string, double>{"flat", 1.0}}) {
    CaseRecord c;
    c.position = position++;
    c.identity.variant_name = name;
    c.identity.variant_key = name;
    c.status = kStatusOk;
    c.iterations = 1;
    c.tokens_per_step = 100;
    for (double k : {0.99, 1.0, 1.0, 1.01, 1.02}) c.samples_s.push_back(seconds * wobble * k);
    store.AddCase(id, c);
  }
  return run;
}

TEST_CASE("history: a step in one case is found at its run, per machine", "[history]") {
  // cpu A's runs in two stores, the later ones first, one of them merged into both.
  Store store(""), later("");
  for (int i = 6; i < 12; ++i) AddRun(later, "hist", i, "cpu A", 1.3);
  AddRun(later, "hist", 3, "cpu A", 1.0);  // also in `store`: the same uuid, counted once
  for (int i = 0; i < 6; ++i) AddRun(store, "hist", i, "cpu A", 1.0);
  // Test-only and A/B runs do not measure the code as it is: left out.
  AddRun(store, "hist", 40, "cpu A", 5.0, "complete", {{"test_slowdown", "5 (test-only)"}});
  AddRun(store, "hist", 41, "cpu A", 5.0, "complete", {{"ab_side", "new"}});
  for (int i = 12; i < 15; ++i) AddRun(store, "hist", i, "cpu B", 0.5);
  AddRun(store, "hist", 30, "cpu A", 9.0, "interrupted");  // not complete: not a point
  AddRun(store, "other", 31, "cpu A", 9.0);                // another suite
  HistoryRequest request;
  request.suite = "hist";
  request.metric = FindHistoryMetric("runtime");
  REQUIRE(request.metric != nullptr);
  const std::vector<HistorySeries> series = BuildHistory({&later, &store}, request);
  REQUIRE(series.size() == 4);  // fast and flat, on each machine
  const HistorySeries& fast_a = series[0];
  CHECK(fast_a.machine == "cpu_model=cpu A");
  REQUIRE(fast_a.points.size() == 12);
  CHECK(fast_a.points.front().git_sha == "sha0");  // in start order, whichever store
  REQUIRE(fast_a.changes.size() == 1);
  CHECK(fast_a.changes[0].index == 6);
  CHECK(fast_a.points[fast_a.changes[0].index].git_sha == "sha6");
  CHECK(fast_a.changes[0].ratio.estimate == Approx(1.3).epsilon(0.02));
  CHECK(series[1].machine == "cpu_model=cpu B");  // never joined to cpu A's series
  CHECK(series[1].points.size() == 3);
  CHECK(series[2].changes.empty());  // flat on cpu A
  // The renderings carry the same points and the change.
  const std::string csv = RenderHistoryCsv(series);
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 1 + 12 + 3 + 12 + 3);
  const auto json = nlohmann::json::parse(RenderHistoryJson(series, request));
  CHECK(json["series"][0]["changes"][0]["run_id"] == fast_a.points[6].run_id);
  CHECK_THAT(RenderHistoryMarkdown(series, request), Catch::Contains("(sha6)"));
  // Tokens/s moves the other way at the same run.
  request.metric = FindHistoryMetric("tokens_per_s");
  const auto throughput = BuildHistory({&later, &store}, request);
  REQUIRE(throughput[0].changes.size() == 1);
  CHECK(throughput[0].changes[0].ratio.estimate == Approx(1 / 1.3).epsilon(0.02));
  CHECK(FindHistoryMetric("latency") == nullptr);
}

TEST_CASE("history: a machine key an older run lacks is unknown, not another machine",
          "[history]") {
  Store store("");
  for (int i = 0; i < 5; ++i) AddRun(store, "hist", i, "cpu A", 1.0);
  for (int i = 5; i < 10; ++i)
    AddRun(store, "hist", i, "cpu A", 1.0, "complete", {{"blas_core", "Prescott"}});
  for (int i = 10; i < 13; ++i)
    AddRun(store, "hist", i, "cpu A", 1.0, "complete", {{"blas_core", "SkylakeX"}});
  HistoryRequest request;
  request.suite = "hist";
  request.metric = FindHistoryMetric("runtime");
  const auto series = BuildHistory({&store}, request);
  REQUIRE(series.size() == 4);  // fast and flat; Prescott (with the older runs) and SkylakeX
  CHECK(series[0].points.size() == 10);
  CHECK(series[0].machine == "cpu_model=cpu A, blas_core=Prescott");
  CHECK(series[1].points.size() == 3);
  CHECK(series[1].machine == "cpu_model=cpu A, blas_core=SkylakeX");
}

}  // namespace
}  // namespace seqbench
