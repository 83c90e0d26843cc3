#include "reports/compare.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "harness/statistics.h"
#include "reports/report.h"

namespace seqbench {
std::vector<CaseComparison> CompareCases(const std::vector<CaseRecord>& base,
                                         const std::vector<CaseRecord>& next,
                                         const CompareSettings& settings) {
  std::map<std::string, const CaseRecord*> base_by_key;
  for (const CaseRecord& c : base) base_by_key[c.key()] = &c;
  std::vector<CaseComparison> comparisons;
  std::map<std::string, bool> matched;
  for (const CaseRecord& n : next) {
    CaseComparison comparison;
    comparison.case_key = n.key();
    const auto found = base_by_key.find(n.key());
    if (found == base_by_key.end()) {
      comparison.verdict = "only in new";
      comparisons.push_back(comparison);
      continue;
    }
    matched[n.key()] = true;
    const CaseRecord& b = *found->second;
    if (b.samples_s.empty() || n.samples_s.empty()) {
      comparison.verdict = "ambiguous";
      comparison.note = "no timings (status " + b.status + " / " + n.status + ")";
      comparisons.push_back(comparison);
      continue;
    }
    comparison.base_median_s = stats::Median(b.samples_s);
    comparison.new_median_s = stats::Median(n.samples_s);
    // new time / base time: the inverse of Speedup(new, base), the one definition.
    comparison.ratio = 1 / Speedup(n, b).value_or(0);
    if (b.samples_s.size() < settings.min_samples || n.samples_s.size() < settings.min_samples) {
      comparison.verdict = "ambiguous";
      comparison.note = "cannot judge: " + std::to_string(b.samples_s.size()) + " and " +
                        std::to_string(n.samples_s.size()) + " samples, at least " +
                        std::to_string(settings.min_samples) + " a side";
    } else {
      const stats::Interval interval =
          stats::BootstrapRatioOfMedians(b.samples_s, n.samples_s, settings.confidence);
      comparison.interval = interval;
      const double up = 1 + settings.threshold, down = 1 - settings.threshold;
      if (interval.low > up) {
        comparison.verdict = "slower";
      } else if (interval.high < down) {
        comparison.verdict = "faster";
      } else if (interval.low >= down && interval.high <= up) {
        comparison.verdict = "same";
      } else {
        comparison.verdict = "ambiguous";
        char note[128];
        std::snprintf(note, sizeof(note), "%g%% interval %.3f–%.3f reaches past ±%g%%",
                      settings.confidence * 100, interval.low, interval.high,
                      settings.threshold * 100);
        comparison.note = note;
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
    if (!matched.count(b.key())) {
      CaseComparison comparison;
      comparison.case_key = b.key();
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
    const std::string a = base.Environment(key), b = next.Environment(key);
    if (a != b) differences.push_back(std::string(key) + ": " + a + " -> " + b);
  }
  return differences;
}

}  // namespace seqbench
