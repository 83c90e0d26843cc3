// The pieces of a training step around the model: the learning-rate schedule, dynamic
// loss scaling for float16 mixed precision (LibTorch's C++ API has no GradScaler), and
// an autocast scope, and the choice of optimizer. AdamW and clipping by global norm are
// LibTorch's own (torch::optim::AdamW, torch::nn::utils::clip_grad_norm_); 8-bit AdamW
// (adamw_8bit.h) and AdamW with its state on the host (offloaded_adamw.h) are ours.
//
// Thread-safety: LearningRateAt() is pure. A DynamicLossScaler belongs to one training
// loop. AutocastScope changes thread-local state: open and close it on one thread.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace seqbench::training {

// Linear warmup to `peak`, then cosine decay to peak·min_ratio over `cycle_steps`. With
// restarts (SGDR), the cosine starts again at `peak` after each cycle, every cycle
// `cycle_multiplier` times longer than the one before; without, the rate stays at the
// minimum after the first cycle.
struct ScheduleOptions {
  double peak = 3e-3;
  int64_t warmup_steps = 0;
  int64_t cycle_steps = 1000;
  double min_ratio = 0.1;
  bool restarts = false;
  double cycle_multiplier = 1.0;
};

// The learning rate of optimizer step `step` (0-based).
double LearningRateAt(const ScheduleOptions& schedule, int64_t step);

// Dynamic loss scaling: the loss is multiplied by scale() before backward so that small
// float16 gradients do not flush to zero. A step whose unscaled gradients hold an inf or
// NaN is skipped and the scale multiplied by `backoff`; after `growth_interval`
// consecutive good steps the scale is multiplied by `growth`.
struct LossScalerOptions {
  double initial_scale = 65536.0;
  double growth = 2.0;
  double backoff = 0.5;
  int64_t growth_interval = 2000;
};

class DynamicLossScaler {
 public:
  explicit DynamicLossScaler(LossScalerOptions options = {});

  double scale() const { return scale_; }
  int64_t good_steps() const { return good_steps_; }

  // Called after backward of the scaled loss, before clipping: divides every gradient by
  // scale() in place. Returns whether all of them are finite (the step may be taken).
  bool UnscaleGradients(const std::vector<torch::Tensor>& parameters) const;
  // Called once per optimizer step with what UnscaleGradients() returned.
  void Update(bool gradients_finite);
  // Checkpoint resumption.
  void Restore(double scale, int64_t good_steps);

 private:
  LossScalerOptions options_;
  double scale_;
  int64_t good_steps_ = 0;
};

// Mixed-precision modes of the training loop.
enum class Precision { kFloat32, kBFloat16, kFloat16 };
std::string_view PrecisionName(Precision precision);
std::optional<Precision> ParsePrecision(std::string_view name);
// The autocast dtype of a mixed mode (kFloat32 has none).
torch::ScalarType AutocastDtype(Precision precision);

// The optimizers a training pipeline can step with: AdamW, 8-bit AdamW, and the
// layer-wise adaptive LAMB and LARS (layerwise_adaptive.h).
enum class OptimizerKind { kAdamW, kAdamW8bit, kLamb, kLars };
std::string_view OptimizerKindName(OptimizerKind kind);  // adamw | adamw8bit | lamb | lars
std::optional<OptimizerKind> ParseOptimizerKind(std::string_view name);

// The bytes of an optimizer's per-parameter state, wherever it lives: the moments (and
// amsgrad's maximum) of torch::optim::AdamW or of OffloadedAdamW, AdamW8bit's, LAMB's
// or LARS's StateBytes(). Throws std::invalid_argument for another optimizer.
int64_t OptimizerStateBytes(const torch::optim::Optimizer& optimizer);

// Turns autocast on for `device` while alive (nothing for kFloat32). Closing clears
// autocast's cache of casted weights, which would be stale after the optimizer step.
// Throws c10::Error where this LibTorch cannot autocast to the precision on the device.
class AutocastScope {
 public:
  AutocastScope(torch::Device device, Precision precision);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  c10::DeviceType device_;
  bool enabled_;
};

}  // namespace seqbench::training
