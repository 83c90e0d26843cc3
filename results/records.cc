#include "results/records.h"

namespace seqbench {

std::string PeakGemmKey(const std::string& device, const std::string& dtype, int64_t threads) {
  return "peak_gemm_gflops." + device + "." + dtype + ".t" + std::to_string(threads);
}

std::string PeakStreamKey(const std::string& device, int64_t threads) {
  return "peak_stream_gbs." + device + ".t" + std::to_string(threads);
}

std::string RunRecord::Environment(const std::string& key) const {
  for (const auto& [name, value] : environment) {
    if (name == key) return value;
  }
  return "";
}

std::optional<double> CaseRecord::MetricValue(const std::string& name) const {
  for (const Metric& metric : metrics) {
    if (metric.name == name) return metric.value;
  }
  return std::nullopt;
}

}  // namespace seqbench
