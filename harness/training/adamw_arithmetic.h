// What our two forms of AdamW (8-bit AdamW, offloaded AdamW) share: one element of
// torch::optim::AdamW's update, for the C++ loops over float32 arrays that they run
// instead of ATen's tensor operations (8-bit AdamW's pass per block, offloaded AdamW's
// host update), their parameter groups' check, and their checkpoints' keys and layout. The formulas
// and their order are AdamW's: decoupled weight decay, both bias corrections, eps added after the
// square root. ATen's vectorised kernels may fuse multiply-adds where this loop does not, so the
// two agree to rounding, not to the bit.
//
// Thread-safety: functions of their arguments only, no shared state; the checkpoint
// functions write to the archive and the states they are given.
#pragma once

#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace seqbench::training {

// The constants of one parameter's step, in float32 as the tensor operations cast their
// double scalars.
struct AdamWStepConstants {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, decay, sqrt_bias_correction2, eps,
      negative_step_size;
};

// For the parameter's `step`-th update (1-based) under its group's options.
inline AdamWStepConstants AdamWConstantsFor(const torch::optim::AdamWOptions& options,
                                            int64_t step) {
  const auto [beta1, beta2] = options.betas();
  const double bias_correction1 = 1 - std::pow(beta1, step);
  const double bias_correction2 = 1 - std::pow(beta2, step);
  return {static_cast<float>(beta1),
          static_cast<float>(1 - beta1),
          static_cast<float>(beta2),
          static_cast<float>(1 - beta2),
          static_cast<float>(1 - options.lr() * options.weight_decay()),
          static_cast<float>(std::sqrt(bias_correction2)),
          static_cast<float>(options.eps()),
          static_cast<float>(-options.lr() / bias_correction1)};
}

// Updates the moments `first` and `second` in place with `grad`; returns the new value of
// `parameter`.
inline float AdamWElementUpdate(float parameter, float grad, float& first, float& second,
                                const AdamWStepConstants& u) {
  first = first * u.beta1 + u.one_minus_beta1 * grad;
  second = second * u.beta2 + u.one_minus_beta2 * grad * grad;
  const float denominator = std::sqrt(second) / u.sqrt_bias_correction2 + u.eps;
  return parameter * u.decay + u.negative_step_size * (first / denominator);
}

// The parameter count of each group, once every group is checked to carry
// torch::optim::AdamWOptions without amsgrad, which neither form implements. Throws
// c10::Error naming `optimizer`.
inline std::vector<size_t> AdamWGroupSizes(
    const std::vector<torch::optim::OptimizerParamGroup>& groups, const char* optimizer) {
  std::vector<size_t> sizes;
  for (const auto& group : groups) {
    const auto* options = dynamic_cast<const torch::optim::AdamWOptions*>(&group.options());
    TORCH_CHECK(options != nullptr, optimizer, " takes AdamWOptions");
    TORCH_CHECK(!options->amsgrad(), optimizer, " has no amsgrad");
    sizes.push_back(group.params().size());
  }
  return sizes;
}

// Calls visit(options, g, i, parameter, grad) for parameter i of group g, in order, for
// every parameter with a gradient this step: the walk every one of our optimizers' step()
// makes. Throws c10::Error naming `optimizer` for a sparse gradient or a parameter that
// is not floating-point. groups: AdamWGroupSizes-checked; parameters written in place by
// visit.
template <typename Visit>
void ForEachGradient(std::vector<torch::optim::OptimizerParamGroup>& groups, const char* optimizer,
                     const Visit& visit) {
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& options = static_cast<const torch::optim::AdamWOptions&>(groups[g].options());
    auto& parameters = groups[g].params();
    for (size_t i = 0; i < parameters.size(); ++i) {
      torch::Tensor& parameter = parameters[i];
      const torch::Tensor grad = parameter.grad();
      if (!grad.defined()) continue;
      TORCH_CHECK(!grad.is_sparse(), optimizer, " does not take sparse gradients");
      TORCH_CHECK(parameter.is_floating_point(), optimizer, " updates floating-point parameters");
      visit(options, g, i, parameter, grad);
    }
  }
}

// The checkpoint key of a parameter's state field: "group.G.parameter.I.FIELD".
inline std::string StateKey(size_t group, size_t index, const char* field) {
  return "group." + std::to_string(group) + ".parameter." + std::to_string(index) + "." + field;
}

// The tensor a checkpoint holds under `key`, on the CPU. Throws c10::Error unless it has
// `numel` elements of `dtype`.
inline torch::Tensor ReadStateTensor(torch::serialize::InputArchive& archive,
                                     const std::string& key, torch::ScalarType dtype,
                                     int64_t numel) {
  torch::Tensor stored;
  archive.read(key, stored);
  TORCH_CHECK(stored.scalar_type() == dtype && stored.numel() == numel, key, ": ", stored.numel(),
              " elements of ", stored.scalar_type(), ", expected ", numel, " of ", dtype);
  return stored;
}

// The checkpoint layout both forms share: "format", then for every parameter its step
// count under StateKey(g, i, "step") and, once it has been updated (step > 0), its state
// fields, which `write_fields(g, i, state)` writes. `states[g][i]` has a `step`.
template <typename States, typename WriteFields>
void WriteParameterStates(torch::serialize::OutputArchive& archive, const char* format,
                          const States& states, const WriteFields& write_fields) {
  archive.write("format", c10::IValue(std::string(format)));
  for (size_t g = 0; g < states.size(); ++g) {
    for (size_t i = 0; i < states[g].size(); ++i) {
      archive.write(StateKey(g, i, "step"), c10::IValue(states[g][i].step));
      if (states[g][i].step > 0) write_fields(g, i, states[g][i]);
    }
  }
}

// Reads back what WriteParameterStates wrote: every state is reset, and a parameter that
// had been updated gets its fields from `read_fields(g, i, state)`, then its step. Throws
// c10::Error naming `optimizer` unless the archive is in `format`.
template <typename States, typename ReadFields>
void ReadParameterStates(torch::serialize::InputArchive& archive, const char* format,
                         const char* optimizer, States& states, const ReadFields& read_fields) {
  c10::IValue value;
  TORCH_CHECK(
      archive.try_read("format", value) && value.isString() && value.toStringRef() == format,
      "the optimizer state is not ", optimizer, "'s");
  for (size_t g = 0; g < states.size(); ++g) {
    for (size_t i = 0; i < states[g].size(); ++i) {
      auto& state = states[g][i];
      state = {};
      archive.read(StateKey(g, i, "step"), value);
      const int64_t step = value.toInt();
      if (step == 0) continue;
      read_fields(g, i, state);
      state.step = step;
    }
  }
}

}  // namespace seqbench::training
