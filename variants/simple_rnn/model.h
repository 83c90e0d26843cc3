// The SimpleRNN language model (specification: variants/simple_rnn/README.md): the
// shared weights, their seeded initializer, and the pieces that several variants share.
// Each variant composes these differently; what differs between them is how the
// recurrence over time is evaluated, which is the thing being benchmarked.
//
// Thread-safety: free functions over tensors; safe from any thread.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <vector>

#include "variants/core/language_model.h"
#include "variants/core/variant.h"

namespace seqbench::simple_rnn {

inline constexpr char kFamily[] = "simple_rnn";

// Throws unless the config describes a valid simple_rnn (positive sizes, H divides D).
void ValidateConfig(const ModelConfig& config);

// The shared initialisation of every simple_rnn variant. Drawn in float64 from a private
// generator, so the same seed gives the same weights whatever the variant, dtype or
// whatever ran before. Names: embedding [V,D]; layers.{l}.{norm [D], w_q, w_k, w_v,
// w_g, w_o [D,D], b_g [D]}; norm_out [D]; w_out [D,V].
ParameterSet InitWeights(const ModelConfig& config, uint64_t seed);

struct LayerWeights {
  torch::Tensor norm, w_q, w_k, w_v, w_g, b_g, w_o;
};

// Typed views onto a ParameterSet (no copies: gradients flow to the named parameters).
struct Weights {
  torch::Tensor embedding;
  std::vector<LayerWeights> layers;
  torch::Tensor norm_out, w_out;

