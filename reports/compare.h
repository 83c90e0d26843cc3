// Comparison of two runs, case by case (matched by the one case identity,
// results/case_identity.h): the ratio of median runtimes, a two-sided Mann–Whitney U test
// (harness/statistics.h) on the raw repetition samples, and a verdict;
// peak and activation memory are judged against the same threshold.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "results/store.h"

namespace seqbench {

struct CompareSettings {
  double threshold = 0.05;  // a change smaller than 5% is never a verdict
  double alpha = 0.01;      // significance level of the U test
  size_t min_samples = 9;   // fewer repetitions than this on either side: cannot judge
};

struct CaseComparison {
  std::string case_key;
  std::string verdict;  // faster | slower | same | ambiguous | only in base | only in new
  std::string note;     // why, when ambiguous
  double base_median_s = 0, new_median_s = 0;
  double ratio = 0;  // new median / base median
  std::optional<double> p_value;
  std::optional<double> memory_ratio;  // new peak / base peak
  std::string memory_verdict;          // smaller | larger | same | "" (not measured)
};

std::vector<CaseComparison> CompareCases(const std::vector<CaseRecord>& base,
                                         const std::vector<CaseRecord>& next,
                                         const CompareSettings& settings);

// True when a comparison should fail a CI gate: slower, or memory larger.
bool IsRegression(const CaseComparison& comparison);

// "cpu_model: A -> B" for the environment entries that change what numbers mean.
std::vector<std::string> EnvironmentDifferences(const RunRecord& base, const RunRecord& next);

}  // namespace seqbench
