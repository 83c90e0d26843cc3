// What a stored run's numbers mean, defined once for every renderer, README section,
// comparison and check: the speedup, a case's median throughput and its place on the
// roofline, the timed share of a run's wall time, and the warnings a reader must see
// first. Renderers (reports/report.h) only lay these out.
//
// Thread-safety: pure functions over their arguments.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "results/records.h"

namespace seqbench {

// What a reader of the run's numbers must know first: the run's own warnings (CPU frequency
// governor, debug build, ...), then one line per timed case whose samples cannot carry a
// verdict: IQR / median above stats::kNoisyRelativeIqr ("noisy") or
// stats::kVeryNoisyRelativeIqr ("very noisy"), with its Tukey outliers, or fewer samples than
// stats::kMinBootstrapSamples. From the stored samples, so older runs get them too. `show`,
// `report` and `check` print them.
std::vector<std::string> RunWarnings(const RunRecord& run, const std::vector<CaseRecord>& cases);

// How much of the cases' wall time (wall_s: checks, warmup, the memory pass and the float64
// reference included) the timed steps themselves took: every sample times the steps it is
// the mean of (a benchmark case's iterations; one for a training step).
struct TimedShare {
  double timed_s = 0;
  double wall_s = 0;
  double share() const { return wall_s > 0 ? timed_s / wall_s : 0; }
};
TimedShare TimedShareOf(const RunRecord& run, const std::vector<CaseRecord>& cases);

// A case's workload in a table cell: "L=2 D=64 B=8 T=128 (min 64)", or P= and N= for
// generation.
std::string ShapeCell(const CaseRecord& c);

// The one definition of speedup in seqbench (README, report, check, compare, plot):
//
//   speedup = median throughput of `candidate` / median throughput of `reference`,
//   median throughput = tokens per step / median seconds per step.
//
// On the same workload (same tokens per step) this is the ratio of median step times,
// reference / candidate. nullopt when either case has no samples or no tokens.
std::optional<double> Speedup(const CaseRecord& candidate, const CaseRecord& reference);
// Tokens per step / median seconds per step; nullopt without samples or tokens.
std::optional<double> MedianThroughput(const CaseRecord& c);

// A case on its run's roofline: the step's FLOPs and compulsory bytes (stored with the
// case) over its median step time, and the share of the limit that binds it:
//
//   % of peak = max(FLOPs / peak GEMM rate, bytes / peak bandwidth) / median step time,
//
// with the peaks the run measured at the case's device, dtype and thread count. 100%
// means the step ran as fast as the machine's measured limits allow. The measured GEMM
// rate is only as fast as the BLAS kernel that ran (reports/hardware.h), so beside it:
//
//   % of HW peak = max(FLOPs / the device's theoretical peak, bytes / peak bandwidth)
//                  / median step time,
//
// the theoretical peak from the run's recorded vector extensions, clock and the case's
// cores on the CPU, from the recorded compute capability, SMs and clock on CUDA
// (HardwarePeakGflops; reports/hardware.h has both tables).
struct RooflinePoint {
  double gflops_per_s = 0;
  double gbytes_per_s = 0;
  std::optional<double> percent_of_peak;  // nullopt when the run stored no peaks
  std::string bound;                      // "compute" or "memory": the binding limit
  // nullopt for a run that recorded no device facts (cpu_simd/cpu_mhz on the CPU,
  // gpu_compute_capability/gpu_sm_count/gpu_max_clock_khz on CUDA) or a GPU the table lacks,
  // Where the measured GEMM rate exceeds that peak (the recorded clock understates the
  // cores; RunWarnings says so), the peak is taken as the measured rate.
  std::optional<double> percent_of_hardware_peak;
  // The median step over its GEMM floor, the time its matrix products take at the GEMM
  // rate the run measured for the case's device, dtype and threads:
  //   × GEMM floor = median step time / (step_gemm_flops / peak GEMM rate).
  // 1 is a step that is nothing but its products at the BLAS's own rate; padding counts
  // where the variant computes it. nullopt for a run without the rate or a case stored
  // before step_gemm_flops.
  std::optional<double> times_gemm_floor;
};
// The device's theoretical GFLOP/s for a case of `run` on `w`: CpuPeakGflops over the
// threads it used (at most the physical cores), or GpuPeakGflops for a CUDA case; nullopt
// for another device or a run without the facts.
std::optional<double> HardwarePeakGflops(const RunRecord& run, const Workload& w);
// nullopt for a case without samples or a stored cost.
std::optional<RooflinePoint> Roofline(const RunRecord& run, const CaseRecord& c);

}  // namespace seqbench
