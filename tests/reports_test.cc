// The renderers: Markdown tables are rectangular, escaped and carry the database's
// numbers; README sections regenerate idempotently and touch nothing else; compare gives
// the known verdicts; gbench-json has Google Benchmark's own field names and types; the
// check and the plots do what they say.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include "base/text.h"
#include "base/files.h"
#include "reports/check.h"
#include "reports/compare.h"
#include "reports/fit.h"
#include "reports/format.h"
#include "reports/gate.h"
#include "reports/hardware.h"
#include "reports/markdown.h"
#include "reports/plot.h"
#include "reports/readme.h"
#include "reports/readme_sections.h"
#include "reports/report.h"
#include "reports/scaling.h"
#include "reports/training.h"
#include "stats/statistics.h"

namespace seqbench {
namespace {

using nlohmann::json;

RunRecord Run() {
  RunRecord run;
  run.run_id = 7;
  run.suite_name = "demo";
  run.suite_path = "suites/demo.toml";
  run.started_at = "2026-11-21T10:00:00Z";
  run.status = "complete";
  run.baseline = "baseline";
  run.threads = 2;
  run.environment = {{"torch_version", "1.13.0"}, {"torch_threads", "2"},
                     {"cpu_model", "Test CPU"},   {"git_sha", "0123456789abcdef"},
                     {"hostname", "box"},         {"cpu_logical_cores", "2"}};
  return run;
}

// A case with its metrics computed as ToRecord() does: from the samples, by the one
// statistics module.
CaseRecord Case(const std::string& variant, const std::string& mode, int64_t batch,
                std::vector<double> samples, const std::string& status = "ok") {
  CaseRecord c;
  c.identity.variant_name = c.identity.variant_key = variant;
  c.identity.workload.mode = mode;
  c.identity.workload.batch = batch;
  c.identity.workload.seq_len = 64;
  c.status = status;
  c.iterations = 1;
  c.tokens_per_step = batch * 64;
  c.category = "cat";
  c.description = "does | things with `code`";
  c.samples_s = std::move(samples);
  if (!c.samples_s.empty()) {
    const stats::Summary summary = stats::Summarize(c.samples_s);
    c.metrics = {{"runtime_mean_s", summary.mean, "s"},
                 {"runtime_median_s", summary.median, "s"},
                 {"runtime_stddev_s", summary.stddev, "s"},
                 {"runtime_iqr_s", summary.iqr, "s"},
                 {"tokens_per_s", c.tokens_per_step / summary.median, "tokens/s"},
                 {"peak_bytes", 4096.0 * batch, "bytes"},
                 {"activation_bytes", 1024.0 * batch, "bytes"},
                 {"correct", status == "ok" ? 1.0 : 0.0, "bool"},
                 {"step_flops", 1e6 * batch, "FLOP"},
                 {"step_bytes", 1e5 * batch, "bytes"}};
  }
  if (status == "error") c.message = "out of memory | `oops`";
  return c;
}

// Samples whose mean and median differ, so that a report using the wrong one shows:
// fused's median is 0.2 s (2× the baseline's 0.4 s) but its mean is 0.4 s (1×).
std::vector<CaseRecord> Cases() {
  return {Case("baseline", "train", 1, {0.4, 0.35, 0.45}),
          Case("fused", "train", 1, {0.2, 0.2, 0.8}),
          Case("batched", "train", 8, {0.5, 0.5, 0.6}),
          Case("scan", "train", 8, {}, "error"),
          Case("baseline", "generate", 1, {2.0, 2.0, 2.0}),
          Case("stepwise", "generate", 1, {0.05, 0.05, 1.0})};
}

// Splits a Markdown table row on pipes that are not backslash-escaped.
std::vector<std::string> Cells(const std::string& row) {
  std::vector<std::string> cells;
  std::string cell;
  for (size_t i = 1; i < row.size(); ++i) {
    if (row[i] == '\\' && i + 1 < row.size()) {
      cell += row.substr(i, 2);
      ++i;
    } else if (row[i] == '|') {
      cells.push_back(cell);
      cell.clear();
    } else {
      cell += row[i];
    }
  }
  return cells;
}

TEST_CASE("Markdown tables are rectangular, escaped, and carry the stored numbers", "[reports]") {
  const auto cases = Cases();
  const std::string markdown = RenderMarkdown(Run(), cases);
  std::istringstream lines(markdown);
  std::string line;
  size_t columns = 0, tables = 0, rows = 0;
  std::vector<std::vector<std::string>> body;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] != '|') {
      columns = 0;
      continue;
    }
    const auto cells = Cells(line);
    if (columns == 0) {
      columns = cells.size();
      ++tables;
    }
    CHECK(cells.size() == columns);  // rectangular
    if (line.rfind("|---", 0) != 0 && line.find("S/N") == std::string::npos) {
      body.push_back(cells);
      ++rows;
    }
  }
  CHECK(tables == 2);           // train and generate
  CHECK(rows == cases.size());  // failed cases are shown, not dropped
  // Unescaped pipes or backticks from the data would break the table or start code.
  CHECK(markdown.find("does \\| things with \\`code\\`") != std::string::npos);
  CHECK(markdown.find("out of memory \\| \\`oops\\`") != std::string::npos);
  // The numbers are the database's: runtime, memory and throughput of the fused row.
  const auto& fused = body[1];
  CHECK(fused[1].find("fused") != std::string::npos);
  // The seeds' mean ± std (sample deviation: sqrt((0.2² + 0.2² + 0.4²) / 2) = 0.346 s)
  // beside the median the verdicts use: {0.2, 0.2, 0.8} has mean 400 ms, median 200 ms.
  CHECK(fused[4] == " 400 ± 346 ms ");
  CHECK(fused[5] == " 200 ms (IQR 300 ms) ");  // q3 - q1 = 0.5 - 0.2
  CHECK(fused[6] == " " + FormatBytes(4096) + " ");
  CHECK(fused[7] == " " + FormatBytes(1024) + " ");
  CHECK(fused[8] == " 2.00× ");    // median throughput over the baseline's (the means say 1×)
  CHECK(fused[9] == " 320 ");      // 64 tokens / 0.2 s, the median
  CHECK(body[2][8] == " 6.40× ");  // batched B=8 over baseline B=1: (512 / 0.5) / (64 / 0.4)
  CHECK(body[3][4] == " — ");      // the error row has no runtime
  CHECK(body[3][5] == " — ");
  CHECK(body[5][8] == " 40.0× ");  // stepwise over baseline in generate mode
  // The speedup column and check agree: one definition (Speedup()).
  const std::vector<Expectation> expectations = {
      {"speedup", "fused", "baseline", 1.99, 2.01, {{"mode", "train"}}, 1}};
  CHECK(EvaluateExpectations(expectations, cases).at(0).held);
}

TEST_CASE("mean ± std in the mean's unit, to the deviation's second figure", "[reports]") {
  CHECK(FormatDurationSpread(3.0147, 0.0362) == "3.015 ± 0.036 s");  // the seeds' example
  CHECK(FormatDurationSpread(0.974, 0.115) == "974 ± 115 ms");       // no fewer than the mean's
  CHECK(FormatDurationSpread(0.0129, 0) == "12.9 ± 0.0 ms");         // no deviation: the mean's
  CHECK(FormatDurationSpread(1.0, 1e-7) == "1.0000 ± 0.0000 s");     // at most 4 decimals
  CHECK(FormatDurationSpread(2e-6, 3e-6) == "2.00 ± 3.00 us");       // wider than the mean
}

TEST_CASE("noise warnings: IQR/median over 10% and 25%, too few samples, the run's own",
          "[reports][noise]") {
  RunRecord run = Run();
  run.warnings = {"CPU frequency governor is 'powersave'"};
  // Medians 1.0; IQR/median 2% (quiet), 15% (noisy), 40% (very noisy, one far outlier);
  // mean != median in each spread one, so a mean-based spread would judge them otherwise.
  const std::vector<CaseRecord> cases = {Case("quiet", "train", 1, {0.99, 1.0, 1.0, 1.01, 1.03}),
                                         Case("noisy", "train", 1, {0.9, 0.95, 1.0, 1.1, 1.12}),
                                         Case("very_noisy", "train", 1, {0.8, 0.8, 1.0, 1.2, 3.0}),
                                         Case("few", "train", 1, {1.0, 1.5}),
                                         Case("failed", "train", 1, {}, "error")};
  const std::vector<std::string> warnings = RunWarnings(run, cases);
  REQUIRE(warnings.size() == 4);
  CHECK(warnings[0] == run.warnings[0]);
  CHECK_THAT(warnings[1], Catch::StartsWith("noisy ") &&
                              Catch::Contains(": noisy, IQR/median 15%") &&
                              Catch::Contains("0 Tukey outlier(s) in 5 samples"));
  CHECK_THAT(warnings[2], Catch::StartsWith("very_noisy ") &&
                              Catch::Contains(": very noisy, IQR/median 40% (over 25%)") &&
                              Catch::Contains("1 Tukey outlier(s)"));
  CHECK_THAT(warnings[3],
             Catch::StartsWith("few ") && Catch::Contains("2 sample(s), fewer than the 3"));

  // A Markdown list, one item per warning, escaped like table cells.
  const std::string rendered = RenderWarnings(warnings);
  CHECK_THAT(rendered, Catch::StartsWith("**Warnings** (4)"));
  CHECK(std::count(rendered.begin(), rendered.end(), '\n') == 2 + 4 + 1);
  CHECK(RenderWarnings({}).empty());
  CHECK(RenderWarnings({"a <b> | c"}).find("<b>") == std::string::npos);

  // A training run's step times spread by design: only the run's own warnings.
  run.kind = kRunKindTraining;
  CHECK(RunWarnings(run, cases).size() == 1);
}

TEST_CASE("timed share: every sample times its iterations over the cases' wall time", "[reports]") {
  // Two cases with different iteration counts and unequal samples: the share weighs each
  // sample by the steps it averages (a count of samples, a mean, or one iteration
  // count for all would each give another figure).
  RunRecord run = Run();
  std::vector<CaseRecord> cases = {Case("a", "train", 1, {0.1, 0.2, 0.6}),
                                   Case("b", "forward", 1, {0.05, 0.15})};
  cases[0].iterations = 4;  // 0.9 s of samples, 3.6 s of steps
  cases[0].wall_s = 6;
  cases[1].iterations = 10;  // 0.2 s of samples, 2 s of steps
  cases[1].wall_s = 14;
  const TimedShare timed = TimedShareOf(run, cases);
  CHECK(timed.timed_s == Approx(5.6));
  CHECK(timed.wall_s == Approx(20));
  CHECK(timed.share() == Approx(0.28));
  // A training run's sample is one step, whatever the case's iterations field says.
  run.kind = kRunKindTraining;
  CHECK(TimedShareOf(run, cases).timed_s == Approx(1.1));
  CHECK(TimedShareOf(run, {}).share() == 0);
}

TEST_CASE("report --phases: each phase, the samples inside, the rest and the share", "[reports]") {
  RunRecord run = Run();
  std::vector<CaseRecord> cases = {Case("a", "train", 1, {0.2, 0.3, 0.4}),
                                   Case("b", "forward", 1, {0.05, 0.15})};
  cases[0].iterations = 4;  // 3.6 s of steps
  cases[0].wall_s = 6;
  cases[1].iterations = 10;  // 2 s of steps
  cases[1].wall_s = 14;
  // a: 0.5 + 1 + 0.25 + 4 + 0.125 + 0.0625 = 5.9375 s of phases, 0.0625 s other.
  const double phases_a[] = {0.5, 1, 0.25, 4, 0.125, 0.0625};
  for (size_t i = 0; i < std::size(kCasePhases); ++i)
    cases[0].metrics.push_back({std::string("phase_") + kCasePhases[i] + "_s", phases_a[i], "s"});
  // b was stored before phases were: dashes (–), and no "other" claimed.
  const std::string table = RenderPhaseTable(run, cases);
  INFO(table);
  const auto row_of = [&](const std::string& start) {
    const auto at = table.find("| " + start);
    REQUIRE(at != std::string::npos);
    return table.substr(at, table.find('\n', at) - at);
  };
  const std::string a = row_of("a ");
  CHECK(a.find("| 500 ms | 1.00 s | 250 ms | 4.00 s | 125 ms | 62.5 ms | 3.60 s | 62.5 ms | 6.00 s "
               "| 60% |") != std::string::npos);
  const std::string b = row_of("b ");
  CHECK(b.find("| – | – | – | – | – | – | 2.00 s | – | 14.0 s | 14.3% |") != std::string::npos);
  // The total: phases summed over cases, 5.6 s of steps in 20 s.
  const std::string all = row_of("all cases");
  CHECK(all.find("| 500 ms | 1.00 s | 250 ms | 4.00 s | 125 ms | 62.5 ms | 5.60 s | 14.1 s | 20.0 "
                 "s | 28% |") != std::string::npos);
}

TEST_CASE("one speedup definition: the ratio of median throughputs", "[reports]") {
  const auto cases = Cases();
  // Same workload: the ratio of median step times.
  CHECK(*Speedup(cases[1], cases[0]) == Approx(0.4 / 0.2));
  CHECK(*Speedup(cases[0], cases[1]) == Approx(0.2 / 0.4));
  // Other work per step: tokens per median second. batched B=8: 512 tokens / 0.5 s;
  // baseline B=1: 64 tokens / 0.4 s.
  CHECK(*Speedup(cases[2], cases[0]) == Approx((512 / 0.5) / (64 / 0.4)));
  CHECK_FALSE(Speedup(cases[3], cases[0]));  // no samples: no speedup
}

