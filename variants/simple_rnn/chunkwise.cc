#include "variants/simple_rnn/chunkwise.h"

#include <cmath>
#include <vector>

#include "variants/core/batched_matmul.h"
#include "variants/simple_rnn/chunk_kernels.h"
#include "variants/simple_rnn/chunk_operands.h"

namespace seqbench::simple_rnn {
namespace {

// How far a chunk's log decay may fall before e^{-b} leaves the dtype's normal range (with
// a margin for the values it scales): float32 and bfloat16 share float32's exponent, up to
// e^{88.7}; float16's reaches e^{11.1}.
double MaxLogDecayRange(torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kFloat64:
      return 700;
    case torch::kHalf:
      return 8;
    default:
      return 80;
  }
}

// Whether the product form holds: the lowest of the chunks' total log decays b_C above
// -MaxLogDecayRange(dtype), so that every factor e^{-b_s} stays a normal number.
bool WithinRange(double lowest_log_decay, torch::ScalarType dtype) {
  return -lowest_log_decay < MaxLogDecayRange(dtype);
}

// The product form: every pair (t, s) of a chunk is one entry of decayed_q·unscaled_kᵀ,
// and the states carried from chunk to chunk take each chunk's keys as they are
// (chunk_kernels.h). state: [B,H,dh,dh], replaced by the state after the last chunk.
// Returns o: [B,N·C,D] by position.
torch::Tensor ProductForm(const ChunkOperands& operands, torch::Tensor& state) {
  auto [o, final_state] = ChunkProducts(operands.decayed_q, operands.unscaled_k, operands.v,
                                        operands.chunk_decay, state);
  state = final_state;
  return o;
}

// The explicit form's states, where a key divided by its decay would overflow: each
// chunk's contribution from keys scaled to the chunk's end, S_{n+1} = local[n] +
// diag(decay[n])·S_n, in ATen. end_keys, v: [B,H,N,C,dh]; chunk_decay: [B,H,N,dh];
// state: replaced by the last. Returns the states entering each chunk, [B,H,N,dh,dh].
torch::Tensor ExplicitStates(const torch::Tensor& end_keys, const torch::Tensor& v,
                             const torch::Tensor& chunk_decay, torch::Tensor& state) {
  const auto local_state = BatchedMatmul(end_keys.transpose(-1, -2), v);  // [B,H,N,dh,dh]
  // Unbound once, so that the backward does not scatter per chunk into full-size buffers.
  const auto local_states = local_state.unbind(2), decays = chunk_decay.unsqueeze(-1).unbind(2);
  std::vector<torch::Tensor> incoming;
  incoming.reserve(local_states.size());
  for (size_t n = 0; n < local_states.size(); ++n) {
    incoming.push_back(state);
    state = torch::addcmul(local_states[n], decays[n], state);
  }
  return torch::stack(incoming, 2);
}

// o: [B,N·C,D] -> [B,T,H,dh], the tail's padding dropped.
torch::Tensor ToPositions(const torch::Tensor& o, int64_t length, int64_t heads) {
  return o.narrow(1, 0, length).view({o.size(0), length, heads, o.size(2) / heads});
}

// Where scan's fused front applies: host code in float32/float64, one dtype throughout.
bool FusedFrontApplies(const torch::Tensor& projected, const torch::Tensor& b_g,
                       const torch::Tensor& state) {
  const auto dtype = projected.scalar_type();
  return projected.device().is_cpu() && (dtype == torch::kFloat || dtype == torch::kDouble) &&
         b_g.scalar_type() == dtype && state.scalar_type() == dtype;
}

}  // namespace

