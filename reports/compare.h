// Comparison of two runs, case by case (matched by the one case identity,
// results/case_identity.h): the ratio of median runtimes (new / base, the inverse of the
// one speedup), its bootstrap confidence interval (harness/statistics.h) from the raw
// repetition samples, and a verdict from where that interval lies against the threshold;
// peak memory is judged against the same threshold.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "harness/statistics.h"
#include "results/store.h"

namespace seqbench {

struct CompareSettings {
  double threshold = 0.05;   // a fraction: a change within 5% is "same"
  double confidence = 0.95;  // of the ratio's bootstrap interval
  // Fewer repetitions on either side: no verdict.
  size_t min_samples = stats::kMinBootstrapSamples;
};

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
};

std::vector<CaseComparison> CompareCases(const std::vector<CaseRecord>& base,
                                         const std::vector<CaseRecord>& next,
                                         const CompareSettings& settings);

// True when a comparison should fail a CI gate: slower, or memory larger.
bool IsRegression(const CaseComparison& comparison);

// "cpu_model: A -> B" for the environment entries that change what numbers mean.
std::vector<std::string> EnvironmentDifferences(const RunRecord& base, const RunRecord& next);

}  // namespace seqbench