TEST_CASE("roofline: rates over the median step, % of the binding measured peak",
          "[reports][roofline]") {
  RunRecord run = Run();
  run.environment.push_back({PeakGemmKey("cpu", "float32", 1), "100"});  // GFLOP/s
  run.environment.push_back({PeakStreamKey("cpu", 1), "10"});            // GB/s
  // Median 0.04 s, mean 0.06 s: a roofline from the mean would give two thirds of these.
  CaseRecord compute = Case("batched", "train", 8, {0.04, 0.04, 0.1});
  compute.metrics.erase(
      std::remove_if(compute.metrics.begin(), compute.metrics.end(),
                     [](const Metric& m) { return m.name.rfind("step_", 0) == 0; }),
      compute.metrics.end());
  compute.metrics.push_back({"step_flops", 1e9, "FLOP"});
  compute.metrics.push_back({"step_bytes", 1e7, "bytes"});
  CaseRecord memory = compute;  // stored before step_gemm_flops: no floor
  // 4e8 FLOP of products: 0.004 s at 100 GFLOP/s, a tenth of the 0.04 s median (a mean
  // would give 15×).
  compute.metrics.push_back({"step_gemm_flops", 4e8, "FLOP"});
  memory.metrics.back().value = 2e8;     // bytes: 0.02 s at 10 GB/s
  memory.metrics.end()[-2].value = 1e8;  // FLOPs: 0.001 s at 100 GFLOP/s

  const auto point = Roofline(run, compute);
  REQUIRE(point);
  CHECK(point->gflops_per_s == Approx(25));    // 1e9 FLOP / 0.04 s
  CHECK(point->gbytes_per_s == Approx(0.25));  // 1e7 B / 0.04 s
  REQUIRE(point->percent_of_peak);
  CHECK(point->bound == "compute");
  CHECK(*point->percent_of_peak == Approx(25));  // 0.01 s at peak / 0.04 s
  const auto bandwidth_bound = Roofline(run, memory);
  REQUIRE(bandwidth_bound);
  REQUIRE(bandwidth_bound->percent_of_peak);
  CHECK(bandwidth_bound->bound == "memory");
  CHECK(*bandwidth_bound->percent_of_peak == Approx(50));  // 0.02 s at peak / 0.04 s
  REQUIRE(point->times_gemm_floor);
  CHECK(*point->times_gemm_floor == Approx(10));
  CHECK_FALSE(bandwidth_bound->times_gemm_floor);

  // [[expect]] what = "gemm_floor" holds that figure to its bound, tried at both ends; a
  // run without the rate, a case without step_gemm_flops or one that failed falls short.
  const auto floor_outcome = [&](std::optional<double> at_least, std::optional<double> at_most,
                                 const CaseRecord& c, const RunRecord* in) {
    const Expectation e{"gemm_floor", c.name(), "", at_least, at_most, {}, 1};
    return EvaluateExpectations({e}, {c}, in).at(0);
  };
  CHECK(floor_outcome(std::nullopt, 10.5, compute, &run).held);
  CHECK_FALSE(floor_outcome(std::nullopt, 9.5, compute, &run).held);
  CHECK(floor_outcome(9.5, std::nullopt, compute, &run).held);
  CHECK_FALSE(floor_outcome(10.5, std::nullopt, compute, &run).held);
  CHECK_THAT(floor_outcome(std::nullopt, 10.5, compute, &run).measured, Catch::StartsWith("10×"));
  CHECK_FALSE(floor_outcome(std::nullopt, 10.5, compute, nullptr).held);
  CHECK_FALSE(floor_outcome(std::nullopt, 1e9, memory, &run).held);
  CaseRecord failed = compute;
  failed.status = kStatusError;
  CHECK_FALSE(floor_outcome(std::nullopt, 10.5, failed, &run).held);

  // The peaks belong to a device, dtype and thread count: none stored for 2 threads.
  CaseRecord other_threads = compute;
  other_threads.identity.workload.threads = 2;
  const auto unmeasured = Roofline(run, other_threads);
  REQUIRE(unmeasured);
  CHECK_FALSE(unmeasured->percent_of_peak);
  CHECK_FALSE(unmeasured->times_gemm_floor);  // no GEMM rate at 2 threads
  CHECK(unmeasured->gflops_per_s == Approx(25));
  // No stored cost, no roofline.
  CaseRecord no_cost = Case("baseline", "train", 1, {0.4, 0.35, 0.45});
  no_cost.metrics.resize(no_cost.metrics.size() - 2);
  CHECK_FALSE(Roofline(run, no_cost));

  // The same numbers reach every export.
  const std::vector<CaseRecord> cases = {compute, memory};
  const std::string markdown = RenderMarkdown(run, cases);
  CHECK(markdown.find("| % of BLAS peak | % of HW peak | × GEMM floor | Correct |") !=
        std::string::npos);
  CHECK(markdown.find(" 25% (compute) | — | 10× |") != std::string::npos);
  CHECK(markdown.find(" 50% (memory) | — | — |") != std::string::npos);
  // A table of cases stored before step_gemm_flops has no such column.
  const std::string older = RenderMarkdown(run, {memory});
  CHECK(older.find("GEMM floor") == std::string::npos);
  CHECK(older.find("| % of BLAS peak | % of HW peak | Correct |") != std::string::npos);
  const std::string csv = RenderCsv(run, cases);
  CHECK(csv.find(",percent_of_peak,bound,percent_of_hardware_peak,times_gemm_floor\n") !=
        std::string::npos);
  CHECK(csv.find(",25,compute,,10\n") != std::string::npos);  // no CPU facts: no HW peak
  CHECK(csv.find(",50,memory,,\n") != std::string::npos);
  const json document = json::parse(RenderJson(run, cases));
  CHECK(document.at("cases")[1].at("roofline").at("percent_of_peak") == Approx(50));
  CHECK(document.at("cases")[0].at("roofline").at("times_gemm_floor") == Approx(10));
  CHECK_FALSE(document.at("cases")[1].at("roofline").contains("times_gemm_floor"));
  const json gbench = json::parse(RenderGbenchJson(run, cases));
  const json& first = gbench.at("benchmarks").at(0);
  CHECK(first.at("run_type") == "iteration");
  CHECK(first.at("FLOPS") == Approx(1e9 / 0.04));
  CHECK(first.at("items_per_second") == Approx(8 * 64 / 0.04));
}

TEST_CASE("hardware peak: cores x clock x FLOPs a cycle, by hand for fixed CPUs",
          "[reports][roofline][hardware]") {
  const std::string avx512 = "sse2 sse3 ssse3 sse4_1 sse4_2 avx fma avx2 avx512f";
  // 2 cores x 2.1 GHz x (2 FMA ports x 16 lanes x 2 FLOPs) = 268.8 GFLOP/s in float32.
  CHECK(*CpuPeakGflops({avx512, 2100, 2, "float32"}) == Approx(268.8));
  CHECK(*CpuPeakGflops({avx512, 2100, 2, "float64"}) == Approx(134.4));  // 8 lanes
  // Flags in any order; AVX2 counts as FMA-capable only with fma: 1 x 3 GHz x 32 = 96.
  CHECK(*CpuPeakGflops({"fma avx2 avx sse2", 3000, 1, "float32"}) == Approx(96));
  // AVX2 without fma, and AVX: one add and one multiply of 8 lanes, 1 x 2.5 GHz x 16.
  CHECK(*CpuPeakGflops({"sse2 avx avx2", 2500, 1, "float32"}) == Approx(40));
  // SSE: 4 + 4 FLOPs a cycle; 4 cores x 2 GHz x 8 = 64.
  CHECK(*CpuPeakGflops({"sse2 sse3", 2000, 4, "float32"}) == Approx(64));
  // No peak without an x86 level, a clock, cores, or a float type it models.
  CHECK_FALSE(CpuPeakGflops({"fp asimd", 2000, 1, "float32"}));
  CHECK_FALSE(CpuPeakGflops({"none", 2000, 1, "float32"}));
  CHECK_FALSE(CpuPeakGflops({avx512, 0, 1, "float32"}));
  CHECK_FALSE(CpuPeakGflops({avx512, 2000, 0, "float32"}));
  CHECK_FALSE(CpuPeakGflops({avx512, 2000, 1, "bfloat16"}));

  // A case's % of HW peak: its threads, capped at the physical cores, at the recorded
  // clock. 1e9 FLOPs in a 0.04 s median (mean 0.06 s) on 4 threads of a 2-core AVX2 CPU
  // at 2 GHz: peak 2 x 2e9 x 32 = 128 GFLOP/s, 1e9 / 128e9 = 7.8125 ms, 19.53%.
  RunRecord run = Run();
  run.environment.push_back({"cpu_simd", "sse2 avx fma avx2"});
  run.environment.push_back({"cpu_mhz", "2000"});
  run.environment.push_back({"cpu_physical_cores", "2"});
  run.environment.push_back({PeakStreamKey("cpu", 4), "1"});  // GB/s
  CaseRecord c = Case("fused_recurrent", "train", 8, {0.04, 0.04, 0.1});
  c.identity.workload.threads = 4;
  for (Metric& metric : c.metrics) {
    if (metric.name == "step_flops") metric.value = 1e9;
    if (metric.name == "step_bytes") metric.value = 1e6;  // 1 ms at 1 GB/s: not binding
  }
  REQUIRE(HardwarePeakGflops(run, c.workload()));
  CHECK(*HardwarePeakGflops(run, c.workload()) == Approx(128));
  auto point = Roofline(run, c);
  REQUIRE(point);
  REQUIRE(point->percent_of_hardware_peak);
  CHECK(*point->percent_of_hardware_peak == Approx(100 * 1e9 / 128e9 / 0.04));
  CHECK(RenderMarkdown(run, {c}).find(" 20% |") != std::string::npos);
  // Bandwidth binds when its bytes take longer: 1e8 B at 1 GB/s = 0.1 s of 0.04 s.
  for (Metric& metric : c.metrics)
    if (metric.name == "step_bytes") metric.value = 1e8;
  CHECK(*Roofline(run, c)->percent_of_hardware_peak == Approx(250));
  // A measured GEMM rate at the peak keeps the figure; above it the recorded clock is not
  // the cores' (a VM's nominal MHz): the peak is at least the measured rate, and a warning
  // names both rates. 1e8 B at 1 GB/s binds either way; with 1e6 B, the FLOPs do.
  const auto clock_warnings = [&] {
    int count = 0;
    for (const std::string& warning : RunWarnings(run, {c}))
      count += warning.find("understates this CPU") != std::string::npos;
    return count;
  };
  run.environment.push_back({PeakGemmKey("cpu", "float32", 4), "128"});
  CHECK(Roofline(run, c)->percent_of_hardware_peak);
  CHECK(clock_warnings() == 0);
  for (Metric& metric : c.metrics)
    if (metric.name == "step_bytes") metric.value = 1e6;
  CHECK(*Roofline(run, c)->percent_of_hardware_peak == Approx(100 * 1e9 / 128e9 / 0.04));
  run.environment.back().second = "256";
  CHECK(*Roofline(run, c)->percent_of_hardware_peak == Approx(100 * 1e9 / 256e9 / 0.04));
  CHECK(clock_warnings() == 1);
  run.environment.pop_back();
  // A GPU case has no CPU peak; without the device's facts, no peak at all.
  c.identity.workload.device = "cuda";
  CHECK_FALSE(Roofline(run, c)->percent_of_hardware_peak);
}

TEST_CASE("GPU peak: SMs x clock x FLOPs a cycle per SM, by hand for fixed devices",
          "[reports][roofline][hardware]") {
  // H100 SXM: 132 SMs x 1980 MHz x 256 (128 FP32 FMA units) = 66.9 TFLOP/s, NVIDIA's
  // datasheet figure; TF32 tensor cores 2048 a cycle (535 at 1980 MHz, 495 at 1830).
  CHECK(*GpuPeakGflops({"9.0", 132, 1980, "float32", false}) == Approx(66908.16));
  CHECK(*GpuPeakGflops({"9.0", 132, 1830, "float32", true}) == Approx(494714.88));
  CHECK(*GpuPeakGflops({"9.0", 132, 1830, "bfloat16", false}) == Approx(989429.76));
  // float64 on the FP64 tensor cores, where DGEMM runs: 67 TFLOP/s.
  CHECK(*GpuPeakGflops({"9.0", 132, 1980, "float64", false}) == Approx(66908.16));
  // A100: 108 x 1410 MHz x 128 = 19.5 TFLOP/s float32, x 1024 = 156 TF32, x 2048 = 312 bf16.
  CHECK(*GpuPeakGflops({"8.0", 108, 1410, "float32", false}) == Approx(19491.84));
  CHECK(*GpuPeakGflops({"8.0", 108, 1410, "float32", true}) == Approx(155934.72));
  CHECK(*GpuPeakGflops({"8.0", 108, 1410, "bfloat16", false}) == Approx(311869.44));
  // V100: 80 x 1530 MHz x 1024 = 125 TFLOP/s fp16; no TF32 (the flag changes nothing:
  // 15.7 TFLOP/s on the CUDA cores) and no bfloat16.
  CHECK(*GpuPeakGflops({"7.0", 80, 1530, "float16", false}) == Approx(125337.6));
  CHECK(*GpuPeakGflops({"7.0", 80, 1530, "float32", true}) == Approx(15667.2));
  CHECK_FALSE(GpuPeakGflops({"7.0", 80, 1530, "bfloat16", false}));
  // Unknown capability, SMs or clock: no peak, never a guess.
  CHECK_FALSE(GpuPeakGflops({"8.9", 128, 2520, "float32", false}));
  CHECK_FALSE(GpuPeakGflops({"", 132, 1980, "float32", false}));
  CHECK_FALSE(GpuPeakGflops({"9.0", 0, 1980, "float32", false}));
  CHECK_FALSE(GpuPeakGflops({"9.0", 132, 0, "float32", false}));

  // A CUDA case's % of HW peak from the facts every CUDA run records: 1e12 FLOPs in a
  // 0.05 s median (mean 0.07 s) on an H100 at 1980 MHz, TF32 off: 1e12 / 66.9e12 s
  // = 14.95 ms of 50 ms, 29.9%; with tf32_cublas on, the TF32 peak (535 TF): 3.74%.
  RunRecord run = Run();
  run.environment.push_back({"gpu_compute_capability", "9.0"});
  run.environment.push_back({"gpu_sm_count", "132"});
  run.environment.push_back({"gpu_max_clock_khz", "1980000"});
  CaseRecord c = Case("batched", "train", 8, {0.05, 0.05, 0.11});
  c.identity.workload.device = "cuda";
  run.environment.push_back({PeakStreamKey("cuda", c.workload().threads), "3000"});
  run.environment.push_back({"tf32_cublas", "false"});
  for (Metric& metric : c.metrics) {
    if (metric.name == "step_flops") metric.value = 1e12;
    if (metric.name == "step_bytes") metric.value = 1e9;  // 0.33 ms at 3 TB/s: not binding
  }
  REQUIRE(HardwarePeakGflops(run, c.workload()));
  CHECK(*HardwarePeakGflops(run, c.workload()) == Approx(66908.16));
  CHECK(*Roofline(run, c)->percent_of_hardware_peak == Approx(100 * 1e12 / 66908.16e9 / 0.05));
  run.environment.back() = {"tf32_cublas", "true"};
  CHECK(*Roofline(run, c)->percent_of_hardware_peak ==
        Approx(100 * 1e12 / (132 * 1980e6 * 2048) / 0.05));
}

