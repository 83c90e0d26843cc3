#include "harness/threads.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>

#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <utility>

namespace seqbench {
namespace {

// OpenBLAS and OpenMP are reached through the symbols already loaded with LibTorch's BLAS
// (Debian resolves libblas.so.3 through alternatives): no link-time dependency on either,
// and a BLAS without them is reported as unknown rather than failing.
template <typename Function>
Function LoadedSymbol(const char* name) {
  return reinterpret_cast<Function>(dlsym(RTLD_DEFAULT, name));
}

int64_t ReadInteger(const std::string& path) {
  std::ifstream file(path);
  int64_t value = -1;
  return file >> value ? value : -1;
}

}  // namespace

int64_t PhysicalCores() {
  std::set<std::pair<int64_t, int64_t>> cores;
  const unsigned logical = std::thread::hardware_concurrency();
  for (unsigned cpu = 0; cpu < logical; ++cpu) {
    const std::string topology = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    const int64_t package = ReadInteger(topology + "physical_package_id");
    const int64_t core = ReadInteger(topology + "core_id");
    if (package < 0 || core < 0) return logical > 0 ? logical : 1;
    cores.emplace(package, core);
  }
  return cores.empty() ? 1 : static_cast<int64_t>(cores.size());
}

ThreadsInForce CurrentThreads() {
  ThreadsInForce in_force;
  in_force.intra_op = at::get_num_threads();
  if (const auto get = LoadedSymbol<int (*)()>("openblas_get_num_threads")) {
    in_force.blas = get();
  }
  if (const auto get = LoadedSymbol<int (*)()>("omp_get_max_threads")) in_force.omp = get();
  return in_force;
}

ThreadsInForce SetThreads(int64_t threads) {
  at::set_num_threads(static_cast<int>(threads));
  if (const auto set = LoadedSymbol<void (*)(int)>("openblas_set_num_threads")) {
    set(static_cast<int>(threads));
  }
  return CurrentThreads();
}

}  // namespace seqbench
