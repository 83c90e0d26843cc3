#include "variants/simple_rnn/model.h"

#include <cmath>
#include <string>

#include "variants/core/batched_matmul.h"
#include "variants/core/registry.h"
#include "variants/core/torch_compat.h"

namespace seqbench::simple_rnn {
void ValidateConfig(const ModelConfig& config) {
  TORCH_CHECK(
      config.vocab_size > 0 && config.width > 0 && config.num_layers > 0 && config.num_heads > 0,
      "simple_rnn needs positive vocab_size, width, layers and heads");
  TORCH_CHECK(config.width % config.num_heads == 0, "simple_rnn width (", config.width,
              ") must be divisible by heads (", config.num_heads, ")");
}

ParameterSet InitWeights(const ModelConfig& config, uint64_t seed) {
  ValidateConfig(config);
  auto generator = compat::MakeCpuGenerator(seed);
  const auto options = torch::TensorOptions().dtype(torch::kFloat64);
  const int64_t d = config.width;
  const auto normal = [&](std::vector<int64_t> shape, double std) {
    return torch::randn(shape, generator, options) * std;
  };
  // Gains near 1 (not exactly 1) so that their gradients are exercised by the checks.
  const auto gain = [&] { return 1.0 + normal({d}, 0.1); };
  const double projection_std = 1.0 / std::sqrt(static_cast<double>(d));

  ParameterSet weights;
  weights.insert("embedding", normal({config.vocab_size, d}, 1.0));
  for (int64_t layer = 0; layer < config.num_layers; ++layer) {
    weights.insert(LayerParameterName(layer, "norm"), gain());
    weights.insert(LayerParameterName(layer, "w_q"), normal({d, d}, projection_std));
    weights.insert(LayerParameterName(layer, "w_k"), normal({d, d}, projection_std));
    weights.insert(LayerParameterName(layer, "w_v"), normal({d, d}, projection_std));
    weights.insert(LayerParameterName(layer, "w_g"), normal({d, d}, projection_std));
    // Decays start between 0.9 and 0.999 at zero input: long but finite memory.
    const auto decay = torch::rand({d}, generator, options) * 0.099 + 0.9;
    weights.insert(LayerParameterName(layer, "b_g"), torch::log(decay / (1.0 - decay)));
    weights.insert(LayerParameterName(layer, "w_o"), normal({d, d}, projection_std));
  }
  weights.insert("norm_out", gain());
  weights.insert("w_out", normal({d, config.vocab_size}, projection_std));
  return weights;
}

Weights Weights::View(const ParameterSet& parameters, int64_t num_layers) {
  Weights weights;
  weights.embedding = parameters["embedding"];
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    weights.layers.push_back(LayerWeights{
        parameters[LayerParameterName(layer, "norm")], parameters[LayerParameterName(layer, "w_q")],
        parameters[LayerParameterName(layer, "w_k")], parameters[LayerParameterName(layer, "w_v")],
        parameters[LayerParameterName(layer, "w_g")], parameters[LayerParameterName(layer, "b_g")],
        parameters[LayerParameterName(layer, "w_o")]});
  }
  weights.norm_out = parameters["norm_out"];
  weights.w_out = parameters["w_out"];
  return weights;
}

LayerInputs ProjectFused(const torch::Tensor& u, const LayerWeights& layer, int64_t num_heads,
                         const torch::Tensor& mask) {
  return SplitProjections(torch::matmul(u, FusedProjectionWeight(layer)), layer.b_g, num_heads,
                          mask);
}

torch::Tensor FusedProjectionWeight(const LayerWeights& layer) {
  return torch::cat({layer.w_q, layer.w_k, layer.w_v, layer.w_g}, 1);
}

LayerInputs SplitProjections(const torch::Tensor& projected, const torch::Tensor& b_g,
                             int64_t num_heads, const torch::Tensor& mask) {
  const int64_t head_width = projected.size(-1) / 4 / num_heads;
  auto parts = projected.chunk(4, -1);
  std::vector<int64_t> head_shape(projected.sizes().begin(), projected.sizes().end() - 1);
  head_shape.push_back(num_heads);
  head_shape.push_back(head_width);
  LayerInputs inputs;
  inputs.q = parts[0].reshape(head_shape) * (1.0 / std::sqrt(static_cast<double>(head_width)));
  inputs.k = parts[1].reshape(head_shape);
  inputs.v = parts[2].reshape(head_shape);
  inputs.decay_logits = (parts[3] + b_g).reshape(head_shape);
  if (mask.defined()) {
    inputs.k = inputs.k.masked_fill(~mask.unsqueeze(-1).unsqueeze(-1), 0.0);
  }
  return inputs;
}