torch::Tensor ChunkwiseRecurrence(const torch::Tensor& q, const torch::Tensor& k,
                                  const torch::Tensor& v, const torch::Tensor& log_g,
                                  torch::Tensor& state, int64_t chunk) {
  const int64_t batch = q.size(0), length = q.size(1), heads = q.size(2), width = q.size(3);
  const int64_t num_chunks = (length + chunk - 1) / chunk;
  const int64_t padding = num_chunks * chunk - length;
  // Pad the tail to whole chunks with positions that change nothing (k = 0, log g = 0),
  // then lay out as [B,H,N,C,dh].
  // No pad where T is whole chunks: constant_pad_nd copies even a pad of zero.
  const auto to_chunks = [&](const torch::Tensor& x) {
    return (padding > 0 ? torch::constant_pad_nd(x, {0, 0, 0, 0, 0, padding}) : x)
        .view({batch, num_chunks, chunk, heads, width})
        .permute({0, 3, 1, 2, 4});
  };
  const auto qc = to_chunks(q), kc = to_chunks(k), vc = to_chunks(v);
  const auto log_b = to_chunks(log_g).cumsum(3);         // log of the decay since the chunk start
  const auto log_b_end = log_b.narrow(3, chunk - 1, 1);  // [B,H,N,1,dh]: the chunk's total
  const auto decay = log_b.exp();                        // e^{b_t}, in (0, 1]
  const auto decay_end = decay.narrow(3, chunk - 1, 1);  // e^{b_C}: each chunk's total decay
  const auto decayed_q = qc * decay;                     // q_t e^{b_t}, never above |q_t|

  // Within a chunk: o_t += sum_{s<=t} (q_t . (b_t/b_s) k_s) v_s. The product form takes
  // the keys as k_s e^{-b_s} (an exp, not a division by e^{b_s}: the division's gradient
  // squares e^{b_s}, which underflows long before e^{-b_s} overflows), for the scores and,
  // scaled by e^{b_C} after the sum, for the chunk's end state (chunk_kernels.h).
  if (WithinRange(log_b_end.min().item<double>(), q.scalar_type())) {
    const ChunkOperands operands{decayed_q, kc * (-log_b).exp(), vc, decay_end.squeeze(3)};
    return ToPositions(ProductForm(operands, state), length, heads);
  }
  const auto causal = torch::ones({chunk, chunk}, q.options().dtype(torch::kBool)).tril();
  const auto relative = (log_b.unsqueeze(4) - log_b.unsqueeze(3))  // [B,H,N,C(t),C(s),dh]
                            .masked_fill(~causal.unsqueeze(-1), -INFINITY)
                            .exp();
  const auto scores = (qc.unsqueeze(4) * relative * kc.unsqueeze(3)).sum(-1);
  const auto end_keys = kc * (log_b_end - log_b).exp();
  const auto incoming = ExplicitStates(end_keys, vc, decay_end.squeeze(3), state);
  const auto o = BatchedMatmul(scores, vc) + BatchedMatmul(decayed_q, incoming);  // [B,H,N,C,dh]
  return o.permute({0, 2, 3, 1, 4})
      .reshape({batch, num_chunks * chunk, heads, width})
      .narrow(1, 0, length);
}

torch::Tensor ChunkwiseFromProjections(const torch::Tensor& projected, const torch::Tensor& b_g,
                                       int64_t num_heads, const torch::Tensor& lengths,
                                       torch::Tensor& state, int64_t chunk) {
  const int64_t batch = projected.size(0), length = projected.size(1);
  const int64_t model = projected.size(2) / 4, width = model / num_heads;
  if (FusedFrontApplies(projected, b_g, state)) {
    const auto operands = ChunkOperandsOf(projected, b_g, lengths, num_heads, chunk,
                                          1.0 / std::sqrt(static_cast<double>(width)));
    if (WithinRange(std::log(operands.chunk_decay.min().item<double>()),
                    operands.chunk_decay.scalar_type())) {
      return ProductForm(operands, state).narrow(1, 0, length);
    }
  }
  const auto positions = torch::arange(length, lengths.options().device(projected.device()));
  const auto mask = positions.unsqueeze(0) < lengths.to(projected.device()).unsqueeze(1);
  const auto inputs = SplitProjections(projected, b_g, num_heads, mask);
  return ChunkwiseRecurrence(inputs.q, inputs.k, inputs.v, LogDecay(inputs.decay_logits, mask),
                             state, chunk)
      .reshape({batch, length, model});
}

TimeMixer ChunkwiseMixer(int64_t chunk) {
  return [chunk](const LayerInputs& in, const torch::Tensor& mask, torch::Tensor& state) {
    return ChunkwiseRecurrence(in.q, in.k, in.v, LogDecay(in.decay_logits, mask), state, chunk);
  };
}

}  // namespace seqbench::simple_rnn
