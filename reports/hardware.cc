#include "reports/hardware.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

namespace seqbench {
namespace {

std::string Lowercase(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower;
}

// OpenBLAS's x86 core names (driver/others/dynamic.c's corename table, lowercased) and
// the widest extension each one's kernels use.
const std::vector<std::pair<std::string_view, SimdLevel>>& CoreTable() {
  static const std::vector<std::pair<std::string_view, SimdLevel>> table = {
      {"katmai", SimdLevel::kSse},
      {"coppermine", SimdLevel::kSse},
      {"northwood", SimdLevel::kSse},
      {"prescott", SimdLevel::kSse},
      {"banias", SimdLevel::kSse},
      {"core2", SimdLevel::kSse},
      {"penryn", SimdLevel::kSse},
      {"dunnington", SimdLevel::kSse},
      {"nehalem", SimdLevel::kSse},
      {"atom", SimdLevel::kSse},
      {"opteron", SimdLevel::kSse},
      {"barcelona", SimdLevel::kSse},
      {"bobcat", SimdLevel::kSse},
      {"sandybridge", SimdLevel::kAvx},
      {"bulldozer", SimdLevel::kAvx},
      {"piledriver", SimdLevel::kAvx},
      {"steamroller", SimdLevel::kAvx},
      {"excavator", SimdLevel::kAvx},
      {"haswell", SimdLevel::kAvx2Fma},
      {"zen", SimdLevel::kAvx2Fma},
      {"skylakex", SimdLevel::kAvx512},
      {"cooperlake", SimdLevel::kAvx512},
      {"sapphirerapids", SimdLevel::kAvx512},
  };
  return table;
}

// What each level means, in SimdLevel's order: its name, the OpenBLAS core whose kernels
// match it (what the warning suggests for OPENBLAS_CORETYPE), and its float32 FLOPs a
// cycle per core (hardware.h states the assumptions).
struct LevelFacts {
  std::string_view name;
  std::string_view matching_core;
  double flops_per_cycle;
};

const LevelFacts& FactsOf(SimdLevel level) {
  static const LevelFacts facts[] = {
      {"SSE", "Prescott", 4 + 4},           // an add and a multiply of 4 lanes
      {"AVX", "Sandybridge", 8 + 8},        // an add and a multiply of 8 lanes
      {"AVX2+FMA", "Haswell", 2 * 8 * 2},   // two FMA ports of 8 lanes
      {"AVX-512", "SkylakeX", 2 * 16 * 2},  // two FMA ports of 16 lanes
  };
  return facts[static_cast<int>(level)];
}

}  // namespace

std::string_view SimdLevelName(SimdLevel level) { return FactsOf(level).name; }

std::optional<SimdLevel> CpuSimdLevel(std::string_view flags) {
  std::istringstream words{std::string(flags)};
  std::set<std::string> present;
  for (std::string word; words >> word;) present.insert(Lowercase(word));
  const auto has = [&](const char* flag) { return present.count(flag) > 0; };
  if (has("avx512f")) return SimdLevel::kAvx512;
  if (has("avx2") && has("fma")) return SimdLevel::kAvx2Fma;
  if (has("avx")) return SimdLevel::kAvx;
  for (const char* sse : {"sse", "sse2", "sse3", "pni", "ssse3", "sse4_1", "sse4_2"}) {
    if (has(sse)) return SimdLevel::kSse;
  }
  return std::nullopt;
}

std::optional<SimdLevel> BlasCoreLevel(std::string_view core) {
  const std::string name = Lowercase(core);
  for (const auto& [known, level] : CoreTable()) {
    if (name == known) return level;
  }
  return std::nullopt;
}

std::string BlasCoreWarning(std::string_view blas_core, std::string_view cpu_flags,
                            std::string_view coretype_variable) {
  const auto core = BlasCoreLevel(blas_core);
  const auto cpu = CpuSimdLevel(cpu_flags);
  if (!core || !cpu || *core >= *cpu) return "";
  const bool chosen = !coretype_variable.empty() && coretype_variable != "unset";
  return "OpenBLAS ran its " + std::string(blas_core) + " kernels (" +
         std::string(SimdLevelName(*core)) + ") on a CPU with " + std::string(SimdLevelName(*cpu)) +
         " (" +
         (chosen ? "OPENBLAS_CORETYPE=" + std::string(coretype_variable) + " chose them"
                 : std::string("OpenBLAS's own choice: OPENBLAS_CORETYPE unset")) +
         "): GEMMs ran slower than this CPU allows, and % of BLAS peak is relative to those "
         "kernels; OPENBLAS_CORETYPE=" +
         std::string(FactsOf(*cpu).matching_core) +
         " selects kernels for its extension (seqbench never sets it; a run records it, and "
         "checks every case either way)";
}

std::string BlasPoolWarning(std::string_view blas_config, std::string_view aten_parallel,
                            std::string_view blas_threads) {
  const bool openblas = blas_config.rfind("OpenBLAS", 0) == 0;
  const bool own_pool = blas_config.find("USE_OPENMP") == std::string_view::npos;
  const bool threaded = !blas_threads.empty() && blas_threads != "1" && blas_threads != "unknown";
  if (!openblas || !own_pool || aten_parallel != "OpenMP" || !threaded) return "";
  return "OpenBLAS ran on a thread pool of its own (its pthread build) beside ATen's OpenMP "
         "pool: between GEMMs its idle threads spin on the cores the OpenMP workers need, and "
         "multi-threaded steps ran slower than this machine allows; Debian's "
         "libopenblas0-openmp shares the one pool (ci/install-deps selects it)";
}

double FlopsPerCycle(SimdLevel level) { return FactsOf(level).flops_per_cycle; }

std::optional<double> CpuPeakGflops(const CpuPeakInput& input) {
  const auto level = CpuSimdLevel(input.simd_flags);
  if (!level || !(input.mhz > 0) || input.cores <= 0) return std::nullopt;
  double lanes_factor = 0;
  if (input.dtype == "float32") lanes_factor = 1;
  if (input.dtype == "float64") lanes_factor = 0.5;
  if (lanes_factor == 0) return std::nullopt;
  return static_cast<double>(input.cores) * input.mhz * 1e6 * FlopsPerCycle(*level) * lanes_factor /
         1e9;
}

namespace {

// One row per compute capability: dense FLOPs a cycle per SM.
struct GpuRates {
  std::string_view capability;
  double float32, float64, tf32, bfloat16, float16;
};

const std::vector<GpuRates>& GpuRateTable() {
  // float64 is the rate cuBLAS's DGEMM reaches: the FP64 tensor cores from 8.0 on.
  static const std::vector<GpuRates> table = {
      // V100: 64 FP32 and 32 FP64 FMA units, 8 tensor cores of 64 fp16 FMAs per SM; no TF32.
      {"7.0", 128, 64, 0, 0, 1024},
      // A100: 64 FP32 FMA units; FP64 tensor cores 19.5 TF; TF32/bf16 156/312 TF.
      {"8.0", 128, 128, 1024, 2048, 2048},
      // H100/H200: 128 FP32 FMA units; FP64 tensor cores 67 TF; fourth-generation tensor cores.
      {"9.0", 256, 256, 2048, 4096, 4096},
  };
  return table;
}

}  // namespace

double GpuFlopsPerCycle(std::string_view compute_capability, std::string_view dtype, bool tf32) {
  for (const GpuRates& rates : GpuRateTable()) {
    if (rates.capability != compute_capability) continue;
    // A part without TF32 (7.0) runs float32 on its CUDA cores whatever the flag says.
    if (dtype == "float32") return tf32 && rates.tf32 > 0 ? rates.tf32 : rates.float32;
    if (dtype == "float64") return rates.float64;
    if (dtype == "bfloat16") return rates.bfloat16;
    if (dtype == "float16") return rates.float16;
    return 0;
  }
  return 0;
}

std::optional<double> GpuPeakGflops(const GpuPeakInput& input) {
  const double per_cycle = GpuFlopsPerCycle(input.compute_capability, input.dtype, input.tf32);
  if (!(per_cycle > 0) || input.sm_count <= 0 || !(input.mhz > 0)) return std::nullopt;
  return static_cast<double>(input.sm_count) * input.mhz * 1e6 * per_cycle / 1e9;
}

}  // namespace seqbench
