// A Trainer runs the training loop of any variant that supports `train` mode, with the
// pipeline options the seeds measure: batching policy, background loading, gradient
// accumulation, mixed precision with dynamic loss scaling, AdamW with a cosine schedule
// and clipping by global norm. One Step() is one optimizer step.
//
// The loss of a step is the mean next-token loss over every target of its micro-batches:
// each micro-batch's mean loss is weighted by its share of the step's targets, so that k
// accumulated micro-batches give the gradient of the one large batch they make up.
//
// Thread-safety: one thread drives a Trainer; its loader's workers are internal.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/training/data_loader.h"
#include "harness/training/distillation.h"
#include "harness/training/distributed.h"
#include "harness/training/layerwise_adaptive.h"
#include "harness/training/optimization.h"
#include "harness/training/pruning.h"
#include "variants/core/variant.h"

namespace seqbench::training {

struct TrainingConfig {
  std::string variant = "batched";
  VariantOptions variant_options;
  ModelConfig model;  // vocab_size is the tokenizer's (text::kVocabularySize)
  BatchingOptions batching;
  // Batches are pinned (page-locked) by default; the trainer pins only when on CUDA.
  LoaderOptions loader{/*workers=*/0, /*prefetch=*/4, /*pin_memory=*/true};
  int64_t accumulation = 1;  // micro-batches per optimizer step
  Precision precision = Precision::kFloat32;
  bool loss_scaling = false;  // dynamic loss scaling (always on for fp16)
  LossScalerOptions scaler;
  ScheduleOptions schedule;
  OptimizerKind optimizer = OptimizerKind::kAdamW;
  LarsOptions lars;  // optimizer = lars only
  // offload = "cpu": AdamW's moments and update on the host (OffloadedAdamW); AdamW only.
  bool offload_optimizer = false;
  double weight_decay = 0.01;  // AdamW, on matrices only (not gains)
  double beta1 = 0.9, beta2 = 0.99, epsilon = 1e-8;
  double clip_norm = 1.0;  // 0 = no clipping
  PruningOptions pruning;  // gradual magnitude pruning of the matrices (off by default)
  // Knowledge distillation from a trained teacher (Trainer::SetTeacher), off by default.
  // The step's logged loss and the validation loss stay the next-token loss.
  DistillationOptions distillation;
  int64_t eval_batch_size = 32;
  uint64_t seed = 1;
  std::string device = "cpu";
  // Data parallelism: with ranks > 1 the batch options describe the global batch, which
  // the ranks split (ShardPlan), and each step's loss, tokens and gradients are the
  // group's, so that k ranks follow the one-rank trajectory of the same options.
  DataParallelOptions data_parallel;

  // Everything that shapes the trajectory, as "key=value ..." (not the worker count or
  // the prefetch depth, which must not change it). A checkpoint resumes only under the
  // same fingerprint.
  std::string Fingerprint() const;
};

struct StepResult {
  int64_t step = 0;  // optimizer steps so far, this one included (1-based)
  double loss = 0;   // mean next-token loss over the step's targets (before the update)
  double learning_rate = 0;
  double grad_norm = 0;              // global norm before clipping; NaN when skipped
  double loss_scale = 1;             // the scale the step ran with (1 without loss scaling)
  bool skipped = false;              // inf/NaN gradients: no update (loss scaling only)
  int64_t tokens = 0;                // non-padding tokens
  int64_t padded_tokens = 0;         // B·T summed over micro-batches
  double seconds = 0;                // wall time, loader wait included
  CommunicationStats communication;  // this rank's gradient all-reduces (data parallelism)
};

struct CheckpointModel;  // below: a trained model and its weights

class Trainer {
 public:
  // Builds the variant with the family's seeded weights. Throws c10::Error (variant or
  // option problems) or std::invalid_argument (pipeline options). With
  // config.data_parallel.ranks > 1, `group` is this rank's group of that many ranks; the
  // weights are rank 0's, and c10d's errors (a rank lost, a timeout) reach Step() and
  // Evaluate() as exceptions.
  Trainer(TrainingConfig config, const Samples& train, const Samples& validation,
          std::shared_ptr<DataParallelGroup> group = nullptr);
  ~Trainer();

  StepResult Step();
  // Mean next-token loss over every validation sample, under no-grad, in fixed batches
  // (dealt out to the ranks under data parallelism).
  double Evaluate();
  // Runs Forward() under no-grad over this rank's share of the validation samples, in
  // batches of eval_batch_size (rank r takes batches r, r + ranks, ...), and hands each
  // batch, the samples' indices in it and the output to `visit`, for measures beside the
  // loss (the recall task's accuracy). Combine what it counts with SumOverRanks().
  using ValidationVisitor = std::function<void(
      const Batch& batch, const std::vector<int64_t>& indices, const ForwardOutput& output)>;
  void ForEachValidationBatch(const ValidationVisitor& visit);
  // Elementwise sums over the data-parallel group's ranks (every rank must call it with
  // as many values); `values` themselves with one rank.
  std::vector<double> SumOverRanks(std::vector<double> values);
  const Samples& validation() const { return validation_; }

