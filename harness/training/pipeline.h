// The runner of one training pipeline, the twin of CaseRunner for `seqbench train`: it
// builds the Trainer, steps it to the pipeline's step count (from a checkpoint when
// resuming), logs every step into the store's training_steps at each evaluation, saves
// checkpoints, and returns the pipeline's case record (throughput, padding, losses,
// memory, the parameter count, and on the recall task the accuracy by distance). A failure becomes
// the record's "error" status, a non-finite loss its "diverged" status, with the steps that ran
// kept either way.
//
// Thread-safety: one pipeline at a time per Store; the hooks run on the calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "harness/memory.h"
#include "harness/training/distributed.h"
#include "harness/training/trainer.h"
#include "harness/training/training_suite.h"
#include "results/store.h"

namespace seqbench::training {

struct PipelineHooks {
  // Asked before each step with the steps taken in this process; true stops the pipeline
  // as interrupted (its logged steps stay stored, its case is not written).
  std::function<bool(int64_t steps_taken)> should_stop;
  // After each step: the step, wall time and tokens/s since this process's first step,
  // the validation loss at evaluation steps, the first step of this process (0, or where a
  // checkpoint resumed), and whether it was the last.
  std::function<void(const StepResult& step, double elapsed_s, double tokens_per_s,
                     std::optional<double> validation_loss, int64_t first_step, bool last)>
      on_step;
  // A line for the user ("resumed from ...", "checkpoint at step ...", an error).
  std::function<void(const std::string& message)> on_message;
};

struct PipelineFiles {
  std::string checkpoint;  // save here at the end (and every save_every steps); "" = none
  int64_t save_every = 0;
  std::string resume;  // load this checkpoint first; "" = start fresh
  // The run the steps go into, saved in each checkpoint: a resume into a database that
  // holds this run continues it (`seqbench train --resume`).
  std::string run_uuid;
  // Distillation: the trained model of the pipeline named by distill_from (the training
  // run's, from its PipelineOutcome); null when that pipeline did not train here.
  const CheckpointModel* teacher = nullptr;
};

struct PipelineOutcome {
  CaseRecord record;
  bool interrupted = false;
  // The trained model, for a pipeline with keep_model that finished ok (a later one
  // distils from it).
  std::optional<CheckpointModel> model;
};

// The pipeline's identity as a case: its name, its variant, and the workload it trains
// (mode train, float32, its device, batch size, max length and model sizes).
CaseIdentity PipelineIdentity(const TrainingSuite& suite, const PipelineSpec& spec);

// Why a pipeline cannot be measured on this machine, or "" when it can: CUDA asked for
// and not available, or optimizer offload off CUDA (no device memory to relieve).
// RunPipeline records such a pipeline as skipped, with this reason, and trains nothing.
std::string PipelineSkipReason(const TrainingConfig& config);

// A pipeline with config.data_parallel.ranks > 1 trains on the first that many ranks of
// `world` (this process one of them); every one of them calls RunPipeline for it. Rank 0
// alone should be given a database and checkpoint path that matter: the others log the
// same (group-wide) steps.
PipelineOutcome RunPipeline(const TrainingSuite& suite, const PipelineSpec& spec,
                            const TrainingData& data, Store& store, int64_t run_id,
                            int64_t position, const PipelineFiles& files,
                            const PipelineHooks& hooks, World* world = nullptr);

// The case's metrics from its logged steps (all of them, across resumed processes):
// throughput over the steps after the pipeline's timing warmup (total tokens / total time,
// and the spread of per-step rates), padding and losses over all of them, and the memory
// probe's figures (this process's). Appends to record.metrics and record.samples_s; sets
// tokens_per_step.
void AddPipelineMetrics(const std::vector<TrainingStepRecord>& steps, const PipelineSpec& spec,
                        const MemoryUsage& memory, CaseRecord& record);

// Rank 0's communication per timed step (its steps in this process after the pipeline's
// timing warmup; the ranks' buckets are the same size): buckets, bytes and seconds of the
// gradient all-reduces, and the blocking all-reduces of counts. Appends nothing when no
// step was timed.
void AddCommunicationMetrics(const std::vector<CommunicationStats>& steps, const PipelineSpec& spec,
                             CaseRecord& record);

}  // namespace seqbench::training
