// The O(T) check of a variant's train step, without a clock: the bytes one step allocates
// (the counting CPU allocator sees every tensor) at T and at 2T. Linear work allocates
// about twice the bytes at 2T; a per-step select()/narrow() in an autograd'ed time loop
// makes each step's backward scatter into a zero buffer the size of the whole input,
// O(T²) bytes, a ratio near 4. ctest holds every built-in variant that claims O(T) to it
// (tests/scaling_test.cc) and `seqbench verify` every variant it checks, plugins included.
//
// Thread-safety: installs the process-wide counting allocator and reads its counters: one
// check at a time, with no other thread allocating.
#pragma once

#include <cstdint>
#include <string>

#include "variants/core/variant.h"

namespace seqbench {

// The bound on bytes(2T) / bytes(T): 2 for linear work, plus slack for fixed costs.
inline constexpr double kLinearBytesRatio = 2.3;
// Below this the count did not see the step's work grow with T (a broken measurement,
// not a fast variant).
inline constexpr double kGrowingBytesRatio = 1.5;
// The T the check starts from: long enough that fixed costs (chunk edges, one-off
// buffers) do not dominate, short enough for a plugin author's machine.
inline constexpr int64_t kScalingSteps = 96;

struct ScalingCheck {
  int64_t steps = 0;  // T; the long run is 2T
  int64_t short_bytes = 0, long_bytes = 0;
  double ratio() const {
    return short_bytes > 0 ? static_cast<double>(long_bytes) / static_cast<double>(short_bytes) : 0;
  }
  bool linear() const {
    return short_bytes > 0 && ratio() <= kLinearBytesRatio && ratio() >= kGrowingBytesRatio;
  }
};

// Train steps of variant `key` on the CPU with `weights`, a batch of two unpadded
// sequences of length `steps`, then 2·steps: the bytes of one step at each, measured
// after an untimed step at that length (so that nothing allocated once is counted).
ScalingCheck CheckTrainScaling(const std::string& key, const ModelConfig& config,
                               const ParameterSet& weights, torch::ScalarType dtype,
                               int64_t steps = kScalingSteps);

}  // namespace seqbench
