// What the harness needs from a CUDA build of LibTorch, behind one interface: CUDA-event
// timing of a step, the caching allocator's peak per case, and the device's properties and
// library settings for the run's environment. cuda_probe_cuda.cc implements it against a
// CUDA LibTorch 2.x; cuda_probe_none.cc stands in on CPU-only builds (Debian's 1.13),
// which therefore compile without any CUDA header.
//
// Thread-safety: call from the thread that runs the case.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace seqbench::cuda_probe {

// Whether this binary was built against a CUDA LibTorch.
bool Compiled();

// Why a case or pipeline on CUDA is skipped where torch::cuda::is_available() is false.
inline constexpr char kUnavailableReason[] = "CUDA is not available to this build or machine";

// Seconds of one step on `device`, between CUDA events recorded on the current stream
// before and after it (the host waits for the second one).
double TimeStep(const std::function<void()>& step, torch::Device device);

// The caching allocator's statistics for `device`: ResetPeak() starts a new peak from
// what is allocated now.
void ResetPeak(torch::Device device);
int64_t AllocatedBytes(torch::Device device);
int64_t PeakBytes(torch::Device device);

// Float32 means float32: TF32 off for cuDNN as it is for cuBLAS (LibTorch's defaults are
// on and off), so that a library variant (cuDNN's LSTM) is not timed and checked at a
// lower precision than the hand-written ones. seqbench calls it once at start-up, before
// any command records its settings or runs a case.
void UseFullFloat32();

// Hands the caching allocator's unused blocks back to the driver. The harness calls it
// after each CUDA case and after measuring the machine's limits, so that the next case, a
// child process under --isolate, and the cuBLAS/cuDNN workspaces (allocated outside the
// cache) find the memory free even after a case that ran out of it.
void ReleaseCachedMemory();

// GPU name, SMs, memory, compute capability, clock; CUDA runtime, driver and cuDNN
// versions; TF32 and cuDNN settings. Empty when no CUDA device is usable.
std::vector<std::pair<std::string, std::string>> Environment();

}  // namespace seqbench::cuda_probe
