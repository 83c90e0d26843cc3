// The causal self-attention language model (specification: variants/attention/README.md):
// the shared weights, their seeded initializer, and the pieces its variants share. The
// variants differ only in how one layer's attention softmax(q·kᵀ + causal mask)·v is
// evaluated, which is the thing being benchmarked; embedding, RMSNorm, head and loss are
// the ones simple_rnn uses (variants/core/language_model.h).
//
// Thread-safety: free functions over tensors; safe from any thread.
#pragma once

#include <torch/torch.h>

#include <array>
#include <functional>
#include <vector>

#include "variants/core/language_model.h"
#include "variants/core/variant.h"

namespace seqbench::attention {

inline constexpr char kFamily[] = "attention";

// Throws unless the config describes a valid attention model: positive sizes, H divides D,
// an even head width (rotary embedding rotates pairs) and a known feed-forward activation.
void ValidateConfig(const ModelConfig& config);

// The feed-forward block's hidden width F: 4·D for gelu; 8·D/3 (rounded up) for the gated
// activations, whose input matrix is [D,2F], so that all three have about 8·D² weights.
int64_t FeedForwardWidth(const ModelConfig& config);

// The shared initialisation of every attention variant, drawn in float64 from a private
// generator (one seed, the same weights whatever the variant). Names: embedding [V,D];
// layers.{l}.{norm [D], w_q, w_k, w_v, w_o [D,D], ffn_norm [D], w_up [D,F] or [D,2F] for the
// gated activations, w_down [F,D]}; norm_out [D]; w_out [D,V].
ParameterSet InitWeights(const ModelConfig& config, uint64_t seed);

struct LayerWeights {
  torch::Tensor norm, w_q, w_k, w_v, w_o, ffn_norm, w_up, w_down;
};

// Typed views onto a ParameterSet (no copies: gradients flow to the named parameters).
struct Weights {
  torch::Tensor embedding;
  std::vector<LayerWeights> layers;
  torch::Tensor norm_out, w_out;

  static Weights View(const ParameterSet& parameters, int64_t num_layers);
};

// How a variant evaluates one layer's attention for every head:
//   o = softmax(q·kᵀ, keys after the query masked)·v
// q: [B,H,T,dh], already scaled by 1/sqrt(dh); k, v: [B,H,S,dh] with S >= T, the last T
// keys at the queries' positions (S > T when a cache holds earlier keys). -> o: [B,H,T,dh]
using AttentionFn = std::function<torch::Tensor(const torch::Tensor& q, const torch::Tensor& k,
                                                const torch::Tensor& v)>;

// The literal attention: the [B,H,T,S] score matrix, masked, softmax, ·v.
torch::Tensor NaiveAttention(const torch::Tensor& q, const torch::Tensor& k,
                             const torch::Tensor& v);

// The same function in tiles of `block` queries and keys with an online softmax and a
// hand-written backward that recomputes the tiles (flash.cc): memory O(T·block) instead of
// O(T²). q, k, v: [B,H,T,dh] (q scaled), S = T only. -> o: [B,H,T,dh]
torch::Tensor FlashAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             int64_t block);

// Bytes of the score and probability matrices NaiveAttention keeps for one step: one
// layer's pair in inference, every layer's in train mode (saved for backward), at
// `positions` keys. What naive and kv_cache compare with their `score_budget_mib`.
double NaiveScoreBytes(const ModelConfig& config, Mode mode, int64_t batch_size, int64_t positions,
                       torch::ScalarType dtype);
// A SkipReason for NaiveScoreBytes above `budget_mib`, or "".
std::string NaiveBudgetReason(double bytes, int64_t budget_mib);
inline constexpr int64_t kDefaultScoreBudgetMiB = 2048;

// Rotary position embedding (RoPE, rotate-half form) of x: [B,H,T,dh] at absolute
// positions offset .. offset+T-1; base 10000. Returns a new tensor.
torch::Tensor Rotary(const torch::Tensor& x, int64_t offset);

// A key/value cache: one [B,H,capacity,dh] pair per layer and how many positions hold
// values. Written in place by RunLayers(), which turns gradients off while it has a cache
// (decoding is inference only).
struct KeyValueCache {
  std::vector<torch::Tensor> keys, values;
  int64_t length = 0;
};

// A layer's six weight matrices, named by the product each one takes part in.
enum class Matrix { kQuery, kKey, kValue, kOutput, kUp, kDown };
inline constexpr std::array<Matrix, 6> kMatrices = {Matrix::kQuery,  Matrix::kKey, Matrix::kValue,
                                                    Matrix::kOutput, Matrix::kUp,  Matrix::kDown};

// The float weight `matrix` of `layer`: [D,D], or w_up [D,F] / [D,2F], w_down [F,D]. What
// RunLayers multiplies by when it has no ProjectFn.
const torch::Tensor& MatrixOf(const LayerWeights& layer, Matrix matrix);

// How a variant applies layer `layer`'s matrix `matrix`: x: [...,in] -> x·W: [...,out].
// Empty (the default): torch::matmul with the float weights. int8 inference gives its
// quantized kernels instead (attention_int8_dynamic.cc).
using ProjectFn = std::function<torch::Tensor(size_t layer, Matrix matrix, const torch::Tensor& x)>;

// Embedding and every layer: attention (through `attend`) and the feed-forward block,
// each a pre-norm residual, their matrices applied through `project`. tokens: [B,T] at
// positions cache->length .. (0 without a cache); with a cache, each layer's k, v are
// appended to it and attention reads the whole cache, under no-grad. Returns the residual
// stream h: [B,T,D].
torch::Tensor RunLayers(const Weights& weights, const ModelConfig& config,
                        const torch::Tensor& tokens, const AttentionFn& attend,
                        KeyValueCache* cache = nullptr, const ProjectFn& project = {});

// logits = RMSNorm(h)·W_out. h: [...,D] -> [...,V]
torch::Tensor Head(const torch::Tensor& h, const Weights& weights);

// The whole model with a given attention. Padding needs no mask: under the causal mask a
// position attends only to earlier ones, and right-padding comes after every real token.
ForwardOutput ForwardWith(const Weights& weights, const ModelConfig& config, const Batch& batch,
                          const AttentionFn& attend);

// The family's step cost (FamilyEntry::step_cost): per position and layer the four [D,D]
// projections and the feed-forward block; per (query, key) pair that attention evaluates
// (StepWork::attention_pairs) 4·D (q·k and p·v for every head).
StepCost StepCostOf(const ModelConfig& config, const StepWork& work);

// `work` (Variant::Work's, which knows the mode) with the attention pairs of the default
// steps: the causal pairs of every [B,T] position (T·(T+1)/2 a sequence and layer), and in
// generate mode those of every re-run prefix. `scores_recomputed`: a train step's backward
// computes every pair's scores again (flash attention's tiles), counted as recomputed.
StepWork CausalWork(StepWork work, const Batch& batch, int64_t num_tokens,
                    bool scores_recomputed = false);

// Capabilities every attention variant starts from: all modes, CPU and CUDA, fp32/fp64,
// attention memory O(T^2) unless the variant says otherwise.
Capabilities BaseCapabilities(const std::string& category);

}  // namespace seqbench::attention
