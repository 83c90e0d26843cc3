// The O(T) check of a variant's train step, without a clock: the bytes one step allocates
// (the counting CPU allocator sees every tensor) at T, 2T and 4T. What a step allocates
// once whatever T is (the embedding's and head's gradients, V×D each) cancels in the
// differences: (bytes(4T) − bytes(2T)) / (bytes(2T) − bytes(T)) is 2 for work linear in T
// and 4 for quadratic work, such as a per-step select()/narrow() in an autograd'ed time
// loop, whose backward scatters into a zero buffer the size of the whole input at every
// step. ctest holds every built-in variant that claims O(T) to it (tests/scaling_test.cc)
// and `seqbench verify` every variant it checks, plugins included, at any model size.
//
// Thread-safety: installs the process-wide counting allocator and reads its counters: one
// check at a time, with no other thread allocating.
#pragma once

#include <cstdint>
#include <string>

#include "variants/core/variant.h"

namespace seqbench {

// The bound on the growth ratio: 2 for linear work, plus slack for chunked evaluations
// whose chunk count rounds up.
inline constexpr double kLinearBytesRatio = 2.3;
// Below this the count did not see the step's work grow with T (a broken measurement,
// not a fast variant).
inline constexpr double kGrowingBytesRatio = 1.5;
// The shortest T of the check: long enough that chunk edges do not dominate, short
// enough (with 4T) for a plugin author's machine.
inline constexpr int64_t kScalingSteps = 64;

struct ScalingCheck {
  int64_t steps = 0;             // T; the others are 2T and 4T
  int64_t bytes[3] = {0, 0, 0};  // one train step's allocations at T, 2T, 4T
  // (bytes(4T) − bytes(2T)) / (bytes(2T) − bytes(T)); 0 when the bytes did not grow.
  double ratio() const {
    const double first = static_cast<double>(bytes[1] - bytes[0]);
    return first > 0 ? static_cast<double>(bytes[2] - bytes[1]) / first : 0;
  }
  bool linear() const { return ratio() >= kGrowingBytesRatio && ratio() <= kLinearBytesRatio; }
};

// Train steps of variant `key` on the CPU with `weights`, a batch of two unpadded
// sequences of length `steps`, 2·steps and 4·steps: the bytes of one step at each,
// measured after an untimed step at that length (so that nothing allocated once is
// counted), each length on a fresh variant.
ScalingCheck CheckTrainScaling(const std::string& key, const ModelConfig& config,
                               const ParameterSet& weights, torch::ScalarType dtype,
                               int64_t steps = kScalingSteps);

}  // namespace seqbench
