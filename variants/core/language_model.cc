#include "variants/core/language_model.h"

#include "variants/core/test_hooks.h"

namespace seqbench {

std::string LayerParameterName(int64_t layer, const char* name) {
  return "layers." + std::to_string(layer) + "." + name;
}

Capabilities LanguageModelCapabilities(const std::string& family, const std::string& category) {
  Capabilities caps;
  caps.family = family;
  caps.category = category;
  caps.modes = {Mode::kTrain, Mode::kForward, Mode::kGenerate};
  caps.devices = {torch::kCPU, torch::kCUDA};
  caps.dtypes = {torch::kFloat32, torch::kFloat64};
  return caps;
}

StepCost LanguageModelCost(const ModelConfig& config, const StepWork& work, const LayerFlops& layer,
                           double parameters) {
  const double layers = static_cast<double>(config.num_layers);
  const double positions = static_cast<double>(work.positions);
  const double recomputed = static_cast<double>(work.recomputed_positions) * layers;
  const double head_flops = 2.0 * config.width * config.vocab_size;
  const double forward_gemm =
      positions * layers * layer.gemm + static_cast<double>(work.head_positions) * head_flops;
  const double forward = forward_gemm + positions * layers * layer.other;
  StepCost cost;
  const double element_bytes = static_cast<double>(work.element_bytes);
  if (work.mode == Mode::kTrain) {
    cost.flops = 3 * forward + recomputed * (layer.recomputed_gemm + layer.recomputed_other) +
                 2 * parameters;
    cost.gemm_flops = 3 * forward_gemm + recomputed * layer.recomputed_gemm;
    cost.bytes = 4 * parameters * element_bytes;
  } else {
    cost.flops = forward;
    cost.gemm_flops = forward_gemm;
    cost.bytes = parameters * element_bytes;
    if (work.mode == Mode::kForward) {
      cost.bytes += static_cast<double>(work.head_positions) * config.vocab_size * element_bytes;
    }
  }
  return cost;
}

torch::Tensor RmsNorm(const torch::Tensor& x, const torch::Tensor& gain) {
  return x * torch::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + kRmsNormEpsilon) * gain;
}

namespace {
int64_t test_extra_head_passes = 0;
}  // namespace

void SetTestExtraHeadPasses(int64_t passes) { test_extra_head_passes = passes; }
int64_t TestExtraHeadPasses() { return test_extra_head_passes; }

torch::Tensor LanguageModelHead(const torch::Tensor& h, const torch::Tensor& gain,
                                const torch::Tensor& w_out) {
  for (int64_t pass = 0; pass < test_extra_head_passes; ++pass) {
    torch::NoGradGuard no_grad;
    (void)torch::matmul(RmsNorm(h, gain), w_out);
  }
  return torch::matmul(RmsNorm(h, gain), w_out);
}

torch::Tensor NextTokenLoss(const torch::Tensor& logits, const Batch& batch) {
  return NextTokenLoss(logits, batch.tokens, batch.PaddingMask());
}

torch::Tensor NextTokenLoss(const torch::Tensor& logits, const torch::Tensor& tokens,
                            const torch::Tensor& mask) {
  const int64_t t = tokens.size(1);
  const auto predictions = logits.slice(1, 0, t - 1);  // [B,T-1,V]
  const auto targets = tokens.slice(1, 1, t);          // [B,T-1]
  const auto has_target =
      mask.defined() ? mask.slice(1, 1, t) : torch::ones_like(targets, torch::kBool);  // [B,T-1]
  const auto losses = torch::nn::functional::cross_entropy(
      predictions.reshape({-1, logits.size(-1)}), targets.reshape({-1}),
      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
  const auto count = has_target.sum().clamp_min(1).to(logits.scalar_type());
  return (losses * has_target.reshape({-1}).to(logits.scalar_type())).sum() / count;
}

}  // namespace seqbench
