#include "harness/training/layerwise_adaptive.h"

#include <cmath>
#include <initializer_list>
#include <utility>

#include "harness/training/adamw_arithmetic.h"

namespace seqbench::training {
namespace {

constexpr const char* kLambFormat = "seqbench.lamb.v1";
constexpr const char* kLarsFormat = "seqbench.lars.v1";

// ratio where a > 0 and b > 0, else 1: a layer with zero weights (LAMB's update or
// LARS's denominator zero too) takes the plain step. Every argument a 0-dim tensor on one
// device.
torch::Tensor RatioWhereBothPositive(const torch::Tensor& a_norm, const torch::Tensor& b_norm,
                                     const torch::Tensor& ratio) {
  return torch::where(a_norm.gt(0).logical_and(b_norm.gt(0)), ratio, torch::ones_like(ratio));
}

template <typename State>
int64_t BytesOf(const std::vector<std::vector<State>>& states,
                std::initializer_list<torch::Tensor State::*> fields) {
  int64_t bytes = 0;
  for (const auto& group : states) {
    for (const State& state : group) {
      for (const auto field : fields) {
        if ((state.*field).defined()) bytes += static_cast<int64_t>((state.*field).nbytes());
      }
    }
  }
  return bytes;
}

// The [shape of `parameter`] tensor a checkpoint stored under field, on its device.
torch::Tensor ReadLike(torch::serialize::InputArchive& archive, size_t g, size_t i,
                       const char* field, const torch::Tensor& parameter) {
  return ReadStateTensor(archive, StateKey(g, i, field), parameter.scalar_type(), parameter.numel())
      .to(parameter.device())
      .view_as(parameter);
}

}  // namespace

// ---- LAMB

Lamb::Lamb(std::vector<torch::optim::OptimizerParamGroup> groups,
           torch::optim::AdamWOptions defaults)
    : torch::optim::Optimizer(std::move(groups),
                              std::make_unique<torch::optim::AdamWOptions>(defaults)) {
  for (const size_t size : AdamWGroupSizes(param_groups_, "LAMB")) states_.emplace_back(size);
}

torch::Tensor Lamb::step(LossClosure closure) {
  TORCH_CHECK(!closure, "LAMB takes no closure");
  torch::NoGradGuard no_grad;
  ForEachGradient(
      param_groups_, "LAMB",
      [&](const torch::optim::AdamWOptions& options, size_t g, size_t i, torch::Tensor& parameter,
          const torch::Tensor& grad) { Update(options, grad, parameter, states_[g][i]); });
  return {};
}

void Lamb::Update(const torch::optim::AdamWOptions& options, const torch::Tensor& grad,
                  torch::Tensor& parameter, ParameterState& state) {
  const auto [beta1, beta2] = options.betas();
  if (state.step == 0) {
    state.first = torch::zeros_like(parameter, torch::MemoryFormat::Preserve);
    state.second = torch::zeros_like(parameter, torch::MemoryFormat::Preserve);
  }
  state.step += 1;
  state.first.mul_(beta1).add_(grad, 1 - beta1);
  state.second.mul_(beta2).addcmul_(grad, grad, 1 - beta2);
  const double bias_correction1 = 1 - std::pow(beta1, state.step);
  const double bias_correction2 = 1 - std::pow(beta2, state.step);
  torch::Tensor update = (state.second / bias_correction2).sqrt_().add_(options.eps());
  update = (state.first / bias_correction1).div_(update);
  if (options.weight_decay() != 0) update.add_(parameter, options.weight_decay());
  const torch::Tensor weight_norm = parameter.norm(), update_norm = update.norm();
  const torch::Tensor ratio =
      RatioWhereBothPositive(weight_norm, update_norm, weight_norm / update_norm);
  parameter.sub_(update.mul_(ratio * options.lr()));
}

void Lamb::save(torch::serialize::OutputArchive& archive) const {
  WriteParameterStates(archive, kLambFormat, states_,
                       [&](size_t g, size_t i, const ParameterState& state) {
                         archive.write(StateKey(g, i, "first"), state.first.cpu());
                         archive.write(StateKey(g, i, "second"), state.second.cpu());
                       });
}

void Lamb::load(torch::serialize::InputArchive& archive) {
  ReadParameterStates(archive, kLambFormat, "LAMB", states_,
                      [&](size_t g, size_t i, ParameterState& state) {
                        const torch::Tensor& parameter = param_groups_[g].params()[i];
                        state.first = ReadLike(archive, g, i, "first", parameter);
                        state.second = ReadLike(archive, g, i, "second", parameter);
                      });
}

int64_t Lamb::StateBytes() const {
  return BytesOf(states_, {&ParameterState::first, &ParameterState::second});
}

// ---- LARS

Lars::Lars(std::vector<torch::optim::OptimizerParamGroup> groups,
           torch::optim::AdamWOptions defaults, LarsOptions options)
    : torch::optim::Optimizer(std::move(groups),
                              std::make_unique<torch::optim::AdamWOptions>(defaults)),
      options_(options) {
  TORCH_CHECK(options_.momentum >= 0 && options_.momentum < 1,
              "LARS's momentum must be in [0, 1), not ", options_.momentum);
  TORCH_CHECK(options_.trust_coefficient > 0, "LARS's trust coefficient must be above 0, not ",
              options_.trust_coefficient);
  for (const size_t size : AdamWGroupSizes(param_groups_, "LARS")) states_.emplace_back(size);
}

torch::Tensor Lars::step(LossClosure closure) {
  TORCH_CHECK(!closure, "LARS takes no closure");
  torch::NoGradGuard no_grad;
  ForEachGradient(
      param_groups_, "LARS",
      [&](const torch::optim::AdamWOptions& options, size_t g, size_t i, torch::Tensor& parameter,
          const torch::Tensor& grad) { Update(options, grad, parameter, states_[g][i]); });
  return {};
}

void Lars::Update(const torch::optim::AdamWOptions& options, const torch::Tensor& grad,
                  torch::Tensor& parameter, ParameterState& state) const {
  const double decay = options.weight_decay();
  if (state.step == 0) {
    state.momentum = torch::zeros_like(parameter, torch::MemoryFormat::Preserve);
  }
  state.step += 1;
  const torch::Tensor weight_norm = parameter.norm();
  const torch::Tensor denominator = grad.norm() + decay * weight_norm;
  const torch::Tensor local_rate = RatioWhereBothPositive(
      weight_norm, denominator, options_.trust_coefficient * weight_norm / denominator);
  torch::Tensor direction = decay != 0 ? grad.add(parameter, decay) : grad.clone();
  state.momentum.mul_(options_.momentum).add_(direction.mul_(local_rate * options.lr()));
  parameter.sub_(state.momentum);
}

void Lars::save(torch::serialize::OutputArchive& archive) const {
  WriteParameterStates(archive, kLarsFormat, states_,
                       [&](size_t g, size_t i, const ParameterState& state) {
                         archive.write(StateKey(g, i, "momentum"), state.momentum.cpu());
                       });
}

void Lars::load(torch::serialize::InputArchive& archive) {
  ReadParameterStates(archive, kLarsFormat, "LARS", states_,
                      [&](size_t g, size_t i, ParameterState& state) {
                        const torch::Tensor& parameter = param_groups_[g].params()[i];
                        state.momentum = ReadLike(archive, g, i, "momentum", parameter);
                      });
}

int64_t Lars::StateBytes() const { return BytesOf(states_, {&ParameterState::momentum}); }

}  // namespace seqbench::training
