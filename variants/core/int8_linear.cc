#include "variants/core/int8_linear.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <algorithm>

namespace seqbench {
namespace {

bool Supported(at::QEngine engine) {
  const auto& engines = at::globalContext().supportedQEngines();
  return std::find(engines.begin(), engines.end(), engine) != engines.end();
}

// The operators by name, called boxed: their packed-weight type is a TorchScript class
// whose C++ header moved between LibTorch versions, and an IValue carries it untouched.
c10::IValue CallQuantizedOp(const char* name, torch::jit::Stack stack) {
  const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
  op.callBoxed(&stack);
  TORCH_CHECK(stack.size() == 1, name, " returned ", stack.size(), " values, expected 1");
  return std::move(stack.front());
}

}  // namespace

std::string PreferredInt8Engine() {
  if (Supported(at::QEngine::FBGEMM)) return "fbgemm";
  if (Supported(at::QEngine::QNNPACK)) return "qnnpack";
  return "";
}

std::string Int8UnavailableReason() {
  return PreferredInt8Engine().empty()
             ? "this LibTorch has neither the FBGEMM nor the QNNPACK quantized engine"
             : "";
}

Capabilities Int8InferenceCapabilities(Capabilities base) {
  base.modes = {Mode::kForward};
  base.devices = {c10::DeviceType::CPU};
  base.dtypes = {torch::kFloat32};
  base.unavailable = Int8UnavailableReason();
  return base;
}

void SelectInt8Engine() {
  const std::string engine = PreferredInt8Engine();
  TORCH_CHECK(!engine.empty(), Int8UnavailableReason());
  const at::QEngine wanted = engine == "fbgemm" ? at::QEngine::FBGEMM : at::QEngine::QNNPACK;
  if (at::globalContext().qEngine() != wanted) at::globalContext().setQEngine(wanted);
}

Int8Linear::Int8Linear(const torch::Tensor& weight) {
  TORCH_CHECK(
      weight.dim() == 2 && weight.device().is_cpu() && weight.scalar_type() == torch::kFloat,
      "Int8Linear takes a [in,out] float32 CPU weight, got ", weight.sizes(), " ",
      weight.scalar_type(), " on ", weight.device());
  SelectInt8Engine();
  const torch::Tensor transposed = weight.detach().t().contiguous();  // [out,in]
  // An all-zero channel would get scale 0, which quantize_per_channel refuses.
  scales_ = (transposed.abs().amax(1).to(torch::kDouble) / 127.0).clamp_min(1e-12);
  const auto zero_points = torch::zeros({transposed.size(0)}, torch::kLong);
  quantized_ =
      torch::quantize_per_channel(transposed, scales_, zero_points, /*axis=*/0, torch::kQInt8);
  packed_ = CallQuantizedOp("quantized::linear_prepack", {quantized_, c10::IValue()});
  reduce_range_ = at::globalContext().qEngine() == at::QEngine::FBGEMM;
}

torch::Tensor Int8Linear::operator()(const torch::Tensor& x) const {
  TORCH_CHECK(!packed_.isNone(), "Int8Linear used before construction from a weight");
  TORCH_CHECK(x.size(-1) == quantized_.size(1), "Int8Linear: input width ", x.size(-1),
              ", weight takes ", quantized_.size(1));
  const auto rows = x.reshape({-1, x.size(-1)}).contiguous().to(torch::kFloat);
  torch::Tensor y =
      CallQuantizedOp("quantized::linear_dynamic", {rows, packed_, reduce_range_}).toTensor();
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = quantized_.size(0);
  return y.reshape(shape);
}

torch::Tensor Int8Linear::Dequantized() const { return quantized_.dequantize().t(); }

int64_t Int8Linear::WeightBytes() const {
  return quantized_.numel() + quantized_.size(0) * static_cast<int64_t>(sizeof(float));
}

}  // namespace seqbench
