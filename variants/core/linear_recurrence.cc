#include "variants/core/linear_recurrence.h"

#include <ATen/Parallel.h>

#include <vector>

namespace seqbench {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// One sequence: h[t,:] = a[t,:]·h[t-1,:] + b[t,:] for t < steps, rows of `width`.
template <typename scalar_t>
void ForwardRows(const scalar_t* a, const scalar_t* b, const scalar_t* h0, scalar_t* h,
                 int64_t steps, int64_t width) {
  const scalar_t* previous = h0;
  for (int64_t t = 0; t < steps; ++t) {
    const int64_t at = t * width;
    for (int64_t n = 0; n < width; ++n) h[at + n] = a[at + n] * previous[n] + b[at + n];
    previous = h + at;
  }
}

// Backward through one sequence. total_t = ∂loss/∂h_t = d_h[t] + a[t+1]·total_{t+1}; then
// d_b[t] = total_t, d_a[t] = total_t·h[t-1] and d_h0 = a[0]·total_0. `carry` (width values)
// holds a[t+1]·total_{t+1} on the way down and ends as d_h0.
template <typename scalar_t>
void BackwardRows(const scalar_t* a, const scalar_t* h, const scalar_t* h0, const scalar_t* d_h,
                  scalar_t* d_a, scalar_t* d_b, scalar_t* carry, int64_t steps, int64_t width) {
  std::fill(carry, carry + width, scalar_t(0));
  for (int64_t t = steps - 1; t >= 0; --t) {
    const int64_t at = t * width;
    const scalar_t* previous = t > 0 ? h + at - width : h0;
    for (int64_t n = 0; n < width; ++n) {
      const scalar_t total = d_h[at + n] + carry[n];
      d_b[at + n] = total;
      d_a[at + n] = total * previous[n];
      carry[n] = a[at + n] * total;
    }
  }
}

torch::Tensor ForwardCpu(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& h0) {
  const int64_t batch = a.size(0), steps = a.size(1), width = a.size(2);
  auto h = torch::empty_like(a);
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "linear_recurrence_forward", [&] {
    at::parallel_for(0, batch, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t offset = i * steps * width;
        ForwardRows(a.data_ptr<scalar_t>() + offset, b.data_ptr<scalar_t>() + offset,
                    h0.data_ptr<scalar_t>() + i * width, h.data_ptr<scalar_t>() + offset, steps,
                    width);
      }
    });
  });
  return h;
}

// -> {d_a, d_b, d_h0}
variable_list BackwardCpu(const torch::Tensor& a, const torch::Tensor& h, const torch::Tensor& h0,
                          const torch::Tensor& d_h) {
  const int64_t batch = a.size(0), steps = a.size(1), width = a.size(2);
  auto d_a = torch::empty_like(a), d_b = torch::empty_like(a), d_h0 = torch::empty_like(h0);
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "linear_recurrence_backward", [&] {
    at::parallel_for(0, batch, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t offset = i * steps * width;
        BackwardRows(a.data_ptr<scalar_t>() + offset, h.data_ptr<scalar_t>() + offset,
                     h0.data_ptr<scalar_t>() + i * width, d_h.data_ptr<scalar_t>() + offset,
                     d_a.data_ptr<scalar_t>() + offset, d_b.data_ptr<scalar_t>() + offset,
                     d_h0.data_ptr<scalar_t>() + i * width, steps, width);
      }
    });
  });
  return {d_a, d_b, d_h0};
}

// The same two passes in tensor ops, for devices without the raw kernel: each step's
// slices come from one unbind, so no step allocates anything of size T.
torch::Tensor ForwardTensors(const torch::Tensor& a, const torch::Tensor& b,
                             const torch::Tensor& h0) {
  const auto a_steps = a.unbind(1), b_steps = b.unbind(1);
  std::vector<torch::Tensor> h_steps;
  h_steps.reserve(a_steps.size());
  torch::Tensor previous = h0;
  for (size_t t = 0; t < a_steps.size(); ++t) {
    previous = torch::addcmul(b_steps[t], a_steps[t], previous);
    h_steps.push_back(previous);
  }
  return torch::stack(h_steps, 1);
}

