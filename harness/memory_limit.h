// The memory a case may hold, as a limit the CPU allocator enforces (harness/memory.h).
// LibTorch-free, so that the command line can tell this failure apart without LibTorch's
// headers.
//
// Thread-safety: MachineMemoryBytes() reads /proc and /sys each call; safe from any thread.
#pragma once

#include <cstdint>
#include <stdexcept>

namespace seqbench {

// Thrown by CountingCpuAllocator::allocate, before any memory is requested, when the live
// tensor bytes would pass the allocator's limit: a case sized for a bigger machine fails
// with the sizes named instead of being killed by the kernel's OOM killer (or reaching the
// user as LibTorch's "enforce fail at alloc_cpu.cpp").
class MemoryLimitExceeded : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The memory this process may use: the physical memory, or the cgroup's limit where one is
// set lower (a container, a Slurm job), in bytes.
int64_t MachineMemoryBytes();

}  // namespace seqbench
