// The threads a case computes with, set and read back: LibTorch's intra-op pool (which
// also sets OpenMP's) and OpenBLAS's thread count, which LibTorch does not touch (a pool
// of its own in OpenBLAS's pthread build; OpenMP's in the OpenMP build that
// ci/install-deps selects, so that the two share one pool). A
// run records what was in force, not what was asked for, so that "1 thread" never hides
// a GEMM on two.
//
// Thread-safety: process-wide settings; call from the thread that runs cases, between
// cases.
#pragma once

#include <cstdint>

namespace seqbench {

struct ThreadsInForce {
  int64_t intra_op = -1;  // at::get_num_threads()
  int64_t blas = -1;      // openblas_get_num_threads(); -1 when the BLAS is not OpenBLAS
  int64_t omp = -1;       // omp_get_max_threads(); -1 without an OpenMP runtime loaded
};

// Distinct (package, core) pairs in /sys; the logical CPU count where that is unreadable.
int64_t PhysicalCores();

// Sets LibTorch's intra-op threads and, where the loaded BLAS is OpenBLAS, its threads to
// `threads` (>= 1), then reads back what is in force.
ThreadsInForce SetThreads(int64_t threads);
ThreadsInForce CurrentThreads();

}  // namespace seqbench
