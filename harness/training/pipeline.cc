#include "harness/training/pipeline.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>

#include "harness/cuda_probe.h"
#include "harness/training/inference_comparison.h"
#include "harness/training/offloaded_adamw.h"
#include "harness/training/recall_task.h"
#include "results/metrics.h"
#include "stats/ring_model.h"
#include "stats/statistics.h"
#include "variants/core/registry.h"

namespace seqbench::training {
namespace {

std::string FormatNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3g", value);
  return text;
}

// The trained weights through `key` (an evaluate_with variant), as the record's
// inference_*_<key> metrics. A variant this build cannot run, or one that fails, leaves its
// metrics out and its reason in the record's message; the training itself succeeded, so
// the status stays.
void AddInferenceComparison(Trainer& trainer, const std::string& key,
                            const std::function<void(const std::string&)>& say,
                            CaseRecord& record) {
  const auto left_out = [&](const std::string& reason) {
    record.message += (record.message.empty() ? "" : "; ") + reason;
    say(reason);
  };
  const std::string unavailable = GlobalVariants().Get(key).capabilities.unavailable;
  if (!unavailable.empty()) {
    left_out("evaluate_with " + key + " skipped: " + unavailable);
    return;
  }
  try {
    const InferenceComparison c = CompareInference(trainer, key);
    auto add = [&](const std::string& name, double value) {
      record.metrics.push_back(TrainingMetric("inference_" + name + "_" + key, value));
    };
    add("loss", c.loss);
    add("reference_loss", c.reference_loss);
    add("argmax_agreement", c.argmax_agreement);
    add("logit_rms_error", c.logit_rms_error);
    if (c.generated_tokens > 0) {
      add("generated_agreement", c.generated_agreement);
      add("generated_prefix", c.generated_common_prefix);
      add("generated_tokens", static_cast<double>(c.generated_tokens));
    }
    if (c.weight_bytes >= 0) add("weight_bytes", static_cast<double>(c.weight_bytes));
    say("through " + key + ": held-out loss " + FormatNumber(c.loss) + " (trained " +
        FormatNumber(c.reference_loss) + "), argmax agreement " +
        FormatNumber(c.argmax_agreement * 100) + "%");
  } catch (const std::exception& error) {
    left_out("evaluate_with " + key + " failed: " + DescribeError(error));
  }
}

}  // namespace

CaseIdentity PipelineIdentity(const TrainingSuite& suite, const PipelineSpec& spec) {
  const TrainingConfig& config = spec.config;
  CaseIdentity identity;
  identity.variant_name = spec.name;
  identity.variant_key = config.variant;
  Workload& w = identity.workload;
  w.mode = "train";
  w.dtype = "float32";
  w.device = config.device;
  w.threads = at::get_num_threads();
  // A token budget has no fixed batch size; 0 says so.
  w.batch = config.batching.policy == BatchingPolicy::kTokenBudget ? 0 : config.batching.batch_size;
  w.seq_len = suite.data.max_length;
  w.layers = config.model.num_layers;
  w.width = config.model.width;
  w.heads = config.model.num_heads;
  w.vocab_size = config.model.vocab_size;
  w.ffn = config.model.ffn;
  return identity;
}

void AddPipelineMetrics(const std::vector<TrainingStepRecord>& steps, const PipelineSpec& spec,
                        const MemoryUsage& memory, CaseRecord& record) {
  int64_t timed_tokens = 0, all_tokens = 0, padded_tokens = 0, skipped = 0;
  double timed_seconds = 0, previous_elapsed_s = 0;
  std::vector<double> rates;
  std::optional<double> last_validation;
  for (size_t i = 0; i < steps.size(); ++i) {
    // A step's own time: the log keeps the training time up to the end of each step.
    const double seconds = steps[i].elapsed_s - previous_elapsed_s;
    previous_elapsed_s = steps[i].elapsed_s;
    all_tokens += steps[i].tokens;
    padded_tokens += steps[i].padded_tokens;
    skipped += steps[i].skipped ? 1 : 0;
    if (steps[i].validation_loss) last_validation = steps[i].validation_loss;
    if (static_cast<int64_t>(i) < spec.timing_warmup || !(seconds > 0)) continue;
    record.samples_s.push_back(seconds);
    timed_tokens += steps[i].tokens;
    timed_seconds += seconds;
    rates.push_back(steps[i].tokens / seconds);
  }
  record.tokens_per_step = all_tokens / static_cast<int64_t>(steps.size());
  const auto add = [&](const std::string& name, double value) {
    record.metrics.push_back(TrainingMetric(name, value));
  };
  if (timed_seconds > 0) {
    add("tokens_per_s", timed_tokens / timed_seconds);
    if (rates.size() >= 2) add("tokens_per_s_stddev", stats::SampleStddev(rates));
    add("runtime_mean_s", stats::Mean(record.samples_s));
    if (rates.size() >= 2) add("runtime_stddev_s", stats::SampleStddev(record.samples_s));
  }
  // Steps logged before v6 have no padded count.
  if (padded_tokens > 0) {
    add("padding_efficiency", static_cast<double>(all_tokens) / padded_tokens);
  }
  const size_t tail = std::max<size_t>(1, steps.size() / 10);
  double tail_loss = 0;
  for (size_t i = steps.size() - tail; i < steps.size(); ++i) tail_loss += steps[i].loss;
  add("final_train_loss", tail_loss / tail);
  if (last_validation) add("final_validation_loss", *last_validation);
  add("skipped_steps", skipped);
  if (spec.config.loss_scaling || spec.config.precision == training::Precision::kFloat16) {
    add("final_loss_scale", steps.back().loss_scale);
  }
  if (memory.peak_bytes >= 0) add("peak_bytes", memory.activation_bytes);
  if (memory.max_rss_bytes >= 0) add("max_rss_bytes", memory.max_rss_bytes);
}

