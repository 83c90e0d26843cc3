// Int8Linear is one weight matrix of a model held in int8 for inference, as PyTorch's
// dynamic quantization does (torch.ao.quantization.quantize_dynamic): the weight is
// quantized once, symmetrically per output channel (scale_j = max_i |W_ij| / 127, zero
// point 0), and prepacked for the CPU's quantized engine; each call quantizes its input
// per tensor to uint8 on the fly, multiplies in integers and returns float32. What it
// saves is the bytes the products read (1 a weight instead of 4); what it costs is the two
// roundings, bounded in int8_linear_test.
//
// The engine is LibTorch's global quantized engine, chosen by SelectInt8Engine():
// FBGEMM where the build has it (x86 PyTorch wheels), else QNNPACK (Debian's LibTorch
// 1.13 has QNNPACK and ONEDNN, not FBGEMM). FBGEMM gets reduce_range (inputs in 7 bits),
// as PyTorch's own dynamic Linear passes it: without VNNI its kernels add pairs of
// uint8·int8 products in 16 bits, which saturate at full range. ONEDNN is not chosen: in a
// probe on this LibTorch its dynamic linear erred 20× more than QNNPACK's on the same
// product, which we have not explained.
//
// Thread-safety: calls on one Int8Linear may come from any thread (the engine's packed
// weights are behind its own lock, so concurrent calls serialise); SelectInt8Engine() sets
// process-wide state and belongs in setup code.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "variants/core/variant.h"

namespace seqbench {

// The quantized engine SelectInt8Engine() would pick ("fbgemm", "qnnpack"), or "" when
// this LibTorch has neither.
std::string PreferredInt8Engine();
// Why int8 inference cannot run in this build ("" when it can): for Capabilities::unavailable.
std::string Int8UnavailableReason();
// What every int8 inference variant supports, from its family's `base`: forward only, on
// the CPU, in float32, unavailable where Int8UnavailableReason() says so. Forward only,
// because the harness's generate check wants the float32 model's tokens exactly, which a
// lossy model decoding greedily from near-flat logits (the suites' random weights) loses
// at its first near-tie (measured for int8_dynamic: 371 of 512 tokens differ at D = 256).
// The variant still states its own tolerance: its measured int8 error.
Capabilities Int8InferenceCapabilities(Capabilities base);
// Makes PreferredInt8Engine() LibTorch's quantized engine. Throws when there is none.
void SelectInt8Engine();

class Int8Linear {
 public:
  Int8Linear() = default;
  // weight: [in,out] float32 on the CPU, in the families' layout (y = x·W); not kept.
  explicit Int8Linear(const torch::Tensor& weight);

  // x: [...,in] float32 on the CPU -> x·W: [...,out] float32, through the int8 kernel.
  torch::Tensor operator()(const torch::Tensor& x) const;

  // The weight the kernel multiplies by, as float32 again: [in,out].
  torch::Tensor Dequantized() const;
  // Per output channel: [out] float64.
  torch::Tensor Scales() const { return scales_; }
  // Whether inputs are quantized to 7 bits (0…127) instead of 8 (FBGEMM; see above).
  bool reduce_range() const { return reduce_range_; }
  // What the weight occupies: one byte per value plus a float32 scale per output channel
  // (the prepacked copy is the engine's, of the same size).
  int64_t WeightBytes() const;

 private:
  torch::Tensor quantized_;  // [out,in] qint8
  torch::Tensor scales_;     // [out] float64
  c10::IValue packed_;       // the engine's LinearPackedParamsBase
  bool reduce_range_ = false;
};

}  // namespace seqbench
