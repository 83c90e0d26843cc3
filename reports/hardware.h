// The hardware behind a run's numbers, judged from what the run recorded: the CPU's
// vector extensions (environment entry cpu_simd), its clock (cpu_mhz), and the kernels
// OpenBLAS chose (blas_core, env_openblas_coretype). Two things follow from them:
//   - the CPU's theoretical floating-point peak, so that a case shows "% of HW peak"
//     beside its "% of BLAS peak" (the measured GEMM rate, which is only as fast as the
//     kernel that ran it);
//   - a warning when OpenBLAS runs kernels written for an older vector extension than the
//     CPU has: Debian 12's OpenBLAS 0.3.21 does not recognise recent Intel server cores
//     and falls back to its Prescott (SSE3) kernels, at a third or less of the AVX-512
//     rate, so "% of BLAS peak" there is measured against a slow kernel.
//
// Thread-safety: pure functions over immutable tables; safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace seqbench {

// x86-64's vector extensions as levels, each a superset of the one before.
enum class SimdLevel { kSse = 0, kAvx = 1, kAvx2Fma = 2, kAvx512 = 3 };

// "SSE", "AVX", "AVX2+FMA", "AVX-512".
std::string_view SimdLevelName(SimdLevel level);

// The widest level among /proc/cpuinfo-style flags in any order ("sse2 sse3 avx fma avx2
// avx512f"); nullopt when none of x86's is among them (another architecture, or a run
// stored before cpu_simd was recorded).
std::optional<SimdLevel> CpuSimdLevel(std::string_view flags);

// The widest level OpenBLAS's kernels for `core` use (openblas_get_corename's name, any
// case: "Prescott" SSE, "Sandybridge" AVX, "Haswell"/"Zen" AVX2+FMA, "SkylakeX" AVX-512);
// nullopt for a name the table lacks, "not OpenBLAS" included.
std::optional<SimdLevel> BlasCoreLevel(std::string_view core);

// The warning for a run whose OpenBLAS keeps a thread pool of its own (its pthread build:
// `blas_config` without USE_OPENMP) beside ATen's OpenMP pool (`aten_parallel`), with more
// than one BLAS thread: between GEMMs its idle threads spin on the cores the OpenMP workers
// need. "" otherwise, or when any of the three is unknown.
std::string BlasPoolWarning(std::string_view blas_config, std::string_view aten_parallel,
                            std::string_view blas_threads);

// The warning for a run whose OpenBLAS core is below its CPU's level, naming the core,
// the CPU's extension, whether OPENBLAS_CORETYPE chose it (`coretype_variable`: its value,
// or "unset"/"") and the core that would match; "" when they match or either is unknown.
std::string BlasCoreWarning(std::string_view blas_core, std::string_view cpu_flags,
                            std::string_view coretype_variable);

// What the theoretical peak is computed from.
struct CpuPeakInput {
  std::string_view simd_flags;  // as CpuSimdLevel takes them
  double mhz = 0;               // the clock the run recorded (google/benchmark's CPUInfo)
  int64_t cores = 0;            // cores the case computes on: its threads, at most the cores
  std::string_view dtype;       // "float32" or "float64"; others have no peak here
};

// FLOPs per cycle per core at `level` in float32, under these assumptions: AVX-512 and
// AVX2 cores issue two fused multiply-adds a cycle (two FMA ports, as Intel's server cores
// since Skylake-SP and AMD's since Zen 2 do; a part with one 512-bit port reaches half);
// AVX and SSE cores one add and one multiply a cycle. So 2·16·2 = 64 (AVX-512),
// 2·8·2 = 32 (AVX2+FMA), 8 + 8 = 16 (AVX), 4 + 4 = 8 (SSE). float64 has half the lanes.
double FlopsPerCycle(SimdLevel level);

// cores × clock × FlopsPerCycle, / 1e9, halved for float64; nullopt when the flags have
// no x86 level, the clock or cores are unknown (≤ 0), or the dtype is neither float type.
// Turbo clocks above the recorded one can take a case past 100%.
std::optional<double> CpuPeakGflops(const CpuPeakInput& input);

// What a GPU's theoretical peak is computed from: the device facts every CUDA run records
// (gpu_compute_capability, gpu_sm_count, gpu_max_clock_khz, tf32_cublas).
struct GpuPeakInput {
  std::string_view compute_capability;  // "9.0"
  int64_t sm_count = 0;                 // streaming multiprocessors
  double mhz = 0;                       // the SMs' maximum clock
  std::string_view dtype;               // "float32", "float64", "bfloat16" or "float16"
  bool tf32 = false;                    // float32 products on TF32 tensor cores (cuBLAS's flag)
};

// Dense FLOPs per cycle per SM for a compute capability and dtype, from NVIDIA's
// architecture whitepapers (V100 7.0, A100 8.0, H100/H200 9.0): 2 x the FMA units of the
// CUDA cores for float32 (TF32 off, or a part without TF32), the tensor cores' dense rate
// for TF32, bfloat16, float16 and, from 8.0 on, float64 (cuBLAS's DGEMM runs there).
// 0 for a capability or dtype the table lacks (8.6/8.9 parts differ by product: not
// guessed; bfloat16 on 7.0).
double GpuFlopsPerCycle(std::string_view compute_capability, std::string_view dtype, bool tf32);

// SMs x clock x GpuFlopsPerCycle / 1e9; nullopt when any input is unknown. NVIDIA quotes
// the tensor-core rates at a lower clock than the maximum (H100 SXM: 989 TFLOP/s bf16 at
// 1830 MHz), so at the recorded maximum clock this peak is a little above the datasheet's.
std::optional<double> GpuPeakGflops(const GpuPeakInput& input);

}  // namespace seqbench