void AddCommunicationMetrics(const std::vector<CommunicationStats>& steps, const PipelineSpec& spec,
                             CaseRecord& record) {
  CommunicationStats sum;
  int64_t timed = 0;
  for (size_t i = static_cast<size_t>(std::max<int64_t>(spec.timing_warmup, 0)); i < steps.size();
       ++i, ++timed)
    sum += steps[i];
  if (timed == 0) return;
  const double per_step = 1.0 / static_cast<double>(timed);
  record.metrics.push_back(TrainingMetric("bucket_mb", spec.config.data_parallel.bucket_mb));
  record.metrics.push_back(
      TrainingMetric("allreduce_buckets_per_step", static_cast<double>(sum.buckets) * per_step));
  record.metrics.push_back(
      TrainingMetric("allreduce_bytes_per_step", static_cast<double>(sum.bytes) * per_step));
  record.metrics.push_back(
      TrainingMetric("allreduce_s_per_step", sum.allreduce_seconds * per_step));
  record.metrics.push_back(TrainingMetric("count_allreduces_per_step",
                                          static_cast<double>(sum.count_allreduces) * per_step));
  record.metrics.push_back(
      TrainingMetric("count_allreduce_s_per_step", sum.count_allreduce_seconds * per_step));
  if (spec.config.data_parallel.zero_stage > 0) {
    record.metrics.push_back(TrainingMetric("zero_broadcast_bytes_per_step",
                                            static_cast<double>(sum.broadcast_bytes) * per_step));
    record.metrics.push_back(
        TrainingMetric("zero_broadcast_s_per_step", sum.broadcast_seconds * per_step));
  }
}

namespace {

// All-reduces from 4 B (all latency) to 1 MiB (mostly bandwidth) on the group, each the
// median of 7, fitted to the ring model. About 40 all-reduces: under a second even behind
// the network study's slowest emulated link.
RingModel MeasureRingModel(DataParallelGroup& group) {
  const std::vector<double> sizes = {4, 64 << 10, 256 << 10, 1 << 20};
  std::vector<double> seconds;
  for (const double bytes : sizes) {
    seconds.push_back(
        stats::Median(group.TimeAllReduces(static_cast<int64_t>(bytes), /*repetitions=*/7)));
  }
  return FitRingModel(group.size(), sizes, seconds);
}

}  // namespace

std::string PipelineSkipReason(const TrainingConfig& config) {
  if (config.device == "cuda" && !torch::cuda::is_available())
    return cuda_probe::kUnavailableReason;
  if (config.offload_optimizer && config.device != "cuda") {
    return "offload = \"cpu\" moves AdamW's state off a CUDA device; this pipeline trains on " +
           config.device + ", where the state is in host memory already";
  }
  return "";
}

namespace {

// One pipeline's training, in named steps, and the state they share: the record being
// written, the steps not yet logged, the memory probe. Not thread-safe; one per pipeline.
class PipelineRun {
 public:
  PipelineRun(const TrainingSuite& suite, const PipelineSpec& spec, const TrainingData& data,
              Store& store, int64_t run_id, const PipelineFiles& files, const PipelineHooks& hooks,
              World* world, PipelineOutcome& outcome)
      : suite_(suite),
        spec_(spec),
        data_(data),
        store_(store),
        run_id_(run_id),
        files_(files),
        hooks_(hooks),
        world_(world),
        outcome_(outcome),
        record_(outcome.record),
        device_(spec.config.device) {}

