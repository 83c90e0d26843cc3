#include "variants/simple_rnn/chunkwise.h"

#include <cmath>
#include <vector>

#include "variants/core/batched_matmul.h"

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
  // each key's share of the end state as k_s e^{-b_s} e^{b_C} from the two factors it forms
  // anyway, instead of a third exp of b_C - b_s (one exp and a subtraction fewer, each way):
  // within its range bound both factors are normal numbers. Not k_s / e^{b_s}: the
  // division's gradient squares e^{b_s}, which underflows long before e^{-b_s} overflows.
  const auto causal = torch::ones({chunk, chunk}, q.options().dtype(torch::kBool)).tril();
  torch::Tensor scores;    // [B,H,N,C(t),C(s)]
  torch::Tensor end_keys;  // k_s e^{b_C - b_s}: each key's share of the chunk's end state
  if (-log_b_end.min().item<double>() < MaxLogDecayRange(q.scalar_type())) {
    const auto unscaled_k = kc * (-log_b).exp();  // k_s e^{-b_s}
    scores = BatchedMatmul(decayed_q, unscaled_k.transpose(-1, -2)).masked_fill_(~causal, 0.0);
    end_keys = unscaled_k * decay_end;
  } else {
    const auto relative = (log_b.unsqueeze(4) - log_b.unsqueeze(3))  // [B,H,N,C(t),C(s),dh]
                              .masked_fill(~causal.unsqueeze(-1), -INFINITY)
                              .exp();
    scores = (qc.unsqueeze(4) * relative * kc.unsqueeze(3)).sum(-1);
    end_keys = kc * (log_b_end - log_b).exp();
  }
  const auto intra = BatchedMatmul(scores, vc);  // [B,H,N,C,dh]

  // Each chunk's own contribution to the state at its end, and its total decay.
  const auto local_state = BatchedMatmul(end_keys.transpose(-1, -2), vc);  // [B,H,N,dh,dh]
  const auto chunk_decay = decay_end.squeeze(3).unsqueeze(-1);             // [B,H,N,dh,1]

  // The only sequential part: one state update per chunk.
  // Unbound once, so that the backward does not scatter per chunk into full-size buffers.
  const auto local_states = local_state.unbind(2), decays = chunk_decay.unbind(2);
  std::vector<torch::Tensor> incoming;
  incoming.reserve(num_chunks);
  for (int64_t n = 0; n < num_chunks; ++n) {
    incoming.push_back(state);
    state = torch::addcmul(local_states[n], decays[n], state);
  }
  const auto inter = BatchedMatmul(decayed_q, torch::stack(incoming, 2));  // [B,H,N,C,dh]

  return (intra + inter)
      .permute({0, 2, 3, 1, 4})
      .reshape({batch, num_chunks * chunk, heads, width})
      .narrow(1, 0, length);
}

TimeMixer ChunkwiseMixer(int64_t chunk) {
  return [chunk](const LayerInputs& in, const torch::Tensor& mask, torch::Tensor& state) {
    return ChunkwiseRecurrence(in.q, in.k, in.v, LogDecay(in.decay_logits, mask), state, chunk);
  };
}

}  // namespace seqbench::simple_rnn
