#include "variants/core/variant.h"

#include <algorithm>

#include "variants/core/torch_compat.h"
#include "variants/core/trace.h"

namespace seqbench {

std::string_view ModeName(Mode mode) {
  switch (mode) {
    case Mode::kTrain:
      return "train";
    case Mode::kForward:
      return "forward";
    case Mode::kGenerate:
      return "generate";
  }
  return "unknown";
}

std::optional<Mode> ParseMode(std::string_view name) {
  for (const Mode mode : {Mode::kTrain, Mode::kForward, Mode::kGenerate}) {
    if (ModeName(mode) == name) return mode;
  }
  return std::nullopt;
}

std::string DeviceName(c10::DeviceType type) {
  return c10::DeviceTypeName(type, /*lower_case=*/true);
}

std::string DtypeName(c10::ScalarType dtype) {
  switch (dtype) {
    case torch::kFloat32:
      return "float32";
    case torch::kFloat64:
      return "float64";
    case torch::kFloat16:
      return "float16";
    case torch::kBFloat16:
      return "bfloat16";
    default:
      return c10::toString(dtype);
  }
}

std::optional<c10::ScalarType> ParseDtype(std::string_view name) {
  if (name == "float32") return torch::kFloat32;
  if (name == "float64") return torch::kFloat64;
  return std::nullopt;
}

std::string DescribeError(const std::exception& error) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&error)) {
    return c10_error->what_without_backtrace();
  }
  return error.what();
}

int64_t Batch::NumTokens() const { return lengths.sum().item<int64_t>(); }

torch::Tensor Batch::PaddingMask() const {
  const auto positions = torch::arange(max_length(), lengths.options());
  return (positions.unsqueeze(0) < lengths.unsqueeze(1)).to(tokens.device());
}

bool Capabilities::Supports(Mode mode) const {
  return std::find(modes.begin(), modes.end(), mode) != modes.end();
}
bool Capabilities::Supports(c10::DeviceType device) const {
  return std::find(devices.begin(), devices.end(), device) != devices.end();
}
bool Capabilities::Supports(c10::ScalarType dtype) const {
  return std::find(dtypes.begin(), dtypes.end(), dtype) != dtypes.end();
}
Tolerance Capabilities::ToleranceFor(c10::ScalarType dtype) const {
  return dtype == torch::kFloat64 ? float64 : float32;
}

void Variant::Setup(const ModelConfig& config, const ParameterSet& weights, torch::Device device,
                    torch::ScalarType dtype, const VariantOptions& options) {
  const Capabilities caps = capabilities();
  TORCH_CHECK(config.family == caps.family, "variant of family '", caps.family, "' cannot run a '",
              config.family, "' model");
  TORCH_CHECK(caps.Supports(device.type()), "variant does not support device ",
              DeviceName(device.type()));
  TORCH_CHECK(caps.Supports(dtype), "variant does not support dtype ", DtypeName(dtype));
  for (const auto& [name, value] : options) {
    if (caps.options.count(name) == 0) {
      std::string known;
      for (const auto& [option, meaning] : caps.options)
        known += (known.empty() ? "" : ", ") + option;
      TORCH_CHECK(false, "unknown variant option '", name,
                  "'; this variant reads: ", known.empty() ? "(no options)" : known);
    }
  }
  config_ = config;
  options_ = options;
  device_ = device;
  dtype_ = dtype;
  parameters_.clear();
  std::vector<torch::Tensor> trainable;
  for (const auto& item : weights) {
    auto copy = item.value().detach().to(device, dtype, /*non_blocking=*/false, /*copy=*/true);
    copy.set_requires_grad(true);
    parameters_.insert(item.key(), copy);
    trainable.push_back(copy);
  }
  optimizer_ =
      std::make_unique<torch::optim::SGD>(trainable, torch::optim::SGDOptions(kTrainLearningRate));
  OnSetup();
}

int64_t Variant::OptionOr(const std::string& name, int64_t fallback) const {
  const auto it = options_.find(name);
  return it == options_.end() ? fallback : it->second;
}

ForwardOutput Variant::TrainStep(const Batch& batch) {
  TORCH_CHECK(optimizer_ != nullptr, "Setup() must run before TrainStep()");
  compat::ClearGradients(parameters_.values());
  ForwardOutput output;
  {
    TraceRange range("forward");
    output = Forward(batch);
  }
  {
    TraceRange range("backward");
    output.loss.backward();
  }
  TraceRange range("optimizer");
  optimizer_->step();
  return output;
}

ForwardOutput Variant::InferStep(const Batch& batch) {
  torch::NoGradGuard no_grad;
  TraceRange range("forward");
  return Forward(batch);
}

torch::Tensor Variant::Generate(const torch::Tensor& prompt, int64_t num_tokens) {
  TORCH_CHECK(prompt.dim() == 2 && prompt.size(1) > 0, "prompt must be [B,P] with P > 0");
  TORCH_CHECK(num_tokens > 0, "num_tokens must be positive");
  torch::NoGradGuard no_grad;
  torch::Tensor sequence = prompt;
  std::vector<torch::Tensor> generated;
  for (int64_t i = 0; i < num_tokens; ++i) {
    const auto lengths = torch::full({sequence.size(0)}, sequence.size(1), torch::kLong);
    TraceRange range("decode (whole prefix)");
    const ForwardOutput output = Forward(Batch{sequence, lengths});
    const auto next = output.logits.select(1, -1).argmax(-1);  // [B]
    generated.push_back(next);
    sequence = torch::cat({sequence, next.unsqueeze(1)}, 1);
  }
  return torch::stack(generated, 1);
}

StepWork Variant::Work(Mode mode, const Batch& batch, int64_t num_tokens) const {
  StepWork work;
  work.mode = mode;
  work.element_bytes = static_cast<int64_t>(c10::elementSize(dtype_));
  const int64_t sequences = batch.batch_size();
  const int64_t length = batch.max_length();
  if (mode == Mode::kGenerate) {
    // Forward() over the prefix of length P + i for the i-th new token, i = 0..N-1.
    work.positions = sequences * (num_tokens * length + num_tokens * (num_tokens - 1) / 2);
  } else {
    work.positions = sequences * length;
  }
  work.head_positions = work.positions;
  return work;
}

torch::Tensor GreedyDecode(IncrementalDecoder& decoder, const torch::Tensor& prompt,
                           int64_t num_tokens) {
  TORCH_CHECK(num_tokens > 0, "num_tokens must be positive");
  torch::NoGradGuard no_grad;
  IncrementalDecoder::DecodeState state;
  torch::Tensor logits;
  {
    TraceRange range("prefill");
    logits = decoder.Prefill(prompt, num_tokens - 1, state);
  }
  std::vector<torch::Tensor> generated;
  for (int64_t i = 0; i < num_tokens; ++i) {
    generated.push_back(logits.argmax(-1));
    if (i + 1 < num_tokens) {
      TraceRange range("decode");
      logits = decoder.Step(generated.back(), state);
    }
  }
  return torch::stack(generated, 1);
}

}  // namespace seqbench