variable_list BackwardTensors(const torch::Tensor& a, const torch::Tensor& h,
                              const torch::Tensor& h0, const torch::Tensor& d_h) {
  const auto a_steps = a.unbind(1), h_steps = h.unbind(1), d_h_steps = d_h.unbind(1);
  const int64_t steps = static_cast<int64_t>(a_steps.size());
  std::vector<torch::Tensor> d_a(steps), d_b(steps);
  torch::Tensor carry = torch::zeros_like(h0);
  for (int64_t t = steps - 1; t >= 0; --t) {
    const torch::Tensor total = d_h_steps[t] + carry;
    d_b[t] = total;
    d_a[t] = total * (t > 0 ? h_steps[t - 1] : h0);
    carry = a_steps[t] * total;
  }
  return {torch::stack(d_a, 1), torch::stack(d_b, 1), carry};
}

class LinearRecurrenceFunction : public torch::autograd::Function<LinearRecurrenceFunction> {
 public:
  // use_kernel: the raw CPU kernel (CPU tensors only), else the tensor-op passes.
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor a, torch::Tensor b,
                               torch::Tensor h0, bool use_kernel) {
    a = a.contiguous(), b = b.contiguous(), h0 = h0.contiguous();
    torch::Tensor h = use_kernel ? ForwardCpu(a, b, h0) : ForwardTensors(a, b, h0);
    ctx->save_for_backward({a, h, h0});
    ctx->saved_data["use_kernel"] = use_kernel;
    return h;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& a = saved[0];
    // In the inputs' type: under autocast, h's consumer may hand back a bf16 gradient.
    const torch::Tensor d_h = grad_outputs[0].to(a.scalar_type()).contiguous();
    variable_list grads = ctx->saved_data["use_kernel"].toBool()
                              ? BackwardCpu(a, saved[1], saved[2], d_h)
                              : BackwardTensors(a, saved[1], saved[2], d_h);
    grads.emplace_back();  // for use_kernel
    return grads;
  }
};

torch::Tensor CheckedLinearRecurrence(const torch::Tensor& a, const torch::Tensor& b,
                                      const torch::Tensor& h0, bool use_kernel) {
  TORCH_CHECK(a.dim() == 3 && a.sizes() == b.sizes(),
              "LinearRecurrence: a and b must both be [B,T,N], got ", a.sizes(), " and ",
              b.sizes());
  TORCH_CHECK(h0.dim() == 2 && h0.size(0) == a.size(0) && h0.size(1) == a.size(2),
              "LinearRecurrence: h0 must be [B,N] = [", a.size(0), ",", a.size(2), "], got ",
              h0.sizes());
  TORCH_CHECK(a.device() == b.device() && a.device() == h0.device(),
              "LinearRecurrence: a, b and h0 must be on one device, got ", a.device(), ", ",
              b.device(), " and ", h0.device());
  const auto dtype =
      c10::promoteTypes(c10::promoteTypes(a.scalar_type(), b.scalar_type()), h0.scalar_type());
  return LinearRecurrenceFunction::apply(a.to(dtype), b.to(dtype), h0.to(dtype),
                                         use_kernel && a.is_cpu());
}

}  // namespace

namespace detail {
torch::Tensor LinearRecurrenceWithTensorOps(const torch::Tensor& a, const torch::Tensor& b,
                                            const torch::Tensor& h0) {
  return CheckedLinearRecurrence(a, b, h0, /*use_kernel=*/false);
}
}  // namespace detail

torch::Tensor LinearRecurrence(const torch::Tensor& a, const torch::Tensor& b,
                               const torch::Tensor& h0) {
  return CheckedLinearRecurrence(a, b, h0, /*use_kernel=*/true);
}

torch::Tensor LogSpaceLinearRecurrence(const torch::Tensor& log_a, const torch::Tensor& log_b) {
  TORCH_CHECK(log_a.dim() == 3 && log_a.sizes() == log_b.sizes(),
              "LogSpaceLinearRecurrence: log_a and log_b must both be [B,T,N], got ", log_a.sizes(),
              " and ", log_b.sizes());
  const torch::Tensor decay = log_a.cumsum(1);  // A_t
  return (decay + (log_b - decay).logcumsumexp(1)).exp();
}

torch::Tensor PositiveActivation(const torch::Tensor& x) {
  return torch::where(x >= 0, x + 0.5, torch::sigmoid(x));
}

torch::Tensor LogPositiveActivation(const torch::Tensor& x) {
  // relu keeps log's argument >= 0.5 in the branch where() discards, so that its gradient
  // there is 0, not NaN.
  return torch::where(x >= 0, (torch::relu(x) + 0.5).log(), torch::log_sigmoid(x));
}

}  // namespace seqbench