  // Writes parameters, optimizer moments, schedule position, loss scale and the loader's
  // position atomically (WriteFileAtomically: whole or not at all), so that Load()
  // continues with the same next batch and the same next loss. Throws OutputRefused for a
  // symlink or non-file at `path`, std::runtime_error when the write fails. Both Save() and
  // Load() throw std::invalid_argument under ZeRO-1 (no rank holds the whole state).
  void Save(const std::string& path) const;
  // Throws std::runtime_error naming the file when it is not a seqbench checkpoint or was
  // written under another fingerprint.
  void Load(const std::string& path);
  // The model as trained so far, in memory: its variant, configuration, options, step and a
  // copy of its weights on the CPU (what ReadCheckpointModel reads from a file), for a later
  // pipeline that distils from this one. Under ZeRO-1 too: every rank holds every weight.
  CheckpointModel Model() const;

  int64_t step() const { return step_; }
  // The stored run this training logs into, saved with each checkpoint so that a resume
  // continues that run (ReadCheckpointOrigin).
  void set_run_uuid(std::string uuid) { run_uuid_ = std::move(uuid); }
  const TrainingConfig& config() const { return config_; }
  Variant& variant() { return *variant_; }
  const DataLoader& loader() const { return *loader_; }
  // The optimizer's per-parameter state (moments and their scales), in bytes: 0 before the
  // first step, since both optimizers allocate their moments lazily. Under ZeRO-1, this
  // rank's share.
  int64_t optimizer_state_bytes() const;
  const torch::optim::Optimizer& optimizer() const { return *optimizer_; }
  // The trained model that teaches this one when config.distillation is enabled: called
  // once, before the first Step(). Throws c10::Error when its vocabulary differs.
  void SetTeacher(const CheckpointModel& teacher);
  // The fraction of the model's matrices at zero, when the pipeline prunes.
  std::optional<double> weight_sparsity() const;

 private:
  void MakeLoader(LoaderPosition start);
  // After backward, on gradients that are finite: clips them, steps the optimizer at
  // result.learning_rate and (ZeRO-1) broadcasts the stepped shares; sets grad_norm.
  void Update(StepResult& result);
  // The teacher's logits of `batch`: [B,T,V] float32, computed outside the student's
  // autocast (an fp16 teacher could overflow into the objective); undefined when not
  // distilling or at distill_weight 0.
  torch::Tensor TeacherLogits(const Batch& batch);
  // The objective backward runs on for one micro-batch: the next-token loss, mixed with
  // the teacher's soft targets when `teacher_logits` is defined. output: the student's.
  torch::Tensor Objective(const ForwardOutput& output, const torch::Tensor& teacher_logits,
                          const Batch& batch);
  // Throws std::invalid_argument under ZeRO-1, whose optimizer state no one rank holds.
  void RefuseShardedCheckpoint() const;

  TrainingConfig config_;
  torch::Device device_;
  const Samples& train_;
  const Samples& validation_;
  std::unique_ptr<Variant> variant_;
  std::unique_ptr<Variant> teacher_;  // distillation: the teacher, its weights frozen
  std::vector<torch::Tensor> parameters_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<DataLoader> loader_;
  std::optional<DynamicLossScaler> scaler_;
  std::optional<MagnitudePruner> pruner_;
  std::shared_ptr<DataParallelGroup> group_;
  std::unique_ptr<GradientReducer> reducer_;
  std::vector<int64_t> owners_;  // ZeRO-1: the rank that steps each of parameters_; else empty
  int64_t step_ = 0;
  std::string run_uuid_;
};

// The configuration a Trainer runs with, whose Fingerprint() its checkpoints carry: the
// variant's model family, and loss scaling on under fp16.
TrainingConfig EffectiveConfig(TrainingConfig config);

// Where a checkpoint comes from: the Fingerprint() of the configuration that wrote it, and
// the uuid of the run its training was logged into ("" for a checkpoint written before
// seqbench saved it). Throws like Trainer::Load for a file that is not a checkpoint.
struct CheckpointOrigin {
  std::string fingerprint;
  std::string run_uuid;
  int64_t step = 0;  // the optimizer steps taken when it was written
};
CheckpointOrigin ReadCheckpointOrigin(const std::string& path);

// How the configuration resuming from a checkpoint relates to the one that wrote it,
// compared by their Fingerprint()s: the same; differing only in the cosine schedule's
// length, which follows the step count unless a suite sets cycle_steps (a run extended to
// more steps: allowed, and said); or differing in anything else (refused).
struct ResumeMatch {
  enum Kind { kSame, kScheduleLength, kDifferent } kind = kSame;
  std::string checkpoint_cycle, resuming_cycle;  // set for kScheduleLength
};
ResumeMatch MatchForResume(const std::string& checkpoint_fingerprint,
                           const std::string& resuming_fingerprint);

// What `seqbench generate` needs from a checkpoint: the model and its weights.
struct CheckpointModel {
  std::string variant;
  ModelConfig model;
  ParameterSet weights;
  int64_t step = 0;
  VariantOptions variant_options;  // a trained pipeline's (checkpoints do not store them)
};
CheckpointModel ReadCheckpointModel(const std::string& path);

}  // namespace seqbench::training
