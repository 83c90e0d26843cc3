#include "harness/training/optimization.h"

#include <cmath>
#include <stdexcept>

#include "harness/training/adamw_8bit.h"
#include "harness/training/layerwise_adaptive.h"
#include "harness/training/offloaded_adamw.h"
#include "variants/core/torch_compat.h"

namespace seqbench::training {

double LearningRateAt(const ScheduleOptions& schedule, int64_t step) {
  TORCH_CHECK(step >= 0, "step must be at least 0");
  if (step < schedule.warmup_steps) {
    return schedule.peak * static_cast<double>(step + 1) / schedule.warmup_steps;
  }
  const double minimum = schedule.peak * schedule.min_ratio;
  double position = static_cast<double>(step - schedule.warmup_steps);
  double cycle = static_cast<double>(schedule.cycle_steps);
  if (schedule.restarts) {
    while (position >= cycle) {
      position -= cycle;
      cycle *= schedule.cycle_multiplier;
    }
  } else if (position >= cycle) {
    return minimum;
  }
  const double pi = std::acos(-1.0);
  return minimum + (schedule.peak - minimum) * 0.5 * (1.0 + std::cos(pi * position / cycle));
}

DynamicLossScaler::DynamicLossScaler(LossScalerOptions options)
    : options_(options), scale_(options.initial_scale) {
  TORCH_CHECK(options_.initial_scale > 0 && options_.growth >= 1 && options_.backoff > 0 &&
                  options_.backoff < 1 && options_.growth_interval >= 1,
              "loss scaler needs initial_scale > 0, growth >= 1, 0 < backoff < 1 and "
              "growth_interval >= 1");
}

bool DynamicLossScaler::UnscaleGradients(const std::vector<torch::Tensor>& parameters) const {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> finite;  // one flag per gradient, left on its device
  for (const auto& parameter : parameters) {
    auto grad = parameter.grad();
    if (!grad.defined()) continue;
    grad.div_(scale_);
    finite.push_back(grad.isfinite().all());
  }
  // Read back once for all gradients: one device synchronisation per step, not per tensor.
  return finite.empty() || torch::stack(finite).all().item<bool>();
}

void DynamicLossScaler::Update(bool gradients_finite) {
  if (!gradients_finite) {
    scale_ *= options_.backoff;
    good_steps_ = 0;
    return;
  }
  if (++good_steps_ >= options_.growth_interval) {
    scale_ *= options_.growth;
    good_steps_ = 0;
  }
}

void DynamicLossScaler::Restore(double scale, int64_t good_steps) {
  TORCH_CHECK(scale > 0 && good_steps >= 0, "invalid loss-scaler state");
  scale_ = scale;
  good_steps_ = good_steps;
}

std::string_view PrecisionName(Precision precision) {
  switch (precision) {
    case Precision::kFloat32:
      return "fp32";
    case Precision::kBFloat16:
      return "bf16";
    case Precision::kFloat16:
      return "fp16";
  }
  return "?";
}

std::optional<Precision> ParsePrecision(std::string_view name) {
  for (const auto precision : {Precision::kFloat32, Precision::kBFloat16, Precision::kFloat16}) {
    if (PrecisionName(precision) == name) return precision;
  }
  return std::nullopt;
}

std::string_view OptimizerKindName(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kAdamW8bit:
      return "adamw8bit";
    case OptimizerKind::kLamb:
      return "lamb";
    case OptimizerKind::kLars:
      return "lars";
    case OptimizerKind::kAdamW:
      break;
  }
  return "adamw";
}

std::optional<OptimizerKind> ParseOptimizerKind(std::string_view name) {
  for (const auto kind : {OptimizerKind::kAdamW, OptimizerKind::kAdamW8bit, OptimizerKind::kLamb,
                          OptimizerKind::kLars}) {
    if (OptimizerKindName(kind) == name) return kind;
  }
  return std::nullopt;
}

int64_t OptimizerStateBytes(const torch::optim::Optimizer& optimizer) {
  if (const auto* eight_bit = dynamic_cast<const AdamW8bit*>(&optimizer)) {
    return eight_bit->StateBytes();
  }
  if (const auto* offloaded = dynamic_cast<const OffloadedAdamW*>(&optimizer)) {
    return offloaded->StateBytes();
  }
  if (const auto* lamb = dynamic_cast<const Lamb*>(&optimizer)) return lamb->StateBytes();
  if (const auto* lars = dynamic_cast<const Lars*>(&optimizer)) return lars->StateBytes();
  if (dynamic_cast<const torch::optim::AdamW*>(&optimizer) == nullptr) {
    throw std::invalid_argument(
        "OptimizerStateBytes knows AdamW, AdamW8bit, OffloadedAdamW, LAMB and LARS only");
  }
  int64_t bytes = 0;
  for (const auto& [key, state] : optimizer.state()) {
    const auto& adamw = static_cast<const torch::optim::AdamWParamState&>(*state);
    for (const torch::Tensor* tensor :
         {&adamw.exp_avg(), &adamw.exp_avg_sq(), &adamw.max_exp_avg_sq()}) {
      if (tensor->defined()) bytes += static_cast<int64_t>(tensor->nbytes());
    }
  }
  return bytes;
}

torch::ScalarType AutocastDtype(Precision precision) {
  return precision == Precision::kFloat16 ? torch::kHalf : torch::kBFloat16;
}

AutocastScope::AutocastScope(torch::Device device, Precision precision)
    : device_(device.type()), enabled_(precision != Precision::kFloat32) {
  if (!enabled_) return;
  TORCH_CHECK(compat::AutocastSupports(device_, AutocastDtype(precision)),
              "amp=", PrecisionName(precision), " is not supported on ", device.str(),
              " by LibTorch ", compat::TorchVersion(),
              " (CPU autocast takes bf16 only before LibTorch 2.4; fp16 needs CUDA)");
  compat::SetAutocast(device_, true, AutocastDtype(precision));
}

AutocastScope::~AutocastScope() {
  if (!enabled_) return;
  compat::SetAutocast(device_, false, torch::kFloat32);
  at::autocast::clear_cache();
}

}  // namespace seqbench::training
