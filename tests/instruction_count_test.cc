// Counted work and the counts gate: a callgrind dump's total is read from its own line;
// a counted case's metrics are the median of its steps (not their mean) with the spread;
// compare judges counts against their own threshold, flags more instructions under the
// counts gate only, flags steps that disagree as nondeterministic rather than failing, names
// what differs between two runs' fingerprints; the gate's measured power under counts.
#include "harness/instruction_count.h"

#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>

#include "reports/compare.h"
#include "reports/gate.h"

namespace seqbench {
namespace {

// A case counted at these steps, timed at these samples (mean != median on both).
CaseRecord CountedCase(const std::vector<double>& steps, const std::vector<double>& samples_s) {
  CaseRecord record;
  record.identity.variant_name = "fused";
  record.identity.variant_key = "fused";
  record.status = kStatusOk;
  record.samples_s = samples_s;
  StepCounts counts;
  counts.steps["instructions"] = steps;
  record.metrics = CountMetrics(counts);
  return record;
}

const std::vector<double> kSamples = {1.0, 1.1, 1.9, 1.05, 1.2};

// Stores a complete run of suite "demo" at `commit`, labelled `label`, whose cases are
// `cases` named baseline, fused, batched, ... in order: the gate tests' rounds.
void StoreGateRun(Store& store, const std::string& label, std::vector<CaseRecord> cases,
                  const std::string& commit = "abc") {
  RunRecord run;
  run.uuid = label + std::to_string(store.Runs().size());
  run.suite_name = "demo";
  run.label = label;
  run.status = "running";
  run.started_at = "2026-11-26T00:00:00Z";
  run.environment = {{"git_sha", commit}};
  const int64_t run_id = store.CreateRun(run);
  const char* const variants[] = {"baseline", "fused", "batched"};
  for (size_t i = 0; i < cases.size(); ++i) {
    cases[i].identity.variant_name = cases[i].identity.variant_key = variants[i];
    cases[i].position = static_cast<int64_t>(i);
    store.AddCase(run_id, cases[i]);
  }
  store.SetRunStatus(run_id, "complete", "2026-11-26T00:00:00Z");
}

TEST_CASE("a callgrind dump's total is its summary or totals line", "[count]") {
  CHECK(CallgrindTotal("version: 1\ncreator: callgrind-3.19.0\nevents: Ir\nsummary: 257066074\n"
                       "fn=(1) main\n16 3\n") == Approx(257066074.0));
  CHECK(CallgrindTotal("events: Ir\nfn=main\n3 7\ntotals: 1234\n") == Approx(1234.0));
  // A cost line that merely contains digits is not a total.
  CHECK_FALSE(CallgrindTotal("events: Ir\nfn=main\n16 3\n").has_value());
  CHECK_FALSE(CallgrindTotal("").has_value());
}

TEST_CASE("a dump's events are named by its events line; missing trailing costs are 0", "[count]") {
  const std::string dump =
      "events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw\nfn=(1) main\n16 3 1\n"
      "summary: 5000 900 400 7 30 11 2 5\n";
  const std::map<std::string, double> events = CallgrindEvents(dump);
  CHECK(events.at("Ir") == 5000);
  CHECK(events.at("D1mr") == 30);
  CHECK(events.at("DLmr") == 5);
  CHECK(events.at("DLmw") == 0);  // left out of the summary: zero
  CHECK(CallgrindEvents("events: Ir\n").empty());
  // Ir + 10 L1 misses (7 + 30 + 11) + 100 LL misses (2 + 5 + 0): every term weighted apart.
  CHECK(CycleEstimate(events) == Approx(5000 + 10 * 48 + 100 * 7));
  std::map<std::string, double> no_cache = {{"Ir", 5000}};
  CHECK_FALSE(CycleEstimate(no_cache).has_value());
}

TEST_CASE("count kinds: one table; hw-instructions counts alone", "[count]") {
  for (const CountKind& kind : CountKinds()) CHECK(FindCountKind(kind.name) == &kind);
  CHECK(FindCountKind("cycles") == nullptr);
  CHECK(CountKindsConflict({kCountInstructions, kCountCyclesEstimate}).empty());
  CHECK_FALSE(CountKindsConflict({kCountInstructions, kCountHwInstructions}).empty());
  CHECK(CountsNatively({kCountHwInstructions}));
  CHECK_FALSE(CountsNatively({kCountInstructions, kCountCyclesEstimate}));
  CHECK(SimulatesCaches({kCountInstructions, kCountCyclesEstimate}));
  CHECK_FALSE(SimulatesCaches({kCountInstructions}));
}

TEST_CASE("hardware counters: counted per step where the kernel offers them", "[count]") {
  const std::string unavailable = HardwareCountersUnavailable();
  if (!unavailable.empty()) {
    CHECK_THROWS_WITH(CountStepsWithPerf([] {}, 2), Catch::Contains("perf_event_open"));
    WARN("skipped: no hardware counter here: " << unavailable);
    return;
  }
  volatile double sink = 0;
  const auto work = [&sink](int n) {
    for (int i = 0; i < n; ++i) sink = sink + i * 0.5;
  };
  const std::vector<double> small = CountStepsWithPerf([&] { work(1000); }, 3);
  const std::vector<double> large = CountStepsWithPerf([&] { work(100000); }, 3);
  REQUIRE(small.size() == 3);
  // A hundred times the loop is about a hundred times the instructions.
  CHECK(large[1] / small[1] > 50);
}

TEST_CASE("a counted case stores the median step, the spread and every step", "[count]") {
  StepCounts counts;
  counts.steps["instructions"] = {1000, 1300, 1010};  // mean 1103.3, median 1010
  const std::vector<Metric> metrics = CountMetrics(counts);
  CaseRecord record;
  record.metrics = metrics;
  CHECK(record.MetricValue("instructions_per_step") == Approx(1010));
  CHECK(record.MetricValue("instructions_spread") == Approx(300.0 / 1010));
  CHECK(CountedSteps(record) == std::vector<double>{1000, 1300, 1010});
  CHECK(CountMetrics(StepCounts{}).empty());
  // A second series, the cycle estimate, is stored under its own name and unit.
  counts.steps["cycles_estimate"] = {4000, 3000, 9000};
  record.metrics = CountMetrics(counts);
  CHECK(record.MetricValue("cycles_estimate_per_step") == Approx(4000));
  CHECK(record.MetricValue("instructions_per_step") == Approx(1010));
  const auto cycles =
      std::find_if(record.metrics.begin(), record.metrics.end(),
                   [](const Metric& m) { return m.name == "cycles_estimate_step_3"; });
  REQUIRE(cycles != record.metrics.end());
  CHECK(cycles->unit == "cycles");
}

TEST_CASE("the counts gate flags more instructions and passes an unchanged pair", "[count]") {
  const CaseRecord base = CountedCase({1'000'000, 1'000'100, 1'000'050}, kSamples);
  CompareSettings settings;  // count threshold 1%

  // Unchanged code: counts within 0.05%; times alike.
  const CaseRecord same = CountedCase({1'000'400, 1'000'300, 1'000'500}, kSamples);
  const CaseComparison unchanged = CompareCases({base}, {same}, settings).at(0);
  CHECK(unchanged.count_verdict == "same");
  CHECK_FALSE(IsRegression(unchanged, Gate::kCounts));

  // 2% more instructions, but the clock happened to be kind: only the counts gate sees it.
  const CaseRecord more = CountedCase({1'020'000, 1'020'050, 1'020'100}, kSamples);
  const CaseComparison grown = CompareCases({base}, {more}, settings).at(0);
  CHECK(grown.count_verdict == "more");
  CHECK(*grown.count_ratio == Approx(1.02).epsilon(1e-4));
  CHECK(IsRegression(grown, Gate::kCounts));
  CHECK(IsRegression(grown, Gate::kBoth));
  CHECK_FALSE(IsRegression(grown, Gate::kTime));

  // 0.9% more: inside the 1% threshold.
  const CaseRecord slight = CountedCase({1'009'000, 1'009'050, 1'009'100}, kSamples);
  CHECK(CompareCases({base}, {slight}, settings).at(0).count_verdict == "same");

  // The count ratio is of the median steps: 1.05M / 1.0M, where the mean steps give 1.015
  // and the median of the step ratios (1.05, 1.0, 1.0) gives 1.0.
  const CaseRecord skewed_base = CountedCase({1'000'000, 1'000'000, 1'300'000}, kSamples);
  const CaseRecord skewed_new = CountedCase({1'050'000, 1'000'000, 1'300'000}, kSamples);
  CHECK(*CompareCases({skewed_base}, {skewed_new}, settings).at(0).count_ratio == Approx(1.05));

  // Fewer instructions are no regression.
  const CaseRecord fewer = CountedCase({900'000, 900'050, 900'100}, kSamples);
  const CaseComparison shrunk = CompareCases({base}, {fewer}, settings).at(0);
  CHECK(shrunk.count_verdict == "fewer");
  CHECK_FALSE(IsRegression(shrunk, Gate::kCounts));
}

TEST_CASE("steps that disagree past a tenth of the threshold are nondeterministic", "[count]") {
  const CaseRecord base = CountedCase({1'000'000, 1'000'100, 1'000'050}, kSamples);
  // Step k against step k: ratios 1.005, 1.0150, 1.00995 reach across the 1% limit and
  // disagree by 1%, past a tenth of the threshold.
  const CaseRecord noisy = CountedCase({1'005'000, 1'015'100, 1'010'000}, kSamples);
  CompareSettings settings;
  const CaseComparison c = CompareCases({base}, {noisy}, settings).at(0);
  CHECK(c.count_verdict == "ambiguous");
  CHECK(c.count_nondeterministic);
  const double r1 = 1'005'000 / 1'000'000.0, r2 = 1'015'100 / 1'000'100.0;
  REQUIRE(c.count_range.has_value());
  CHECK(c.count_range->low == Approx(r1));
  CHECK(c.count_range->high == Approx(r2));
  // Differences step k minus step k: 5000, 15000, 9950, over the base's median step.
  CHECK(c.count_spread == Approx(10'000.0 / 1'000'050));
  CHECK_FALSE(IsRegression(c, Gate::kCounts));
  settings.count_threshold = 0.2;  // a tenth: 2%, wider than its disagreement
  const CaseComparison wide = CompareCases({base}, {noisy}, settings).at(0);
  CHECK(wide.count_verdict == "same");
  CHECK_FALSE(wide.count_nondeterministic);
  // A median ratio above the limit (1 012 000 / 1 000 050 = 1.0119) is not "more" while
  // a step's ratio (1.005) lies within it: the verdict takes the whole range.
  const CaseRecord straddling = CountedCase({1'005'000, 1'015'100, 1'012'000}, kSamples);
  const CaseComparison straddled = CompareCases({base}, {straddling}, CompareSettings{}).at(0);
  CHECK(*straddled.count_ratio > 1.01);
  CHECK(straddled.count_verdict == "ambiguous");
  CHECK_FALSE(IsRegression(straddled, Gate::kCounts));
  // A disagreement whose whole range lies above the limit is still a regression.
  const CaseRecord grown = CountedCase({1'030'000, 1'040'000, 1'035'000}, kSamples);
  const CaseComparison more = CompareCases({base}, {grown}, CompareSettings{}).at(0);
  CHECK(more.count_verdict == "more");
  CHECK(more.count_nondeterministic);
  CHECK(IsRegression(more, Gate::kCounts));
}

TEST_CASE("work added to every step alike is no disagreement", "[count]") {
  // Steps that differ by 0.5% among themselves, each 20 000 instructions more: ratios
  // 1.0800, 1.0803, 1.0801 move apart, their differences do not.
  const CaseRecord base = CountedCase({250'158, 248'926, 249'808}, kSamples);
  const CaseRecord added = CountedCase({270'158, 268'926, 269'808}, kSamples);
  const CaseComparison c = CompareCases({base}, {added}, CompareSettings{}).at(0);
  CHECK(c.count_verdict == "more");
  CHECK(c.count_spread == 0);
  CHECK_FALSE(c.count_nondeterministic);
}

TEST_CASE("steps that differ alike in both runs are deterministic", "[count]") {
  // One process's steps differ by 0.5% (seen: 25015862, 24892626, 24980891), and so do
  // the same steps of every other process of the same binary: no disagreement.
  const CaseRecord base = CountedCase({25'015'862, 24'892'626, 24'980'891}, kSamples);
  const CaseComparison c = CompareCases({base}, {base}, CompareSettings{}).at(0);
  CHECK(c.count_spread == 0);
  CHECK_FALSE(c.count_nondeterministic);
  CHECK(c.count_verdict == "same");
  // Counted at other step counts, every step against every step: 0.995-1.005.
  const CaseRecord two = CountedCase({25'015'862, 24'892'626}, kSamples);
  const CaseComparison unpaired = CompareCases({base}, {two}, CompareSettings{}).at(0);
  CHECK(unpaired.count_verdict == "same");
  CHECK(unpaired.count_nondeterministic);
  CHECK(unpaired.count_range->low == Approx(24'892'626.0 / 25'015'862));
}

TEST_CASE("an uncounted case fails the counts gate or is judged on time", "[count]") {
  const CaseRecord base = CountedCase({1'000'000, 1'000'100, 1'000'050}, kSamples);
  CaseRecord plain = base;
  plain.metrics.clear();
  // Counted in the base, not in the new run (its counting failed): the gate cannot pass it.
  const CaseComparison lost = CompareCases({base}, {plain}, CompareSettings{}).at(0);
  CHECK(lost.count_verdict == "not counted");
  CHECK_FALSE(lost.count_ratio.has_value());
  CHECK(IsRegression(lost, Gate::kCounts));
  CHECK(HasCounts({base}));
  CHECK_FALSE(HasCounts({plain}));
  // Counted on neither side (a CUDA case): its time decides, as under the time gate.
  CaseRecord slow = plain;
  for (double& s : slow.samples_s) s *= 2;
  const CaseComparison cuda = CompareCases({plain}, {slow}, CompareSettings{}).at(0);
  CHECK(cuda.count_verdict.empty());
  CHECK(cuda.verdict == "slower");
  CHECK(IsRegression(cuda, Gate::kCounts));
  CHECK_FALSE(IsRegression(CompareCases({plain}, {plain}, CompareSettings{}).at(0), Gate::kCounts));
}

TEST_CASE("fingerprints name what decides which code a counted run executed", "[count]") {
  RunRecord base, next;
  for (RunRecord* run : {&base, &next}) {
    run->environment = {{"count_tool", "valgrind-3.19.0"},
                        {"count_pinning", CountPinningText()},
                        {"count_blas_core", "Haswell"},
                        {"torch_version", "1.13.1"},
                        {"cpu_model", "Intel Xeon"}};
  }
  CHECK(CountFingerprintDifferences(base, next).empty());
  next.environment.push_back({"hostname", "another-vm"});  // not part of the fingerprint
  next.environment[4].second = "AMD EPYC";                 // nor is the CPU: counts are pinned
  CHECK(CountFingerprintDifferences(base, next).empty());
  next.environment[2].second = "SkylakeX";
  const auto differences = CountFingerprintDifferences(base, next);
  REQUIRE(differences.size() == 1);
  CHECK(differences[0] == "count_blas_core: Haswell -> SkylakeX");
}

TEST_CASE("the child's files are written whole or not at all", "[count]") {
  // A full disk shows only when the buffer is flushed: the writer must judge the close.
  CHECK_THROWS_AS(WriteFacts("/dev/full", {{"steps_per_sample", "1"}}), std::runtime_error);
  const std::string path = "/tmp/seqbench-facts-test-" + std::to_string(::getpid());
  WriteFacts(path, {{"blas_core", "Haswell"}, {"error", "two\nlines"}});
  const auto facts = ReadFacts(path);
  std::remove(path.c_str());
  REQUIRE(facts.size() == 2);
  CHECK(facts[0] == std::pair<std::string, std::string>{"blas_core", "Haswell"});
  CHECK(facts[1].second == "two lines");  // one line a fact
}

TEST_CASE("the pinning fixes ATen, OpenBLAS, glibc and one thread", "[count]") {
  const std::string pinning = CountPinningText();
  for (const char* variable : {"ATEN_CPU_CAPABILITY=avx2", "OPENBLAS_CORETYPE=Haswell",
                               "OPENBLAS_NUM_THREADS=1", "OMP_NUM_THREADS=1", "GLIBC_TUNABLES="})
    CHECK(pinning.find(variable) != std::string::npos);
}

TEST_CASE("the gate's power under counts: drift in time, none in counts", "[count]") {
  // Runs whose times drift 1.5x between runs (as on the CI VM) and whose counts do not;
  // planted extra work in the shared head adds 3% of instructions.
  Store store(":memory:");
  std::mt19937_64 generator(11);
  std::uniform_real_distribution<double> drift(1.0, 1.5);
  const auto add_run = [&](const std::string& label, double count_factor) {
    const double machine = drift(generator);
    std::vector<double> samples;
    for (double base : kSamples) samples.push_back(base * machine);
    const CaseRecord c = CountedCase(
        {1e6 * count_factor, 1.0004e6 * count_factor, 0.9998e6 * count_factor}, samples);
    StoreGateRun(store, label, {c, c});
  };
  for (int round = 0; round < 4; ++round) {
    add_run("gate base", 1.0);
    add_run("gate head+1", 1.03);
  }
  const CompareSettings settings;
  const std::vector<GateRow> counted = MeasureGate(store, "demo", "gate", settings, Gate::kCounts);
  REQUIRE(counted.size() == 2);
  CHECK(counted[0].compares == 3);
  CHECK(counted[0].flagged == 0);
  CHECK(counted[0].same_count == 6);
  CHECK_THAT(counted[1].what, Catch::StartsWith("the shared head computed 1 extra"));
  CHECK(counted[1].flagged == 4);
  CHECK(counted[1].more == 8);
  const std::string table = RenderGateTable(counted, settings, Gate::kCounts);
  CHECK_THAT(table, Catch::Contains("--count-threshold 1%"));
  CHECK_THAT(table, !Catch::Contains("| slower"));
}

TEST_CASE("the gate's table counts each verdict in its own column", "[count]") {
  // Two rounds; in each planted run baseline is 20% faster with 3% fewer instructions,
  // fused's steps straddle the limit (ambiguous, nondeterministic), batched went uncounted:
  // each column gets exactly its 2, and only the uncounted case fails the counts gate.
  Store store(":memory:");
  const auto add_run = [&](const std::string& label, bool planted) {
    const std::vector<double> base_steps = {1'000'000, 1'000'100, 1'000'050};
    const std::vector<double> flat = {0.01, 0.01, 0.01, 0.01, 0.01};  // time: exactly same
    std::vector<CaseRecord> cases = {CountedCase(base_steps, flat), CountedCase(base_steps, flat),
                                     CountedCase(base_steps, flat)};
    if (planted) {
      std::vector<double> faster;
      for (const double s : flat) faster.push_back(0.8 * s);
      cases[0] = CountedCase({970'000, 970'097, 970'048.5}, faster);
      cases[1] = CountedCase({1'005'000, 1'015'100, 1'010'000}, flat);
      cases[2] = CountedCase({}, flat);
    }
    StoreGateRun(store, label, cases);
  };
  for (int round = 0; round < 2; ++round) {
    add_run("gate base", false);
    add_run("gate head+1", true);
  }
  const std::vector<GateRow> rows =
      MeasureGate(store, "demo", "gate", CompareSettings{}, Gate::kCounts);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].compares == 1);
  CHECK(rows[0].same == 3);
  CHECK(rows[0].same_count == 3);
  const GateRow& planted = rows[1];
  CHECK(planted.compares == 2);
  CHECK(planted.cases == 6);
  CHECK(planted.faster == 2);
  CHECK(planted.same == 4);
  CHECK(planted.slower + planted.ambiguous == 0);
  CHECK(planted.fewer == 2);
  CHECK(planted.ambiguous_count == 2);
  CHECK(planted.uncounted == 2);
  CHECK(planted.more + planted.same_count == 0);
  CHECK(planted.nondeterministic == 2);
  CHECK(planted.flagged == 2);
}

TEST_CASE("the gate's verdicts on pairs of commits, against their labels", "[count]") {
  // Two cases a run; per commit, each case's instructions per step (three equal steps).
  Store store(":memory:");
  const auto add_commit = [&](const std::string& sha, double first, double second) {
    StoreGateRun(store, "gate base",
                 {CountedCase({first, first, first}, kSamples),
                  CountedCase({second, second, second}, kSamples)},
                 sha);
  };
  add_commit("aaa111", 1e6, 2e6);
  add_commit("bbb222", 1e6, 2e6);        // nothing moved
  add_commit("ccc333", 1.03e6, 1.94e6);  // one case up 3%, the other down 3%
  add_commit("ddd444", 9e6, 9e6);        // an older count of ddd, replaced by the next
  add_commit("ddd444", 1.03e6, 2.06e6);  // the second case up 6.2% against ccc
  const std::vector<CommitPair> pairs =
      ParseCommitPairs("aaa..bbb:same,bbb..ccc:moved,ccc..ddd444:fewer");
  REQUIRE(pairs.size() == 3);
  CHECK(pairs[2].base == "ccc");
  CHECK(pairs[2].head == "ddd444");
  CHECK(pairs[2].expected == "fewer");
  const CompareSettings settings;
  const std::vector<CommitPairRow> rows = MeasureCommitPairs(store, "demo", pairs, settings);
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].observed == "same");
  CHECK(rows[0].agrees);
  CHECK(rows[0].verdicts.same_count == 2);
  CHECK(rows[0].verdicts.flagged == 0);
  CHECK(*rows[0].counts.value == Approx(1.0));
  CHECK(rows[1].observed == "mixed");  // "moved" takes either way
  CHECK(rows[1].agrees);
  CHECK(rows[1].verdicts.more == 1);
  CHECK(rows[1].verdicts.fewer == 1);
  CHECK(rows[1].verdicts.flagged == 1);
  CHECK(*rows[1].counts.value == Approx(std::sqrt(1.03 * 0.97)));
  CHECK(rows[2].observed == "more");  // the newest run of ddd444, not its older count
  CHECK_FALSE(rows[2].agrees);
  CHECK(rows[2].verdicts.same_count == 1);
  CHECK(*rows[2].counts.value == Approx(std::sqrt(2.06 / 1.94)));
  CHECK(*rows[2].count_wall_s == Approx(0.0));
  const std::string table = RenderCommitPairTable(rows, settings);
  CHECK_THAT(table, Catch::Contains("2 of 3 verdicts as labelled"));
  CHECK_THAT(table, Catch::Contains("| ccc | ddd444 | fewer | more | no |"));

  CHECK_THROWS_WITH(MeasureCommitPairs(store, "demo", ParseCommitPairs("aaa..eee:same"), settings),
                    Catch::Contains("at commit eee"));
  for (const char* malformed : {"", "aaa-bbb:same", "..bbb:same", "aaa..:same",
                                "aaa..bbb:", "aaa..bbb", "aaa..bbb:faster", "aaa..bbb:same,"}) {
    CAPTURE(malformed);
    CHECK_THROWS_AS(ParseCommitPairs(malformed), std::invalid_argument);
  }
}

TEST_CASE("gate names round-trip", "[count]") {
  for (const Gate gate : {Gate::kTime, Gate::kCounts, Gate::kBoth})
    CHECK(ParseGate(GateName(gate)) == gate);
  CHECK_FALSE(ParseGate("wall").has_value());
}

}  // namespace
}  // namespace seqbench
