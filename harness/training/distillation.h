// Knowledge distillation (Hinton, Vinyals and Dean 2015): a student trained on a mix of
// its next-token loss and the divergence of its softened distribution from a trained
// teacher's, objective = (1 − α)·CE + α·T²·KL(softmax(teacher/T) ‖ softmax(student/T)).
// The T² keeps the soft term's gradients at the hard term's scale as T grows. In a suite
// the teacher is an earlier pipeline (`distill_from`), trained in the same run.
//
// Thread-safety: DistillationLoss is a pure function of its tensors.
#pragma once

#include <torch/torch.h>

#include <string>

#include "variants/core/variant.h"

namespace seqbench::training {

struct DistillationOptions {
  std::string teacher;       // the suite's pipeline whose trained model teaches; "" = off
  double temperature = 2.0;  // T: both distributions are softmax(logits / T)
  double weight = 0.5;       // α, the soft term's share of the objective, in [0, 1]

  bool enabled() const { return !teacher.empty(); }
};

// T²·KL(softmax(teacher/T) ‖ softmax(student/T)) per position, averaged over the
// positions of `batch` that have a next-token target (the positions NextTokenLoss
// averages over); 0 when there are none. student, teacher: [B,T,V] logits of batch's
// tokens (the teacher's are not differentiated). Differentiable in `student`.
torch::Tensor DistillationLoss(const torch::Tensor& student, const torch::Tensor& teacher,
                               const Batch& batch, double temperature);

}  // namespace seqbench::training
