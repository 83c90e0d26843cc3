// Threads are set where computation happens: LibTorch's pool and, when the loaded BLAS is
// OpenBLAS (Debian's libopenblas0-openmp or -pthread), OpenBLAS's thread count, which
// LibTorch leaves at its default; what is read back is what is in force.
#include "harness/threads.h"

#include <ATen/Parallel.h>

#include <catch2/catch.hpp>
#include <thread>

#include "harness/environment.h"

namespace seqbench {
namespace {

TEST_CASE("threads: LibTorch's and OpenBLAS's pools both follow SetThreads", "[threads]") {
  const bool openblas =
      CaptureEnvironment().Get("blas_library").find("openblas") != std::string::npos;
  const ThreadsInForce before = CurrentThreads();
  for (const int64_t threads : {int64_t{1}, int64_t{2}, int64_t{1}}) {
    INFO("threads " << threads);
    const ThreadsInForce in_force = SetThreads(threads);
    CHECK(in_force.intra_op == threads);
    if (openblas) {
      CHECK(in_force.blas == threads);
    } else {
      CHECK(in_force.blas == -1);  // not OpenBLAS: unknown, never a guess
    }
    CHECK(CurrentThreads().intra_op == in_force.intra_op);
    CHECK(CurrentThreads().blas == in_force.blas);
  }
  SetThreads(before.intra_op);
}

TEST_CASE("threads: OpenMP's team size is read back where ATen parallelises with it", "[threads]") {
  // ATen names its backend; under OpenMP, set_num_threads sets OpenMP's team size too, so
  // the stored threads_omp must follow it through 2 (where a one-thread reading, such as
  // omp_get_num_threads() outside a parallel region, would still say 1).
  const bool openmp = at::get_parallel_info().find("parallel backend: OpenMP") != std::string::npos;
  if (!openmp) {
    WARN("skipped: ATen's parallel backend is not OpenMP: " << at::get_parallel_info());
    return;
  }
  const ThreadsInForce before = CurrentThreads();
  for (const int64_t threads : {int64_t{2}, int64_t{1}, int64_t{3}}) {
    INFO("threads " << threads);
    CHECK(SetThreads(threads).omp == threads);
  }
  SetThreads(before.intra_op);
}

TEST_CASE("threads: physical cores are at least one and at most the logical CPUs", "[threads]") {
  const int64_t cores = PhysicalCores();
  CHECK(cores >= 1);
  CHECK(cores <= static_cast<int64_t>(std::thread::hardware_concurrency()));
}

}  // namespace
}  // namespace seqbench