TEST_CASE("BLAS core warning: an OpenBLAS core below the CPU's vector extension",
          "[reports][hardware]") {
  const std::string avx512 = "sse2 sse3 avx fma avx2 avx512f";
  // This VM: Debian's OpenBLAS 0.3.21 picks Prescott on an AVX-512 Xeon.
  const std::string warning = BlasCoreWarning("Prescott", avx512, "unset");
  CHECK_THAT(warning, Catch::Contains("Prescott kernels (SSE)") &&
                          Catch::Contains("a CPU with AVX-512") &&
                          Catch::Contains("OPENBLAS_CORETYPE unset") &&
                          Catch::Contains("OPENBLAS_CORETYPE=SkylakeX"));
  // Chosen by the variable (the instruction counts pin Haswell): said so.
  CHECK_THAT(BlasCoreWarning("Haswell", avx512, "Haswell"),
             Catch::Contains("OPENBLAS_CORETYPE=Haswell chose them"));
  CHECK_THAT(BlasCoreWarning("sandybridge", "sse2 avx fma avx2", ""),
             Catch::Contains("OPENBLAS_CORETYPE=Haswell selects"));
  // A core that matches, or one above the CPU: nothing to say.
  CHECK(BlasCoreWarning("SkylakeX", avx512, "SkylakeX").empty());
  CHECK(BlasCoreWarning("Cooperlake", avx512, "unset").empty());
  CHECK(BlasCoreWarning("Zen", "sse2 avx fma avx2", "unset").empty());
  CHECK(BlasCoreWarning("Haswell", "sse2 avx", "unset").empty());
  // What the rule cannot judge: not OpenBLAS, an unknown core, no recorded flags.
  CHECK(BlasCoreWarning("not OpenBLAS", avx512, "unset").empty());
  CHECK(BlasCoreWarning("NeoverseN1", avx512, "unset").empty());
  CHECK(BlasCoreWarning("Prescott", "", "unset").empty());
  CHECK(BlasCoreWarning("Prescott", "fp asimd", "unset").empty());

  // show, report and check list it with the run's warnings, training runs included.
  RunRecord run = Run();
  run.environment.push_back({"blas_core", "Prescott"});
  run.environment.push_back({"cpu_simd", avx512});
  run.environment.push_back({"env_openblas_coretype", "unset"});
  CHECK(RunWarnings(run, {}) == std::vector<std::string>{warning});
  // A CPU table's title names the kernels, and the variable where it chose them.
  const std::vector<CaseRecord> cases = {Case("fused", "train", 1, {0.1, 0.2, 0.3})};
  CHECK_THAT(RenderMarkdown(run, cases), Catch::Contains("Test CPU, OpenBLAS Prescott kernels, "));
  run.environment.back().second = "SkylakeX";
  CHECK_THAT(RenderMarkdown(run, cases),
             Catch::Contains("OpenBLAS Prescott kernels (OPENBLAS_CORETYPE=SkylakeX), "));
  run.kind = kRunKindTraining;
  CHECK(RunWarnings(run, {}).size() == 1);
}

TEST_CASE("BLAS pool warning: OpenBLAS's own threads beside ATen's OpenMP pool", "[reports]") {
  const std::string pthreads =
      "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Zen MAX_THREADS=64";
  const std::string openmp =
      "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY USE_OPENMP Zen MAX_THREADS=64";
  CHECK_THAT(BlasPoolWarning(pthreads, "OpenMP", "2"),
             Catch::Contains("thread pool of its own") && Catch::Contains("libopenblas0-openmp"));
  CHECK_THAT(BlasPoolWarning(pthreads, "OpenMP", "64"), Catch::Contains("pthread build"));
  // One pool, or one thread, or another backend or BLAS: nothing to say.
  CHECK(BlasPoolWarning(openmp, "OpenMP", "2").empty());
  CHECK(BlasPoolWarning(pthreads, "OpenMP", "1").empty());
  CHECK(BlasPoolWarning(pthreads, "native", "2").empty());
  CHECK(BlasPoolWarning("not OpenBLAS", "OpenMP", "2").empty());
  // Runs stored before the keys existed.
  CHECK(BlasPoolWarning(pthreads, "", "2").empty());
  CHECK(BlasPoolWarning(pthreads, "OpenMP", "").empty());
  CHECK(BlasPoolWarning(pthreads, "OpenMP", "unknown").empty());

  RunRecord run = Run();
  run.environment.push_back({"blas_config", pthreads});
  run.environment.push_back({"aten_parallel", "OpenMP"});
  run.environment.push_back({"blas_threads", "2"});
  CHECK(RunWarnings(run, {}) == std::vector<std::string>{BlasPoolWarning(pthreads, "OpenMP", "2")});
  run.environment[run.environment.size() - 3].second = openmp;  // blas_config
  CHECK(RunWarnings(run, {}).empty());
}

TEST_CASE("Markdown tables escape every cell as text (reports/escape/markdown.h)", "[reports]") {
  MarkdownTable table({"name"});
  table.AddRow({"two\nlines | <b>bold</b>"});
  const std::string rendered = table.Render();
  CHECK(std::count(rendered.begin(), rendered.end(), '\n') == 3);  // header, rule, one row
  CHECK(rendered.find("<b>") == std::string::npos);
}

TEST_CASE("MarkdownTable rejects ragged rows", "[reports]") {
  MarkdownTable table({"a", "b"});
  CHECK_THROWS_AS(table.AddRow({"1"}), std::invalid_argument);
  table.AddRow({"x|y", "`z`"});
  CHECK(table.Render() == "| a | b |\n|---|---|\n| x\\|y | \\`z\\` |\n");
}

TEST_CASE("README sections regenerate idempotently and leave the rest alone", "[reports][readme]") {
  const std::string before =
      "# Title\r\nintro ünïcode  \n<!-- seqbench:begin suite=demo device=cpu -->\nold\ntable\n"
      "<!-- seqbench:end -->\nmiddle\n<!-- seqbench:begin suite=other -->"
      "<!-- seqbench:end -->\ntail without newline";
  std::vector<std::map<std::string, std::string>> seen;
  const SectionRenderer render = [&](const ReadmeSection& section) {
    seen.push_back(section.attributes);
    return "generated for " + section.attributes.at("suite") + "\n";
  };
  const std::string once = RewriteReadme(before, "README.md", render);
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].at("device") == "cpu");
  CHECK(once.find("old\ntable") == std::string::npos);
  CHECK(once.find("generated for demo\n<!-- seqbench:end -->") != std::string::npos);
  // Outside the markers, byte for byte.
  const auto outside = [](const std::string& text) {
    return std::regex_replace(text, std::regex("-->[^]*?<!-- seqbench:end -->"),
                              "--><!-- seqbench:end -->");
  };
  CHECK(outside(once) == outside(before));
  CHECK(RewriteReadme(once, "README.md", render) == once);  // idempotent
}

TEST_CASE("README errors name the file and line", "[reports][readme]") {
  const SectionRenderer render = [](const ReadmeSection&) -> std::string {
    throw ReadmeError("no complete run of suite 'demo'");
  };
  const SectionRenderer fine = [](const ReadmeSection&) { return std::string("x\n"); };
  CHECK_THROWS_WITH(RewriteReadme("no markers\n", "R.md", fine),
                    Catch::Contains("R.md: no seqbench sections"));
  CHECK_THROWS_WITH(RewriteReadme("a\n<!-- seqbench:begin suite=x -->\n", "R.md", fine),
                    Catch::Contains("R.md:2: seqbench:begin without a matching"));
  CHECK_THROWS_WITH(RewriteReadme("a\nb\n<!-- seqbench:end -->\n", "R.md", fine),
                    Catch::Contains("R.md:3: seqbench:end without a seqbench:begin"));
  CHECK_THROWS_WITH(
      RewriteReadme(
          "<!-- seqbench:begin suite=x -->\n<!-- seqbench:begin suite=y -->\n<!-- seqbench:end -->",
          "R.md", fine),
      Catch::Contains("R.md:2: seqbench:begin inside another section"));
  CHECK_THROWS_WITH(
      RewriteReadme("\n<!-- seqbench:begin suite=demo -->\n<!-- seqbench:end -->\n", "R.md",
                    render),
      Catch::Contains("R.md:2:") && Catch::Contains("no complete run of suite 'demo'"));
  CHECK_THROWS_WITH(
      RewriteReadme("<!-- seqbench:begin suite -->\n<!-- seqbench:end -->\n", "R.md", fine),
      Catch::Contains("malformed attribute 'suite'"));
}

CaseRecord Timed(const std::string& key, std::vector<double> samples, double peak = 1000) {
  CaseRecord c;
  c.identity.variant_name = c.identity.variant_key = key;
  c.tokens_per_step = 64;
  c.status = "ok";
  c.samples_s = std::move(samples);
  c.metrics = {{"peak_bytes", peak, "bytes"}};
  return c;
}

std::vector<double> Noisy(double center, size_t n, double spread = 0.01) {
  std::vector<double> samples;
  for (size_t i = 0; i < n; ++i)
    samples.push_back(center * (1 + spread * ((i * 7 % n) / double(n) - 0.5)));
  return samples;
}

TEST_CASE("compare: identical, 20% slower, too few samples, memory", "[reports][compare]") {
  const CompareSettings settings;  // 5%, 95% interval, 3 samples
  const auto base = std::vector<CaseRecord>{Timed("same", Noisy(1.0, 10)),
                                            Timed("slow", Noisy(1.0, 10)),
                                            Timed("few", {1, 1}),
                                            Timed("fat", Noisy(2.0, 10), 1000),
                                            Timed("gone", Noisy(1.0, 10)),
                                            Timed("slow5", {1.0, 1.08, 0.95, 1.1, 0.92}),
                                            Timed("noisy", {1.0, 1.5, 0.7, 1.2, 0.9}),
                                            Timed("quick", Noisy(1.0, 10), 1000)};
  const auto next = std::vector<CaseRecord>{Timed("same", Noisy(1.0, 10)),
                                            Timed("slow", Noisy(1.2, 10)),
                                            Timed("few", {2, 2}),
                                            Timed("fat", Noisy(2.0, 10), 1500),
                                            Timed("new", Noisy(1.0, 10)),
                                            Timed("slow5", {1.4, 1.5, 1.33, 1.45, 1.38}),
                                            Timed("noisy", {1.1, 1.6, 0.8, 1.3, 0.95}),
                                            Timed("quick", Noisy(0.8, 10), 500)};
  const auto results = CompareCases(base, next, settings);
  std::map<std::string, CaseComparison> by_key;
  for (const auto& r : results) by_key[r.case_key.substr(0, r.case_key.find(' '))] = r;
  CHECK(by_key["same"].verdict == "same");
  CHECK_FALSE(IsRegression(by_key["same"]));
  CHECK(by_key["slow"].verdict == "slower");
  CHECK(by_key["slow"].ratio == Approx(1.2).epsilon(0.02));
  CHECK(IsRegression(by_key["slow"]));
  CHECK(by_key["few"].verdict == "ambiguous");
  CHECK_THAT(by_key["few"].note, Catch::Contains("cannot judge"));
  CHECK_FALSE(IsRegression(by_key["few"]));
  CHECK(by_key["fat"].verdict == "same");
  CHECK(by_key["fat"].memory_verdict == "larger");
  CHECK(IsRegression(by_key["fat"]));
  CHECK(by_key["gone"].verdict == "only in base");
  CHECK(by_key["new"].verdict == "only in new");
  // 40% slower at 5 samples a side is a verdict, not "cannot judge" (the U test needed 9).
  CHECK(by_key["slow5"].verdict == "slower");
  REQUIRE(by_key["slow5"].interval);
  CHECK(by_key["slow5"].interval->low > 1.05);
  // 10% slower under 30% noise: the interval reaches both ways, and it says so.
  CHECK(by_key["noisy"].verdict == "ambiguous");
  CHECK_THAT(by_key["noisy"].note, Catch::Contains("interval"));
  CHECK_FALSE(IsRegression(by_key["noisy"]));
  // 20% faster in half the memory: both improvements, neither a regression.
  CHECK(by_key["quick"].verdict == "faster");
  CHECK(by_key["quick"].ratio == Approx(0.8).epsilon(0.02));
  CHECK(by_key["quick"].memory_verdict == "smaller");
  CHECK(*by_key["quick"].memory_ratio == Approx(0.5));
  CHECK_FALSE(IsRegression(by_key["quick"]));
  // A steady 2% change is "same" at a 5% threshold; at 1% it is "slower".
  const auto small = CompareCases({Timed("x", Noisy(1.0, 12, 0.001))},
                                  {Timed("x", Noisy(1.02, 12, 0.001))}, settings);
  CHECK(small[0].verdict == "same");
  CompareSettings strict = settings;
  strict.threshold = 0.01;
  CHECK(CompareCases({Timed("x", Noisy(1.0, 12, 0.001))}, {Timed("x", Noisy(1.02, 12, 0.001))},
                     strict)[0]
            .verdict == "slower");
}

