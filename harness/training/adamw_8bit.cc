#include "harness/training/adamw_8bit.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>

#include "harness/training/adamw_arithmetic.h"

namespace seqbench::training {
namespace {

// The checkpoint format save() writes and load() accepts.
constexpr char kFormat[] = "seqbench-adamw8bit-1";

int64_t BlockCount(int64_t elements) {
  return (elements + kQuantizationBlock - 1) / kQuantizationBlock;
}

// [n] → [blocks, kQuantizationBlock], the last block padded with zeros (which change no
// block's absmax and are cut off again by the caller).
torch::Tensor AsBlocks(const torch::Tensor& flat) {
  const int64_t n = flat.numel(), blocks = BlockCount(n);
  const int64_t padding = blocks * kQuantizationBlock - n;
  const torch::Tensor padded = padding == 0 ? flat : torch::constant_pad_nd(flat, {0, padding});
  return padded.view({blocks, kQuantizationBlock});
}

constexpr int64_t kCodeSize = 256;

// The index of the code value nearest to x; the code is sorted. The same rule as the
// tensor operations: the two values around x, a tie to the lower.
inline uint8_t NearestCodeIndex(const float* code, float x) {
  const int64_t upper =
      std::clamp<int64_t>(std::lower_bound(code, code + kCodeSize, x) - code, 1, kCodeSize - 1);
  return static_cast<uint8_t>(x - code[upper - 1] <= code[upper] - x ? upper - 1 : upper);
}

// Quantises values[0, count) as one block into indices; returns the block's absmax.
float QuantizeBlock(const float* values, int64_t count, const float* code, uint8_t* indices) {
  float absmax = 0;
  bool nan = false;
  for (int64_t j = 0; j < count; ++j) {
    absmax = std::max(absmax, std::abs(values[j]));
    nan = nan || std::isnan(values[j]);
  }
  // As amax does: a NaN moment makes its block NaN, so that a diverged step shows as one
  // instead of being rounded to a finite code value.
  if (nan) absmax = std::numeric_limits<float>::quiet_NaN();
  const float divisor = std::max(absmax, std::numeric_limits<float>::min());
  for (int64_t j = 0; j < count; ++j) indices[j] = NearestCodeIndex(code, values[j] / divisor);
  return absmax;
}

void CheckCpuCode(const torch::Tensor& code) {
  TORCH_CHECK(code.is_cpu() && code.is_contiguous() && code.scalar_type() == torch::kFloat32 &&
                  code.numel() == kCodeSize,
              "the code must be 256 contiguous float32 values");
}

// Calls visit(block, start, count) for every block of an n-element tensor, blocks in
// parallel; count is kQuantizationBlock except for a shorter last block.
template <typename Visit>
void ForEachBlockInParallel(int64_t n, const Visit& visit) {
  at::parallel_for(0, BlockCount(n), 1, [&](int64_t begin, int64_t end) {
    for (int64_t block = begin; block < end; ++block) {
      const int64_t start = block * kQuantizationBlock;
      visit(block, start, std::min(kQuantizationBlock, n - start));
    }
  });
}

// One parameter's step on the CPU: for each block, dequantise its moments, update them,
// the parameter with them, and quantise them again, in one pass over the block.
// parameter, grad: [n] float32; the moments' indices [n] and absmax [blocks], in place.
void UpdateBlocksOnCpu(float* parameter, const float* grad, int64_t n, BlockQuantized& first,
                       BlockQuantized& second, const float* signed_code, const float* unsigned_code,
                       const AdamWStepConstants& u) {
  uint8_t* first_indices = first.indices.data_ptr<uint8_t>();
  uint8_t* second_indices = second.indices.data_ptr<uint8_t>();
  float* first_absmax = first.absmax.data_ptr<float>();
  float* second_absmax = second.absmax.data_ptr<float>();
  ForEachBlockInParallel(n, [&](int64_t block, int64_t start, int64_t count) {
    // The block's float32 moments between dequantising and quantising: 16 KiB of stack.
    std::array<float, kQuantizationBlock> first_values, second_values;
    const float first_scale = first_absmax[block], second_scale = second_absmax[block];
    for (int64_t j = 0; j < count; ++j) {
      const int64_t i = start + j;
      const float g = grad[i];
      float m = signed_code[first_indices[i]] * first_scale;
      float v = unsigned_code[second_indices[i]] * second_scale;
      parameter[i] = AdamWElementUpdate(parameter[i], g, m, v, u);
      first_values[j] = m;
      second_values[j] = v;
    }
    first_absmax[block] =
        QuantizeBlock(first_values.data(), count, signed_code, first_indices + start);
    second_absmax[block] =
        QuantizeBlock(second_values.data(), count, unsigned_code, second_indices + start);
  });
}

}  // namespace

torch::Tensor DynamicQuantizationCode(bool is_signed) {
  // bitsandbytes' create_dynamic_map(signed, max_exponent_bits=7, total_bits=8): for each
  // decade 10^(i-6), i = 0..6, the midpoints of an even split of [0.1, 1] into 2^i
  // (signed) or 2^(i+1) (unsigned) parts, and their negatives when signed; then 0 and 1.
  // 127·2 + 2 = 254 + 2 = 256 values either way.
  constexpr int kExponentBits = 7;
  std::vector<float> values;
  for (int i = 0; i < kExponentBits; ++i) {
    const int64_t parts = is_signed ? (int64_t{1} << i) : (int64_t{1} << (i + 1));
    const double decade = std::pow(10.0, -(kExponentBits - 1) + i);
    for (int64_t k = 0; k < parts; ++k) {
      const double low = 0.1 + 0.9 * static_cast<double>(k) / parts;
      const double high = 0.1 + 0.9 * static_cast<double>(k + 1) / parts;
      const double mean = decade * (low + high) / 2;
      values.push_back(static_cast<float>(mean));
      if (is_signed) values.push_back(static_cast<float>(-mean));
    }
  }
  values.push_back(0.0F);
  values.push_back(1.0F);
  TORCH_CHECK(values.size() == 256, "the dynamic code must have 256 values, has ", values.size());
  return std::get<0>(torch::tensor(values).sort());
}

namespace {
void CheckQuantizeArguments(const torch::Tensor& values, const torch::Tensor& code,
                            const BlockQuantized& out) {
  TORCH_CHECK(values.dim() == 1 && values.scalar_type() == torch::kFloat32,
              "QuantizeBlockwise takes a flat float32 tensor");
  TORCH_CHECK(code.numel() == kCodeSize, "the code must have 256 values");
  const int64_t n = values.numel();
  TORCH_CHECK(out.indices.numel() == n && out.absmax.numel() == BlockCount(n),
              "QuantizeBlockwise: output of ", out.indices.numel(), " indices and ",
              out.absmax.numel(), " scales for ", n, " values");
}
}  // namespace

void QuantizeBlockwise(const torch::Tensor& values, const torch::Tensor& code,
                       BlockQuantized& out) {
  if (!values.is_cpu()) return QuantizeBlockwiseWithTensorOps(values, code, out);
  CheckQuantizeArguments(values, code, out);
  CheckCpuCode(code);
  TORCH_CHECK(values.is_contiguous() && out.indices.is_contiguous() && out.absmax.is_contiguous(),
              "QuantizeBlockwise on the CPU takes contiguous tensors");
  const int64_t n = values.numel();
  const float* input = values.data_ptr<float>();
  const float* code_values = code.data_ptr<float>();
  uint8_t* indices = out.indices.data_ptr<uint8_t>();
  float* absmax = out.absmax.data_ptr<float>();
  ForEachBlockInParallel(n, [&](int64_t block, int64_t start, int64_t count) {
    absmax[block] = QuantizeBlock(input + start, count, code_values, indices + start);
  });
}

void QuantizeBlockwiseWithTensorOps(const torch::Tensor& values, const torch::Tensor& code,
                                    BlockQuantized& out) {
  CheckQuantizeArguments(values, code, out);
  const int64_t n = values.numel();
  const torch::Tensor blocks = AsBlocks(values);
  const torch::Tensor absmax = blocks.abs().amax(1);
  // An all-zero block divides by the smallest normal float instead of 0: its values stay 0.
  const torch::Tensor normalized =
      (blocks / absmax.clamp_min(std::numeric_limits<float>::min()).unsqueeze(1))
          .view(-1)
          .slice(0, 0, n);
  // The nearest of the two code values around each element (the code is sorted).
  const torch::Tensor upper = torch::searchsorted(code, normalized).clamp(1, code.numel() - 1);
  const torch::Tensor lower = upper - 1;
  const torch::Tensor below = normalized - code.index_select(0, lower);
  const torch::Tensor above = code.index_select(0, upper) - normalized;
  out.indices.copy_(torch::where(below <= above, lower, upper));
  out.absmax.copy_(absmax);
}

BlockQuantized QuantizeBlockwise(const torch::Tensor& values, const torch::Tensor& code) {
  const auto options = values.options();
  BlockQuantized out{torch::empty({values.numel()}, options.dtype(torch::kUInt8)),
                     torch::empty({BlockCount(values.numel())}, options.dtype(torch::kFloat32))};
  QuantizeBlockwise(values, code, out);
  return out;
}

torch::Tensor DequantizeBlockwise(const BlockQuantized& quantized, const torch::Tensor& code) {
  const int64_t n = quantized.indices.numel();
  const torch::Tensor normalized = code.index_select(0, quantized.indices.to(torch::kLong));
  return (AsBlocks(normalized) * quantized.absmax.unsqueeze(1)).view(-1).slice(0, 0, n);
}

AdamW8bit::AdamW8bit(std::vector<torch::optim::OptimizerParamGroup> groups,
                     torch::optim::AdamWOptions defaults, AdamW8bitOptions options)
    : torch::optim::Optimizer(std::move(groups),
                              std::make_unique<torch::optim::AdamWOptions>(defaults)),
      options_(options) {
  TORCH_CHECK(options_.min_8bit_elements >= 1 && options_.blocks_per_chunk >= 1,
              "AdamW8bit needs min_8bit_elements >= 1 and blocks_per_chunk >= 1");
  for (const size_t size : AdamWGroupSizes(param_groups_, "AdamW8bit")) states_.emplace_back(size);
}

AdamW8bit::ParameterState& AdamW8bit::StateOf(size_t group, size_t index,
                                              const torch::Tensor& parameter) {
  ParameterState& state = states_[group][index];
  EnsureCodesOn(parameter.device());
  if (state.first.indices.defined() || state.first_fp32.defined()) return state;
  state.quantized = Quantizes(parameter);
  if (state.quantized) {
    // Zero moments: a block of absmax 0 dequantises to zeros whatever its indices.
    const auto bytes = parameter.options().dtype(torch::kUInt8);
    const auto scales = parameter.options().dtype(torch::kFloat32);
    const int64_t n = parameter.numel();
    state.first = {torch::zeros({n}, bytes), torch::zeros({BlockCount(n)}, scales)};
    state.second = {torch::zeros({n}, bytes), torch::zeros({BlockCount(n)}, scales)};
  } else {
    state.first_fp32 = torch::zeros_like(parameter, torch::MemoryFormat::Preserve);
    state.second_fp32 = torch::zeros_like(parameter, torch::MemoryFormat::Preserve);
  }
  return state;
}

void AdamW8bit::EnsureCodesOn(const torch::Device& device) {
  if (!signed_code_.defined()) {
    signed_code_ = DynamicQuantizationCode(/*is_signed=*/true).to(device);
    unsigned_code_ = DynamicQuantizationCode(/*is_signed=*/false).to(device);
  }
  TORCH_CHECK(device == signed_code_.device(), "AdamW8bit keeps every parameter on one device");
}

torch::Tensor AdamW8bit::step(LossClosure closure) {
  TORCH_CHECK(!closure, "AdamW8bit takes no closure");
  torch::NoGradGuard no_grad;
  ForEachGradient(
      param_groups_, "AdamW8bit",
      [&](const torch::optim::AdamWOptions& options, size_t g, size_t i, torch::Tensor& parameter,
          const torch::Tensor& grad) { Update(options, g, i, parameter, grad); });
  return {};
}

void AdamW8bit::Update(const torch::optim::AdamWOptions& options, size_t g, size_t i,
                       torch::Tensor& parameter, const torch::Tensor& grad) {
  const double lr = options.lr(), eps = options.eps();
  const auto [beta1, beta2] = options.betas();
  TORCH_CHECK(parameter.is_contiguous() && grad.is_contiguous() &&
                  parameter.scalar_type() == torch::kFloat32,
              "AdamW8bit updates contiguous float32 parameters");
  ParameterState& state = StateOf(g, i, parameter);
  state.step += 1;
  const double bias_correction1 = 1 - std::pow(beta1, state.step);
  const double bias_correction2 = 1 - std::pow(beta2, state.step);
  const double step_size = lr / bias_correction1;
  const double decay = 1 - lr * options.weight_decay();
  if (state.quantized && parameter.is_cpu() && options_.fused_cpu) {
    UpdateBlocksOnCpu(parameter.data_ptr<float>(), grad.data_ptr<float>(), parameter.numel(),
                      state.first, state.second, signed_code_.data_ptr<float>(),
                      unsigned_code_.data_ptr<float>(), AdamWConstantsFor(options, state.step));
    return;
  }
  // The order of torch::optim::AdamW's float32 update, so that with float32 moments
  // the two agree to the last bit.
  if (options.weight_decay() != 0) parameter.mul_(decay);
  const auto update = [&](torch::Tensor target, const torch::Tensor& gradient, torch::Tensor& first,
                          torch::Tensor& second) {
    first.mul_(beta1).add_(gradient, 1 - beta1);
    second.mul_(beta2).addcmul_(gradient, gradient, 1 - beta2);
    const torch::Tensor denominator = (second.sqrt() / std::sqrt(bias_correction2)).add_(eps);
    target.addcdiv_(first, denominator, -step_size);
  };
  if (!state.quantized) {
    update(parameter, grad, state.first_fp32, state.second_fp32);
    return;
  }
  const torch::Tensor flat_parameter = parameter.view(-1), flat_grad = grad.view(-1);
  const int64_t n = parameter.numel(), blocks = state.first.absmax.numel();
  for (int64_t block = 0; block < blocks; block += options_.blocks_per_chunk) {
    const int64_t chunk_blocks = std::min(options_.blocks_per_chunk, blocks - block);
    const int64_t begin = block * kQuantizationBlock;
    const int64_t end = std::min(n, (block + chunk_blocks) * kQuantizationBlock);
    // Views into the stored state: quantising into them writes it in place.
    BlockQuantized first{state.first.indices.slice(0, begin, end),
                         state.first.absmax.slice(0, block, block + chunk_blocks)};
    BlockQuantized second{state.second.indices.slice(0, begin, end),
                          state.second.absmax.slice(0, block, block + chunk_blocks)};
    torch::Tensor first_values = DequantizeBlockwise(first, signed_code_);
    torch::Tensor second_values = DequantizeBlockwise(second, unsigned_code_);
    update(flat_parameter.slice(0, begin, end), flat_grad.slice(0, begin, end), first_values,
           second_values);
    QuantizeBlockwiseWithTensorOps(first_values, signed_code_, first);
    QuantizeBlockwiseWithTensorOps(second_values, unsigned_code_, second);
  }
}

void AdamW8bit::save(torch::serialize::OutputArchive& archive) const {
  WriteParameterStates(
      archive, kFormat, states_, [&](size_t g, size_t i, const ParameterState& state) {
        archive.write(StateKey(g, i, "quantized"), c10::IValue(state.quantized));
        if (state.quantized) {
          archive.write(StateKey(g, i, "first.indices"), state.first.indices.cpu());
          archive.write(StateKey(g, i, "first.absmax"), state.first.absmax.cpu());
          archive.write(StateKey(g, i, "second.indices"), state.second.indices.cpu());
          archive.write(StateKey(g, i, "second.absmax"), state.second.absmax.cpu());
        } else {
          archive.write(StateKey(g, i, "first"), state.first_fp32.cpu());
          archive.write(StateKey(g, i, "second"), state.second_fp32.cpu());
        }
      });
}

void AdamW8bit::load(torch::serialize::InputArchive& archive) {
  ReadParameterStates(
      archive, kFormat, "8-bit AdamW", states_, [&](size_t g, size_t i, ParameterState& state) {
        const torch::Tensor& parameter = param_groups_[g].params()[i];
        const int64_t n = parameter.numel();
        const auto read_tensor = [&](const char* field, torch::ScalarType dtype, int64_t numel) {
          return ReadStateTensor(archive, StateKey(g, i, field), dtype, numel)
              .to(parameter.device());
        };
        EnsureCodesOn(parameter.device());
        state.quantized = Quantizes(parameter);
        c10::IValue stored_choice;
        archive.read(StateKey(g, i, "quantized"), stored_choice);
        TORCH_CHECK(stored_choice.toBool() == state.quantized, StateKey(g, i, "quantized"),
                    " differs from this optimizer's choice for ", n, " elements");
        if (state.quantized) {
          state.first = {read_tensor("first.indices", torch::kUInt8, n),
                         read_tensor("first.absmax", torch::kFloat32, BlockCount(n))};
          state.second = {read_tensor("second.indices", torch::kUInt8, n),
                          read_tensor("second.absmax", torch::kFloat32, BlockCount(n))};
        } else {
          state.first_fp32 = read_tensor("first", torch::kFloat32, n).view_as(parameter);
          state.second_fp32 = read_tensor("second", torch::kFloat32, n).view_as(parameter);
        }
      });
}

int64_t AdamW8bit::StateBytes() const {
  int64_t bytes = 0;
  for (const auto& group : states_) {
    for (const ParameterState& state : group) {
      for (const torch::Tensor* tensor :
           {&state.first.indices, &state.first.absmax, &state.second.indices, &state.second.absmax,
            &state.first_fp32, &state.second_fp32}) {
        if (tensor->defined()) bytes += static_cast<int64_t>(tensor->nbytes());
      }
    }
  }
  return bytes;
}

}  // namespace seqbench::training