torch::Tensor Decay(const torch::Tensor& decay_logits, const torch::Tensor& mask) {
  auto g = torch::sigmoid(decay_logits);
  return mask.defined() ? g.masked_fill(~mask.unsqueeze(-1).unsqueeze(-1), 1.0) : g;
}

torch::Tensor LogDecay(const torch::Tensor& decay_logits, const torch::Tensor& mask) {
  auto log_g = torch::log_sigmoid(decay_logits);
  return mask.defined() ? log_g.masked_fill(~mask.unsqueeze(-1).unsqueeze(-1), 0.0) : log_g;
}

torch::Tensor RecurrenceStep(torch::Tensor& state, const torch::Tensor& q, const torch::Tensor& k,
                             const torch::Tensor& v, const torch::Tensor& g) {
  state = torch::addcmul(g.unsqueeze(-1) * state, k.unsqueeze(-1), v.unsqueeze(-2));
  return BatchedMatmul(q.unsqueeze(-2), state).squeeze(-2);
}

torch::Tensor RecurrenceLoop(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const torch::Tensor& g, torch::Tensor& state) {
  // Unbound once: the backward of unbind is one stack, where a per-step select() would
  // scatter into a zero tensor the size of the whole input at every step (O(T^2)).
  const auto qs = q.unbind(1), ks = k.unbind(1), vs = v.unbind(1), gs = g.unbind(1);
  std::vector<torch::Tensor> outputs;
  outputs.reserve(qs.size());
  for (size_t t = 0; t < qs.size(); ++t) {
    outputs.push_back(RecurrenceStep(state, qs[t], ks[t], vs[t], gs[t]));
  }
  return torch::stack(outputs, 1);
}