TEST_CASE("compare's summary: the geometric mean of the ratios it has", "[reports][compare]") {
  // Time ratios 1, 4, 2, 8 and one case not timed (0): geometric mean 64^(1/4) = 2.83,
  // where the arithmetic mean is 3.75 and the median 3. Count ratios on two cases only.
  std::vector<CaseComparison> comparisons(5);
  const double ratios[] = {1, 4, 2, 8, 0};
  for (size_t i = 0; i < comparisons.size(); ++i) comparisons[i].ratio = ratios[i];
  comparisons[0].count_ratio = 1.0;
  comparisons[3].count_ratio = 1.21;
  const GeometricMean time = GeometricMeanOf(comparisons, TimeRatio);
  CHECK(time.count == 4);
  CHECK(*time.value == Approx(std::pow(64.0, 0.25)));
  const GeometricMean counts = GeometricMeanOf(comparisons, CountRatio);
  CHECK(counts.count == 2);
  CHECK(*counts.value == Approx(1.1));
  CHECK_FALSE(GeometricMeanOf({}, TimeRatio).value);
}

TEST_CASE("check: a speedup bound fails only when its whole interval misses it",
          "[reports][check]") {
  // batched's step times sit around 1 s; scan's around 0.72 s (1.38x) with 28% spread, the
  // clean-clone flake of `scan >= 1.4x batched`: inside the noise, so it holds; against a
  // 2x bound the whole interval falls short.
  const auto make = [](const std::string& name, std::vector<double> samples) {
    CaseRecord c = Timed(name, std::move(samples));
    c.identity.workload.mode = "train";
    return c;
  };
  // A scan case on another workload, with no batched case beside it: no pair, so it takes
  // no part (neither holds nor fails the bound).
  CaseRecord unpaired = make("scan", {3.0, 3.1, 2.9, 3.0, 3.0});
  unpaired.identity.workload.batch = 7;
  const std::vector<CaseRecord> cases = {make("batched", {1.0, 1.02, 0.98, 1.01, 0.99}),
                                         make("scan", {0.72, 0.55, 0.75, 0.9, 0.7}), unpaired};
  const std::vector<Expectation> expectations = {
      {"speedup", "scan", "batched", 1.4, std::nullopt, {}, 1},
      {"speedup", "scan", "batched", 2.0, std::nullopt, {}, 2},
      {"speedup", "scan", "batched", std::nullopt, 1.0, {}, 3}};
  const auto outcomes = EvaluateExpectations(expectations, cases);
  CHECK(outcomes[0].held);
  CHECK_THAT(outcomes[0].measured, Catch::Contains("within noise of the bound"));
  CHECK(outcomes[0].measured.find(';') == std::string::npos);  // one pair measured
  CHECK_FALSE(outcomes[1].held);
  CHECK_THAT(outcomes[1].measured, Catch::Contains("95% interval"));
  CHECK_FALSE(outcomes[2].held);  // at most 1x: the whole interval is above it
}

// Field name -> JSON type name, for every entry of one run_type.
std::map<std::string, std::string> Schema(const json& document, const std::string& run_type) {
  std::map<std::string, std::string> schema;
  for (const auto& entry : document.at("benchmarks")) {
    if (entry.at("run_type") != run_type) continue;
    for (const auto& [key, value] : entry.items()) {
      const std::string type = value.is_number() ? "number" : value.type_name();
      schema[key] = type;
    }
  }
  return schema;
}

// The problems of a document against google/benchmark's documented JSON format
// (json_schema_version 1: docs/user_guide.md and src/json_reporter.cc): the context's
// fields and types; per entry the identity fields, the repetition or aggregate fields,
// times with a known unit, error and skip flags each with its message, and every other
// field a number (a user counter). Empty: the document is in the format.
// Collects a document's departures from google/benchmark's format (GbenchFormatProblems).
struct GbenchChecker {
  std::vector<std::string> problems;

  // `key` is in `object` with the type `is` checks.
  void need(const json& object, const std::string& where, const std::string& key,
            bool (json::*is)() const) {
    if (!object.contains(key)) {
      problems.push_back(where + ": no " + key);
    } else if (!(object.at(key).*is)()) {
      problems.push_back(where + ": " + key + " has the wrong type");
    }
  }

  void CheckContext(const json& context) {
    for (const char* key :
         {"date", "host_name", "executable", "library_build_type", "library_version"})
      need(context, "context", key, &json::is_string);
    for (const char* key : {"num_cpus", "mhz_per_cpu", "json_schema_version"})
      need(context, "context", key, &json::is_number_integer);
    need(context, "context", "caches", &json::is_array);
    need(context, "context", "load_avg", &json::is_array);
    if (context.value("json_schema_version", 0) != 1)
      problems.push_back("json_schema_version != 1");
    if (context.contains("cpu_scaling_enabled") && !context.at("cpu_scaling_enabled").is_boolean())
      problems.push_back("cpu_scaling_enabled is not a boolean");
    for (const auto& cache : context.value("caches", json::array())) {
      need(cache, "cache", "type", &json::is_string);
      for (const char* key : {"level", "size", "num_sharing"})
        need(cache, "cache", key, &json::is_number_integer);
    }
    for (const auto& load : context.value("load_avg", json::array()))
      if (!load.is_number()) problems.push_back("load_avg holds a non-number");
    const std::set<std::string> context_keys = {
        "date",        "host_name",           "executable",         "num_cpus",
        "mhz_per_cpu", "cpu_scaling_enabled", "aslr_enabled",       "caches",
        "load_avg",    "library_version",     "library_build_type", "json_schema_version"};
    for (const auto& [key, value] : context.items()) {
      if (!context_keys.count(key) && !value.is_string())
        problems.push_back("custom context " + key + " is not a string");
    }
  }

  void CheckEntry(const json& entry) {
    static const std::set<std::string> known = {"name",
                                                "family_index",
                                                "per_family_instance_index",
                                                "run_name",
                                                "run_type",
                                                "repetitions",
                                                "repetition_index",
                                                "threads",
                                                "aggregate_name",
                                                "aggregate_unit",
                                                "iterations",
                                                "real_time",
                                                "cpu_time",
                                                "time_unit",
                                                "error_occurred",
                                                "error_message",
                                                "skipped",
                                                "skip_message"};
    const std::string where = entry.value("name", "(unnamed)");
    for (const char* key : {"name", "run_name", "run_type", "time_unit"})
      need(entry, where, key, &json::is_string);
    for (const char* key :
         {"family_index", "per_family_instance_index", "repetitions", "threads", "iterations"})
      need(entry, where, key, &json::is_number_integer);
    need(entry, where, "real_time", &json::is_number);
    need(entry, where, "cpu_time", &json::is_number);
    const std::string unit = entry.value("time_unit", "");
    if (unit != "ns" && unit != "us" && unit != "ms" && unit != "s")
      problems.push_back(where + ": time_unit " + unit);
    const std::string run_type = entry.value("run_type", "");
    if (run_type == "iteration") {
      need(entry, where, "repetition_index", &json::is_number_integer);
    } else if (run_type == "aggregate") {
      need(entry, where, "aggregate_name", &json::is_string);
      const std::string aggregate_unit = entry.value("aggregate_unit", "");
      if (aggregate_unit != "time" && aggregate_unit != "percentage")
        problems.push_back(where + ": aggregate_unit " + aggregate_unit);
    } else {
      problems.push_back(where + ": run_type " + run_type);
    }
    if (entry.contains("error_occurred")) {
      need(entry, where, "error_occurred", &json::is_boolean);
      need(entry, where, "error_message", &json::is_string);
    }
    if (entry.contains("skipped")) {
      need(entry, where, "skipped", &json::is_boolean);
      need(entry, where, "skip_message", &json::is_string);
    }
    for (const auto& [key, value] : entry.items()) {
      if (!known.count(key) && !value.is_number())
        problems.push_back(where + ": counter " + key + " is not a number");
    }
  }
};

std::vector<std::string> GbenchFormatProblems(const json& document) {
  GbenchChecker checker;
  checker.CheckContext(document.at("context"));
  for (const auto& entry : document.at("benchmarks")) checker.CheckEntry(entry);
  return checker.problems;
}

// A run as a benchmark run records it (harness/environment.cc), for the export's context.
RunRecord RunWithMachineFacts() {
  RunRecord run = Run();
  run.environment.insert(
      run.environment.end(),
      {{"cpu_mhz", "2450"},
       {"cpu_governor", "unavailable"},
       {"cpu_caches", R"([{"type":"Data","level":1,"size":32768,"num_sharing":1}])"},
       {"load_avg_start", "0.50 0.25 0.10"},
       {"gbench_version", "v1.7.1"},
       {"build_type", "Release"}});
  return run;
}

TEST_CASE("gbench-json has Google Benchmark's own fields and types", "[reports][gbench]") {
  // What Google Benchmark itself writes for a manual-time benchmark with repetitions, and
  // for one that failed (SkipWithError).
  benchmark::ClearRegisteredBenchmarks();
  benchmark::RegisterBenchmark(
      "reference",
      [](benchmark::State& state) {
        for (auto _ : state) state.SetIterationTime(0.001);
        // The rates and sizes seqbench exports as user counters.
        for (const char* name : {"items_per_second", "FLOPS", "bytes_per_second"}) {
          state.counters[name] = benchmark::Counter(1, benchmark::Counter::kIsRate);
        }
        for (const char* name : {"peak_bytes", "activation_bytes"}) state.counters[name] = 1;
      })
      ->UseManualTime()
      ->Iterations(2)
      ->Repetitions(3)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("failing",
                               [](benchmark::State& state) {
                                 state.SkipWithError("out of memory");
                                 for (auto _ : state) {
                                 }
                               })
      ->Iterations(1)
      ->Repetitions(1);
  std::ostringstream output, errors;
  benchmark::JSONReporter reporter;
  reporter.SetOutputStream(&output);
  reporter.SetErrorStream(&errors);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::ClearRegisteredBenchmarks();
  const json theirs = json::parse(output.str());

  std::vector<CaseRecord> cases = Cases();
  cases.push_back(Case("lstm", "train", 1, {}, "skipped"));
  cases.back().message = "needs CUDA";
  const json ours = json::parse(RenderGbenchJson(RunWithMachineFacts(), cases));
  // Field for field as the library writes them (1.7.1 has no skip-with-message: the
  // documented "skipped"/"skip_message" are checked by the format check below).
  json without_skips = ours;
  auto& entries = without_skips.at("benchmarks");
  entries.erase(std::remove_if(entries.begin(), entries.end(),
                               [](const json& entry) { return entry.contains("skipped"); }),
                entries.end());
  for (const char* run_type : {"iteration", "aggregate"}) {
    INFO(run_type);
    const auto expected = Schema(theirs, run_type);
    REQUIRE_FALSE(expected.empty());
    CHECK(Schema(without_skips, run_type) == expected);
  }
  const auto problems = GbenchFormatProblems(ours);
  for (const auto& problem : problems) UNSCOPED_INFO(problem);
  CHECK(problems.empty());
  // The aggregates' values: fused's samples 0.2, 0.2, 0.8 s have median 0.2 and mean 0.4,
  // sample standard deviation sqrt(0.12) and cv sqrt(0.12) / 0.4.
  const std::map<std::string, double> per_second = {
      {"ns", 1e9}, {"us", 1e6}, {"ms", 1e3}, {"s", 1}};
  std::map<std::string, double> fused;
  for (const json& entry : ours.at("benchmarks")) {
    const std::string name = entry.at("name");
    if (entry.at("run_type") != "aggregate" || name.find("fused") == std::string::npos) continue;
    const double value = entry.at("real_time").get<double>();
    const std::string aggregate = entry.at("aggregate_name");
    fused[aggregate] =
        aggregate == "cv" ? value : value / per_second.at(entry.at("time_unit").get<std::string>());
  }
  CHECK(fused.at("median") == Approx(0.2));
  CHECK(fused.at("mean") == Approx(0.4));
  CHECK(fused.at("stddev") == Approx(std::sqrt(0.12)));
  CHECK(fused.at("cv") == Approx(std::sqrt(0.12) / 0.4));
  CHECK(fused.at("min") == Approx(0.2));
  CHECK(fused.at("max") == Approx(0.8));
  CHECK(fused.at("iqr") == Approx(0.3));  // quartiles 0.2 and 0.5, as the tables' IQR
  // The check can fail: it knows the format.
  json broken = ours;
  broken["context"].erase("json_schema_version");
  broken["benchmarks"][0]["time_unit"] = "fortnight";
  broken["benchmarks"][1]["error_occurred"] = true;  // without its message
  // Missing and not 1; an unknown unit; an error without its message.
  CHECK(GbenchFormatProblems(broken).size() == 4);

  // Every case is there: 5 timed with 3 repetitions; the error and the skip as one row each,
  // flagged as google/benchmark flags them.
  std::map<std::string, int> iterations;
  for (const auto& entry : ours.at("benchmarks"))
    iterations[entry.at("run_name")] += entry.at("run_type") == "iteration";
  CHECK(iterations.size() == cases.size());
  bool error_seen = false, skip_seen = false;
  for (const auto& entry : ours.at("benchmarks")) {
    if (entry.value("error_occurred", false)) {
      error_seen = true;
      CHECK_THAT(entry.at("error_message").get<std::string>(), Catch::StartsWith("error: "));
    }
    if (entry.value("skipped", false)) {
      skip_seen = true;
      CHECK(entry.at("skip_message") == "needs CUDA");
    }
  }
  CHECK(error_seen);
  CHECK(skip_seen);
  // The context from what the run recorded, not placeholders.
  const json& context = ours.at("context");
  CHECK(context.at("mhz_per_cpu") == 2450);
  CHECK(context.at("caches").at(0).at("size") == 32768);
  CHECK(context.at("load_avg") == json::array({0.5, 0.25, 0.1}));
  CHECK(context.at("library_version") == "v1.7.1");
  CHECK_FALSE(context.contains("cpu_scaling_enabled"));  // no governor: unknown
}

