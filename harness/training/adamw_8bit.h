// 8-bit AdamW (Dettmers et al., "8-bit Optimizers via Block-wise Quantization",
// arXiv:2110.02861): AdamW whose two moments are stored as one byte per element. Each
// moment is cut into blocks of 2048 elements; a block keeps its largest magnitude (absmax,
// float32) and, per element, the index of the nearest value of a 256-entry "dynamic"
// code (a sign, a decimal exponent from 10^-6 to 10^0 and a linear fraction), so that
// small moments keep their relative precision beside large ones in the same block. The
// update itself runs in float32: each group of blocks is dequantised, updated with
// torch::optim::AdamW's formulas (decoupled decay, both bias corrections, eps after the
// square root), applied to the parameter, and quantised again. State per element: 2 bytes
// plus 8 bytes per block, against AdamW's 8.
//
// Two implementations of that arithmetic: on the CPU, one pass per block in C++ (the
// block's float32 moments in a scratch, blocks in parallel), as bitsandbytes' fused kernel
// does on the GPU; on other devices, tensor operations over groups of blocks, which
// allocate float32 temporaries for a group and launch a kernel per operation. The tensor
// operations are torch::optim::AdamW's, in its order (bit for bit with float32 moments);
// the C++ pass rounds in its own order (ATen's vectorised kernels fuse multiply-adds where
// the CPU has FMA), so the two agree to rounding, not to the bit.
//
// As in bitsandbytes, a tensor of fewer than `min_8bit_elements` elements (RMSNorm gains,
// biases) keeps float32 moments: its bytes are negligible and its quantisation error
// would not be averaged over a block.
//
// Thread-safety: an optimizer belongs to one training loop; the quantisation functions are
// pure.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace seqbench::training {

constexpr int64_t kQuantizationBlock = 2048;

// bitsandbytes' dynamic data type (create_dynamic_map with 7 exponent bits): 256 sorted
// float32 values in [-1, 1] when `is_signed` (the first moment), in [0, 1] otherwise (the
// second moment, never negative). Both contain 0 and 1.
torch::Tensor DynamicQuantizationCode(bool is_signed);

// A float32 tensor stored block-wise as 8-bit indices into `code`.
struct BlockQuantized {
  torch::Tensor indices;  // [n] uint8, flat
  torch::Tensor absmax;   // [ceil(n / kQuantizationBlock)] float32, one scale per block
};

// values: [n] float32, contiguous. Each element becomes the index of the code value
// nearest to value / absmax of its block (blocks of kQuantizationBlock, the last one
// shorter; a tie goes to the lower value); an all-zero block has absmax 0 and dequantises
// to zeros. Writes into `out` (shapes as BlockQuantized) in place, so that the optimizer
// reuses its storage. The C++ loop on the CPU, the tensor operations elsewhere.
void QuantizeBlockwise(const torch::Tensor& values, const torch::Tensor& code, BlockQuantized& out);
BlockQuantized QuantizeBlockwise(const torch::Tensor& values, const torch::Tensor& code);
// The tensor-operation form, on any device (what CUDA runs): exposed to be checked
// against the C++ loop on the CPU.
void QuantizeBlockwiseWithTensorOps(const torch::Tensor& values, const torch::Tensor& code,
                                    BlockQuantized& out);
// The [n] float32 values that `quantized` stands for: code[index] · absmax of the block.
torch::Tensor DequantizeBlockwise(const BlockQuantized& quantized, const torch::Tensor& code);

struct AdamW8bitOptions {
  int64_t min_8bit_elements = 4096;  // bitsandbytes' min_8bit_size
  // Tensor operations: blocks dequantised at once, which bounds the float32 temporaries.
  int64_t blocks_per_chunk = 64;
  // false: the tensor operations on the CPU too, to check them there.
  bool fused_cpu = true;
};

// A torch::optim::Optimizer whose parameter groups carry torch::optim::AdamWOptions (lr,
// betas, eps, weight_decay; amsgrad is refused), so that the trainer sets learning rates
// and saves checkpoints through the same interface as for AdamW.
class AdamW8bit : public torch::optim::Optimizer {
 public:
  AdamW8bit(std::vector<torch::optim::OptimizerParamGroup> groups,
            torch::optim::AdamWOptions defaults, AdamW8bitOptions options = {});

  // Called once per optimizer step, after the gradients are complete (clipped, unscaled).
  // Parameters without a gradient are left alone. `closure` must be null.
  torch::Tensor step(LossClosure closure = nullptr) override;
  void save(torch::serialize::OutputArchive& archive) const override;
  // Throws c10::Error when the archive's state does not fit these parameters.
  void load(torch::serialize::InputArchive& archive) override;

  // Bytes held by the moments and their scales (what 8 bits saves), for every parameter
  // that has taken a step.
  int64_t StateBytes() const;

 private:
  struct ParameterState {
    int64_t step = 0;
    bool quantized = false;
    BlockQuantized first, second;           // when quantized
    torch::Tensor first_fp32, second_fp32;  // otherwise: [shape of the parameter]
  };
  // The state of a parameter about to step: zero moments, allocated at its first step.
  ParameterState& StateOf(size_t group, size_t index, const torch::Tensor& parameter);
  // Parameter i of group g's step (ForEachGradient's visit): parameter written in place,
  // grad: [shape of parameter].
  void Update(const torch::optim::AdamWOptions& options, size_t g, size_t i,
              torch::Tensor& parameter, const torch::Tensor& grad);
  // The two codes, made on the device of the first parameter that needs them.
  void EnsureCodesOn(const torch::Device& device);
  bool Quantizes(const torch::Tensor& parameter) const {
    return parameter.numel() >= options_.min_8bit_elements;
  }

  AdamW8bitOptions options_;
  torch::Tensor signed_code_, unsigned_code_;        // [256] float32 on the parameters' device
  std::vector<std::vector<ParameterState>> states_;  // [group][parameter]
};

}  // namespace seqbench::training
