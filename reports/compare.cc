#include "reports/compare.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "reports/report.h"

namespace seqbench {
MannWhitney MannWhitneyU(const std::vector<double>& first, const std::vector<double>& second) {
  const double n1 = static_cast<double>(first.size()), n2 = static_cast<double>(second.size());
  MannWhitney result;
  if (first.empty() || second.empty()) return result;
  // Rank the pooled samples, ties taking the mean of their ranks.
  std::vector<std::pair<double, int>> pooled;
  for (const double x : first) pooled.emplace_back(x, 0);
  for (const double x : second) pooled.emplace_back(x, 1);
  std::sort(pooled.begin(), pooled.end());
  double rank_sum_first = 0, tie_term = 0;
  for (size_t i = 0; i < pooled.size();) {
    size_t j = i;
    while (j < pooled.size() && pooled[j].first == pooled[i].first) ++j;
    const double ties = static_cast<double>(j - i);
    const double mean_rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2;
    for (size_t k = i; k < j; ++k) {
      if (pooled[k].second == 0) rank_sum_first += mean_rank;
    }
    tie_term += ties * ties * ties - ties;
    i = j;
  }
  result.u = rank_sum_first - n1 * (n1 + 1) / 2;
  const double n = n1 + n2;
  const double variance = n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1)));
  if (variance <= 0) return result;  // every value equal: no evidence of a difference
  const double z = (std::fabs(result.u - n1 * n2 / 2) - 0.5) / std::sqrt(variance);
  result.p_value = std::min(1.0, std::erfc(std::max(z, 0.0) / std::sqrt(2.0)));
  return result;
}

std::vector<CaseComparison> CompareCases(const std::vector<CaseRecord>& base,
                                         const std::vector<CaseRecord>& next,
                                         const CompareSettings& settings) {
  std::map<std::string, const CaseRecord*> base_by_key;
  for (const CaseRecord& c : base) base_by_key[c.case_key] = &c;
  std::vector<CaseComparison> comparisons;
  std::map<std::string, bool> matched;
  for (const CaseRecord& n : next) {
    CaseComparison comparison;
    comparison.case_key = n.case_key;
    const auto found = base_by_key.find(n.case_key);
    if (found == base_by_key.end()) {
      comparison.verdict = "only in new";
      comparisons.push_back(comparison);
      continue;
    }
    matched[n.case_key] = true;
    const CaseRecord& b = *found->second;
    if (b.samples_s.empty() || n.samples_s.empty()) {
      comparison.verdict = "ambiguous";
      comparison.note = "no timings (status " + b.status + " / " + n.status + ")";
      comparisons.push_back(comparison);
      continue;
    }
    comparison.base_median_s = SampleMedian(b.samples_s);
    comparison.new_median_s = SampleMedian(n.samples_s);
    comparison.ratio = comparison.new_median_s / comparison.base_median_s;
    if (b.samples_s.size() < settings.min_samples || n.samples_s.size() < settings.min_samples) {
      comparison.verdict = "ambiguous";
      comparison.note = "cannot judge: " + std::to_string(b.samples_s.size()) + " and " +
                        std::to_string(n.samples_s.size()) + " samples, the U test needs " +
                        std::to_string(settings.min_samples);
    } else {
      const MannWhitney test = MannWhitneyU(b.samples_s, n.samples_s);
      comparison.p_value = test.p_value;
      const bool significant = test.p_value < settings.alpha;
      const bool beyond = std::fabs(comparison.ratio - 1) > settings.threshold;
      if (!significant) {
        comparison.verdict = "same";
      } else if (!beyond) {
        comparison.verdict = "ambiguous";
        comparison.note = "significant, but within the threshold";
      } else {
        comparison.verdict = comparison.ratio > 1 ? "slower" : "faster";
      }
    }
    const auto base_peak = b.MetricValue("peak_bytes");
    const auto new_peak = n.MetricValue("peak_bytes");
    if (base_peak && new_peak && *base_peak > 0) {
      comparison.memory_ratio = *new_peak / *base_peak;
      comparison.memory_verdict = *comparison.memory_ratio > 1 + settings.threshold   ? "larger"
                                  : *comparison.memory_ratio < 1 - settings.threshold ? "smaller"
                                                                                      : "same";
    }
    comparisons.push_back(comparison);
  }
  for (const CaseRecord& b : base) {
    if (!matched.count(b.case_key)) {
      CaseComparison comparison;
      comparison.case_key = b.case_key;
      comparison.verdict = "only in base";
      comparisons.push_back(comparison);
    }
  }
  return comparisons;
}

bool IsRegression(const CaseComparison& comparison) {
  return comparison.verdict == "slower" || comparison.memory_verdict == "larger";
}

std::vector<std::string> EnvironmentDifferences(const RunRecord& base, const RunRecord& next) {
  std::vector<std::string> differences;
  for (const char* key :
       {"cpu_model", "cpu_logical_cores", "gpu_name", "torch_version", "cuda_version",
        "cudnn_version", "blas_library", "torch_threads", "build_type", "compiler", "hostname"}) {
    const std::string a = EnvironmentValue(base, key), b = EnvironmentValue(next, key);
    if (a != b) differences.push_back(std::string(key) + ": " + a + " -> " + b);
  }
  return differences;
}

}  // namespace seqbench