TEST_CASE("gbench-json: one time unit, counters that round-trip", "[reports][gbench]") {
  std::vector<CaseRecord> cases = {Case("slow", "train", 2, {1.5, 2.0, 2.5}),
                                   Case("milli", "train", 2, {0.004, 0.005, 0.009}),
                                   Case("micro", "train", 2, {4e-6, 5e-6, 6e-6})};
  const json ours = json::parse(RenderGbenchJson(RunWithMachineFacts(), cases));
  const std::map<std::string, double> per_second = {
      {"s", 1}, {"ms", 1e3}, {"us", 1e6}, {"ns", 1e9}};
  std::map<std::string, std::string> units;
  for (const auto& entry : ours.at("benchmarks")) {
    const std::string name = entry.at("run_name");
    units[name] = entry.at("time_unit");
    if (entry.at("run_type") != "iteration") continue;
    const CaseRecord& c = *std::find_if(cases.begin(), cases.end(), [&](const CaseRecord& x) {
      return name.rfind(x.name() + "/", 0) == 0;
    });
    const double seconds = entry.at("real_time").get<double>() / per_second.at(units[name]);
    CHECK(seconds == Approx(c.samples_s.at(entry.at("repetition_index"))));
    // A rate times the step's time gives back what one step does.
    CHECK(entry.at("items_per_second").get<double>() * seconds == Approx(c.tokens_per_step));
    CHECK(entry.at("FLOPS").get<double>() * seconds == Approx(*c.MetricValue("step_flops")));
    CHECK(entry.at("peak_bytes") == Approx(*c.MetricValue("peak_bytes")));
    CHECK(entry.at("activation_bytes") == Approx(*c.MetricValue("activation_bytes")));
  }
  std::set<std::string> seen;
  for (const auto& [name, unit] : units) seen.insert(unit);
  // One unit whatever the median (compare.py pairs cases only within a unit), with
  // nanosecond resolution for whole-number printing.
  CHECK(seen == std::set<std::string>{"ns"});
}

TEST_CASE("csv and json carry every case with its metrics", "[reports]") {
  const auto cases = Cases();
  const std::string csv = RenderCsv(Run(), cases);
  std::istringstream lines(csv);
  std::string header, line;
  std::getline(lines, header);
  const auto columns = std::count(header.begin(), header.end(), ',');
  int rows = 0;
  while (std::getline(lines, line)) {
    ++rows;
    // Quoted fields may hold commas; strip them before counting separators.
    const std::string unquoted = std::regex_replace(line, std::regex("\"[^\"]*\""), "q");
    CHECK(std::count(unquoted.begin(), unquoted.end(), ',') == columns);
  }
  CHECK(rows == static_cast<int>(cases.size()));
  const json document = json::parse(RenderJson(Run(), cases));
  CHECK(document.at("cases").size() == cases.size());
  CHECK(document.at("cases")[1].at("metrics").at("tokens_per_s").at("value") == Approx(320));
  CHECK(document.at("cases")[1].at("layers") == 2);
  CHECK(document.at("cases")[1].at("heads") == 4);
  CHECK(document.at("run").at("baseline") == "baseline");
  // Every workload field is a column, in the identity's order.
  CHECK(header.find(",mode,dtype,device,threads,batch,seq_len,min_len,generate_tokens,layers,"
                    "width,heads,vocab_size,") != std::string::npos);
  CHECK(document.at("run").at("environment").at("torch_version") == "1.13.0");
}

TEST_CASE("check evaluates ratios on one workload and fails when one falls short",
          "[reports][check]") {
  const auto cases = Cases();
  const std::vector<Expectation> expectations = {
      {"speedup", "fused", "baseline", 1.5, std::nullopt, {{"mode", "train"}}, 1},
      {"speedup", "fused", "baseline", 3.0, std::nullopt, {}, 2},
      {"speedup", "stepwise", "baseline", 20.0, std::nullopt, {{"mode", "generate"}}, 3},
      {"memory_ratio", "fused", "baseline", std::nullopt, 1.1, {}, 4},
      {"speedup", "batched", "baseline", 1.0, std::nullopt, {}, 5},  // no same-workload pair
      {"all_correct", "", "", std::nullopt, std::nullopt, {}, 6},    // scan errored
      {"all_correct", "", "", std::nullopt, std::nullopt, {{"mode", "generate"}}, 7},
  };
  const auto outcomes = EvaluateExpectations(expectations, cases);
  REQUIRE(outcomes.size() == expectations.size());
  CHECK(outcomes[0].held);  // medians 0.4 / 0.2 = 2 (the means would say 1)
  CHECK_THAT(outcomes[0].measured, Catch::Contains("2×"));
  CHECK_FALSE(outcomes[1].held);
  CHECK(outcomes[2].held);  // 2.0 / 0.05 = 40
  CHECK(outcomes[3].held);  // same memory: ratio 1
  CHECK_FALSE(outcomes[4].held);
  CHECK_THAT(outcomes[4].measured, Catch::Contains("no pair"));
  CHECK_FALSE(outcomes[5].held);
  CHECK_THAT(outcomes[5].measured, Catch::Contains("scan"));
  CHECK(outcomes[6].held);
  // A case timed under --check sample/none is neither correct nor wrong.
  std::vector<CaseRecord> sampled = {Case("fused", "train", 1, {0.2}),
                                     Case("fused", "train", 2, {0.2})};
  sampled[1].reference = std::string(kNotCheckedReference) + " (--check sample)";
  const auto sample = EvaluateExpectations({expectations[5]}, sampled).at(0);
  CHECK(sample.held);
  CHECK_THAT(sample.measured, Catch::Contains("1 ok, 0 not, 1 not checked"));
  sampled.pop_back();
  sampled[0].reference = std::string(kNotCheckedReference) + " (--check none)";
  CHECK_FALSE(EvaluateExpectations({expectations[5]}, sampled).at(0).held);  // nothing checked
}

TEST_CASE("check's metric ratios: the named metric, candidate over the other", "[reports][check]") {
  // checkpointed against batched on one workload: activation memory 0.3x but peak 0.9x;
  // 2x the instructions of batched a step. Each bound holds for the right ratio and fails
  // for its inverse or for the neighbouring metric.
  CaseRecord checkpointed = Case("checkpointed", "train", 4, {0.3, 0.3, 0.3});
  CaseRecord batched = Case("batched", "train", 4, {0.2, 0.2, 0.2});
  const auto set = [](CaseRecord& c, const std::string& name, double value) {
    for (Metric& m : c.metrics) {
      if (m.name == name) m.value = value;
    }
    if (!c.MetricValue(name)) c.metrics.push_back({name, value, "x"});
  };
  set(checkpointed, "activation_bytes", 300);
  set(checkpointed, "peak_bytes", 900);
  set(batched, "activation_bytes", 1000);
  set(batched, "peak_bytes", 1000);
  set(checkpointed, "instructions_per_step", 2e6);
  set(batched, "instructions_per_step", 1e6);
  const std::vector<CaseRecord> cases = {checkpointed, batched};
  const auto held = [&](const std::string& what, std::optional<double> at_least,
                        std::optional<double> at_most) {
    return EvaluateExpectations({{what, "checkpointed", "batched", at_least, at_most, {}, 1}},
                                cases)
        .at(0)
        .held;
  };
  CHECK(held("memory_ratio", 0.25, 0.35));  // activation 0.3, not peak 0.9 nor 3.33
  CHECK_FALSE(held("memory_ratio", std::nullopt, 0.2));
  CHECK(held("instructions_ratio", 1.9, 2.1));  // 2, not 0.5
  CHECK_FALSE(held("instructions_ratio", std::nullopt, 1.5));
}

TEST_CASE("plots: one series per variant, units on the axes, log axes over decades",
          "[reports][plot]") {
  std::vector<CaseRecord> cases;
  for (const int64_t t : {128, 256, 512, 1024, 2048}) {
    for (const char* variant : {"batched", "scan"}) {
      CaseRecord c = Case(variant, "train", 4, {t * 1e-5, t * 1e-5});
      c.identity.workload.seq_len = t;
      cases.push_back(c);
    }
  }
  PlotRequest request;
  request.output = (std::filesystem::temp_directory_path() / "seqbench_plot_test.svg").string();
  const std::string script = BuildGnuplotScript(cases, request);
  CHECK(std::count(script.begin(), script.end(), '\n') > 10);
  CHECK_THAT(script, Catch::Contains("set logscale x 2") && Catch::Contains("set logscale y") &&
                         Catch::Contains("(ms)") && Catch::Contains("sequence length T (tokens)") &&
                         Catch::Contains("title 'batched'") && Catch::Contains("title 'scan'"));
  request.y = "memory";
  CHECK_THAT(BuildGnuplotScript(cases, request), Catch::Contains("activation memory (MiB)"));
  request.y = "latency";
  CHECK_THROWS_AS(BuildGnuplotScript(cases, request), std::invalid_argument);

  request.y = "runtime";
  std::filesystem::remove(request.output);
  RenderPlot(cases, request);
  std::ifstream svg(request.output);
  std::stringstream content;
  content << svg.rdbuf();
  // gnuplot drew what the script says: both series in the key, the axis label.
  CHECK_THAT(content.str(), Catch::Contains("<svg") && Catch::Contains(">batched<") &&
                                Catch::Contains(">scan<") &&
                                Catch::Contains("sequence length T (tokens)"));
}

// Two checkpointing schedules at three budgets each, and the store-everything variant:
// activation memory grows with the budget, recomputation falls.
std::vector<CaseRecord> ScheduleCases() {
  std::vector<CaseRecord> cases;
  const auto add = [&](const std::string& key, int64_t budget, double memory_mib,
                       double recompute) {
    CaseRecord c = Case(key, "train", 4, {0.1, 0.1});
    c.identity.variant_name = key + "_" + std::to_string(budget);
    c.identity.options = "max_states=" + std::to_string(budget);
    for (Metric& metric : c.metrics) {
      if (metric.name == "activation_bytes") metric.value = memory_mib * (1 << 20);
    }
    c.metrics.push_back({"recompute_factor", recompute, "ratio"});
    cases.push_back(c);
  };
  for (const auto& [budget, memory, binomial, bisection] :
       std::vector<std::tuple<int64_t, double, double, double>>{
           {4, 6, 8.5, 31.0}, {16, 9, 1.4, 2.4}, {64, 21, 0.75, 0.75}}) {
    add("checkpointed_binomial", budget, memory, binomial);
    add("checkpointed_logarithmic", budget, memory, bisection);
  }
  add("batched", 257, 64, 0);
  return cases;
}

TEST_CASE("trade-off plots: a line per variant across its budgets; recompute_ratio",
          "[reports][plot][check]") {
  const auto cases = ScheduleCases();
  PlotRequest request;
  request.x = "memory";
  request.y = "recompute";
  const std::string script = BuildGnuplotScript(cases, request);
  // One series per schedule (not per named case), its x in MiB; batched recomputes
  // nothing, which a log axis cannot place, so it is left out.
  CHECK(std::count(script.begin(), script.end(), '$') == 2 * 2);
  CHECK_THAT(script, Catch::Contains("title 'checkpointed_binomial'") &&
                         Catch::Contains("title 'checkpointed_logarithmic'") &&
                         Catch::Contains("activation memory of a train step (MiB)") &&
                         Catch::Contains("recurrence steps run again per step") &&
                         Catch::Contains("\n6 8.5\n") && !Catch::Contains("binomial_4"));
  const std::vector<Expectation> expectations = {
      {"recompute_ratio",
       "checkpointed_binomial_4",
       "checkpointed_logarithmic_4",
       std::nullopt,
       1.0,
       {},
       1},
      {"recompute_ratio",
       "checkpointed_logarithmic_16",
       "checkpointed_binomial_16",
       std::nullopt,
       1.0,
       {},
       2},
      {"recompute_ratio",
       "checkpointed_binomial_64",
       "checkpointed_logarithmic_64",
       std::nullopt,
       1.0,
       {},
       3},
      {"recompute_ratio", "batched_257", "batched_257", std::nullopt, 1.0, {}, 4},
  };
  const auto outcomes = EvaluateExpectations(expectations, cases);
  REQUIRE(outcomes.size() == expectations.size());
  CHECK(outcomes[0].held);
  CHECK_THAT(outcomes[0].measured, Catch::Contains("0.274×"));
  CHECK_THAT(outcomes[0].expectation, Catch::Contains("recomputation"));
  CHECK_FALSE(outcomes[1].held);  // bisection recomputes 1.7x binomial's
  CHECK(outcomes[2].held);        // equal
  CHECK(outcomes[3].held);        // neither recomputes: 1, not 0/0
  CHECK_THAT(outcomes[3].measured, Catch::Contains("1×"));
}

// Three training pipelines: two on one curve (up to rounding), one on another.
std::vector<CaseRecord> Pipelines() {
  std::vector<CaseRecord> cases;
  for (const auto& [name, tokens_per_s] : std::vector<std::pair<std::string, double>>{
           {"plain", 1000}, {"scan", 1500}, {"bf16", 900}}) {
    CaseRecord c;
    c.identity.variant_name = c.identity.variant_key = name;
    c.description = "variant=" + name + " | odd";
    c.reference = "plain";
    c.status = "ok";
    c.iterations = 50;
    c.metrics = {{"tokens_per_s", tokens_per_s, "tokens/s"},
                 {"peak_bytes", name == "scan" ? 3000.0 : 1000.0, "bytes"},
                 {"final_validation_loss", name == "bf16" ? 2.2 : 2.0, "nats/token"},
                 {"optimizer_state_bytes", name == "bf16" ? 2016.0 : 8000.0, "bytes"}};
    cases.push_back(c);
  }
  return cases;
}

// The case key of pipeline `name` among Pipelines().
std::string Key(const std::string& name) {
  CaseRecord c;
  c.identity.variant_name = c.identity.variant_key = name;
  return c.key();
}

TrainingCurves Curves() {
  const auto row = [](int step, double loss, std::optional<double> validation, double elapsed_s) {
    TrainingStepRecord r;
    r.step = step;
    r.loss = loss;
    r.validation_loss = validation;
    r.learning_rate = 1e-3;
    r.grad_norm = 1;
    r.tokens = r.padded_tokens = 100;
    r.elapsed_s = elapsed_s;
    return r;
  };
  TrainingCurves curves;
  for (int step = 1; step <= 50; ++step) {
    const double loss = 5.0 / step;
    curves[Key("plain")].push_back(row(step, loss, std::nullopt, 0.1 * step));
    curves[Key("scan")].push_back(row(step, loss + 1e-7, std::nullopt, 0.05 * step));
    curves[Key("bf16")].push_back(row(step, loss + 0.01,
                                      step % 10 == 0 ? std::optional<double>(loss) : std::nullopt,
                                      0.1 * step));
  }
  return curves;
}