  // Trains to spec.steps (or a stop, or divergence), saves, and adds the model's metrics.
  void Train() {
    probe_.emplace(device_);
    probe_->Begin();
    probing_ = true;
    const std::shared_ptr<DataParallelGroup> group = JoinGroup();
    Trainer trainer(spec_.config, data_.train, data_.validation, group);
    trainer.set_run_uuid(files_.run_uuid);
    if (spec_.config.distillation.enabled()) trainer.SetTeacher(Teacher());
    const double run_elapsed_s = Resume(trainer);
    std::vector<CommunicationStats> communication;  // each step's in this process
    TrainSteps(trainer, run_elapsed_s, communication);
    if (!pending_.empty()) store_.AddTrainingSteps(run_id_, record_.key(), pending_);
    pending_.clear();
    if (!files_.checkpoint.empty() && record_.status == kStatusOk) {  // never diverged weights
      trainer.Save(files_.checkpoint);
      Say("checkpoint at step " + std::to_string(trainer.step()) + ": " + files_.checkpoint);
    }
    memory_ = probe_->End();
    AddModelMetrics(trainer, communication);
    if (spec_.keep_model && record_.status == kStatusOk) outcome_.model = trainer.Model();
  }

  // The teacher the run kept for this pipeline's distill_from.
  const CheckpointModel& Teacher() const {
    if (files_.teacher == nullptr) {
      throw std::runtime_error("distill_from '" + spec_.config.distillation.teacher +
                               "': that pipeline did not finish in this process (train it in "
                               "the same command, before this one)");
    }
    return *files_.teacher;
  }

  // The pipeline's error: its message, and the steps that ran before it still logged.
  void Fail(const std::exception& error) {
    record_.status = kStatusError;
    record_.message = DescribeError(error);
    const int64_t ranks = spec_.config.data_parallel.ranks;
    if (ranks > 1) {
      // c10d's words ("Connection closed by peer") say what, not where.
      record_.message =
          "in the data-parallel group of " + std::to_string(ranks) +
          " ranks (a rank lost, or a collective past --dist-timeout): " + record_.message;
    }
    Say("error: " + record_.message);
    if (pending_.empty()) return;
    try {
      store_.AddTrainingSteps(run_id_, record_.key(), pending_);
    } catch (const StoreError& store_error) {
      record_.message +=
          "; and its last steps could not be logged: " + std::string(store_error.what());
    }
  }

  // The figures over the whole log of the pipeline in this run, the steps of earlier
  // (resumed) processes included.
  void Finish(std::chrono::steady_clock::time_point started) {
    if (!memory_ && probing_) memory_ = probe_->End();
    record_.wall_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::vector<TrainingStepRecord> logged;
    try {
      logged = store_.TrainingSteps(run_id_, record_.key());
    } catch (const StoreError& error) {
      record_.message += std::string(record_.message.empty() ? "" : "; ") +
                         "its steps could not be read back: " + error.what();
    }
    record_.iterations = static_cast<int64_t>(logged.size());
    if (logged.empty()) return;
    AddPipelineMetrics(logged, spec_, memory_.value_or(MemoryUsage{}), record_);
    if (diverged_validation_) {
      auto& metrics = record_.metrics;
      metrics.erase(
          std::remove_if(metrics.begin(), metrics.end(),
                         [](const Metric& m) { return m.name == "final_validation_loss"; }),
          metrics.end());
      metrics.push_back(TrainingMetric("final_validation_loss", *diverged_validation_));
    }
  }

 private:
  void Say(const std::string& message) const {
    if (hooks_.on_message) hooks_.on_message("[" + spec_.name + "] " + message);
  }

  // The data-parallel group of a pipeline over several ranks (null for one), and the ring
  // model of its network, measured before the gradients cross it.
  std::shared_ptr<DataParallelGroup> JoinGroup() {
    const DataParallelOptions& parallel = spec_.config.data_parallel;
    if (parallel.ranks <= 1) return nullptr;
    const std::vector<int64_t> members = parallel.Members();
    if (world_ == nullptr || world_->size() <= members.back()) {
      throw std::invalid_argument("the pipeline trains on world ranks up to " +
                                  std::to_string(members.back()) +
                                  "; start seqbench train with --nproc " +
                                  std::to_string(members.back() + 1) + " (or under torchrun)");
    }
    std::shared_ptr<DataParallelGroup> group = world_->Group(spec_.name, members, parallel.timeout);
    const RingModel network = MeasureRingModel(*group);
    record_.metrics.push_back(TrainingMetric("network_alpha_s", network.alpha_s));
    record_.metrics.push_back(TrainingMetric("network_beta_s_per_byte", network.beta_s_per_byte));
    return group;
  }

