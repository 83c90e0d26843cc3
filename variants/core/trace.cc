#include "variants/core/trace.h"

#include <atomic>

#if SEQBENCH_WITH_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace seqbench {
namespace {
std::atomic<bool> tracing{false};
}  // namespace

bool TracingCompiledIn() {
#if SEQBENCH_WITH_NVTX
  return true;
#else
  return false;
#endif
}

void SetTracing(bool enabled) { tracing.store(enabled && TracingCompiledIn()); }

bool TracingEnabled() { return tracing.load(std::memory_order_relaxed); }

TraceRange::TraceRange(const char* name) {
#if SEQBENCH_WITH_NVTX
  if (TracingEnabled()) {
    nvtxRangePushA(name);
    pushed_ = true;
  }
#else
  (void)name;
#endif
}

TraceRange::~TraceRange() {
#if SEQBENCH_WITH_NVTX
  if (pushed_) nvtxRangePop();
#endif
}

}  // namespace seqbench
