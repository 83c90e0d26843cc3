// flash's CPU kernels (flash_cpu.h). A task is one (sequence, head) pair and owns that
// pair's rows of o, lse, dq, dk and dv, so tasks share nothing they write. Inside a task
// the tile products are TileGemm calls on raw pointers and exp is ATen's vector kernel on
// the tile.
// OpenBLAS's OpenMP build (what ci/install-deps selects) runs a call made inside an OpenMP
// region on the calling thread; its pthreads build may thread a tile's product itself.
// The loops follow FlashAttention-2: queries outer, keys inner, tiles above the diagonal
// never computed. Blocks of queries and keys are aligned, so only a diagonal tile has
// future keys, and every row of it sees at least its own key.
#include "variants/attention/flash_cpu.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "variants/core/tile_gemm.h"

namespace seqbench::attention {
namespace {

// A tile's span of positions: [first, first + size).
struct TileSpan {
  int64_t first, size;
};

// The tile spans of the first `steps` positions in blocks of `block`.
std::vector<TileSpan> Tiles(int64_t steps, int64_t block) {
  std::vector<TileSpan> tiles;
  for (int64_t first = 0; first < steps; first += block) {
    tiles.push_back({first, std::min(block, steps - first)});
  }
  return tiles;
}

// How many of a tile row's keys precede or equal its query: all of them below the
// diagonal; keys 0..r for row r of a diagonal tile.
int64_t VisibleKeys(TileSpan queries, TileSpan keys, int64_t r) {
  return std::min(keys.size, queries.first + r - keys.first + 1);
}

// The sums and maxima below are reductions that GCC vectorises only when allowed to
// reorder them: `omp simd reduction` allows it loop by loop (every source is compiled with
// OpenMP), without -ffast-math for the file.

// One (sequence, head) pair's [T,dh] row-major matrices: row t of q is q + t·width.
template <typename scalar_t>
struct HeadRows {
  scalar_t* data;
  int64_t width;
  scalar_t* row(int64_t t) const { return data + t * width; }
  // Rows [span.first, +span.size) as a product operand, transposed if asked.
  MatrixRef<scalar_t> operand(TileSpan span, bool transposed = false) const {
    return {row(span.first), span.size, width, width, transposed};
  }
};

template <typename scalar_t>
HeadRows<scalar_t> HeadOf(const torch::Tensor& tensor, int64_t task) {
  const int64_t steps = tensor.size(2), width = tensor.size(3);
  return {tensor.data_ptr<scalar_t>() + task * steps * width, width};
}

// A [block,block] tile buffer: row r at data + r·block.
template <typename scalar_t>
struct Tile {
  std::vector<scalar_t> values;
  int64_t block;
  scalar_t* row(int64_t r) { return values.data() + r * block; }
  MatrixRef<scalar_t> operand(TileSpan rows, TileSpan columns, bool transposed = false) {
    return {values.data(), rows.size, columns.size, block, transposed};
  }
  // exp in place over the [rows, columns] corner, by ATen's vector kernel.
  void Exp(TileSpan rows, TileSpan columns) {
    const auto options = torch::TensorOptions().dtype(c10::CppTypeToScalarType<scalar_t>::value);
    torch::from_blob(values.data(), {rows.size, columns.size}, {block, 1}, options).exp_();
  }
};

// The online softmax's update for one tile of scores, in place (FlashAttention's
// Algorithm 1): per row the new running maximum m, the scores minus m (future keys -inf,
// so that exp gives 0), and rescale = exp(m_old − m_new), the factor for what the row has
// accumulated. row_max: [rows], updated; rescale: [rows], written.
template <typename scalar_t>
void ShiftByRunningMax(Tile<scalar_t>& scores, TileSpan queries, TileSpan keys, scalar_t* row_max,
                       scalar_t* rescale) {
  constexpr scalar_t kMinusInfinity = -std::numeric_limits<scalar_t>::infinity();
  for (int64_t r = 0; r < queries.size; ++r) {
    scalar_t* row = scores.row(r);
    const int64_t visible = VisibleKeys(queries, keys, r);
    scalar_t tile_max = kMinusInfinity;
#pragma omp simd reduction(max : tile_max)
    for (int64_t c = 0; c < visible; ++c) tile_max = std::max(tile_max, row[c]);
    const scalar_t new_max = std::max(row_max[r], tile_max);
    for (int64_t c = 0; c < visible; ++c) row[c] -= new_max;
    std::fill(row + visible, row + keys.size, kMinusInfinity);
    rescale[r] = std::exp(row_max[r] - new_max);  // 0 while row_max is -inf
    row_max[r] = new_max;
  }
}

// After exp: the running sums take the tile's row sums, and the accumulated output rows
// ([rows, width], row stride width) are rescaled before the tile's P·V is added.
template <typename scalar_t>
void RescaleRows(Tile<scalar_t>& probabilities, TileSpan queries, TileSpan keys,
                 const scalar_t* rescale, scalar_t* row_sum, scalar_t* accumulated, int64_t width) {
  for (int64_t r = 0; r < queries.size; ++r) {
    const scalar_t* row = probabilities.row(r);
    scalar_t sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < keys.size; ++c) sum += row[c];
    row_sum[r] = row_sum[r] * rescale[r] + sum;
    if (rescale[r] == scalar_t(1)) continue;  // the maximum held: nothing to rescale
    scalar_t* out = accumulated + r * width;
    for (int64_t j = 0; j < width; ++j) out[j] *= rescale[r];
  }
}

// Per-task forward scratch: a tile's scores, the accumulated output and the rows' running
// maximum, sum and rescale factor.
template <typename scalar_t>
struct ForwardScratch {
  Tile<scalar_t> scores;
  std::vector<scalar_t> accumulated, row_max, row_sum, rescale;
  ForwardScratch(int64_t block, int64_t width)
      : scores{std::vector<scalar_t>(block * block), block},
        accumulated(block * width),
        row_max(block),
        row_sum(block),
        rescale(block) {}
};

// One head's forward pass over one query tile: its rows of o and lse written.
template <typename scalar_t>
void ForwardQueryTile(HeadRows<scalar_t> q, HeadRows<scalar_t> k, HeadRows<scalar_t> v,
                      TileSpan queries, ForwardScratch<scalar_t>& s, HeadRows<scalar_t> o,
                      scalar_t* lse) {
  const int64_t width = q.width;
  std::fill_n(s.accumulated.begin(), queries.size * width, scalar_t(0));
  std::fill_n(s.row_max.begin(), queries.size, -std::numeric_limits<scalar_t>::infinity());
  std::fill_n(s.row_sum.begin(), queries.size, scalar_t(0));
  for (const TileSpan keys : Tiles(queries.first + queries.size, s.scores.block)) {
    TileGemm(q.operand(queries), k.operand(keys, /*transposed=*/true), scalar_t(0), s.scores.row(0),
             s.scores.block);
    ShiftByRunningMax(s.scores, queries, keys, s.row_max.data(), s.rescale.data());
    s.scores.Exp(queries, keys);
    RescaleRows(s.scores, queries, keys, s.rescale.data(), s.row_sum.data(), s.accumulated.data(),
                width);
    TileGemm(s.scores.operand(queries, keys), v.operand(keys), scalar_t(1), s.accumulated.data(),
             width);
  }
  for (int64_t r = 0; r < queries.size; ++r) {
    const scalar_t* in = s.accumulated.data() + r * width;
    scalar_t* out = o.row(queries.first + r);
    for (int64_t j = 0; j < width; ++j) out[j] = in[j] / s.row_sum[r];
    lse[queries.first + r] = s.row_max[r] + std::log(s.row_sum[r]);
  }
}

// A tile's probabilities recomputed from the saved log-sum-exp, in place over its scores:
// the scores minus lse (future keys -inf), then exp. lse: the tile's query rows.
template <typename scalar_t>
void ProbabilitiesFromLse(Tile<scalar_t>& scores, TileSpan queries, TileSpan keys,
                          const scalar_t* lse) {
  for (int64_t r = 0; r < queries.size; ++r) {
    scalar_t* row = scores.row(r);
    const int64_t visible = VisibleKeys(queries, keys, r);
    for (int64_t c = 0; c < visible; ++c) row[c] -= lse[r];
    std::fill(row + visible, row + keys.size, -std::numeric_limits<scalar_t>::infinity());
  }
  scores.Exp(queries, keys);
}

// dS = P ∘ (dP − δ), in place over dP; delta: the tile's query rows of rowsum(dO ∘ O).
template <typename scalar_t>
void ScoreGradient(Tile<scalar_t>& probabilities, Tile<scalar_t>& d_probabilities, TileSpan queries,
                   TileSpan keys, const scalar_t* delta) {
  for (int64_t r = 0; r < queries.size; ++r) {
    const scalar_t* p = probabilities.row(r);
    scalar_t* d = d_probabilities.row(r);
    for (int64_t c = 0; c < keys.size; ++c) d[c] = p[c] * (d[c] - delta[r]);
  }
}

// One head's inputs and gradients for backward; dq, dk, dv are zeroed and accumulated.
template <typename scalar_t>
struct BackwardHead {
  HeadRows<scalar_t> q, k, v, d_o, dq, dk, dv;
  const scalar_t *lse, *delta;  // [T] each
};

// One (query tile, key tile) pair of backward: P recomputed, then dV += Pᵀ·dO,
// dS = P ∘ (dO·Vᵀ − δ), dQ += dS·K and dK += dSᵀ·Q.
template <typename scalar_t>
void BackwardTile(const BackwardHead<scalar_t>& h, TileSpan queries, TileSpan keys,
                  Tile<scalar_t>& p, Tile<scalar_t>& d_scores) {
  TileGemm(h.q.operand(queries), h.k.operand(keys, true), scalar_t(0), p.row(0), p.block);
  ProbabilitiesFromLse(p, queries, keys, h.lse + queries.first);
  TileGemm(p.operand(queries, keys, true), h.d_o.operand(queries), scalar_t(1),
           h.dv.row(keys.first), h.dv.width);
  TileGemm(h.d_o.operand(queries), h.v.operand(keys, true), scalar_t(0), d_scores.row(0),
           d_scores.block);
  ScoreGradient(p, d_scores, queries, keys, h.delta + queries.first);
  TileGemm(d_scores.operand(queries, keys), h.k.operand(keys), scalar_t(1), h.dq.row(queries.first),
           h.dq.width);
  TileGemm(d_scores.operand(queries, keys, true), h.q.operand(queries), scalar_t(1),
           h.dk.row(keys.first), h.dk.width);
}

// Runs body(task) for every (sequence, head) pair of q: [B,H,T,dh], a task per pair.
template <typename Body>
void ForEachHead(const torch::Tensor& q, const Body& body) {
  at::parallel_for(0, q.size(0) * q.size(1), 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) body(task);
  });
}

