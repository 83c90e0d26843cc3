#include "variants/core/language_model.h"

#include <ATen/Parallel.h>

#include <cmath>
#include <vector>

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

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Rows a task of the norm's parallel loops takes: a few thousand values each.
constexpr int64_t kNormGrain = 16;

// x: [N,D], gain: [D], contiguous, one type -> {y: [N,D], the rows' 1/rms: [N]}.
std::vector<torch::Tensor> NormForward(const torch::Tensor& x, const torch::Tensor& gain) {
  const int64_t rows = x.size(0), width = x.size(1);
  auto y = torch::empty_like(x);
  auto inverse_rms = torch::empty({rows}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "fused_rms_norm_forward", [&] {
    const scalar_t *in = x.data_ptr<scalar_t>(), *g = gain.data_ptr<scalar_t>();
    scalar_t *out = y.data_ptr<scalar_t>(), *r = inverse_rms.data_ptr<scalar_t>();
    at::parallel_for(0, rows, kNormGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const scalar_t* row = in + i * width;
        scalar_t squares = 0;
        _Pragma("omp simd reduction(+ : squares)")
        for (int64_t j = 0; j < width; ++j) squares += row[j] * row[j];
        const scalar_t scale = scalar_t(1) / std::sqrt(squares / width + scalar_t(kRmsNormEpsilon));
        r[i] = scale;
        for (int64_t j = 0; j < width; ++j) out[i * width + j] = row[j] * scale * g[j];
      }
    });
  });
  return {y, inverse_rms};
}

// With y = x·r·gain, r = (mean(x²) + ε)^(-1/2) per row:
//   dx = r·gain·dy − x·r³·(Σ_j dy_j·gain_j·x_j)/D,   d gain = Σ_rows dy·x·r.
// Returns {dx: [N,D], d gain: [D]}; each thread sums its rows' d gain in its own row of a
// [threads, D] buffer, added up at the end (no atomics, a fixed order per thread count).
std::vector<torch::Tensor> NormBackward(const torch::Tensor& x, const torch::Tensor& gain,
                                        const torch::Tensor& inverse_rms,
                                        const torch::Tensor& d_y) {
  const int64_t rows = x.size(0), width = x.size(1);
  auto d_x = torch::empty_like(x);
  auto partial_gain = torch::zeros({at::get_num_threads(), width}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "fused_rms_norm_backward", [&] {
    const scalar_t *in = x.data_ptr<scalar_t>(), *g = gain.data_ptr<scalar_t>();
    const scalar_t *r = inverse_rms.data_ptr<scalar_t>(), *dy = d_y.data_ptr<scalar_t>();
    scalar_t *dx = d_x.data_ptr<scalar_t>(), *partials = partial_gain.data_ptr<scalar_t>();
    at::parallel_for(0, rows, kNormGrain, [&](int64_t begin, int64_t end) {
      scalar_t* d_gain = partials + at::get_thread_num() * width;
      for (int64_t i = begin; i < end; ++i) {
        const scalar_t *row = in + i * width, *d_row = dy + i * width;
        scalar_t dot = 0;
        _Pragma("omp simd reduction(+ : dot)")
        for (int64_t j = 0; j < width; ++j) dot += d_row[j] * g[j] * row[j];
        const scalar_t scale = r[i], correction = scale * scale * scale * dot / width;
        for (int64_t j = 0; j < width; ++j) {
          dx[i * width + j] = scale * g[j] * d_row[j] - correction * row[j];
          d_gain[j] += d_row[j] * row[j] * scale;
        }
      }
    });
  });
  return {d_x, partial_gain.sum(0)};
}

class RmsNormFunction : public torch::autograd::Function<RmsNormFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, torch::Tensor x, torch::Tensor gain) {
    const auto rows = x.reshape({-1, x.size(-1)}).contiguous();
    gain = gain.contiguous();
    auto outputs = NormForward(rows, gain);
    ctx->save_for_backward({rows, gain, outputs[1]});
    return {outputs[0].view(x.sizes())};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& rows = saved[0];
    const torch::Tensor d_y = grad_outputs[0].to(rows.scalar_type()).reshape(rows.sizes());
    auto grads = NormBackward(rows, saved[1], saved[2], d_y.contiguous());
    return {grads[0].view(grad_outputs[0].sizes()), grads[1]};
  }
};

int64_t test_extra_head_passes = 0;

// logits = norm(h)·W_out, after the test hook's extra passes.
template <typename Norm>
torch::Tensor HeadWith(const Norm& norm, const torch::Tensor& h, const torch::Tensor& gain,
                       const torch::Tensor& w_out) {
  for (int64_t pass = 0; pass < test_extra_head_passes; ++pass) {
    torch::NoGradGuard no_grad;
    (void)torch::matmul(norm(h, gain), w_out);
  }
  return torch::matmul(norm(h, gain), w_out);
}

}  // namespace

torch::Tensor FusedRmsNorm(const torch::Tensor& x, const torch::Tensor& gain) {
  if (!x.device().is_cpu()) return RmsNorm(x, gain);
  const auto dtype = c10::promoteTypes(x.scalar_type(), gain.scalar_type());
  return RmsNormFunction::apply(x.to(dtype), gain.to(dtype))[0];
}

void SetTestExtraHeadPasses(int64_t passes) { test_extra_head_passes = passes; }
int64_t TestExtraHeadPasses() { return test_extra_head_passes; }

torch::Tensor LanguageModelHead(const torch::Tensor& h, const torch::Tensor& gain,
                                const torch::Tensor& w_out) {
  return HeadWith(RmsNorm, h, gain, w_out);
}

torch::Tensor FusedLanguageModelHead(const torch::Tensor& h, const torch::Tensor& gain,
                                     const torch::Tensor& w_out) {
  return HeadWith(FusedRmsNorm, h, gain, w_out);
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
