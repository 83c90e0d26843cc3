#include "harness/training/offloaded_adamw.h"

#include <ATen/Parallel.h>

#include <string>

#include "harness/training/adamw_arithmetic.h"

#if SEQBENCH_WITH_CUDA_STREAMS
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace seqbench::training {
namespace {

constexpr char kFormat[] = "seqbench-offloaded-adamw-1";

// The host's update of one parameter: master, first and second in place, from gradient.
// One pass over the four arrays, in parallel chunks on LibTorch's intra-op threads, as
// DeepSpeed's CPU Adam fuses it (the tensor operations would make 7 passes).
void UpdateOnHost(torch::Tensor& master, const torch::Tensor& gradient, torch::Tensor& first,
                  torch::Tensor& second, const AdamWStepConstants& constants) {
  float* parameter = master.data_ptr<float>();
  const float* grad = gradient.data_ptr<float>();
  float* m = first.data_ptr<float>();
  float* v = second.data_ptr<float>();
  constexpr int64_t kGrain = 1 << 15;  // 512 KiB of the four arrays per chunk
  at::parallel_for(0, master.numel(), kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      parameter[i] = AdamWElementUpdate(parameter[i], grad[i], m[i], v[i], constants);
    }
  });
}

}  // namespace

OffloadedAdamW::OffloadedAdamW(std::vector<torch::optim::OptimizerParamGroup> groups,
                               torch::optim::AdamWOptions defaults)
    : torch::optim::Optimizer(std::move(groups),
                              std::make_unique<torch::optim::AdamWOptions>(defaults)) {
  for (const size_t size : AdamWGroupSizes(param_groups_, "OffloadedAdamW"))
    states_.emplace_back(size);
}

OffloadedAdamW::ParameterState& OffloadedAdamW::StateOf(size_t group, size_t index,
                                                        const torch::Tensor& parameter) {
  ParameterState& state = states_[group][index];
  if (!state.master.defined()) {
    // Pinned only where there is a device to copy to: pinning needs a CUDA context.
    const auto host =
        torch::TensorOptions().dtype(torch::kFloat32).pinned_memory(parameter.is_cuda());
    const int64_t n = parameter.numel();
    state.master = torch::empty({n}, host);
    state.gradient = torch::empty({n}, host);
    // Zero moments, unless load() has put a checkpoint's there already.
    if (!state.first.defined()) {
      state.first = torch::zeros({n}, host);
      state.second = torch::zeros({n}, host);
    } else if (parameter.is_cuda()) {
      state.first = state.first.pin_memory();
      state.second = state.second.pin_memory();
    }
  }
  return state;
}

torch::Tensor OffloadedAdamW::step(LossClosure closure) {
  TORCH_CHECK(!closure, "OffloadedAdamW takes no closure");
  torch::NoGradGuard no_grad;
  std::vector<Work> work;
  for (size_t g = 0; g < param_groups_.size(); ++g) {
    const auto& options =
        static_cast<const torch::optim::AdamWOptions&>(param_groups_[g].options());
    auto& parameters = param_groups_[g].params();
    for (size_t i = 0; i < parameters.size(); ++i) {
      const torch::Tensor& parameter = parameters[i];
      if (!parameter.grad().defined()) continue;
      const torch::Tensor grad = parameter.grad();
      TORCH_CHECK(!grad.is_sparse(), "OffloadedAdamW does not take sparse gradients");
      TORCH_CHECK(parameter.is_contiguous() && grad.is_contiguous() &&
                      parameter.scalar_type() == torch::kFloat32 &&
                      grad.scalar_type() == torch::kFloat32,
                  "OffloadedAdamW updates contiguous float32 parameters");
      TORCH_CHECK(work.empty() || work.front().parameter.device() == parameter.device(),
                  "OffloadedAdamW keeps every parameter on one device");
      ParameterState& state = StateOf(g, i, parameter);
      state.step += 1;
      work.push_back({parameter.view(-1), grad.view(-1), &state, &options});
    }
  }
  if (work.empty()) return {};
  if (work.front().parameter.is_cuda()) {
    StepOnCuda(work);
    return {};
  }
  for (const Work& item : work) {
    ParameterState& state = *item.state;
    if (!state.master_current) state.master.copy_(item.parameter);
    state.master_current = true;
    state.gradient.copy_(item.grad);
    UpdateOnHost(state.master, state.gradient, state.first, state.second,
                 AdamWConstantsFor(*item.options, state.step));
    item.parameter.copy_(state.master);
  }
  return {};
}

