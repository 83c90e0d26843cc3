#include "harness/memory.h"

#include <c10/core/CPUAllocator.h>
#include <sys/resource.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <mutex>
#include <string>
#include <unordered_map>

#include "base/files.h"
#include "harness/cuda_probe.h"

namespace seqbench {
namespace {

// The wrapped allocations, by data pointer. The DataPtr handed out has context == data
// (with Free as its deleter) because LibTorch's raw_allocate() path, which oneDNN's
// bfloat16 kernels take, requires exactly that.
struct CountedBlock {
  at::DataPtr wrapped;
  int64_t bytes = 0;
  const CountingCpuAllocator* owner = nullptr;
};
std::mutex blocks_mutex;
std::unordered_map<void*, CountedBlock>& Blocks() {
  static auto* blocks = new std::unordered_map<void*, CountedBlock>();  // outlives tensors
  return *blocks;
}

std::atomic<CountingCpuAllocator*> installed{nullptr};

int64_t MaxRssBytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

// A cgroup's memory limit in bytes (v2 memory.max, else v1 memory.limit_in_bytes), or -1
// where none is set ("max", or v1's huge "unlimited" value is above any machine anyway).
int64_t CgroupLimitBytes() {
  for (const char* path :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream file(path);
    std::string text;
    if (file >> text && !text.empty() && text != "max") {
      try {
        return std::stoll(text);
      } catch (const std::exception&) {  // not a number: no limit read from this file
      }
    }
  }
  return -1;
}

std::string Gibibytes(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", static_cast<double>(bytes) / (1 << 30));
  return text;
}

}  // namespace

int64_t MachineMemoryBytes() {
  const int64_t physical =
      static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<int64_t>(sysconf(_SC_PAGE_SIZE));
  const int64_t cgroup = CgroupLimitBytes();
  return cgroup > 0 ? std::min(physical, cgroup) : physical;
}

bool ResetPeakRss() {
  // "5": reset the peak resident set size (VmHWM) to the current one.
  return WriteControlFile("/proc/self/clear_refs", "5");
}

int64_t PeakRssBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // "N kB"
  }
  return -1;
}

const char* RetainFreedMemory() {
#if defined(__GLIBC__)
  static const bool applied = [] {
    return mallopt(M_MMAP_MAX, 0) == 1 && mallopt(M_TRIM_THRESHOLD, -1) == 1;
  }();
  return applied ? "glibc, freed memory kept (M_MMAP_MAX=0, M_TRIM_THRESHOLD=-1)"
                 : "glibc defaults (mallopt refused)";
#else
  return "system default";
#endif
}

std::string RetainFreedMemoryTunables(const std::string& inherited) {
  // mmap_max=0 is M_MMAP_MAX=0; a trim threshold of SIZE_MAX is M_TRIM_THRESHOLD=-1.
  const std::string policy = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=" +
                             std::to_string(std::numeric_limits<size_t>::max());
  return inherited.empty() ? policy : inherited + ":" + policy;
}

CountingCpuAllocator& CountingCpuAllocator::Install() {
  RetainFreedMemory();
  if (CountingCpuAllocator* current = installed.load()) return *current;
  // Leaked on purpose: tensors may outlive every other static.
  static auto* instance = new CountingCpuAllocator(c10::GetCPUAllocator());
  // A tenth of the machine stays for the process's code, BLAS buffers, the page cache.
  instance->set_limit_bytes(MachineMemoryBytes() / 10 * 9);
  c10::SetCPUAllocator(instance, /*priority=*/100);
  installed.store(instance);
  return *instance;
}

CountingCpuAllocator* CountingCpuAllocator::Installed() { return installed.load(); }

at::DataPtr CountingCpuAllocator::allocate(size_t bytes) SEQBENCH_ALLOCATE_QUALIFIER {
  const int64_t limit = limit_bytes_.load();
  const int64_t live = live_bytes_.load();
  if (limit > 0 && bytes > 0 && (live >= limit || bytes > static_cast<size_t>(limit - live))) {
    throw MemoryLimitExceeded("this case needs more memory than the machine has: a tensor of " +
                              Gibibytes(static_cast<int64_t>(std::min<size_t>(bytes, INT64_MAX))) +
                              " on top of " + Gibibytes(live) +
                              " already held passes seqbench's limit of " + Gibibytes(limit) +
                              " (this machine has " + Gibibytes(MachineMemoryBytes()) +
                              "); lower batch, seq_len or width");
  }
  at::DataPtr wrapped = wrapped_->allocate(bytes);
  void* data = wrapped.get();
  const at::Device device = wrapped.device();
  if (data == nullptr) return wrapped;  // zero bytes: nothing to count
  {
    std::lock_guard<std::mutex> lock(blocks_mutex);
    Blocks().emplace(data, CountedBlock{std::move(wrapped), static_cast<int64_t>(bytes), this});
  }
  Add(static_cast<int64_t>(bytes));
  return at::DataPtr(data, data, &CountingCpuAllocator::Free, device);
}

at::DeleterFnPtr CountingCpuAllocator::raw_deleter() const { return &CountingCpuAllocator::Free; }

void CountingCpuAllocator::Free(void* data) {
  CountedBlock block;
  {
    std::lock_guard<std::mutex> lock(blocks_mutex);
    auto node = Blocks().extract(data);
    if (node.empty()) return;
    block = std::move(node.mapped());
  }
  block.owner->Add(-block.bytes);
  // `block` going out of scope frees the wrapped allocation, outside the lock.
}

void CountingCpuAllocator::Add(int64_t bytes) const {
  if (bytes > 0) allocated_bytes_.fetch_add(bytes);
  const int64_t live = live_bytes_.fetch_add(bytes) + bytes;
  int64_t peak = peak_bytes_.load();
  while (live > peak && !peak_bytes_.compare_exchange_weak(peak, live)) {
  }
}

void MemoryProbe::Begin() {
  if (device_.is_cuda()) {
    cuda_probe::ResetPeak(device_);
    start_bytes_ = cuda_probe::AllocatedBytes(device_);
    return;
  }
  if (device_.is_cpu()) {
    if (CountingCpuAllocator* allocator = CountingCpuAllocator::Installed()) {
      allocator->ResetPeak();
      start_bytes_ = allocator->live_bytes();
    }
  }
}

MemoryUsage MemoryProbe::End() {
  MemoryUsage usage;
  usage.max_rss_bytes = MaxRssBytes();
  if (device_.is_cuda()) {
    usage.peak_bytes = cuda_probe::PeakBytes(device_);
    if (usage.peak_bytes >= 0) usage.activation_bytes = usage.peak_bytes - start_bytes_;
    return usage;
  }
  if (device_.is_cpu()) {
    if (CountingCpuAllocator* allocator = CountingCpuAllocator::Installed()) {
      usage.peak_bytes = allocator->peak_bytes();
      usage.activation_bytes = usage.peak_bytes - start_bytes_;
    }
  }
  return usage;
}

}  // namespace seqbench
