// The per-step kernels of `fused_recurrent`'s recurrence (fused_recurrent.cc), on one
// (sequence, head) pair's dh×dh state: S = diag(g)·S + k·vᵀ, o = Sᵀ·q, and the step's
// backward. Two implementations behind one table, chosen once per call by KernelsFor():
// - vector kernels, float32 with dh a multiple of 32 (up to 256): 8-float vectors (GCC's
//   vector extensions), the state's columns taken 32 at a time so that v, dO and the
//   column sums stay in registers while the rows stream through; the backward's three
//   row sums are kept as vectors and reduced 8 rows at once at the end of the step;
// - plain loops for any other width or type, vectorised by the compiler.
// Both are compiled twice, for x86-64-v3 (AVX2 and FMA: 8 floats a vector) and for any
// x86-64 (SSE2), the copy chosen by the CPU's features when the program loads (GCC's
// target_clones). "arch=x86-64-v3" dispatches on features; "arch=haswell", used until
// this change, dispatched on the CPU model and ran the SSE2 copy on every CPU that is
// not a Haswell (measured on this project's AMD EPYC VMs).
//
// Thread-safety: stateless functions; the caller gives each thread its own state.
#pragma once

#include <cstdint>

namespace seqbench::simple_rnn {

// Row pointers of one step: q, k, v, g, d_o: [dh]; the state pointers: [dh,dh] row-major.
template <typename scalar_t>
struct StepKernels {
  // One step forward, state in place: S = diag(g)·S + k·vᵀ, then o = Sᵀ·q (o written).
  void (*forward)(scalar_t* state, const scalar_t* q, const scalar_t* k, const scalar_t* v,
                  const scalar_t* g, scalar_t* o, int64_t width);
  // The state alone, into a new buffer: next = diag(g)·previous + k·vᵀ (backward's
  // recompute of a segment; next and previous do not overlap).
  void (*recompute)(scalar_t* next, const scalar_t* previous, const scalar_t* k, const scalar_t* v,
                    const scalar_t* g, int64_t width);
  // One step backward. d_state: on entry the gradient of S_t from the steps after t, on
  // exit that of S_{t-1} (in place); state: S_t; previous: S_{t-1}; d_q, d_k, d_v, d_g
  // written.
  void (*backward)(scalar_t* d_state, const scalar_t* state, const scalar_t* previous,
                   const scalar_t* q, const scalar_t* k, const scalar_t* v, const scalar_t* g,
                   const scalar_t* d_o, scalar_t* d_q, scalar_t* d_k, scalar_t* d_v, scalar_t* d_g,
                   int64_t width);
  bool vectorized;  // the vector kernels (for tests and for the variant's description)
};

// The kernels for a head width: the vector ones where they apply, else the loops.
StepKernels<float> KernelsFor(float, int64_t width);
StepKernels<double> KernelsFor(double, int64_t width);

}  // namespace seqbench::simple_rnn