// The rows of the Markdown tables in `markdown`, split into cells.
std::vector<std::vector<std::string>> TableRows(const std::string& markdown) {
  std::istringstream lines(markdown);
  std::string line;
  std::vector<std::vector<std::string>> rows;
  while (std::getline(lines, line)) {
    if (!line.empty() && line[0] == '|') rows.push_back(Cells(line));
  }
  return rows;
}

TEST_CASE("the training table is rectangular, escaped, and relative to the reference",
          "[reports][training]") {
  const std::string markdown = RenderTrainingTable(Pipelines());
  const auto rows = TableRows(markdown);
  REQUIRE(rows.size() == 5);  // header, rule, three pipelines
  for (const auto& row : rows) CHECK(row.size() == rows[0].size());
  CHECK(rows[3][1] == " variant=scan \\| odd ");
  CHECK(rows[3][3] == " 1.5× ");  // tokens/s over plain's
  CHECK(rows[3][5] == " 3× ");    // peak memory over plain's
  CHECK(rows[2][3] == " 1× ");
  CHECK_THAT(markdown, Catch::Contains("× ref.: against `plain`."));

  // Two groups in one run, each row against its own baseline.
  auto grouped = Pipelines();
  grouped[1].reference = "bf16";  // scan (1500 tokens/s) against bf16 (900)
  grouped[2].reference = "bf16";
  const std::string two = RenderTrainingTable(grouped);
  const auto grouped_rows = TableRows(two);
  REQUIRE(grouped_rows.size() == 5);
  CHECK(grouped_rows[2][3] == " 1× ");     // plain against itself
  CHECK(grouped_rows[3][3] == " 1.67× ");  // scan against bf16, not plain
  CHECK(grouped_rows[4][3] == " 1× ");     // bf16 against itself
  CHECK_THAT(two, Catch::Contains("against each pipeline's own baseline: `plain` for plain; "
                                  "`bf16` for scan, bf16."));
}

TEST_CASE("exact counts: every digit, grouped in threes, the sign kept", "[reports]") {
  // Against the digits themselves: removing the separators gives back the rounded value.
  for (const double value :
       {0.0, 7.0, 999.0, 1000.0, 65536.0, 459392.4, 1234567.6, -4500.0, -123456.0, 1e12}) {
    const std::string text = FormatExactCount(value);
    std::string digits;
    for (const char c : text) {
      if (c != ',') digits += c;
    }
    CHECK(std::stoll(digits) == std::llround(value));
    // A separator before every group of three digits from the right, and nowhere else.
    const size_t start = text[0] == '-' ? 1 : 0;
    const size_t length = text.size() - start;
    for (size_t i = 0; i < length; ++i) {
      INFO(text);
      CHECK((text[start + i] == ',') == ((length - i) % 4 == 0));
    }
  }
}

TEST_CASE("the recall table: a column per distance, ascending, from each row's metrics",
          "[reports][training][recall]") {
  auto cases = Pipelines();
  CHECK_FALSE(HasRecallScores(cases));
  CHECK_THROWS_WITH(RenderRecallTable(cases), Catch::Contains("corpus = \"recall\""));
  // Runs before the parameter count keep their columns.
  const size_t columns = TableRows(RenderTrainingTable(cases))[0].size();
  // plain scored at 64 and 8 (stored out of order), scan at 8 only, bf16 at none.
  cases[0].metrics.push_back({"recall_accuracy_d64", 0.25, "ratio"});
  cases[0].metrics.push_back({"recall_samples_d64", 40, "count"});
  cases[0].metrics.push_back({"recall_accuracy_d8", 0.875, "ratio"});
  cases[0].metrics.push_back({"recall_samples_d8", 48, "count"});
  cases[1].metrics.push_back({"recall_accuracy_d8", 1.0, "ratio"});
  cases[1].metrics.push_back({"recall_samples_d8", 44, "count"});
  cases[0].metrics.push_back({"parameters", 1234567, "count"});
  REQUIRE(HasRecallScores(cases));
  const std::string markdown = RenderRecallTable(cases);
  const auto rows = TableRows(markdown);
  REQUIRE(rows.size() == 5);
  for (const auto& row : rows) CHECK(row.size() == rows[0].size());
  CHECK(rows[0][3] == " d = 8 ");
  CHECK(rows[0][4] == " d = 64 ");
  CHECK(rows[2][2] == " 1,234,567 ");
  CHECK(rows[2][3] == " 87.5% ");
  CHECK(rows[2][4] == " 25% ");
  CHECK(rows[3][3] == " 100% ");
  CHECK(rows[3][4] == " — ");
  CHECK(rows[4][3] == " — ");
  CHECK_THAT(markdown, Catch::Contains("44 at d = 8") && Catch::Contains("40 at d = 64"));
  // The training table gains the parameters column once a case has a count.
  const auto training = TableRows(RenderTrainingTable(cases));
  CHECK(training[0].size() == columns + 1);
  CHECK(training[0][2] == " parameters ");
  CHECK(training[2][2] == " 1,234,567 ");
  CHECK(training[3][2] == " — ");
}

TEST_CASE("the inference table: a row per pipeline and evaluate_with variant, from the metrics",
          "[reports][training][inference]") {
  auto cases = Pipelines();
  CHECK_FALSE(HasInferenceComparisons(cases));
  CHECK_THROWS_WITH(RenderInferenceTable(cases), Catch::Contains("evaluate_with"));
  // plain through two variants (int8 stored first), scan through none.
  const auto add = [&](CaseRecord& c, const std::string& key, const std::string& name,
                       double value) {
    c.metrics.push_back({"inference_" + name + "_" + key, value, ""});
  };
  add(cases[0], "int8_dynamic", "loss", 2.25);
  add(cases[0], "int8_dynamic", "reference_loss", 2.0);
  add(cases[0], "int8_dynamic", "argmax_agreement", 0.9375);
  add(cases[0], "int8_dynamic", "logit_rms_error", 0.125);
  add(cases[0], "int8_dynamic", "generated_agreement", 0.5);
  add(cases[0], "int8_dynamic", "generated_prefix", 7.25);
  add(cases[0], "int8_dynamic", "generated_tokens", 512);
  add(cases[0], "int8_dynamic", "weight_bytes", 1000);
  add(cases[0], "stepwise", "loss", 2.0);
  add(cases[0], "stepwise", "reference_loss", 2.0);
  cases[0].metrics.push_back({"parameters", 1000, "count"});
  REQUIRE(HasInferenceComparisons(cases));
  const std::string markdown = RenderInferenceTable(cases);
  const auto rows = TableRows(markdown);
  REQUIRE(rows.size() == 4);
  for (const auto& row : rows) CHECK(row.size() == rows[0].size());
  CHECK(rows[2][0] == " plain ");
  CHECK(rows[2][1] == " int8_dynamic ");
  CHECK(rows[2][2] == " 2.000 → 2.250 ");
  CHECK(rows[2][3] == " +0.2500 ");
  // exp(0.25) = 1.2840
  CHECK(rows[2][4] == " 1.284× ");
  CHECK(rows[2][5] == " 93.8% ");
  CHECK(rows[2][6] == " 0.125 ");
  CHECK(rows[2][7] == " 50% ");
  CHECK(rows[2][8] == " 7.25 tokens ");
  // 1000 bytes against 1000 float32 parameters: a quarter.
  CHECK_THAT(rows[2][9], Catch::Contains("0.25× float32"));
  CHECK(rows[3][1] == " stepwise ");
  CHECK(rows[3][3] == " +0.0000 ");
  CHECK(rows[3][4] == " 1× ");
  CHECK(rows[3][5] == " — ");
  CHECK(rows[3][9] == " — ");
  // The stored count is prompts × tokens, the whole probe, not one prompt's.
  CHECK_THAT(markdown, Catch::Contains("512 generated tokens in all"));
}

TEST_CASE("training expectations: loss curves, throughput and validation loss",
          "[reports][training]") {
  const auto cases = Pipelines();
  const auto curves = Curves();
  const auto outcome = [&](const std::string& what, const std::string& variant, double at_most,
                           std::optional<double> at_least = std::nullopt) {
    Expectation e;
    e.what = what;
    e.variant = variant;
    e.over = "plain";
    e.at_least = at_least;
    if (!at_least) e.at_most = at_most;
    return EvaluateTrainingExpectations({e}, cases, curves).at(0);
  };
  CHECK(outcome("loss_match", "scan", 1e-6).held);
  const auto bf16 = outcome("loss_match", "bf16", 1e-3);
  CHECK_FALSE(bf16.held);
  CHECK_THAT(bf16.measured, Catch::Contains("0.01") && Catch::Contains("over 50 steps"));
  CHECK(outcome("throughput", "scan", 0, 1.4).held);
  CHECK_FALSE(outcome("throughput", "bf16", 0, 1.0).held);
  CHECK(outcome("validation_loss_ratio", "bf16", 1.11).held);
  CHECK_FALSE(outcome("validation_loss_ratio", "bf16", 1.09).held);
  CHECK(outcome("memory_ratio", "scan", 3.0).held);
  CHECK_FALSE(outcome("memory_ratio", "scan", 2.9).held);  // scan / plain = 3, not 1/3
  CHECK(outcome("memory_ratio", "scan", 0, 2.9).held);
  const auto state = outcome("optimizer_state_ratio", "bf16", 0.3);
  CHECK(state.held);
  CHECK_THAT(state.expectation, Catch::StartsWith("optimizer state of bf16 / plain"));
  CHECK_THAT(state.measured, Catch::StartsWith("0.252"));
  CHECK_FALSE(outcome("optimizer_state_ratio", "scan", 0.3).held);
  CHECK_THROWS_AS(outcome("optimizer_state", "scan", 0.3), std::invalid_argument);
  // Pipelines have no baseline comparison: finishing ok is what "correct" means for them.
  Expectation all_correct;
  all_correct.what = "all_correct";
  const auto finished = EvaluateTrainingExpectations({all_correct}, cases, curves).at(0);
  CHECK(finished.held);
  CHECK_THAT(finished.measured, Catch::Contains("3 ok"));
  CHECK_FALSE(outcome("loss_match", "nobody", 1).held);

  // Gaps that vary by step and sign: the largest magnitude (0.08 at step 30, below), not
  // the last gap, the mean or the largest signed one (0.05).
  TrainingCurves varied = curves;
  varied[Key("scan")][9].loss = varied[Key("plain")][9].loss + 0.05;
  varied[Key("scan")][29].loss = varied[Key("plain")][29].loss - 0.08;
  const auto gap = [&](double at_most) {
    Expectation e;
    e.what = "loss_match";
    e.variant = "scan";
    e.over = "plain";
    e.at_most = at_most;
    return EvaluateTrainingExpectations({e}, cases, varied).at(0);
  };
  CHECK_FALSE(gap(0.079).held);
  CHECK(gap(0.081).held);
  CHECK_THAT(gap(0.081).measured, Catch::StartsWith("0.08"));
}

// Each route by which user-written text reaches gnuplot, with text that ran a shell command
// through the old double-quoted labels (a backquote) or started a new gnuplot command (a
// newline): afterwards no canary file exists and each SVG was written, stamped.
TEST_CASE("plot labels, titles and file names reach gnuplot as data, never as commands",
          "[reports][plot][security]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("seqbench_gnuplot_" + std::to_string(getpid()));
  RemoveTree(dir.string());
  fs::create_directories(dir);
  int canaries = 0;
  std::vector<fs::path> canary_paths;
  const auto hostile = [&](const std::string& prefix) {
    const fs::path a = dir / ("pwned" + std::to_string(++canaries));
    const fs::path b = dir / ("pwned" + std::to_string(++canaries));
    canary_paths.push_back(a);
    canary_paths.push_back(b);
    return prefix + "`touch " + a.string() + "`\"\nsystem \"touch " + b.string() + "\"\n#'";
  };
  std::vector<CaseRecord> cases;
  for (const int64_t t : {128, 256}) {
    for (const std::string& variant : {std::string("batched"), hostile("variant")}) {
      CaseRecord c = Case(variant, "train", 4, {t * 1e-5, t * 1e-5});
      c.identity.workload.seq_len = t;
      cases.push_back(c);
    }
  }
  PlotRequest plot;
  plot.title = hostile("suite");  // readme's title holds the suite name
  plot.output = (dir / "plot.svg").string();
  RenderPlot(cases, plot);
  CHECK(IsSeqbenchSvg(plot.output));

  // A README marker's file=, resolved inside the README's folder and written verbatim.
  // (No slash in it, so that it names a file in the folder: the command would run in the
  // current directory.)
  const std::string marker_file = "x`touch seqbench_pwned_file`.svg";
  canary_paths.push_back(fs::current_path() / "seqbench_pwned_file");
  plot.output = ResolvePlotFile(dir.string(), marker_file);
  RenderPlot(cases, plot);
  CHECK(IsSeqbenchSvg(plot.output));

  auto pipelines = Pipelines();
  auto curves = Curves();
  const std::string pipeline = hostile("pipeline");
  curves[Key(pipeline)] = curves[Key("bf16")];
  pipelines.back().identity.variant_name = pipelines.back().identity.variant_key = pipeline;
  LossPlotRequest loss;
  loss.title = hostile("training suite");
  loss.output = (dir / "loss.svg").string();
  RenderLossPlot(pipelines, curves, loss);
  CHECK(IsSeqbenchSvg(loss.output));

  for (const fs::path& canary : canary_paths) {
    INFO(canary.string());
    CHECK_FALSE(fs::exists(canary));
  }
  // Quoting as a property: one single-quoted token, no control character inside, and the
  // text back (control characters as spaces) once '' is undone.
  for (const std::string& text : {std::string("it's"), std::string("a\nb\tc\x7f"), hostile("q")}) {
    const std::string quoted = GnuplotQuoted(text);
    REQUIRE(quoted.size() >= 2);
    CHECK(quoted.front() == '\'');
    CHECK(quoted.back() == '\'');
    std::string inner = quoted.substr(1, quoted.size() - 2), unquoted, expected;
    for (size_t i = 0; i < inner.size(); ++i) {
      CHECK(static_cast<unsigned char>(inner[i]) >= 0x20);
      if (inner[i] == '\'') CHECK(inner.at(++i) == '\'');  // every ' is doubled
      unquoted += inner[i];
    }
    for (const char c : text)
      expected += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? ' ' : c;
    CHECK(unquoted == expected);
  }
  RemoveTree(dir.string());
}