torch::ScalarType PromotedType(const std::vector<torch::Tensor>& tensors) {
  torch::ScalarType dtype = tensors.front().scalar_type();
  for (const auto& tensor : tensors) dtype = c10::promoteTypes(dtype, tensor.scalar_type());
  return dtype;
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// q, k, v, g: [B,T,H,dh]; initial: [B,H,dh,dh] -> {o: [B,T,H,dh], final state [B,H,dh,dh]}.
// With S_t = diag(g_t)·S_{t-1} + k_t·v_tᵀ and o_t = S_tᵀ·q_t, backward from dO_t and dS_T:
//   dS_t = dS_{t+1}·diag(g_{t+1}) + q_t·dO_tᵀ  (the future's part, scaled back, plus o_t's)
//   dq_t = S_t·dO_t,  dk_t = dS_t·v_t,  dv_t = dS_tᵀ·k_t,  dg_t = rowsum(dS_t ⊙ S_{t-1}).
class RecurrenceFunction : public torch::autograd::Function<RecurrenceFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, torch::Tensor q, torch::Tensor k,
                               torch::Tensor v, torch::Tensor g, torch::Tensor initial) {
    const int64_t steps = q.size(1);
    std::vector<int64_t> shape{steps + 1};
    shape.insert(shape.end(), initial.sizes().begin(), initial.sizes().end());
    // states[t]: the state after t steps. Time-major views of the inputs: [T,B,H,dh].
    torch::Tensor states = torch::empty(shape, initial.options());
    states[0].copy_(initial);
    const auto ks = k.transpose(0, 1).unsqueeze(-1), vs = v.transpose(0, 1).unsqueeze(-2),
               gs = g.transpose(0, 1).unsqueeze(-1);
    const auto state_steps = states.unbind(0);
    for (int64_t t = 0; t < steps; ++t) {
      torch::Tensor next = state_steps[t + 1];
      torch::mul_out(next, state_steps[t], gs[t]);
      next.addcmul_(ks[t], vs[t]);
    }
    // Every o_t = S_tᵀ·q_t in one batched product: [T,B,H,1,dh]·[T,B,H,dh,dh].
    const auto o = BatchedMatmul(q.transpose(0, 1).unsqueeze(-2), states.slice(0, 1))
                       .squeeze(-2)
                       .transpose(0, 1)
                       .contiguous();
    ctx->save_for_backward({q, k, v, g, states});
    return {o, state_steps[steps].clone()};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &g = saved[3],
                        &states = saved[4];
    const int64_t steps = q.size(1);
    // In the inputs' type: under autocast, o's consumer may hand back a bf16 gradient. The
    // state's gradient is a copy, since it is updated in place.
    const auto dtype = q.scalar_type();
    torch::Tensor d_state = grad_outputs[1].defined()
                                ? grad_outputs[1].to(dtype, /*non_blocking=*/false, /*copy=*/true)
                                : torch::zeros_like(states[0]);
    torch::Tensor d_o =
        grad_outputs[0].defined() ? grad_outputs[0].to(dtype) : torch::zeros_like(q);
    const auto d_o_steps = d_o.transpose(0, 1);  // [T,B,H,dh]
    // dq_t = S_t·dO_t for every step at once.
    const auto d_q =
        BatchedMatmul(states.slice(0, 1), d_o_steps.unsqueeze(-1)).squeeze(-1).transpose(0, 1);
    torch::Tensor d_k = torch::empty_like(d_o_steps), d_v = torch::empty_like(d_o_steps),
                  d_g = torch::empty_like(d_o_steps);  // time-major; transposed on return
    const auto qs = q.transpose(0, 1).unsqueeze(-1), ks = k.transpose(0, 1).unsqueeze(-2),
               vs = v.transpose(0, 1).unsqueeze(-1), gs = g.transpose(0, 1).unsqueeze(-1),
               d_os = d_o_steps.unsqueeze(-2);
    const auto state_steps = states.unbind(0);
    const auto d_k_steps = d_k.unbind(0), d_v_steps = d_v.unbind(0), d_g_steps = d_g.unbind(0);
    for (int64_t t = steps - 1; t >= 0; --t) {
      d_state.addcmul_(qs[t], d_os[t]);
      d_k_steps[t].copy_(BatchedMatmul(d_state, vs[t]).squeeze(-1));
      d_v_steps[t].copy_(BatchedMatmul(ks[t], d_state).squeeze(-2));
      d_g_steps[t].copy_((d_state * state_steps[t]).sum(-1));
      d_state.mul_(gs[t]);
    }
    return {d_q, d_k.transpose(0, 1), d_v.transpose(0, 1), d_g.transpose(0, 1), d_state};
  }
};

}  // namespace

torch::Tensor RecurrenceThroughTime(const torch::Tensor& q, const torch::Tensor& k,
                                    const torch::Tensor& v, const torch::Tensor& g,
                                    torch::Tensor& state) {
  const bool needs_graph = torch::GradMode::is_enabled() &&
                           (q.requires_grad() || k.requires_grad() || v.requires_grad() ||
                            g.requires_grad() || state.requires_grad());
  if (!needs_graph) return RecurrenceLoop(q, k, v, g, state);
  // Under autocast the projections arrive in bf16 beside a float32 state: compute in the
  // promoted type, as the step loop's elementwise ops would (the casts carry gradients).
  const auto dtype = PromotedType({q, k, v, g, state});
  auto outputs = RecurrenceFunction::apply(q.to(dtype), k.to(dtype), v.to(dtype), g.to(dtype),
                                           state.to(dtype));
  state = outputs[1];
  return outputs[0];
}

TimeMixer ThroughTimeMixer() {
  return [](const LayerInputs& in, const torch::Tensor& mask, torch::Tensor& state) {
    return RecurrenceThroughTime(in.q, in.k, in.v, Decay(in.decay_logits, mask), state);
  };
}

TimeMixer StepLoopMixer() {
  return [](const LayerInputs& in, const torch::Tensor& mask, torch::Tensor& state) {
    return RecurrenceLoop(in.q, in.k, in.v, Decay(in.decay_logits, mask), state);
  };
}

torch::Tensor RunLayers(const Weights& weights, const torch::Tensor& tokens,
                        const torch::Tensor& mask, int64_t num_heads, const TimeMixer& mixer,
                        std::vector<torch::Tensor>& states) {
  return RunLayers(
      weights, tokens, num_heads,
      [&](const torch::Tensor& h, int64_t layer, torch::Tensor& state) {
        return LayerForward(h, weights.layers[layer], mask, num_heads, mixer, state);
      },
      states);
}