void CheckInputs(std::initializer_list<torch::Tensor> tensors) {
  for (const torch::Tensor& tensor : tensors) {
    TORCH_CHECK(tensor.device().is_cpu() && tensor.is_contiguous(),
                "flash's CPU kernel takes contiguous CPU tensors");
  }
}

}  // namespace

std::vector<torch::Tensor> FlashForwardCpu(const torch::Tensor& q, const torch::Tensor& k,
                                           const torch::Tensor& v, int64_t block) {
  CheckInputs({q, k, v});
  // A task reads head (b, h) of all three: no broadcasting of k or v.
  TORCH_CHECK(q.dim() == 4 && q.sizes() == k.sizes() && k.sizes() == v.sizes() &&
                  q.scalar_type() == k.scalar_type() && k.scalar_type() == v.scalar_type(),
              "flash's CPU kernel takes q, k, v of one [B,H,T,dh] shape and dtype");
  const int64_t steps = q.size(2), width = q.size(3);
  block = std::min(block, steps);
  auto o = torch::empty_like(q);
  auto lse = torch::empty({q.size(0), q.size(1), steps}, q.options());
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "flash_forward_cpu", [&] {
    ForEachHead(q, [&](int64_t task) {
      ForwardScratch<scalar_t> scratch(block, width);
      scalar_t* lse_head = lse.data_ptr<scalar_t>() + task * steps;
      for (const TileSpan queries : Tiles(steps, block)) {
        ForwardQueryTile(HeadOf<scalar_t>(q, task), HeadOf<scalar_t>(k, task),
                         HeadOf<scalar_t>(v, task), queries, scratch, HeadOf<scalar_t>(o, task),
                         lse_head);
      }
    });
  });
  return {o, lse};
}

