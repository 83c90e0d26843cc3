// Every difference between the LibTorch versions seqbench supports lives here:
// Debian 12's libtorch-dev 1.13 (CPU) and CUDA LibTorch 2.x on GPU machines.
// Code elsewhere calls these helpers instead of testing TORCH_VERSION_* itself.
//
// Thread-safety: stateless free functions; safe from any thread.
#pragma once

#include <ATen/autocast_mode.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <cstdint>
#include <string>

#define SEQBENCH_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||           \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

#if !SEQBENCH_TORCH_AT_LEAST(1, 13)
#error "seqbench needs LibTorch 1.13 or newer"
#endif

namespace seqbench::compat {

// The LibTorch version the binary was compiled against, e.g. "1.13.0".
inline std::string TorchVersion() { return TORCH_VERSION; }

// A CPU generator seeded independently of torch's global generator, so that weight
// initialisation never depends on what ran before it.
inline at::Generator MakeCpuGenerator(uint64_t seed) {
  return at::detail::createCPUGenerator(seed);
}

// Drops every gradient (rather than zero-filling it): 1.13's Optimizer::zero_grad()
// zero-fills, 2.x sets to none by default; resetting by hand behaves the same on both.
inline void ClearGradients(const std::vector<torch::Tensor>& parameters) {
  for (const auto& parameter : parameters) {
    auto& grad = const_cast<torch::Tensor&>(parameter).mutable_grad();
    grad.reset();
  }
}

// at::Allocator changed shape in LibTorch 2.3: allocate() lost its const and copy_data()
// became pure virtual. Allocators declare allocate() with SEQBENCH_ALLOCATE_QUALIFIER and
// put SEQBENCH_ALLOCATOR_COPY_DATA in their body.
#if SEQBENCH_TORCH_AT_LEAST(2, 3)
#define SEQBENCH_ALLOCATE_QUALIFIER
#define SEQBENCH_ALLOCATOR_COPY_DATA                                              \
  void copy_data(void* dest, const void* src, std::size_t count) const override { \
    default_copy_data(dest, src, count);                                          \
  }
#else
#define SEQBENCH_ALLOCATE_QUALIFIER const
#define SEQBENCH_ALLOCATOR_COPY_DATA
#endif

// Autocast (mixed precision) on one device type. LibTorch 2.4 replaced the per-device
// setters (set_enabled for CUDA, set_cpu_enabled for CPU) with ones that take the device.
inline void SetAutocast(c10::DeviceType device, bool enabled, at::ScalarType dtype) {
#if SEQBENCH_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_enabled(device, enabled);
  if (enabled) at::autocast::set_autocast_dtype(device, dtype);
#else
  if (device == c10::DeviceType::CUDA) {
    at::autocast::set_enabled(enabled);
    if (enabled) at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_cpu_enabled(enabled);
    if (enabled) at::autocast::set_autocast_cpu_dtype(dtype);
  }
#endif
}

// Whether autocast to `dtype` works on `device` here: CUDA takes float16 and bfloat16;
// CPU autocast takes bfloat16 only in 1.13 (float16 on CPU came with 2.4).
inline bool AutocastSupports(c10::DeviceType device, at::ScalarType dtype) {
  if (device == c10::DeviceType::CUDA) return dtype == at::kHalf || dtype == at::kBFloat16;
  if (device != c10::DeviceType::CPU) return false;
#if SEQBENCH_TORCH_AT_LEAST(2, 4)
  return dtype == at::kHalf || dtype == at::kBFloat16;
#else
  return dtype == at::kBFloat16;
#endif
}

// Whether at::scaled_dot_product_attention with a `scale` argument exists (LibTorch 2.1+).
inline constexpr bool kHasScaledDotProductAttention = SEQBENCH_TORCH_AT_LEAST(2, 1);

// softmax(q·kᵀ·scale + causal mask)·v through ATen's fused kernels (flash, memory-efficient
// or math backend, as ATen picks). q, k, v: [B,H,T,dh] -> [B,H,T,dh]. Throws where
// kHasScaledDotProductAttention is false.
inline at::Tensor CausalScaledDotProductAttention(const at::Tensor& q, const at::Tensor& k,
                                                  const at::Tensor& v, double scale) {
#if SEQBENCH_TORCH_AT_LEAST(2, 1)
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                          /*is_causal=*/true, scale);
#else
  TORCH_CHECK(false, "at::scaled_dot_product_attention needs LibTorch 2.1 or newer, this is ",
              TORCH_VERSION);
  (void)q, (void)k, (void)v, (void)scale;
  return {};
#endif
}

}  // namespace seqbench::compat