  static Weights View(const ParameterSet& parameters, int64_t num_layers);
};

// The four per-position projections of one layer, each [B,T,H,dh].
struct LayerInputs {
  torch::Tensor q;  // already scaled by 1/sqrt(dh)
  torch::Tensor k;  // zero at padding positions
  torch::Tensor v;
  torch::Tensor decay_logits;  // u·W_g + b_g; the decay is sigmoid() of it
};

// [W_q W_k W_v W_g]: the layer's four [D,D] projections side by side, [D,4D] (a copy).
torch::Tensor FusedProjectionWeight(const LayerWeights& layer);

// One [D,4D] GEMM over every position, then split. u: [B,T,D]; mask: [B,T] bool or an
// undefined tensor when there is no padding.
LayerInputs ProjectFused(const torch::Tensor& u, const LayerWeights& layer, int64_t num_heads,
                         const torch::Tensor& mask);
// The split alone, for variants that compute the product u·[W_q W_k W_v W_g] their own way
// (int8_dynamic). projected: [B,T,4D]; b_g: [D].
LayerInputs SplitProjections(const torch::Tensor& projected, const torch::Tensor& b_g,
                             int64_t num_heads, const torch::Tensor& mask);

// The per-position decay g = sigmoid(decay_logits), forced to 1 at padding positions so
// that padding leaves the state unchanged. [B,T,H,dh]
torch::Tensor Decay(const torch::Tensor& decay_logits, const torch::Tensor& mask);
// log(g), computed as logsigmoid() so it stays finite where g underflows. [B,T,H,dh]
torch::Tensor LogDecay(const torch::Tensor& decay_logits, const torch::Tensor& mask);

// One step of the recurrence for every head at once:
//   S = diag(g)·S + k·vᵀ;  o = Sᵀ·q
// state: [...,H,dh,dh] (updated in place of the handle), q, k, v, g: [...,H,dh] -> o [...,H,dh]
torch::Tensor RecurrenceStep(torch::Tensor& state, const torch::Tensor& q, const torch::Tensor& k,
                             const torch::Tensor& v, const torch::Tensor& g);

// The recurrence as a loop over time. q, k, v, g: [B,T,H,dh]; state: [B,H,dh,dh], carried
// in and out. Returns o: [B,T,H,dh].
torch::Tensor RecurrenceLoop(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const torch::Tensor& g, torch::Tensor& state);

// The type every tensor of `tensors` promotes to (bf16 with float32 gives float32): what a
// hand-written recurrence computes in when autocast hands it mixed inputs.
torch::ScalarType PromotedType(const std::vector<torch::Tensor>& tensors);

// The same recurrence with a hand-written backward through time (as haste writes its
// RNNs): forward writes every state into one [T+1,B,H,dh,dh] buffer, outside autograd, and
// computes all outputs with one batched product; backward walks the buffer once in
// reverse. One autograd node instead of about five per step, no per-step allocation. Same
// arguments and results as RecurrenceLoop(); under no-grad it is RecurrenceLoop() (nothing
// to save). Not twice differentiable.
torch::Tensor RecurrenceThroughTime(const torch::Tensor& q, const torch::Tensor& k,
                                    const torch::Tensor& v, const torch::Tensor& g,
                                    torch::Tensor& state);

// How a variant evaluates the time mixing of one layer: given the layer's projections and
// the padding mask ([B,T] bool or undefined), return o: [B,T,H,dh] and carry `state`
// ([B,H,dh,dh]) from the first position to the last.
using TimeMixer = std::function<torch::Tensor(const LayerInputs& inputs, const torch::Tensor& mask,
                                              torch::Tensor& state)>;

// The plain time mixer: RecurrenceLoop() over sigmoid decays, one step per position.
TimeMixer StepLoopMixer();
// RecurrenceThroughTime() over sigmoid decays: the step loop with its backward by hand.
TimeMixer ThroughTimeMixer();

// One layer on the residual stream: h + mix(projections of RMSNorm(h))·W_o, carrying
// `state` ([B,H,dh,dh], read and replaced). h: [B,T,D] -> [B,T,D]; mask: [B,T] or undefined.
torch::Tensor LayerForward(const torch::Tensor& h, const LayerWeights& layer,
                           const torch::Tensor& mask, int64_t num_heads, const TimeMixer& mixer,
                           torch::Tensor& state);

// Embedding and every layer, with the time mixing delegated. tokens: [B,T]; mask: [B,T]
// or undefined; states: one [B,H,dh,dh] per layer, carried in and out (empty: zeros).
// Returns the residual stream h: [B,T,D].
torch::Tensor RunLayers(const Weights& weights, const torch::Tensor& tokens,
                        const torch::Tensor& mask, int64_t num_heads, const TimeMixer& mixer,
                        std::vector<torch::Tensor>& states);

// One layer's residual update, for a variant whose layer differs from LayerForward in its
// products (int8_dynamic): h: [B,T,D] -> h + the layer's output; `state` [B,H,dh,dh] is
// carried in and out.
using LayerStep =
    std::function<torch::Tensor(const torch::Tensor& h, int64_t layer, torch::Tensor& state)>;
// RunLayers with each layer computed by `layer_step`: the embedding, the zero states and
// their count check stay in one place.
torch::Tensor RunLayers(const Weights& weights, const torch::Tensor& tokens, int64_t num_heads,
                        const LayerStep& layer_step, std::vector<torch::Tensor>& states);

// The whole model of the variants that fuse their elementwise work (fused_recurrent,
// scan): the layers by `layer_step`, then FusedLanguageModelHead() and the loss over the
// batch's real targets.
ForwardOutput ForwardWithFusedHead(const Weights& weights, const Batch& batch, int64_t num_heads,
                                   const LayerStep& layer_step);

// logits = RMSNorm(h)·W_out. h: [...,D] -> [...,V]
torch::Tensor Head(const torch::Tensor& h, const Weights& weights);

// The whole batched model with a given time mixer: what `batched`, `scan` and
// `checkpointed` share.
ForwardOutput ForwardBatched(const Weights& weights, const Batch& batch, int64_t num_heads,
                             const TimeMixer& mixer);
// The same with the padding mask computed by the caller, so that no host work or copy
// happens inside (what a CUDA graph capture needs). tokens: [B,T]; mask: [B,T] bool on
// the tokens' device, or undefined when no position is padding.
ForwardOutput ForwardMasked(const Weights& weights, const torch::Tensor& tokens,
                            const torch::Tensor& mask, int64_t num_heads, const TimeMixer& mixer);

// The family's step cost (FamilyEntry::step_cost): LanguageModelCost() with the layer
// below. Recomputed positions re-run the recurrence only (checkpointed).
StepCost StepCostOf(const ModelConfig& config, const StepWork& work);

// `work` for a variant whose train step re-runs the recurrence of every position it
// computes in backward (layer_checkpointed, packed):
// recomputed_positions = positions in train mode.
StepWork WithRecomputedRecurrence(StepWork work);

// Capabilities every simple_rnn variant starts from: all modes, CPU and CUDA, fp32/fp64,
// under the given improvement category.
Capabilities BaseCapabilities(const std::string& category);

}  // namespace seqbench::simple_rnn
