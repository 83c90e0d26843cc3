// cuda_probe.h against a CUDA LibTorch 2.x. Compiled only when Torch was found with CUDA
// (TORCH_CUDA_LIBRARIES); not yet compiled or run on a GPU machine (see ci/gpu/README.md).
#include <ATen/Context.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>

#include "harness/cuda_probe.h"

namespace seqbench::cuda_probe {
namespace {

c10::DeviceIndex IndexOf(torch::Device device) {
  return device.has_index() ? device.index() : c10::cuda::current_device();
}

// Element 0 of the allocator's StatArrays is the aggregate over all pools (StatType
// AGGREGATE); the enum moved namespaces across 2.x releases, its value did not.
constexpr size_t kAggregate = 0;

std::string Bool(bool value) { return value ? "true" : "false"; }

}  // namespace

bool Compiled() { return true; }

double TimeStep(const std::function<void()>& step, torch::Device device) {
  c10::cuda::CUDAGuard guard(IndexOf(device));
  at::cuda::CUDAEvent start(cudaEventDefault), stop(cudaEventDefault);
  start.record();
  step();
  stop.record();
  stop.synchronize();
  return static_cast<double>(start.elapsed_time(stop)) / 1e3;
}

void ResetPeak(torch::Device device) {
  // The caching allocator is set up by the first allocation on a device, and refuses
  // statistics calls before that ("Invalid device argument"): a training pipeline asks for
  // its peak before its first CUDA tensor. One small allocation sets it up.
  (void)torch::empty({1}, torch::TensorOptions().device(device));
  c10::cuda::CUDACachingAllocator::resetPeakStats(IndexOf(device));
}

void UseFullFloat32() { at::globalContext().setAllowTF32CuDNN(false); }

void ReleaseCachedMemory() { c10::cuda::CUDACachingAllocator::emptyCache(); }

int64_t AllocatedBytes(torch::Device device) {
  return c10::cuda::CUDACachingAllocator::getDeviceStats(IndexOf(device))
      .allocated_bytes[kAggregate]
      .current;
}

int64_t PeakBytes(torch::Device device) {
  return c10::cuda::CUDACachingAllocator::getDeviceStats(IndexOf(device))
      .allocated_bytes[kAggregate]
      .peak;
}

std::vector<std::pair<std::string, std::string>> Environment() {
  std::vector<std::pair<std::string, std::string>> entries;
  if (!torch::cuda::is_available()) return entries;
  const c10::DeviceIndex index = c10::cuda::current_device();
  const cudaDeviceProp* properties = at::cuda::getDeviceProperties(index);
  entries.emplace_back("gpu_name", properties->name);
  entries.emplace_back("gpu_sm_count", std::to_string(properties->multiProcessorCount));
  entries.emplace_back("gpu_memory_bytes", std::to_string(properties->totalGlobalMem));
  entries.emplace_back("gpu_compute_capability",
                       std::to_string(properties->major) + "." + std::to_string(properties->minor));
  int clock_khz = 0, memory_clock_khz = 0;
  if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, index) == cudaSuccess) {
    entries.emplace_back("gpu_max_clock_khz", std::to_string(clock_khz));
  }
  if (cudaDeviceGetAttribute(&memory_clock_khz, cudaDevAttrMemoryClockRate, index) == cudaSuccess) {
    entries.emplace_back("gpu_memory_clock_khz", std::to_string(memory_clock_khz));
  }
  int runtime = 0, driver = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) {
    entries.emplace_back("cuda_version", std::to_string(runtime));
  }
  if (cudaDriverGetVersion(&driver) == cudaSuccess) {
    entries.emplace_back("cuda_driver_version", std::to_string(driver));
  }
  entries.emplace_back("cudnn_version", std::to_string(at::detail::getCUDAHooks().versionCuDNN()));
  const at::Context& context = at::globalContext();
  entries.emplace_back("tf32_cublas", Bool(context.allowTF32CuBLAS()));
  entries.emplace_back("tf32_cudnn", Bool(context.allowTF32CuDNN()));
  entries.emplace_back("cudnn_enabled", Bool(context.userEnabledCuDNN()));
  entries.emplace_back("cudnn_benchmark", Bool(context.benchmarkCuDNN()));
  entries.emplace_back("cudnn_deterministic", Bool(context.deterministicCuDNN()));
  return entries;
}

}  // namespace seqbench::cuda_probe
