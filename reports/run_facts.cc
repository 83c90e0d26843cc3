#include "reports/run_facts.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "base/text.h"
#include "reports/format.h"
#include "reports/hardware.h"
#include "stats/statistics.h"

namespace seqbench {

std::string ShapeCell(const CaseRecord& c) {
  const Workload& w = c.workload();
  const std::string model = "L=" + std::to_string(w.layers) + " D=" + std::to_string(w.width) + " ";
  if (w.mode == "generate") {
    return model + "B=" + std::to_string(w.batch) + " P=" + std::to_string(w.seq_len) +
           " N=" + std::to_string(w.generate_tokens);
  }
  std::string text = model + "B=" + std::to_string(w.batch) + " T=" + std::to_string(w.seq_len);
  if (w.min_len > 0) text += " (min " + std::to_string(w.min_len) + ")";
  return text;
}

std::optional<double> MedianThroughput(const CaseRecord& c) {
  if (c.samples_s.empty() || c.tokens_per_step <= 0) return std::nullopt;
  const double median = stats::Median(c.samples_s);
  if (!(median > 0)) return std::nullopt;
  return c.tokens_per_step / median;
}

std::optional<double> Speedup(const CaseRecord& candidate, const CaseRecord& reference) {
  const auto candidate_rate = MedianThroughput(candidate);
  const auto reference_rate = MedianThroughput(reference);
  if (!candidate_rate || !reference_rate) return std::nullopt;
  return *candidate_rate / *reference_rate;
}

std::optional<double> HardwarePeakGflops(const RunRecord& run, const Workload& w) {
  if (w.device == "cuda") {
    return GpuPeakGflops({run.Environment("gpu_compute_capability"),
                          std::atoll(run.Environment("gpu_sm_count").c_str()),
                          std::atof(run.Environment("gpu_max_clock_khz").c_str()) / 1000, w.dtype,
                          run.Environment("tf32_cublas") == "true"});
  }
  if (w.device != "cpu") return std::nullopt;
  const int64_t physical = std::atoll(run.Environment("cpu_physical_cores").c_str());
  const std::string flags = run.Environment("cpu_simd");
  return CpuPeakGflops({flags, std::atof(run.Environment("cpu_mhz").c_str()),
                        physical > 0 ? std::min(w.threads, physical) : w.threads, w.dtype});
}

std::optional<RooflinePoint> Roofline(const RunRecord& run, const CaseRecord& c) {
  const auto flops = c.MetricValue("step_flops");
  const auto bytes = c.MetricValue("step_bytes");
  if (!flops || !bytes || c.samples_s.empty()) return std::nullopt;
  const double median = stats::Median(c.samples_s);
  if (!(median > 0)) return std::nullopt;
  RooflinePoint point;
  point.gflops_per_s = *flops / median / 1e9;
  point.gbytes_per_s = *bytes / median / 1e9;
  const Workload& w = c.workload();
  const double peak_gflops =
      std::atof(run.Environment(PeakGemmKey(w.device, w.dtype, w.threads)).c_str());
  const double peak_gbs = std::atof(run.Environment(PeakStreamKey(w.device, w.threads)).c_str());
  if (peak_gflops > 0 && peak_gbs > 0) {
    const double compute_s = *flops / (peak_gflops * 1e9);
    const double memory_s = *bytes / (peak_gbs * 1e9);
    point.bound = compute_s >= memory_s ? "compute" : "memory";
    point.percent_of_peak = 100 * std::max(compute_s, memory_s) / median;
  }
  const auto gemm_flops = c.MetricValue("step_gemm_flops");
  if (gemm_flops && *gemm_flops > 0 && peak_gflops > 0) {
    point.times_gemm_floor = median / (*gemm_flops / (peak_gflops * 1e9));
  }
  // A measured GEMM above the theoretical peak means the recorded clock understates the
  // cores (a VM's nominal MHz under turbo): the peak is then at least the measured rate,
  // which the figure uses instead (RunWarnings says so).
  if (auto hardware_gflops = HardwarePeakGflops(run, w)) {
    if (w.device == "cpu" && peak_gflops > *hardware_gflops) hardware_gflops = peak_gflops;
    const double compute_s = *flops / (*hardware_gflops * 1e9);
    const double memory_s = peak_gbs > 0 ? *bytes / (peak_gbs * 1e9) : 0;
    point.percent_of_hardware_peak = 100 * std::max(compute_s, memory_s) / median;
  }
  return point;
}

TimedShare TimedShareOf(const RunRecord& run, const std::vector<CaseRecord>& cases) {
  TimedShare total;
  for (const CaseRecord& c : cases) {
    const int64_t steps_per_sample = run.kind == kRunKindTraining ? 1 : c.iterations;
    for (const double seconds : c.samples_s) total.timed_s += seconds * steps_per_sample;
    total.wall_s += c.wall_s;
  }
  return total;
}

namespace {

// The warning for a run whose measured GEMM rate, on a CPU case, exceeds the theoretical
// peak at the clock it recorded (the first such case's numbers); "" when none does.
std::string ClockWarning(const RunRecord& run, const std::vector<CaseRecord>& cases) {
  for (const CaseRecord& c : cases) {
    const Workload& w = c.workload();
    if (w.device != "cpu") continue;
    const double measured =
        std::atof(run.Environment(PeakGemmKey(w.device, w.dtype, w.threads)).c_str());
    const auto theoretical = HardwarePeakGflops(run, w);
    if (!theoretical || !(measured > *theoretical)) continue;
    return "the recorded clock (cpu_mhz " + run.Environment("cpu_mhz") +
           ") understates this CPU: the GEMM rate measured at " + std::to_string(w.threads) +
           " thread(s), " + FormatSignificant(measured, 4) + " GFLOP/s " + w.dtype +
           ", is above the " + FormatSignificant(*theoretical, 4) +
           " GFLOP/s its vector units peak at that clock, so % of HW peak is taken against "
           "the measured rate (the cores run faster than recorded, as a VM's nominal MHz "
           "under turbo does)";
  }
  return "";
}

}  // namespace

std::vector<std::string> RunWarnings(const RunRecord& run, const std::vector<CaseRecord>& cases) {
  std::vector<std::string> warnings = run.warnings;
  // The BLAS kernels matter where a case ran on the CPU (or before any case is stored).
  const bool on_cpu = cases.empty() ||
                      std::any_of(cases.begin(), cases.end(),
                                  [](const CaseRecord& c) { return c.workload().device == "cpu"; });
  const std::string blas =
      on_cpu ? BlasCoreWarning(run.Environment("blas_core"), run.Environment("cpu_simd"),
                               run.Environment("env_openblas_coretype"))
             : "";
  if (!blas.empty()) warnings.push_back(blas);
  const std::string pool =
      on_cpu ? BlasPoolWarning(run.Environment("blas_config"), run.Environment("aten_parallel"),
                               run.Environment("blas_threads"))
             : "";
  if (!pool.empty()) warnings.push_back(pool);
  if (const std::string clock = ClockWarning(run, cases); !clock.empty()) {
    warnings.push_back(clock);
  }
  // A training pipeline's samples are steps of different batches, spread by design.
  if (run.kind == kRunKindTraining) return warnings;
  for (const CaseRecord& c : cases) {
    if (c.samples_s.empty()) continue;  // failed or skipped: its status says so
    const std::string name = c.name() + " " + ShapeCell(c) + " " + c.workload().mode;
    const stats::Summary summary = stats::Summarize(c.samples_s);
    if (summary.count < stats::kMinBootstrapSamples) {
      warnings.push_back(
          name + ": " + std::to_string(summary.count) + " sample(s), fewer than the " +
          std::to_string(stats::kMinBootstrapSamples) + " a verdict needs: raise repetitions");
      continue;
    }
    if (run.settings.max_noise > 0) {
      const auto noise = stats::MedianRelativeHalfWidth(c.samples_s);
      if (!noise || *noise > run.settings.max_noise) {
        warnings.push_back(name + ": did not reach --max-noise " +
                           FormatSignificant(100 * run.settings.max_noise, 3) + "% within " +
                           FormatSignificant(run.settings.max_time_s, 3) +
                           " s: the median's interval is ±" +
                           (noise ? FormatSignificant(100 * *noise, 3) + "%" : "unknown") +
                           " after " + std::to_string(summary.count) + " samples");
      }
    }
    const double spread = summary.RelativeIqr();
    if (spread <= stats::kNoisyRelativeIqr) continue;
    const bool very = spread > stats::kVeryNoisyRelativeIqr;
    warnings.push_back(
        name + ": " + (very ? "very noisy" : "noisy") + ", IQR/median " +
        FormatSignificant(100 * spread, 3) + "% (over " +
        FormatSignificant(100 * (very ? stats::kVeryNoisyRelativeIqr : stats::kNoisyRelativeIqr),
                          2) +
        "%), " + std::to_string(summary.outliers) + " Tukey outlier(s) in " +
        std::to_string(summary.count) + " samples");
  }
  return warnings;
}

}  // namespace seqbench