torch::Tensor RunLayers(const Weights& weights, const torch::Tensor& tokens, int64_t num_heads,
                        const LayerStep& layer_step, std::vector<torch::Tensor>& states) {
  const int64_t num_layers = static_cast<int64_t>(weights.layers.size());
  auto h = torch::embedding(weights.embedding, tokens);  // [B,T,D]
  const int64_t head_width = h.size(-1) / num_heads;
  if (states.empty()) {
    for (int64_t layer = 0; layer < num_layers; ++layer) {
      states.push_back(
          torch::zeros({tokens.size(0), num_heads, head_width, head_width}, h.options()));
    }
  }
  TORCH_CHECK(static_cast<int64_t>(states.size()) == num_layers, "expected ", num_layers,
              " layer states, got ", states.size());
  for (int64_t layer = 0; layer < num_layers; ++layer) h = layer_step(h, layer, states[layer]);
  return h;
}

torch::Tensor LayerForward(const torch::Tensor& h, const LayerWeights& layer,
                           const torch::Tensor& mask, int64_t num_heads, const TimeMixer& mixer,
                           torch::Tensor& state) {
  const auto inputs = ProjectFused(RmsNorm(h, layer.norm), layer, num_heads, mask);
  const auto o = mixer(inputs, mask, state);  // [B,T,H,dh]
  return h + torch::matmul(o.flatten(-2), layer.w_o);
}

ForwardOutput ForwardWithFusedHead(const Weights& weights, const Batch& batch, int64_t num_heads,
                                   const LayerStep& layer_step) {
  std::vector<torch::Tensor> states;
  const torch::Tensor h = RunLayers(weights, batch.tokens, num_heads, layer_step, states);
  const torch::Tensor logits = FusedLanguageModelHead(h, weights.norm_out, weights.w_out);
  return {logits, NextTokenLoss(logits, batch)};
}

torch::Tensor Head(const torch::Tensor& h, const Weights& weights) {
  return LanguageModelHead(h, weights.norm_out, weights.w_out);
}

ForwardOutput ForwardBatched(const Weights& weights, const Batch& batch, int64_t num_heads,
                             const TimeMixer& mixer) {
  const bool has_padding = batch.lengths.min().item<int64_t>() < batch.max_length();
  return ForwardMasked(weights, batch.tokens, has_padding ? batch.PaddingMask() : torch::Tensor(),
                       num_heads, mixer);
}

ForwardOutput ForwardMasked(const Weights& weights, const torch::Tensor& tokens,
                            const torch::Tensor& mask, int64_t num_heads, const TimeMixer& mixer) {
  std::vector<torch::Tensor> states;
  const auto h = RunLayers(weights, tokens, mask, num_heads, mixer, states);
  auto logits = Head(h, weights);
  auto loss = NextTokenLoss(logits, tokens, mask);
  return {logits, loss};
}

Capabilities BaseCapabilities(const std::string& category) {
  return LanguageModelCapabilities(kFamily, category);
}

StepWork WithRecomputedRecurrence(StepWork work) {
  if (work.mode == Mode::kTrain) work.recomputed_positions = work.positions;
  return work;
}

StepCost StepCostOf(const ModelConfig& config, const StepWork& work) {
  const double d = static_cast<double>(config.width);
  const double head_width = d / static_cast<double>(config.num_heads);
  // Per position and layer: the q, k, v, g and output projections (5 [D,D] GEMMs), and
  // per head the recurrence S = diag(g)·S + k·vᵀ (3·dh²) and o = Sᵀ·q (2·dh²).
  // The projections are products; the recurrence is counted as not (a step loop's
  // per-head outer products, however a variant groups them), and is what checkpointing
  // recomputes.
  const double recurrence = 5 * d * head_width;
  const double v = static_cast<double>(config.vocab_size);
  const double parameters =
      2 * v * d + static_cast<double>(config.num_layers) * (5 * d * d + 2 * d) + d;
  return LanguageModelCost(config, work, {10 * d * d, recurrence, 0, recurrence}, parameters);
}

SEQBENCH_REGISTER_FAMILY(kFamily, InitWeights, ValidateConfig, StepCostOf,
                         "gated linear-recurrence language model (variants/simple_rnn/README.md)");

}  // namespace seqbench::simple_rnn