  // Loads the checkpoint to resume from, if any; the run's training time so far.
  double Resume(Trainer& trainer) {
    const std::string& resume = files_.resume;
    if (resume.empty()) return 0;
    trainer.Load(resume);
    // Steps logged after the checkpoint (before a crash) are taken again, identically.
    const int64_t dropped = store_.RemoveTrainingStepsAfter(run_id_, record_.key(), trainer.step());
    const std::vector<TrainingStepRecord> logged = store_.TrainingSteps(run_id_, record_.key());
    Say("resumed from " + resume + " at step " + std::to_string(trainer.step()) +
        (logged.empty() ? ""
                        : ", continuing the " + std::to_string(logged.size()) +
                              " logged steps of run " + std::to_string(run_id_)) +
        (dropped > 0 ? " (" + std::to_string(dropped) + " logged after it are taken again)" : ""));
    return logged.empty() ? 0 : logged.back().elapsed_s;
  }

  // The steps to spec.steps: each logged, evaluated every eval_every, saved every
  // save_every; stops at a stop request or at divergence.
  void TrainSteps(Trainer& trainer, double run_elapsed_s,
                  std::vector<CommunicationStats>& communication) {
    const int64_t first_step = trainer.step();
    double elapsed_s = 0;  // in this process
    int64_t tokens = 0;
    while (trainer.step() < spec_.steps) {
      if (hooks_.should_stop && hooks_.should_stop(steps_taken_)) {
        outcome_.interrupted = true;
        return;
      }
      const StepResult step = trainer.Step();
      ++steps_taken_;
      communication.push_back(step.communication);
      elapsed_s += step.seconds;
      run_elapsed_s += step.seconds;
      tokens += step.tokens;
      const bool last = step.step == spec_.steps;
      TrainingStepRecord row = LogRow(step, run_elapsed_s);
      if (step.step % spec_.eval_every == 0 || last) row.validation_loss = trainer.Evaluate();
      pending_.push_back(row);
      if (hooks_.on_step) {
        hooks_.on_step(step, elapsed_s, tokens / elapsed_s, row.validation_loss, first_step, last);
      }
      if (Diverged(step, row)) return;
      const bool save =
          !files_.checkpoint.empty() && files_.save_every > 0 && step.step % files_.save_every == 0;
      // The log reaches the database at every evaluation, and before every checkpoint, so
      // that a resume from the checkpoint finds every step up to it.
      if (row.validation_loss || save) {
        store_.AddTrainingSteps(run_id_, record_.key(), pending_);
        pending_.clear();
      }
      if (save) trainer.Save(files_.checkpoint);
    }
  }

  // Fields by name: the record has grown (padded_tokens sits before elapsed_s), and a
  // positional initialiser once put the elapsed time into the token count.
  static TrainingStepRecord LogRow(const StepResult& step, double run_elapsed_s) {
    TrainingStepRecord row;
    row.step = step.step;
    row.loss = step.loss;
    row.learning_rate = step.learning_rate;
    row.grad_norm = step.grad_norm;
    row.loss_scale = step.loss_scale;
    row.skipped = step.skipped;
    row.tokens = step.tokens;
    row.padded_tokens = step.padded_tokens;
    row.elapsed_s = run_elapsed_s;
    return row;
  }

  // A non-finite loss on a step the optimizer applied (a loss-scaled step with overflowing
  // gradients is skipped instead, by design) leaves weights that every later step would
  // only carry on: the pipeline stops there, its steps kept and its weights never saved.
  bool Diverged(const StepResult& step, const TrainingStepRecord& row) {
    const double validation = row.validation_loss.value_or(0);
    if ((step.skipped || std::isfinite(step.loss)) && std::isfinite(validation)) return false;
    record_.status = kStatusDiverged;
    record_.message = "at step " + std::to_string(step.step) + ": " +
                      (std::isfinite(step.loss) ? "validation loss " : "training loss ") +
                      FormatNumber(std::isfinite(step.loss) ? validation : step.loss) +
                      " at learning rate " + FormatNumber(step.learning_rate);
    // Stored as NULL, a NaN validation loss would read back as "not evaluated".
    if (!std::isfinite(validation)) diverged_validation_ = validation;
    Say("diverged " + record_.message);
    return true;
  }

