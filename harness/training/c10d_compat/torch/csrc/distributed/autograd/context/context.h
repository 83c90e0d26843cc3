// Stands in for LibTorch's distributed-autograd context header, which Debian 12's
// libtorch-dev 1.13 leaves out although c10d/reducer.hpp includes it. reducer.hpp needs
// two names from it: the GradCallback type (a static_assert compares it with its own) and
// ContextPtr (held in a shared_ptr member, whose layout does not depend on the pointee).
// seqbench never uses distributed autograd (RPC), so no definition of the context class is
// needed; libtorch_cpu keeps its own.
//
// Thread-safety: declarations only.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>

namespace torch {
namespace distributed {
namespace autograd {

class DistAutogradContext {
 public:
  using GradCallback = std::function<bool(at::Tensor&)>;
};
using ContextPtr = std::shared_ptr<DistAutogradContext>;

}  // namespace autograd
}  // namespace distributed
}  // namespace torch