std::vector<torch::Tensor> FlashBackwardCpu(const torch::Tensor& q, const torch::Tensor& k,
                                            const torch::Tensor& v, const torch::Tensor& o,
                                            const torch::Tensor& lse, const torch::Tensor& d_o,
                                            int64_t block) {
  CheckInputs({q, k, v, o, lse, d_o});
  TORCH_CHECK(!torch::GradMode::is_enabled(),
              "flash's CPU backward is first-order only (no create_graph)");
  const int64_t steps = q.size(2);
  block = std::min(block, steps);
  const auto delta = (d_o * o).sum(-1).contiguous();  // [B,H,T]
  auto dq = torch::zeros_like(q), dk = torch::zeros_like(k), dv = torch::zeros_like(v);
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "flash_backward_cpu", [&] {
    ForEachHead(q, [&](int64_t task) {
      Tile<scalar_t> p{std::vector<scalar_t>(block * block), block};
      Tile<scalar_t> d_scores{std::vector<scalar_t>(block * block), block};
      const BackwardHead<scalar_t> head{HeadOf<scalar_t>(q, task),
                                        HeadOf<scalar_t>(k, task),
                                        HeadOf<scalar_t>(v, task),
                                        HeadOf<scalar_t>(d_o, task),
                                        HeadOf<scalar_t>(dq, task),
                                        HeadOf<scalar_t>(dk, task),
                                        HeadOf<scalar_t>(dv, task),
                                        lse.data_ptr<scalar_t>() + task * steps,
                                        delta.data_ptr<scalar_t>() + task * steps};
      for (const TileSpan queries : Tiles(steps, block)) {
        for (const TileSpan keys : Tiles(queries.first + queries.size, block)) {
          BackwardTile(head, queries, keys, p, d_scores);
        }
      }
    });
  });
  return {dq, dk, dv};
}

}  // namespace seqbench::attention
