// The CPU-only stand-in for cuda_probe.h: this LibTorch has no CUDA, so no case reaches
// these functions (CUDA cases are skipped before timing); reaching one is a bug.
#include "harness/cuda_probe.h"

namespace seqbench::cuda_probe {

bool Compiled() { return false; }

double TimeStep(const std::function<void()>&, torch::Device) {
  TORCH_CHECK(false, "seqbench was built without CUDA LibTorch: no CUDA timing");
}

void ResetPeak(torch::Device) {}
void ReleaseCachedMemory() {}
void UseFullFloat32() {}
int64_t AllocatedBytes(torch::Device) { return -1; }
int64_t PeakBytes(torch::Device) { return -1; }

std::vector<std::pair<std::string, std::string>> Environment() { return {}; }

}  // namespace seqbench::cuda_probe
