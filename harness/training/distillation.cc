#include "harness/training/distillation.h"

namespace seqbench::training {

torch::Tensor DistillationLoss(const torch::Tensor& student, const torch::Tensor& teacher,
                               const Batch& batch, double temperature) {
  TORCH_CHECK(temperature > 0, "the distillation temperature must be above 0");
  TORCH_CHECK(student.sizes() == teacher.sizes(), "student logits ", student.sizes(),
              " and teacher logits ", teacher.sizes(), " differ in shape");
  const int64_t t = batch.tokens.size(1);
  // Position i predicts token i + 1, as in NextTokenLoss: the last position has no target.
  const auto log_student = torch::log_softmax(student.slice(1, 0, t - 1) / temperature, -1);
  const auto log_teacher =
      torch::log_softmax(teacher.slice(1, 0, t - 1).detach() / temperature, -1);
  const auto divergence = (log_teacher.exp() * (log_teacher - log_student)).sum(-1);  // [B,T-1]
  const torch::Tensor mask = batch.PaddingMask();
  const auto has_target =
      (mask.defined() ? mask.slice(1, 1, t) : torch::ones_like(divergence, torch::kBool))
          .to(divergence.scalar_type());
  const auto count = has_target.sum().clamp_min(1);
  return temperature * temperature * (divergence * has_target).sum() / count;
}

}  // namespace seqbench::training