TEST_CASE("readme plot files stay inside the README's folder and overwrite only seqbench SVGs",
          "[reports][readme][security]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("seqbench_paths_" + std::to_string(getpid()));
  RemoveTree(dir.string());
  fs::create_directories(dir / "docs");
  const fs::path outside =
      fs::temp_directory_path() / ("seqbench_outside_" + std::to_string(getpid()));
  fs::create_directories(outside);
  fs::create_directory_symlink(outside, dir / "escape");
  const std::string root = dir.string();
  CHECK(ResolvePlotFile(root, "docs/a.svg") == (fs::weakly_canonical(dir) / "docs/a.svg").string());
  CHECK(ResolvePlotFile(root, "docs/../b.svg") == (fs::weakly_canonical(dir) / "b.svg").string());
  CHECK_THROWS_WITH(ResolvePlotFile(root, (outside / "a.svg").string()),
                    Catch::Contains("relative"));
  CHECK_THROWS_WITH(ResolvePlotFile(root, "../a.svg"),
                    Catch::Contains("outside the README's folder"));
  CHECK_THROWS_WITH(ResolvePlotFile(root, "docs/../../a.svg"), Catch::Contains("outside"));
  CHECK_THROWS_WITH(ResolvePlotFile(root, "escape/a.svg"), Catch::Contains("outside"));
  CHECK_THROWS_WITH(ResolvePlotFile(root, "docs/notes.md"), Catch::Contains("must end in .svg"));
  CHECK_THROWS_WITH(ResolvePlotFile(root, ""), Catch::Contains("file=PATH.svg"));
  // An SVG someone else wrote is kept; one seqbench wrote may be replaced.
  std::ofstream(dir / "docs/logo.svg") << "<svg xmlns='http://www.w3.org/2000/svg'/>\n";
  CHECK_THROWS_WITH(ResolvePlotFile(root, "docs/logo.svg"),
                    Catch::Contains("not an SVG that seqbench wrote"));
  std::ofstream(dir / "docs/old.svg") << "<?xml version='1.0'?>\n"
                                      << kSeqbenchSvgStamp << "\n<svg/>\n";
  CHECK_NOTHROW(ResolvePlotFile(root, "docs/old.svg"));
  fs::create_directories(dir / "docs/dir.svg");
  CHECK_THROWS(ResolvePlotFile(root, "docs/dir.svg"));
  CHECK(fs::is_empty(outside));
  RemoveTree(dir.string());
  RemoveTree(outside.string());
}

TEST_CASE("loss plots: a line per pipeline, the gap on a log axis without the reference",
          "[reports][training]") {
  const auto cases = Pipelines();
  const auto curves = Curves();
  LossPlotRequest request;
  request.output = "loss.svg";
  const std::string script = BuildLossPlotScript(cases, curves, request);
  CHECK(std::regex_search(script, std::regex("title 'plain'")));
  CHECK(std::regex_search(script, std::regex("title 'bf16'")));
  CHECK_THAT(script, Catch::Contains("optimizer step"));
  request.y = "validation_loss";
  request.x = "time";
  const std::string validation = BuildLossPlotScript(cases, curves, request);
  CHECK_THAT(validation, Catch::Contains("$series0") && !Catch::Contains("$series1"));  // bf16 only
  CHECK_THAT(validation, Catch::Contains("wall time (s)"));
  request.y = "loss_difference";
  request.x = "step";
  CHECK_THROWS_WITH(BuildLossPlotScript(cases, curves, request), Catch::Contains("over=PIPELINE"));
  request.over = "plain";
  const std::string gap = BuildLossPlotScript(cases, curves, request);
  CHECK_THAT(gap, Catch::Contains("set logscale y") && !Catch::Contains("title 'plain'"));
  request.y = "accuracy";
  CHECK_THROWS(BuildLossPlotScript(cases, curves, request));
}

// Each inline data block of a gnuplot script ($seriesN << EOD ... EOD): its (x, y) points.
std::vector<std::vector<std::pair<double, double>>> PlottedSeries(const std::string& script) {
  std::vector<std::vector<std::pair<double, double>>> series;
  std::istringstream lines(script);
  bool inside = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("$series", 0) == 0 && line.find("<< EOD") != std::string::npos) {
      series.emplace_back();
      inside = true;
    } else if (line == "EOD") {
      inside = false;
    } else if (inside) {
      std::istringstream point(line);
      double x = 0, y = 0;
      REQUIRE(point >> x >> y);
      series.back().emplace_back(x, y);
    }
  }
  return series;
}

TEST_CASE("loss plots: the values plotted are the trailing mean, the raw gap, the evaluations",
          "[reports][training]") {
  // 120 steps, so one window is 120 / 40 = 3 steps. plain's loss is the step itself, bf16's
  // 1.01 times it: a trailing mean of 3 is the step before, where a centred mean, the
  // window's sum or the last loss would each differ; bf16's gap to plain grows per step.
  std::vector<CaseRecord> cases = Pipelines();
  cases.erase(cases.begin() + 1);  // scan: no curve
  TrainingCurves curves;
  for (int step = 1; step <= 120; ++step) {
    TrainingStepRecord r;
    r.step = step;
    r.loss = step;
    r.elapsed_s = 0.5 * step;
    r.tokens = r.padded_tokens = 100;
    curves[Key("plain")].push_back(r);
    r.loss = 1.01 * step;
    if (step % 30 == 0) r.validation_loss = 100.0 + step;
    curves[Key("bf16")].push_back(r);
  }
  LossPlotRequest request;
  request.output = "loss.svg";
  const auto trailing = PlottedSeries(BuildLossPlotScript(cases, curves, request));
  REQUIRE(trailing.size() == 2);
  REQUIRE(trailing[0].size() == 118);  // from the first full window, step 3
  for (size_t k = 0; k < trailing[0].size(); ++k) {
    const double step = static_cast<double>(k + 3);
    CHECK(trailing[0][k].first == step);
    CHECK(trailing[0][k].second == Approx(step - 1));           // (s-2 + s-1 + s) / 3
    CHECK(trailing[1][k].second == Approx(1.01 * (step - 1)));  // bf16
  }
  request.x = "time";
  CHECK(PlottedSeries(BuildLossPlotScript(cases, curves, request))[0][0].first == 1.5);

  request.x = "step";
  request.y = "loss_difference";
  request.over = "plain";
  const auto gap = PlottedSeries(BuildLossPlotScript(cases, curves, request));
  REQUIRE(gap.size() == 1);  // bf16 only, every step, unsmoothed
  REQUIRE(gap[0].size() == 120);
  for (size_t k = 0; k < gap[0].size(); ++k)
    CHECK(gap[0][k].second == Approx(0.01 * static_cast<double>(k + 1)));

  request.y = "validation_loss";
  const auto evaluations = PlottedSeries(BuildLossPlotScript(cases, curves, request));
  REQUIRE(evaluations.size() == 1);
  CHECK(evaluations[0] ==
        std::vector<std::pair<double, double>>{{30, 130}, {60, 160}, {90, 190}, {120, 220}});
}

TEST_CASE("the gate's power: false alarms between unchanged runs, a known slowdown caught",
          "[reports][gate]") {
  // Three base runs and two slowed by 1.3x, each case 10 samples with 2% noise (seeded):
  // the unchanged pairs are not flagged, every slowed pair is, and a label that is not
  // "<prefix> x<number>" is ignored.
  Store store(":memory:");
  std::mt19937_64 generator(5);
  std::normal_distribution<double> noise(0.0, 0.02);
  const auto add_run = [&](const std::string& label, double factor) {
    RunRecord run = Run();
    run.uuid = label + std::to_string(store.Runs().size());
    run.label = label;
    const int64_t run_id = store.CreateRun(run);
    int64_t position = 0;
    for (const char* variant : {"baseline", "fused"}) {
      std::vector<double> samples(10);
      for (double& value : samples) value = factor * 0.01 * std::exp(noise(generator));
      CaseRecord c = Case(variant, "train", 1, samples);
      c.position = position++;
      store.AddCase(run_id, c);
    }
    store.SetRunStatus(run_id, "complete", "2026-11-23T00:00:00Z");
  };
  // Rounds as ci/measure_gate takes them: base, slowed; base, slowed; base; then a slowed
  // run after the last round's own, which has no base of its own left.
  for (int i = 0; i < 2; ++i) {
    add_run("gate base", 1.0);
    add_run("gate x1.3", 1.3);
  }
  add_run("gate base", 1.0);
  add_run("gate x1.3", 1.3);
  add_run("gate x1.3", 1.3);
  add_run("gate xfast", 1.3);  // not a factor: not a series
  add_run("other base", 1.3);  // another prefix
  const CompareSettings settings;
  const std::vector<GateRow> rows = MeasureGate(store, "demo", "gate", settings);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].compares == 2);
  CHECK(rows[0].flagged == 0);
  CHECK(rows[0].cases == 4);
  CHECK(rows[0].slower == 0);
  CHECK(rows[1].flagged == 3);
  CHECK(rows[1].slower == 6);
  CHECK_THAT(rows[1].what, Catch::StartsWith("1.3x slower"));
  CHECK(rows[1].compares == 3);  // the last slowed run is unpaired
  const std::string table = RenderGateTable(rows, settings);
  CHECK_THAT(table, Catch::Contains("--threshold 5%"));
  std::istringstream lines(table.substr(table.find("| compared")));
  std::string line;
  std::set<size_t> widths;
  while (std::getline(lines, line)) {
    if (!line.empty()) widths.insert(Cells(line).size());
  }
  CHECK(widths.size() == 1);  // rectangular
  CHECK_THROWS_AS(MeasureGate(store, "demo", "nosuch", settings), std::invalid_argument);
}

TEST_CASE("a README section's label= picks the newest run with that label", "[reports][readme]") {
  // Three complete runs of one suite: "blas-SkylakeX" (oldest), "blas-default", unlabelled
  // (newest). Each has one case whose batch tells the runs apart.
  Store store(":memory:");
  int64_t batch = 1;
  for (const char* label : {"blas-SkylakeX", "blas-default", ""}) {
    RunRecord run = Run();
    run.uuid = std::string("uuid ") + label;
    run.label = label;
    const int64_t run_id = store.CreateRun(run);
    store.AddCase(run_id, Case("fused", "train", batch++, {0.1, 0.2, 0.3}));
    store.SetRunStatus(run_id, "complete", "2026-11-27T00:00:00Z");
  }
  ReadmeSection section;
  section.attributes = {{"suite", "demo"}, {"label", "blas-SkylakeX"}};
  CHECK(SelectRunForSection(store, section).cases.at(0).workload().batch == 1);
  section.attributes["label"] = "blas-default";
  CHECK(SelectRunForSection(store, section).cases.at(0).workload().batch == 2);
  section.attributes.erase("label");  // no label: the newest, whatever its label
  CHECK(SelectRunForSection(store, section).cases.at(0).workload().batch == 3);
  // label= is not a workload filter, and a label no run has is refused with the fix.
  section.attributes["label"] = "nosuch";
  CHECK_THROWS_WITH(SelectRunForSection(store, section),
                    Catch::Contains("labelled 'nosuch'") && Catch::Contains("--label 'nosuch'"));
}

TEST_CASE("a README section's gpu= picks the newest run on that GPU", "[reports][readme]") {
  // An H100 run, an H200 run, then another H100 run (newest); batch tells them apart.
  Store store(":memory:");
  int64_t batch = 1;
  for (const char* gpu : {"NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA H100 80GB HBM3"}) {
    RunRecord run = Run();
    run.uuid = "uuid " + std::to_string(batch);
    run.environment.push_back({"gpu_name", gpu});
    const int64_t run_id = store.CreateRun(run);
    store.AddCase(run_id, Case("fused", "train", batch++, {0.1, 0.2, 0.3}));
    store.SetRunStatus(run_id, "complete", "2026-11-27T00:00:00Z");
  }
  ReadmeSection section;
  section.attributes = {{"suite", "demo"}, {"gpu", "H200"}};
  CHECK(SelectRunForSection(store, section).cases.at(0).workload().batch == 2);
  section.attributes["gpu"] = "H100";
  CHECK(SelectRunForSection(store, section).cases.at(0).workload().batch == 3);
  section.attributes.erase("gpu");
  CHECK(SelectRunForSection(store, section).cases.at(0).workload().batch == 3);
  section.attributes["gpu"] = "A100";
  CHECK_THROWS_WITH(SelectRunForSection(store, section), Catch::Contains("'*A100*'"));
}

TEST_CASE("the gate's power pairs runs of one commit only", "[reports][gate]") {
  // Commit a: base, slowed. Commit b: base 1.3x slower than a's (another build), slowed,
  // base. Across the commits nothing is compared: 1 unchanged pair (b's), not 2 with a
  // false alarm; b's slowed run against b's own base, not a's (which it would match).
  Store store(":memory:");
  std::mt19937_64 generator(9);
  std::normal_distribution<double> noise(0.0, 0.02);
  const auto add_run = [&](const std::string& label, const std::string& commit, double factor) {
    RunRecord run = Run();
    run.uuid = label + std::to_string(store.Runs().size());
    run.label = label;
    for (auto& [key, value] : run.environment) {
      if (key == "git_sha") value = commit;
    }
    const int64_t run_id = store.CreateRun(run);
    std::vector<double> samples(10);
    for (double& value : samples) value = factor * 0.01 * std::exp(noise(generator));
    store.AddCase(run_id, Case("fused", "train", 1, samples));
    store.SetRunStatus(run_id, "complete", "2026-11-23T00:00:00Z");
  };
  add_run("gate base", "a", 1.0);
  add_run("gate x1.3", "a", 1.3);
  add_run("gate base", "b", 1.3);
  add_run("gate x1.3", "b", 1.69);
  add_run("gate base", "b", 1.3);
  const std::vector<GateRow> rows = MeasureGate(store, "demo", "gate", CompareSettings{});
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].compares == 1);
  CHECK(rows[0].flagged == 0);
  CHECK(rows[1].compares == 2);
  CHECK(rows[1].flagged == 2);
  CHECK(rows[1].slower == 2);
}

}  // namespace
}  // namespace seqbench

