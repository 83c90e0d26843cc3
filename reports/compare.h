// Comparison of two runs, case by case (matched by the one case identity,
// results/case_identity.h): the ratio of median runtimes (new / base, the inverse of the
// one speedup), its bootstrap confidence interval (stats/statistics.h) from the raw
// repetition samples, and a verdict from where that interval lies against the threshold;
// peak memory is judged against the same threshold. Counted work (run --count) is judged
// apart: the ratio of instructions per step against its own, tighter threshold.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "results/records.h"
#include "stats/statistics.h"

namespace seqbench {

struct CompareSettings {
  double threshold = 0.05;   // a fraction: a change within 5% is "same"
  double confidence = 0.95;  // of the ratio's bootstrap interval
  // Fewer repetitions on either side: no verdict.
  size_t min_samples = stats::kMinBootstrapSamples;
  // Counted instructions: a change within 1% is "same"; a case whose counted steps
  // disagree about the ratio by more than a tenth of this is flagged nondeterministic.
  double count_threshold = 0.01;
  // The two runs are the sides of one A/B run (seqbench ab): each case is judged on the
  // ratios of its rounds, stats::PairedRatioInterval, instead of the bootstrap.
  bool paired = false;
};

// Whether `base` and `next` are the base and new sides of one A/B run (seqbench ab),
// linked by their ab_pair entries.
bool IsAbPair(const RunRecord& base, const RunRecord& next);

// What sets a comparison's verdict for a CI gate: wall time, counted instructions, or
// either (both must pass).
enum class Gate { kTime, kCounts, kBoth };
std::optional<Gate> ParseGate(const std::string& name);  // "time" | "counts" | "both"
std::string GateName(Gate gate);

// One function's move between two counted runs of a case: its self instructions per step
// on each side (0 where it is not among that side's stored costliest functions, which
// makes the change of a function that small an estimate).
struct FunctionMove {
  std::string function;
  double base = 0, next = 0;
  // next - base over the case's change of instructions per step (each side's median
  // step), or 0 when the case did not change.
  double share = 0;
};

// How many functions a moved case lists, the largest changes first.
inline constexpr size_t kMovedFunctions = 10;

struct CaseComparison {
  std::string case_key;
  // slower: the whole interval above 1 + threshold; faster: below 1 - threshold; same:
  // inside [1 - threshold, 1 + threshold]; ambiguous: it reaches across a limit (or too
  // few samples); only in base | only in new.
  std::string verdict;
  std::string note;  // why, when ambiguous
  double base_median_s = 0, new_median_s = 0;
  double ratio = 0;                         // new median / base median
  std::optional<stats::Interval> interval;  // of that ratio, at CompareSettings::confidence
  std::optional<double> memory_ratio;       // new peak / base peak
  std::string memory_verdict;               // smaller | larger | same | "" (not measured)
  // Counted work: new / base instructions per step (each side the median of its counted
  // steps), and the range of the ratios its steps allow: step k against step k (the same
  // steps count the same in every process of an unchanged binary, though not alike within
  // one), or with unequal step counts every step against every step. count_spread is how
  // far the steps disagree: the range of the differences step k minus step k over the
  // base's median step (unpaired: the wider side's own range); past a tenth of the count
  // threshold the case is flagged nondeterministic (shown, not failed).
  std::optional<double> count_ratio;
  std::optional<stats::Interval> count_range;
  double count_spread = 0;
  bool count_nondeterministic = false;
  // more: the whole range above 1 + count_threshold; fewer: below 1 - count_threshold;
  // same: inside both; ambiguous: across a limit; not counted: counted in the base run
  // only (the counts gate fails it); "": counted on neither side (judged on time).
  std::string count_verdict;
  // Counted with functions on both sides and judged more, fewer or ambiguous: the
  // kMovedFunctions functions whose self instructions per step changed most.
  std::vector<FunctionMove> moved_functions;
};

std::vector<CaseComparison> CompareCases(const std::vector<CaseRecord>& base,
                                         const std::vector<CaseRecord>& next,
                                         const CompareSettings& settings);

// True when a comparison should fail a CI gate: memory larger, or under the time gate
// slower, under the counts gate more instructions (or no count where the base had one;
// a case counted on neither side is judged on time), under both either.
bool IsRegression(const CaseComparison& comparison, Gate gate = Gate::kTime);

// The geometric mean of the positive values `of` picks from the comparisons (absent or
// non-positive ones left out), and how many entered it: compare's summary of the time
// ratios (TimeRatio) and of the count ratios (CountRatio).
struct GeometricMean {
  std::optional<double> value;
  int count = 0;
};
GeometricMean GeometricMeanOf(const std::vector<CaseComparison>& comparisons,
                              std::optional<double> (*of)(const CaseComparison&));
std::optional<double> TimeRatio(const CaseComparison& c);
std::optional<double> CountRatio(const CaseComparison& c);

// The counted steps of a stored case, in order (its instructions_step_<k> metrics); empty
// when it was not counted.
std::vector<double> CountedSteps(const CaseRecord& record);

// Whether any case of the run carries counted instructions.
bool HasCounts(const std::vector<CaseRecord>& cases);

// The comparisons as `compare` prints them: a Markdown table, case by case (with the
// instruction columns when both runs were `counted`).
std::string RenderCompareTable(const std::vector<CaseComparison>& comparisons, bool counted);

// The functions that moved, case by case (those with moved_functions): a Markdown heading
// line and table each, or "" when none moved.
std::string RenderMovedFunctions(const std::vector<CaseComparison>& comparisons);

// "count_blas_core: Haswell -> SkylakeX" for each environment entry that decides which
// code a counted run executed (valgrind, the pinning and what the counting child saw of
// OpenBLAS, ATen and glibc, LibTorch, the compiler and build type): counts from runs that
// differ here are not comparable.
std::vector<std::string> CountFingerprintDifferences(const RunRecord& base, const RunRecord& next);

// "cpu_model: A -> B" for the environment entries that change what numbers mean.
std::vector<std::string> EnvironmentDifferences(const RunRecord& base, const RunRecord& next);

}  // namespace seqbench
