#include "variants/simple_rnn/recurrence_kernels.h"

#include <algorithm>
#include <cstdint>

namespace seqbench::simple_rnn {
namespace {

#define SEQBENCH_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#define SEQBENCH_INLINE __attribute__((always_inline)) inline

// ---- Plain loops: any width, float or double.

template <typename scalar_t>
SEQBENCH_INLINE void LoopForward(scalar_t* __restrict state, const scalar_t* __restrict q,
                                 const scalar_t* __restrict k, const scalar_t* __restrict v,
                                 const scalar_t* __restrict g, scalar_t* __restrict o,
                                 int64_t width) {
  std::fill(o, o + width, scalar_t(0));
  for (int64_t i = 0; i < width; ++i) {
    scalar_t* __restrict row = state + i * width;
    const scalar_t decay = g[i], key = k[i], query = q[i];
    for (int64_t j = 0; j < width; ++j) {
      row[j] = decay * row[j] + key * v[j];
      o[j] += query * row[j];
    }
  }
}

template <typename scalar_t>
SEQBENCH_INLINE void LoopRecompute(scalar_t* __restrict next, const scalar_t* __restrict previous,
                                   const scalar_t* __restrict k, const scalar_t* __restrict v,
                                   const scalar_t* __restrict g, int64_t width) {
  for (int64_t i = 0; i < width; ++i) {
    const scalar_t decay = g[i], key = k[i];
    for (int64_t j = 0; j < width; ++j) {
      next[i * width + j] = decay * previous[i * width + j] + key * v[j];
    }
  }
}

template <typename scalar_t>
SEQBENCH_INLINE void LoopBackward(scalar_t* __restrict d_state, const scalar_t* __restrict state,
                                  const scalar_t* __restrict previous, const scalar_t* __restrict q,
                                  const scalar_t* __restrict k, const scalar_t* __restrict v,
                                  const scalar_t* __restrict g, const scalar_t* __restrict d_o,
                                  scalar_t* __restrict d_q, scalar_t* __restrict d_k,
                                  scalar_t* __restrict d_v, scalar_t* __restrict d_g,
                                  int64_t width) {
  std::fill(d_v, d_v + width, scalar_t(0));
  for (int64_t i = 0; i < width; ++i) {
    scalar_t* __restrict d_row = d_state + i * width;
    const scalar_t* __restrict row = state + i * width;
    const scalar_t* __restrict previous_row = previous + i * width;
    const scalar_t query = q[i], key = k[i];
    scalar_t dq = 0, dk = 0, dg = 0;
    // Without it the three sums are added in order, lane by lane: a chain of scalar adds
    // that took most of the backward's time. Reassociating them changes only rounding.
#pragma omp simd reduction(+ : dq, dk, dg)
    for (int64_t j = 0; j < width; ++j) {
      d_row[j] += query * d_o[j];  // o_t = S_tᵀ·q_t feeds S_t
      dq += row[j] * d_o[j];
      dk += d_row[j] * v[j];
      d_v[j] += key * d_row[j];
      dg += d_row[j] * previous_row[j];
      d_row[j] *= g[i];
    }
    d_q[i] = dq;
    d_k[i] = dk;
    d_g[i] = dg;
  }
}

// ---- Vector kernels: float32, width a multiple of kBlock, at most kMaxWidth.

// GCC warns that a 32-byte vector passed by value changes the ABI in the SSE2 copy; these
// helpers are always inlined into the kernels, so no call passes one.
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float Vec __attribute__((vector_size(32)));  // 8 floats, aligned
typedef float UnalignedVec __attribute__((vector_size(32), aligned(4)));
typedef int32_t Lanes __attribute__((vector_size(32)));  // a shuffle's indices
constexpr int64_t kLanes = 8;
constexpr int64_t kBlock = 32;  // state columns a pass keeps in registers
constexpr int64_t kBlockVecs = kBlock / kLanes;
constexpr int64_t kMaxWidth = 256;  // bounds the backward's row sums (24 KiB)

SEQBENCH_INLINE Vec Load(const float* p) { return *reinterpret_cast<const UnalignedVec*>(p); }
SEQBENCH_INLINE void Store(float* p, Vec x) { *reinterpret_cast<UnalignedVec*>(p) = x; }
SEQBENCH_INLINE Vec Splat(float x) { return Vec{} + x; }  // a broadcast (`Vec{x,...}` is not)

// The lane sums of 8 vectors a[0..7], as one vector: a transposing tree of shuffles and
// adds (14 shuffles and 7 adds for 8 sums, where 8 separate reductions take 24 of each).
SEQBENCH_INLINE Vec LaneSums(const Vec* a) {
  const Lanes even = {0, 8, 2, 10, 4, 12, 6, 14}, odd = {1, 9, 3, 11, 5, 13, 7, 15};
  Vec pairs[4];
  for (int p = 0; p < 4; ++p) {
    pairs[p] = __builtin_shuffle(a[2 * p], a[2 * p + 1], even) +
               __builtin_shuffle(a[2 * p], a[2 * p + 1], odd);
  }
  const Lanes low = {0, 1, 8, 9, 4, 5, 12, 13}, high = {2, 3, 10, 11, 6, 7, 14, 15};
  const Vec quads0 =
      __builtin_shuffle(pairs[0], pairs[1], low) + __builtin_shuffle(pairs[0], pairs[1], high);
  const Vec quads1 =
      __builtin_shuffle(pairs[2], pairs[3], low) + __builtin_shuffle(pairs[2], pairs[3], high);
  const Lanes first = {0, 1, 2, 3, 8, 9, 10, 11}, second = {4, 5, 6, 7, 12, 13, 14, 15};
  return __builtin_shuffle(quads0, quads1, first) + __builtin_shuffle(quads0, quads1, second);
}

SEQBENCH_INLINE void VecForward(float* __restrict state, const float* __restrict q,
                                const float* __restrict k, const float* __restrict v,
                                const float* __restrict g, float* __restrict o, int64_t width) {
  for (int64_t block = 0; block < width; block += kBlock) {
    Vec values[kBlockVecs], outputs[kBlockVecs];
    for (int64_t c = 0; c < kBlockVecs; ++c) {
      values[c] = Load(v + block + c * kLanes);
      outputs[c] = Splat(0);
    }
    for (int64_t i = 0; i < width; ++i) {
      const Vec decay = Splat(g[i]), key = Splat(k[i]), query = Splat(q[i]);
      float* row = state + i * width + block;
      for (int64_t c = 0; c < kBlockVecs; ++c) {
        const Vec updated = decay * Load(row + c * kLanes) + key * values[c];
        Store(row + c * kLanes, updated);
        outputs[c] += query * updated;
      }
    }
    for (int64_t c = 0; c < kBlockVecs; ++c) Store(o + block + c * kLanes, outputs[c]);
  }
}

SEQBENCH_INLINE void VecRecompute(float* __restrict next, const float* __restrict previous,
                                  const float* __restrict k, const float* __restrict v,
                                  const float* __restrict g, int64_t width) {
  for (int64_t block = 0; block < width; block += kBlock) {
    Vec values[kBlockVecs];
    for (int64_t c = 0; c < kBlockVecs; ++c) values[c] = Load(v + block + c * kLanes);
    for (int64_t i = 0; i < width; ++i) {
      const Vec decay = Splat(g[i]), key = Splat(k[i]);
      const int64_t at = i * width + block;
      for (int64_t c = 0; c < kBlockVecs; ++c) {
        Store(next + at + c * kLanes, decay * Load(previous + at + c * kLanes) + key * values[c]);
      }
    }
  }
}

SEQBENCH_INLINE void VecBackward(float* __restrict d_state, const float* __restrict state,
                                 const float* __restrict previous, const float* __restrict q,
                                 const float* __restrict k, const float* __restrict v,
                                 const float* __restrict g, const float* __restrict d_o,
                                 float* __restrict d_q, float* __restrict d_k,
                                 float* __restrict d_v, float* __restrict d_g, int64_t width) {
  // Per row, the lanes of its three sums (dq = S_t·dO, dk = dS_t·v, dg = (dS_t ⊙ S_{t-1})·1)
  // over the blocks done so far.
  Vec sums_q[kMaxWidth], sums_k[kMaxWidth], sums_g[kMaxWidth];
  for (int64_t block = 0; block < width; block += kBlock) {
    Vec d_outputs[kBlockVecs], values[kBlockVecs], d_values[kBlockVecs];
    for (int64_t c = 0; c < kBlockVecs; ++c) {
      d_outputs[c] = Load(d_o + block + c * kLanes);
      values[c] = Load(v + block + c * kLanes);
      d_values[c] = Splat(0);
    }
    for (int64_t i = 0; i < width; ++i) {
      const Vec query = Splat(q[i]), key = Splat(k[i]), decay = Splat(g[i]);
      Vec dq = Splat(0), dk = Splat(0), dg = Splat(0);
      const int64_t at = i * width + block;
      for (int64_t c = 0; c < kBlockVecs; ++c) {
        const int64_t j = at + c * kLanes;
        const Vec d_row = Load(d_state + j) + query * d_outputs[c];  // o_t = S_tᵀ·q_t feeds S_t
        dq += Load(state + j) * d_outputs[c];
        dk += d_row * values[c];
        d_values[c] += key * d_row;
        dg += d_row * Load(previous + j);
        Store(d_state + j, d_row * decay);
      }
      sums_q[i] = block == 0 ? dq : sums_q[i] + dq;
      sums_k[i] = block == 0 ? dk : sums_k[i] + dk;
      sums_g[i] = block == 0 ? dg : sums_g[i] + dg;
    }
    for (int64_t c = 0; c < kBlockVecs; ++c) Store(d_v + block + c * kLanes, d_values[c]);
  }
  for (int64_t i = 0; i < width; i += kLanes) {
    Store(d_q + i, LaneSums(sums_q + i));
    Store(d_k + i, LaneSums(sums_k + i));
    Store(d_g + i, LaneSums(sums_g + i));
  }
}

// ---- The compiled copies (target_clones on plain functions: a template cannot carry it).

#define SEQBENCH_LOOP_KERNELS(scalar_t)                                                            \
  SEQBENCH_CLONES void LoopForwardOf(scalar_t* state, const scalar_t* q, const scalar_t* k,        \
                                     const scalar_t* v, const scalar_t* g, scalar_t* o,            \
                                     int64_t width) {                                              \
    LoopForward(state, q, k, v, g, o, width);                                                      \
  }                                                                                                \
  SEQBENCH_CLONES void LoopRecomputeOf(scalar_t* next, const scalar_t* previous,                   \
                                       const scalar_t* k, const scalar_t* v, const scalar_t* g,    \
                                       int64_t width) {                                            \
    LoopRecompute(next, previous, k, v, g, width);                                                 \
  }                                                                                                \
  SEQBENCH_CLONES void LoopBackwardOf(                                                             \
      scalar_t* d_state, const scalar_t* state, const scalar_t* previous, const scalar_t* q,       \
      const scalar_t* k, const scalar_t* v, const scalar_t* g, const scalar_t* d_o, scalar_t* d_q, \
      scalar_t* d_k, scalar_t* d_v, scalar_t* d_g, int64_t width) {                                \
    LoopBackward(d_state, state, previous, q, k, v, g, d_o, d_q, d_k, d_v, d_g, width);            \
  }
SEQBENCH_LOOP_KERNELS(float)
SEQBENCH_LOOP_KERNELS(double)
#undef SEQBENCH_LOOP_KERNELS

SEQBENCH_CLONES void VecForwardOf(float* state, const float* q, const float* k, const float* v,
                                  const float* g, float* o, int64_t width) {
  VecForward(state, q, k, v, g, o, width);
}
SEQBENCH_CLONES void VecRecomputeOf(float* next, const float* previous, const float* k,
                                    const float* v, const float* g, int64_t width) {
  VecRecompute(next, previous, k, v, g, width);
}
SEQBENCH_CLONES void VecBackwardOf(float* d_state, const float* state, const float* previous,
                                   const float* q, const float* k, const float* v, const float* g,
                                   const float* d_o, float* d_q, float* d_k, float* d_v, float* d_g,
                                   int64_t width) {
  VecBackward(d_state, state, previous, q, k, v, g, d_o, d_q, d_k, d_v, d_g, width);
}

}  // namespace

StepKernels<float> KernelsFor(float, int64_t width) {
  if (width % kBlock == 0 && width <= kMaxWidth) {
    return {VecForwardOf, VecRecomputeOf, VecBackwardOf, /*vectorized=*/true};
  }
  return {LoopForwardOf, LoopRecomputeOf, LoopBackwardOf, /*vectorized=*/false};
}

StepKernels<double> KernelsFor(double, int64_t /*width*/) {
  return {LoopForwardOf, LoopRecomputeOf, LoopBackwardOf, /*vectorized=*/false};
}

}  // namespace seqbench::simple_rnn
