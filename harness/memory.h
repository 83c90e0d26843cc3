// Peak-memory measurement of one step. On CPU, a counting allocator installed as
// LibTorch's CPU allocator tracks live tensor bytes and their peak exactly (memory that
// libraries allocate outside LibTorch's allocator, e.g. BLAS workspaces, is not seen;
// the process max RSS is recorded beside it for that reason).
//
// Thread-safety: the allocator's counters are atomics, updated from whichever thread
// allocates (intra-op pools included). A MemoryProbe measures one step at a time.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "harness/memory_limit.h"
#include "variants/core/torch_compat.h"

namespace seqbench {

// Wraps the CPU allocator that was current when Install() ran and counts every byte
// that passes through it. Tensors allocated before Install() are not counted, also not
// when freed. Refuses (MemoryLimitExceeded) an allocation that would take the live bytes
// past limit_bytes(): by default 90% of MachineMemoryBytes().
class CountingCpuAllocator final : public at::Allocator {
 public:
  // Installs the process-wide instance (idempotent) and returns it. Also keeps the memory
  // that tensors free inside the process (see RetainFreedMemory()), so that every process
  // that measures allocates under the same policy.
  static CountingCpuAllocator& Install();
  // The installed instance, or nullptr before Install().
  static CountingCpuAllocator* Installed();

  at::DataPtr allocate(size_t bytes) SEQBENCH_ALLOCATE_QUALIFIER override;
  at::DeleterFnPtr raw_deleter() const override;
  SEQBENCH_ALLOCATOR_COPY_DATA

  int64_t live_bytes() const { return live_bytes_.load(); }
  int64_t peak_bytes() const { return peak_bytes_.load(); }
  // Every byte ever allocated through it (never decreases): the work a step does in memory,
  // a count that, unlike time, a noisy machine cannot disturb.
  int64_t allocated_bytes() const { return allocated_bytes_.load(); }
  // Starts a new peak from the current live bytes.
  void ResetPeak() { peak_bytes_.store(live_bytes_.load()); }
  // The most live bytes allowed at once; 0 means no limit.
  int64_t limit_bytes() const { return limit_bytes_.load(); }
  void set_limit_bytes(int64_t bytes) { limit_bytes_.store(bytes); }

  explicit CountingCpuAllocator(at::Allocator* wrapped) : wrapped_(wrapped) {}

 private:
  static void Free(void* data);
  void Add(int64_t bytes) const;

  at::Allocator* wrapped_;
  mutable std::atomic<int64_t> live_bytes_{0};
  mutable std::atomic<int64_t> peak_bytes_{0};
  mutable std::atomic<int64_t> allocated_bytes_{0};
  std::atomic<int64_t> limit_bytes_{0};
};

// Makes glibc's malloc keep freed memory for reuse instead of returning it to the kernel:
// no mmap for large blocks (which glibc otherwise unmaps on free, above 32 MiB always) and
// no trimming of the heap. Without it, a step that allocates 1 GiB of activations faults
// in and zeroes 1 GiB of fresh pages every time (31% of `batched`'s train step on this
// project's 2-core VM, in the kernel's page-fault path), a cost of the allocator rather than
// of the variant, and a noisy one. The same effect as running PyTorch under jemalloc or
// tcmalloc, as CPU tuning guides recommend. Idempotent; returns the policy in words, for
// the run's environment.
const char* RetainFreedMemory();

// The same policy for a child process that is not seqbench (a Python peer), as the value
// of its GLIBC_TUNABLES: `inherited` (the parent's value, may be empty) with the malloc
// tunables appended, so that a peer's step is spared the page faults a variant's is spared
// (GLIBC_TUNABLES is read when a process starts: mallopt cannot reach into a child).
std::string RetainFreedMemoryTunables(const std::string& inherited);

// The process's resident-set high-water mark (VmHWM), in bytes; -1 where /proc has none.
// ResetPeakRss() starts it again from the current resident set (Linux >= 4.0:
// /proc/self/clear_refs, "5"), so that a case's own peak is read, not the process's; it
// returns false where the kernel refuses, and the mark then runs from the process's start.
bool ResetPeakRss();
int64_t PeakRssBytes();

struct MemoryUsage {
  int64_t peak_bytes = -1;        // peak live bytes during the step
  int64_t activation_bytes = -1;  // that peak minus what was live when the step began
  int64_t max_rss_bytes = -1;     // the process's max resident set size so far
};

// Brackets one step: Begin() before it, End() after it. On CUDA the figures are the
// caching allocator's allocated bytes (its peak reset in Begin()).
class MemoryProbe {
 public:
  explicit MemoryProbe(torch::Device device) : device_(device) {}
  void Begin();
  MemoryUsage End();

 private:
  torch::Device device_;
  int64_t start_bytes_ = 0;
};

}  // namespace seqbench