  // The trained model's figures: parameters, recall and inference comparisons where asked,
  // padding, optimizer state, communication.
  void AddModelMetrics(Trainer& trainer, const std::vector<CommunicationStats>& communication) {
    int64_t parameters = 0;
    for (const auto& item : trainer.variant().parameters()) parameters += item.value().numel();
    record_.metrics.push_back(TrainingMetric("parameters", static_cast<double>(parameters)));
    const bool finished = record_.status == kStatusOk && !outcome_.interrupted;
    if (suite_.data.corpus == "recall" && finished) {
      // What the long-range study reads: the trained model's greedy answers, by distance.
      for (const RecallScore& score : ScoreRecall(trainer, suite_.data.recall)) {
        const std::string suffix = "_d" + std::to_string(score.distance);
        record_.metrics.push_back(TrainingMetric("recall_accuracy" + suffix, score.accuracy()));
        record_.metrics.push_back(
            TrainingMetric("recall_samples" + suffix, static_cast<double>(score.total)));
      }
    }
    if (finished) {
      const auto say = [this](const std::string& message) { Say(message); };
      for (const std::string& key : spec_.evaluate_with)
        AddInferenceComparison(trainer, key, say, record_);
    }
    const auto padding = trainer.loader().EpochPadding();
    record_.metrics.push_back(TrainingMetric("epoch_padding_efficiency", padding.efficiency()));
    const int64_t ranks = spec_.config.data_parallel.ranks;
    record_.metrics.push_back(TrainingMetric("ranks", static_cast<double>(ranks)));
    // After a resume the moments were loaded, so the size is the same as in one process.
    record_.metrics.push_back(TrainingMetric("optimizer_state_bytes",
                                             static_cast<double>(trainer.optimizer_state_bytes())));
    if (const auto sparsity = trainer.weight_sparsity()) {
      record_.metrics.push_back(TrainingMetric("weight_sparsity", *sparsity));
    }
    if (const auto* offloaded = dynamic_cast<const OffloadedAdamW*>(&trainer.optimizer())) {
      record_.metrics.push_back(
          TrainingMetric("optimizer_host_bytes", static_cast<double>(offloaded->HostBytes())));
    }
    if (ranks > 1) AddCommunicationMetrics(communication, spec_, record_);
  }

  const TrainingSuite& suite_;
  const PipelineSpec& spec_;
  const TrainingData& data_;
  Store& store_;
  const int64_t run_id_;
  const PipelineFiles& files_;
  const PipelineHooks& hooks_;
  World* world_;
  PipelineOutcome& outcome_;
  CaseRecord& record_;
  const torch::Device device_;
  // Begun inside Train(): a device that fails there (a CUDA allocator not set up, say) is
  // this pipeline's error, not the end of the whole training run.
  std::optional<MemoryProbe> probe_;
  bool probing_ = false;                       // Begin() returned
  int64_t steps_taken_ = 0;                    // in this process
  std::optional<double> diverged_validation_;  // the non-finite validation loss, if any
  // The training's memory, taken before the checks that follow it build other models.
  std::optional<MemoryUsage> memory_;
  std::vector<TrainingStepRecord> pending_;  // logged steps not yet in the database
};

}  // namespace

PipelineOutcome RunPipeline(const TrainingSuite& suite, const PipelineSpec& spec,
                            const TrainingData& data, Store& store, int64_t run_id,
                            int64_t position, const PipelineFiles& files,
                            const PipelineHooks& hooks, World* world) {
  PipelineOutcome outcome;
  CaseRecord& record = outcome.record;
  record.identity = PipelineIdentity(suite, spec);
  record.position = position;
  record.category = "training pipeline";
  // The options that tell pipelines apart, for the training table.
  record.description = spec.Describe();
  record.reference = spec.reference;
  record.status = kStatusOk;
  if (const std::string reason = PipelineSkipReason(spec.config); !reason.empty()) {
    record.status = kStatusSkipped;
    record.message = reason;
    if (hooks.on_message) hooks.on_message("[" + spec.name + "] skipped: " + reason);
    return outcome;
  }
  const auto started = std::chrono::steady_clock::now();
  if (torch::Device(spec.config.device).is_cpu()) CountingCpuAllocator::Install();
  PipelineRun run(suite, spec, data, store, run_id, files, hooks, world, outcome);
  try {
    run.Train();
  } catch (const std::exception& error) {
    run.Fail(error);
  }
  run.Finish(started);
  return outcome;
}

}  // namespace seqbench::training
