#include "harness/roofline.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <tuple>

#include "harness/cuda_probe.h"
#include "harness/runner.h"
#include "harness/threads.h"
#include "results/machine.h"
#include "results/records.h"

namespace seqbench {
namespace {

// The shortest time of `op` over `trials` batches of `per_batch` calls, per call. The
// minimum, as STREAM and BLAS benchmarks report it: the limit is what the machine can
// do, and every disturbance only adds time.
template <typename Op>
double BestSecondsPerCall(const torch::Device& device, int64_t per_batch, int trials, Op op) {
  double best = 1e300;
  for (int trial = 0; trial < trials; ++trial) {
    Synchronize(device);
    const auto begin = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < per_batch; ++i) op();
    Synchronize(device);
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - begin;
    best = std::min(best, elapsed.count() / static_cast<double>(per_batch));
  }
  return best;
}

// How many calls of `op` take about `target_s`, from one timed call after a warm-up.
template <typename Op>
int64_t CallsFor(const torch::Device& device, double target_s, Op op) {
  op();
  const double once = BestSecondsPerCall(device, 1, 1, op);
  return std::clamp<int64_t>(static_cast<int64_t>(target_s / std::max(once, 1e-9)), 1, 1000);
}

std::string Format(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.4g", value);
  return text;
}

}  // namespace

double GemmGflops(int64_t n, double seconds) {
  const double size = static_cast<double>(n);
  return 2.0 * size * size * size / seconds / 1e9;
}

double CopyGbs(int64_t bytes, double seconds) {
  return 2.0 * static_cast<double>(bytes) / seconds / 1e9;
}

MachineLimits MeasureMachineLimits(torch::Device device, torch::ScalarType dtype, int64_t threads) {
  SetThreads(threads);
  torch::NoGradGuard no_grad;
  const auto options = torch::TensorOptions().device(device).dtype(dtype);
  MachineLimits limits;
  {
    // n = 512 on a CPU: three operands of 1 MiB (float32) stay in cache, as the variants'
    // [D,4D] weights do. On a GPU, n = 4096 fills the SMs.
    const int64_t n = device.is_cuda() ? 4096 : 512;
    const auto a = torch::randn({n, n}, options), b = torch::randn({n, n}, options);
    auto c = torch::empty({n, n}, options);
    const auto product = [&]() { torch::mm_out(c, a, b); };
    const int64_t calls = CallsFor(device, 0.05, product);
    const double seconds = BestSecondsPerCall(device, calls, 5, product);
    limits.gemm_gflops = GemmGflops(n, seconds);
  }
  {
    // 128 MiB a side on a CPU, far beyond its caches; 1 GiB on a GPU.
    const int64_t bytes = device.is_cuda() ? (int64_t{1} << 30) : (int64_t{1} << 27);
    const auto source = torch::ones({bytes}, options.dtype(torch::kUInt8));
    auto destination = torch::empty({bytes}, options.dtype(torch::kUInt8));
    const auto copy = [&]() { destination.copy_(source); };
    const double seconds = BestSecondsPerCall(device, 1, 5, copy);
    limits.stream_gbs = CopyGbs(bytes, seconds);
  }
  return limits;
}

namespace {

// Each (device, dtype, threads) among `cases` that this process can run.
std::set<std::tuple<std::string, std::string, int64_t>> LimitConditions(
    const std::vector<CaseSpec>& cases) {
  std::set<std::tuple<std::string, std::string, int64_t>> conditions;
  for (const CaseSpec& spec : cases) {
    const Workload& w = spec.workload;
    if (w.device == "cuda" && !torch::cuda::is_available()) continue;
    conditions.emplace(w.device, w.dtype, w.threads);
  }
  return conditions;
}

// The entries MeasureLimitsFor gives for `cases`, as `run` holds them; empty when `run`
// lacks one.
std::vector<std::pair<std::string, std::string>> StoredLimits(const std::vector<CaseSpec>& cases,
                                                              const RunRecord& run) {
  std::vector<std::pair<std::string, std::string>> entries;
  std::set<std::string> keys;
  for (const auto& [device, dtype, threads] : LimitConditions(cases)) {
    keys.insert(PeakGemmKey(device, dtype, threads));
    keys.insert(PeakStreamKey(device, threads));
  }
  for (const std::string& key : keys) {
    const std::string value = run.Environment(key);
    if (value.empty()) return {};
    entries.emplace_back(key, value);
  }
  return entries;
}

}  // namespace

const std::vector<std::string>& LimitFingerprintKeys() {
  static const std::vector<std::string> keys = MachineKeysFor(MachineKeyUse::kLimits);
  return keys;
}

std::vector<std::pair<std::string, std::string>> LimitsFor(const std::vector<CaseSpec>& cases,
                                                           const Environment& now,
                                                           const std::vector<RunRecord>& earlier,
                                                           bool remeasure) {
  for (const RunRecord& run : remeasure ? std::vector<RunRecord>() : earlier) {
    const auto& keys = LimitFingerprintKeys();
    const bool same = std::all_of(keys.begin(), keys.end(), [&](const std::string& key) {
      return run.Environment(key) == now.Get(key);
    });
    // An A/B side's limits were measured while its partner worker measured too.
    if (!same || !run.Environment("ab_side").empty()) continue;
    auto entries = StoredLimits(cases, run);
    if (entries.empty()) continue;
    // The uuid too: merge renumbers runs.
    entries.emplace_back("machine_limits", "from run " + std::to_string(run.run_id) + " (" +
                                               run.uuid + ", same machine fingerprint)");
    return entries;
  }
  auto entries = MeasureLimitsFor(cases);
  entries.emplace_back("machine_limits", "measured");
  return entries;
}

std::vector<std::pair<std::string, std::string>> KeepHigherLimits(
    const RunRecord& run, const std::vector<std::pair<std::string, std::string>>& again) {
  std::vector<std::pair<std::string, std::string>> entries;
  std::string raised;
  for (const auto& [key, value] : again) {
    const std::string before = run.Environment(key);
    if (before.empty() || !(std::atof(value.c_str()) > std::atof(before.c_str()))) continue;
    entries.emplace_back(key, value);
    raised += (raised.empty() ? "" : ", ") + key + " " + before + " -> " + value;
  }
  if (!entries.empty()) {
    entries.emplace_back("machine_limits", run.Environment("machine_limits") +
                                               "; measured higher after the last case: " + raised);
  }
  return entries;
}

std::vector<std::pair<std::string, std::string>> MeasureLimitsFor(
    const std::vector<CaseSpec>& cases) {
  const auto conditions = LimitConditions(cases);
  std::vector<std::pair<std::string, std::string>> entries;
  std::set<std::pair<std::string, int64_t>> streams;
  for (const auto& [device_name, dtype_name, threads] : conditions) {
    const torch::Device device(device_name == "cuda" ? torch::kCUDA : torch::kCPU);
    const MachineLimits limits = MeasureMachineLimits(device, *ParseDtype(dtype_name), threads);
    if (device.is_cuda()) cuda_probe::ReleaseCachedMemory();
    entries.emplace_back(PeakGemmKey(device_name, dtype_name, threads), Format(limits.gemm_gflops));
    // Bandwidth does not depend on the dtype: one entry per device and thread count.
    if (streams.emplace(device_name, threads).second) {
      entries.emplace_back(PeakStreamKey(device_name, threads), Format(limits.stream_gbs));
    }
  }
  return entries;
}

}  // namespace seqbench