#if SEQBENCH_WITH_CUDA_STREAMS
void OffloadedAdamW::StepOnCuda(const std::vector<Work>& work) {
  const c10::Device device = work.front().parameter.device();
  const c10::cuda::CUDAGuard device_guard(device);
  const c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(device.index());
  // One stream for the whole run: the caching allocator and the copy engine see one
  // queue of transfers, in order, so a step's downloads never pass the last step's uploads
  // of the same master copies.
  if (!copy_stream_ || copy_stream_->device() != device) {
    copy_stream_ = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index()).unwrap();
  }
  const c10::cuda::CUDAStream copy(c10::cuda::CUDAStream::UNCHECKED, *copy_stream_);

  at::cuda::CUDAEvent gradients_ready;  // backward and clipping, as queued so far
  gradients_ready.record(compute);
  gradients_ready.block(copy);
  std::vector<at::cuda::CUDAEvent> downloaded(work.size());
  {
    const c10::cuda::CUDAStreamGuard on_copy(copy);
    for (size_t i = 0; i < work.size(); ++i) {
      ParameterState& state = *work[i].state;
      // After a load, the master copy is the parameter's loaded value.
      if (!state.master_current) state.master.copy_(work[i].parameter, /*non_blocking=*/true);
      state.master_current = true;
      state.gradient.copy_(work[i].grad, /*non_blocking=*/true);
      downloaded[i].record(copy);
    }
  }
  for (size_t i = 0; i < work.size(); ++i) {
    ParameterState& state = *work[i].state;
    downloaded[i].synchronize();
    UpdateOnHost(state.master, state.gradient, state.first, state.second,
                 AdamWConstantsFor(*work[i].options, state.step));
    const c10::cuda::CUDAStreamGuard on_copy(copy);
    work[i].parameter.copy_(state.master, /*non_blocking=*/true);
  }
  // The gradients were read on the copy stream, and every download has landed (each was
  // synchronised above), so the allocator may reuse their blocks on the compute stream.
  at::cuda::CUDAEvent uploaded;
  uploaded.record(copy);
  uploaded.block(compute);
}
#else
void OffloadedAdamW::StepOnCuda(const std::vector<Work>&) {
  TORCH_CHECK(false,
              "OffloadedAdamW: this seqbench was built without a CUDA LibTorch, so it cannot "
              "queue copies on a CUDA stream");
}
#endif

void OffloadedAdamW::save(torch::serialize::OutputArchive& archive) const {
  WriteParameterStates(archive, kFormat, states_,
                       [&](size_t g, size_t i, const ParameterState& state) {
                         archive.write(StateKey(g, i, "first"), state.first);
                         archive.write(StateKey(g, i, "second"), state.second);
                       });
}

void OffloadedAdamW::load(torch::serialize::InputArchive& archive) {
  ReadParameterStates(
      archive, kFormat, "offloaded AdamW", states_, [&](size_t g, size_t i, ParameterState& state) {
        const torch::Tensor& parameter = param_groups_[g].params()[i];
        const auto read_moment = [&](const char* field) {
          return ReadStateTensor(archive, StateKey(g, i, field), torch::kFloat32, parameter.numel())
              .contiguous()
              .view(-1);
        };
        state.first = read_moment("first");
        state.second = read_moment("second");
        StateOf(g, i, parameter);
      });
}

int64_t OffloadedAdamW::StateBytes() const {
  int64_t bytes = 0;
  for (const auto& group : states_) {
    for (const ParameterState& state : group) {
      if (state.step == 0) continue;
      bytes += static_cast<int64_t>(state.first.nbytes() + state.second.nbytes());
    }
  }
  return bytes;
}

int64_t OffloadedAdamW::HostBytes() const {
  int64_t bytes = 0;
  for (const auto& group : states_) {
    for (const ParameterState& state : group) {
      for (const torch::Tensor* tensor :
           {&state.master, &state.gradient, &state.first, &state.second}) {
        if (tensor->defined()) bytes += static_cast<int64_t>(tensor->nbytes());
      }
    }
  }
  return bytes;
}

}  // namespace seqbench::training