namespace seqbench {
namespace {

// A case at sequence length `steps` whose median time and activation bytes follow known
// power laws (with a wobble, so that the fit's interval is not zero).
CaseRecord Scaled(const std::string& variant, const std::string& mode, int64_t steps,
                  double time_exponent, double memory_exponent, const std::string& status = "ok") {
  CaseRecord c = Case(variant, mode, 1, {1.0}, status);
  c.identity.workload.seq_len = steps;
  const double wobble = 1.0 + 0.01 * static_cast<double>(steps % 3);
  c.metrics = {{"runtime_median_s", 1e-6 * std::pow(steps, time_exponent) * wobble, "s"},
               {"activation_bytes", 100.0 * std::pow(steps, memory_exponent), "bytes"}};
  return c;
}

TEST_CASE("report fit: exponents per variant and workload, x left out of the series",
          "[reports][fit]") {
  std::vector<CaseRecord> cases;
  for (const int64_t t : {128, 256, 512, 1024}) {
    cases.push_back(Scaled("naive", "train", t, 2.0, 2.0));
    cases.push_back(Scaled("flash", "train", t, 2.0, 1.0));
    cases.push_back(Scaled("scan", "forward", t, 1.0, 1.0));
  }
  cases.push_back(Scaled("flash", "train", 2048, 9.0, 9.0, "error"));  // not a point
  cases.push_back(Scaled("lonely", "train", 128, 1.0, 1.0));           // too few points
  cases.push_back(Scaled("lonely", "train", 256, 1.0, 1.0));
  const std::vector<FitRow> rows = FitComplexity(cases, "seq_len");
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].variant == "naive");
  CHECK(rows[1].variant == "flash");
  CHECK(rows[1].xs == std::vector<double>{128, 256, 512, 1024});
  CHECK(rows[2].workload.find("mode=forward") != std::string::npos);
  CHECK(rows[2].workload.find("T=") == std::string::npos);
  CHECK(rows[0].time_exponent == Approx(2.0).margin(0.02));
  CHECK(rows[0].memory_exponent == Approx(2.0).margin(1e-9));
  CHECK(rows[1].memory_exponent == Approx(1.0).margin(1e-9));
  CHECK(rows[2].time_exponent == Approx(1.0).margin(0.02));
  for (const FitRow& row : rows) {
    CHECK(row.time_half_width > 0);
    CHECK(std::abs(row.time_exponent - (row.variant == "scan" ? 1.0 : 2.0)) <=
          row.time_half_width + 0.02);
  }
  // Rectangular: every row has the header's cells.
  const std::string table = RenderFitTable(rows, "seq_len");
  std::istringstream lines(table);
  std::string line;
  size_t width = 0, count = 0;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    const size_t cells = Cells(line).size();
    if (width == 0) width = cells;
    CHECK(cells == width);
    ++count;
  }
  CHECK(count == 2 + rows.size());
  CHECK_THROWS_AS(FitComplexity(cases, "mode"), std::invalid_argument);
  CHECK_THROWS_AS(FitComplexity(cases, "nonsense"), std::invalid_argument);
  // One sample a case: each doubling's ratio of medians, without an interval.
  REQUIRE(rows[0].doublings.size() == 3);
  for (const Doubling& d : rows[0].doublings) {
    CHECK_FALSE(d.has_interval);
    CHECK(d.ratio.estimate == Approx(4.0).epsilon(0.03));  // T^2, give or take the wobble
    CHECK(d.longer->identity.workload.seq_len == 2 * d.from);
  }
  CHECK(rows[2].doublings.at(1).ratio.estimate == Approx(2.0).epsilon(0.03));
}

// The middle sample of an odd count, by hand: the reference the doubling ratios are held to.
double MiddleOf(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

TEST_CASE("check: time per doubling judges every doubling on its interval, gaps fail",
          "[reports][check][fit]") {
  // Skewed samples (mean above median), scaled by the step time at each length.
  const std::vector<double> shape = {1.0, 1.02, 0.97, 1.6, 1.01, 0.99, 1.3};
  // A noisy machine: the same median, ±40% around it.
  const std::vector<double> wide = {0.6, 1.0, 1.4, 0.8, 1.2, 0.7, 1.3};
  const auto at = [&](const std::string& variant, int64_t steps, double seconds,
                      const std::string& status = "ok") {
    std::vector<double> samples;
    for (const double s : variant == "noisy" ? wide : shape) samples.push_back(s * seconds);
    CaseRecord c = Case(variant, "train", 4, samples, status);
    c.identity.workload.seq_len = steps;
    return c;
  };
  std::vector<CaseRecord> cases;
  for (const int64_t t : {128, 256, 512, 1024}) {
    const double x = double(t) / 128;
    cases.push_back(at("linear", t, 0.01 * x));
    cases.push_back(at("quadratic", t, 0.01 * x * x));
  }
  cases.push_back(at("linear", 384, 0.1));  // 256 -> 384 and 384 -> 512 are not doublings
  cases.push_back(at("gappy", 128, 0.01));
  cases.push_back(at("gappy", 256, 0.02, "error"));
  cases.push_back(at("gappy", 512, 0.04));
  cases.push_back(at("gappy", 1024, 0.08));  // one doubling left, and it holds
  cases.push_back(at("skipping", 128, 0.01));
  cases.push_back(at("skipping", 256, 0.02));
  cases.push_back(at("skipping", 512, 0.04, "skipped"));
  cases.push_back(at("noisy", 128, 0.01));
  cases.push_back(at("noisy", 256, 0.024));  // 2.4x, within the noise of 2.3

  // The series' ratios equal medians taken by hand; 128 -> 256 -> 512 -> 1024 for linear,
  // 384 in between breaks two of them.
  const std::vector<Series> series = SeriesAlong(cases, "seq_len");
  const auto linear = std::find_if(series.begin(), series.end(),
                                   [](const Series& s) { return s.variant == "linear"; });
  REQUIRE(linear != series.end());
  const std::vector<Doubling> doublings = Doublings(*linear, "seq_len");
  REQUIRE(doublings.size() == 2);
  CHECK(doublings[0].from == 128);
  CHECK(doublings[1].from == 512);
  const auto median = [&](const std::string& variant, int64_t steps) {
    for (const CaseRecord& c : cases)
      if (c.name() == variant && c.identity.workload.seq_len == steps) return MiddleOf(c.samples_s);
    return 0.0;
  };
  CHECK(doublings[1].ratio.estimate == Approx(median("linear", 1024) / median("linear", 512)));
  CHECK(doublings[1].has_interval);
  CHECK(doublings[1].ratio.low <= doublings[1].ratio.estimate);
  CHECK(doublings[1].ratio.high >= doublings[1].ratio.estimate);
  CHECK(doublings[1].ratio.high > doublings[1].ratio.low);

  const auto judge = [&](const std::string& variant, double at_most) {
    return EvaluateExpectations(
               {{"time_per_doubling", variant, "seq_len", std::nullopt, at_most, {}, 1}}, cases)
        .at(0);
  };
  CHECK(judge("linear", 2.3).held);
  const ExpectationOutcome quadratic = judge("quadratic", 2.3);
  CHECK_FALSE(quadratic.held);
  CHECK_THAT(quadratic.measured, Catch::Contains("3 doubling(s); largest 4×"));
  CHECK_THAT(quadratic.measured, Catch::Contains("short of the bound: 4×"));
  CHECK(judge("quadratic", 4.5).held);
  // Past the bound by its point estimate but not by its interval: within the noise.
  const ExpectationOutcome noisy = judge("noisy", 2.3);
  CHECK(noisy.held);
  CHECK_THAT(noisy.measured, Catch::Contains("largest 2.4×"));
  CHECK_FALSE(judge("noisy", 1.2).held);  // the whole interval above 1.2
  // A length that errored leaves its neighbours unjudged: not a pass.
  const ExpectationOutcome gappy = judge("gappy", 2.3);
  CHECK_FALSE(gappy.held);
  CHECK_THAT(gappy.measured, Catch::Contains("1 doubling(s)"));
  CHECK_THAT(gappy.measured, Catch::Contains("not measured: gappy"));
  // A skipped length is not run here, like a skipped case elsewhere.
  CHECK(judge("skipping", 2.3).held);
  // Every variant: quadratic and gappy fall short; from 1 doubling at least.
  CHECK_FALSE(judge("", 2.3).held);
  CHECK_THAT(judge("", 2.3).expectation, Catch::Contains("of every variant"));
  CHECK_FALSE(judge("absent", 2.3).held);
  CHECK_THAT(judge("absent", 2.3).measured, Catch::Contains("no two cases"));
}

// A training pipeline as the data-parallel pipeline stores it.
CaseRecord Pipeline(const std::string& name, double ranks, double tokens_per_s, double step_s,
                    double alpha_s = 0, double bucket_mb = 25) {
  CaseRecord c;
  c.identity.variant_name = c.identity.variant_key = name;
  c.status = kStatusOk;
  c.reference = "one_rank";
  c.description = "ranks=" + FormatSignificant(ranks);
  c.metrics = {{"ranks", ranks, "count"},
               {"tokens_per_s", tokens_per_s, "tokens/s"},
               {"runtime_mean_s", step_s, "s"}};
  if (ranks > 1) {
    c.metrics.push_back({"bucket_mb", bucket_mb, "MiB"});
    c.metrics.push_back({"network_alpha_s", alpha_s, "s"});
    c.metrics.push_back({"network_beta_s_per_byte", 1e-9, "s/B"});
    c.metrics.push_back({"allreduce_bytes_per_step", 3e5, "bytes"});
    c.metrics.push_back({"allreduce_buckets_per_step", bucket_mb >= 1 ? 1.0 : 3.0, "count"});
    c.metrics.push_back({"allreduce_s_per_step", 0.004, "s"});
    c.metrics.push_back({"count_allreduces_per_step", 2, "count"});
    c.metrics.push_back({"count_allreduce_s_per_step", 0.001, "s"});
  }
  return c;
}

TEST_CASE("scaling: efficiency against the one-rank reference, and the model's table",
          "[reports][distributed]") {
  const std::vector<CaseRecord> cases = {Pipeline("one_rank", 1, 1000, 0.080),
                                         Pipeline("fast_link", 2, 1500, 0.050, 1e-4, 25),
                                         Pipeline("slow_link", 2, 800, 0.095, 4e-3, 25),
                                         Pipeline("slow_small", 2, 600, 0.120, 4e-3, 0.05)};
  const std::vector<ScalingRow> rows = ScalingRows(cases);
  REQUIRE(rows.size() == 3);  // the one-rank reference is not a row
  // tokens/s ÷ (2 × 1000), by hand.
  CHECK(rows[0].efficiency == Approx(0.75));
  CHECK(rows[1].efficiency == Approx(0.40));
  CHECK(rows[0].compute_s() == Approx(0.050 - 0.004 - 0.001));
  // Without its reference a row has no efficiency, and says so with a dash.
  const auto orphans = ScalingRows({cases[1]});
  REQUIRE(orphans.size() == 1);
  CHECK(std::isnan(orphans[0].efficiency));

  // Both tables rectangular; the model's holds the one-bucket rows only (3 buckets
  // overlap backward, and their compute is not known).
  const std::vector<std::pair<std::string, size_t>> tables = {
      {RenderScalingTable(rows), rows.size()}, {RenderScalingModel(rows, {2, 8, 64, 512}), 2}};
  for (const auto& [table, expected_rows] : tables) {
    std::istringstream lines(table);
    std::string line;
    size_t width = 0, count = 0;
    while (std::getline(lines, line)) {
      if (line.rfind("|", 0) != 0) continue;  // the note under the table
      const size_t cells = Cells(line).size();
      if (width == 0) width = cells;
      CHECK(cells == width);
      ++count;
    }
    CHECK(count == 2 + expected_rows);
  }
  CHECK(RenderScalingModel(rows).find("slow_small") == std::string::npos);
  CHECK_THROWS_AS(RenderScalingModel({rows[2]}), std::invalid_argument);
  // The model's step on 2 ranks is the compute plus the measured network's all-reduces:
  // one bucket of 300 kB and 2 counts, T(2, n) = 2α + n·β.
  const double alpha = 1e-4, beta = 1e-9;
  const double modelled =
      rows[0].compute_s() + (2 * alpha + 3e5 * beta) + 2 * (2 * alpha + 8 * beta);
  const std::string model = RenderScalingModel(rows, {2});
  CHECK(model.find(FormatDuration(modelled)) != std::string::npos);
  CHECK(model.find("A model, not a measurement") != std::string::npos);

  ScalingPlotRequest plot;
  plot.y = "efficiency";
  plot.x = "latency";
  const std::string script = BuildScalingPlotScript(rows, plot);
  // One line per bucket size, the fast link's point before the slow one's.
  CHECK(script.find("'buckets of 25 MiB'") != std::string::npos);
  CHECK(script.find("'buckets of 0.05 MiB'") != std::string::npos);
  CHECK(script.find("0.1 75\n4 40\n") != std::string::npos);
  plot.x = "bandwidth";  // 1/β = 1000 MB/s for every row: one point per line
  CHECK(BuildScalingPlotScript(rows, plot).find("1000 75\n") != std::string::npos);
  plot.x = "nonsense";
  CHECK_THROWS_AS(BuildScalingPlotScript(rows, plot), std::invalid_argument);
  plot.y = "model_efficiency";
  CHECK(BuildScalingPlotScript(rows, plot).find("512 ") != std::string::npos);
  plot.y = "nonsense";
  CHECK_THROWS_AS(BuildScalingPlotScript(rows, plot), std::invalid_argument);
  CHECK_THROWS_AS(RenderScalingTable({}), std::invalid_argument);
}

}  // namespace
}  // namespace seqbench
