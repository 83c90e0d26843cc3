#include "harness/training/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <sstream>

#include "base/files.h"
#include "harness/text_data.h"
#include "harness/training/adamw_8bit.h"
#include "harness/training/layerwise_adaptive.h"
#include "harness/training/offloaded_adamw.h"
#include "variants/core/registry.h"
#include "variants/core/torch_compat.h"

namespace seqbench::training {
namespace {

constexpr const char* kCheckpointFormat = "seqbench-training-checkpoint-1";

std::string ReadString(torch::serialize::InputArchive& archive, const std::string& key) {
  c10::IValue value;
  archive.read(key, value);
  return value.toStringRef();
}

int64_t ReadInt(torch::serialize::InputArchive& archive, const std::string& key) {
  c10::IValue value;
  archive.read(key, value);
  return value.toInt();
}

double ReadDouble(torch::serialize::InputArchive& archive, const std::string& key) {
  c10::IValue value;
  archive.read(key, value);
  return value.toDouble();
}

// Opens a checkpoint, or throws naming the file and what it is not.
torch::serialize::InputArchive OpenCheckpoint(const std::string& path) {
  if (!std::filesystem::exists(path)) throw std::runtime_error(path + ": no such checkpoint");
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(path);
  } catch (const c10::Error& error) {
    throw std::runtime_error(path + ": not a readable checkpoint (" + DescribeError(error) + ")");
  }
  c10::IValue format;
  if (!archive.try_read("format", format) || !format.isString() ||
      format.toStringRef() != kCheckpointFormat) {
    throw std::runtime_error(path + ": not a seqbench training checkpoint (expected format " +
                             kCheckpointFormat + ")");
  }
  return archive;
}

std::vector<int64_t> ElementCounts(const std::vector<torch::Tensor>& tensors) {
  std::vector<int64_t> counts;
  for (const auto& tensor : tensors) counts.push_back(tensor.numel());
  return counts;
}

// The configured optimizer over two groups: the matrices, with weight decay, and the rest.
std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(const TrainingConfig& config,
                                                       std::vector<torch::Tensor> decayed,
                                                       std::vector<torch::Tensor> not_decayed) {
  torch::optim::AdamWOptions defaults(config.schedule.peak);
  defaults.betas({config.beta1, config.beta2}).eps(config.epsilon).weight_decay(0);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  auto decayed_options = std::make_unique<torch::optim::AdamWOptions>(defaults);
  decayed_options->weight_decay(config.weight_decay);
  groups.emplace_back(std::move(decayed), std::move(decayed_options));
  groups.emplace_back(std::move(not_decayed),
                      std::make_unique<torch::optim::AdamWOptions>(defaults));
  if (config.offload_optimizer) {
    if (config.optimizer != OptimizerKind::kAdamW) {
      throw std::invalid_argument(
          "offload = cpu moves AdamW's float32 state to the host; it does "
          "not combine with optimizer = " +
          std::string(OptimizerKindName(config.optimizer)));
    }
    return std::make_unique<OffloadedAdamW>(std::move(groups), defaults);
  }
  switch (config.optimizer) {
    case OptimizerKind::kAdamW8bit:
      return std::make_unique<AdamW8bit>(std::move(groups), defaults);
    case OptimizerKind::kLamb:
      return std::make_unique<Lamb>(std::move(groups), defaults);
    case OptimizerKind::kLars:
      return std::make_unique<Lars>(std::move(groups), defaults, config.lars);
    case OptimizerKind::kAdamW:
      break;
  }
  return std::make_unique<torch::optim::AdamW>(std::move(groups), defaults);
}

}  // namespace

std::string TrainingConfig::Fingerprint() const {
  std::ostringstream out;
  out.precision(17);
  out << "variant=" << variant;
  for (const auto& [name, value] : variant_options) out << " " << name << "=" << value;
  out << " family=" << model.family << " vocab=" << model.vocab_size << " width=" << model.width
      << " layers=" << model.num_layers << " heads=" << model.num_heads;
  // Only where it departs from gelu, so that checkpoints written before the key resume.
  if (model.ffn != "gelu") out << " ffn=" << model.ffn;
  out << " batching=" << BatchingPolicyName(batching.policy)
      << " batch_size=" << batching.batch_size << " pool_batches=" << batching.pool_batches
      << " token_budget=" << batching.token_budget << " accumulation=" << accumulation
      << " precision=" << PrecisionName(precision) << " loss_scaling=" << loss_scaling
      << " scaler=" << scaler.initial_scale << "/" << scaler.growth << "/" << scaler.backoff << "/"
      << scaler.growth_interval << " lr=" << schedule.peak << " warmup=" << schedule.warmup_steps
      << " cycle=" << schedule.cycle_steps << " min_ratio=" << schedule.min_ratio
      << " restarts=" << schedule.restarts << " cycle_multiplier=" << schedule.cycle_multiplier
      << " weight_decay=" << weight_decay << " betas=" << beta1 << "/" << beta2
      << " epsilon=" << epsilon << " clip_norm=" << clip_norm << " seed=" << seed;
  // Only when data-parallel, so that one-rank checkpoints keep their fingerprint. The
  // bucket size is not part of it: buckets change when gradients travel, not their sum.
  if (data_parallel.ranks > 1) out << " ranks=" << data_parallel.ranks;
  if (!data_parallel.compression.empty()) out << " compression=" << data_parallel.compression;
  // Only when not AdamW, so that earlier checkpoints keep their fingerprint.
  if (optimizer != OptimizerKind::kAdamW) out << " optimizer=" << OptimizerKindName(optimizer);
  if (optimizer == OptimizerKind::kLars) {
    out << " momentum=" << lars.momentum << " trust_coefficient=" << lars.trust_coefficient;
  }
  if (offload_optimizer) out << " offload=cpu";
  // Only when pruning, so that earlier checkpoints keep their fingerprint.
  if (pruning.enabled()) {
    out << " prune=" << pruning.sparsity << "/" << pruning.start << "/" << pruning.end << "/"
        << pruning.every;
  }
  if (distillation.enabled()) {
    out << " distill=" << distillation.teacher << "/" << distillation.temperature << "/"
        << distillation.weight;
  }
  return out.str();
}

Trainer::Trainer(TrainingConfig config, const Samples& train, const Samples& validation,
                 std::shared_ptr<DataParallelGroup> group)
    : config_(std::move(config)),
      device_(config_.device),
      train_(train),
      validation_(validation),
      group_(std::move(group)) {
  if (config_.data_parallel.ranks < 1) throw std::invalid_argument("ranks must be at least 1");
  if (config_.data_parallel.ranks > 1 &&
      (group_ == nullptr || group_->size() != config_.data_parallel.ranks)) {
    throw std::invalid_argument("a data-parallel pipeline of " +
                                std::to_string(config_.data_parallel.ranks) +
                                " ranks needs a process group of that size");
  }
  if (config_.data_parallel.ranks == 1) group_.reset();
  if (!config_.data_parallel.compression.empty() && !group_) {
    throw std::invalid_argument("compression applies to data parallelism (ranks > 1) only");
  }
  if (config_.data_parallel.zero_stage < 0 || config_.data_parallel.zero_stage > 1) {
    throw std::invalid_argument("zero_stage must be 0 or 1 (ZeRO-2 and 3 are not built)");
  }
  if (config_.data_parallel.zero_stage == 1 && !group_) {
    throw std::invalid_argument(
        "zero = 1 shards the optimizer state over ranks; it needs ranks > 1");
  }
  if (config_.accumulation < 1) throw std::invalid_argument("accumulation must be at least 1");
  if (config_.clip_norm < 0) throw std::invalid_argument("clip_norm must be at least 0");
  if (config_.eval_batch_size < 1) throw std::invalid_argument("eval_batch_size must be >= 1");
  if (validation_.empty()) throw std::invalid_argument("no validation samples");
  variant_ = CreateVariant(config_.variant);
  const Capabilities capabilities = variant_->capabilities();
  TORCH_CHECK(capabilities.Supports(Mode::kTrain), "variant '", config_.variant,
              "' does not support train mode");
  config_ = EffectiveConfig(std::move(config_));
  const auto& family = GlobalFamilies().Get(config_.model.family);
  family.validate(config_.model);
  variant_->Setup(config_.model, family.init_weights(config_.model, config_.seed), device_,
                  torch::kFloat32, config_.variant_options);

  // Weight decay on matrices only: decaying RMSNorm gains towards 0 fights the norm.
  // Under ZeRO-1 the optimizer sees this rank's share only; the pruner sees every matrix.
  std::vector<torch::Tensor> decayed, decayed_share, not_decayed_share;
  for (const auto& parameter : variant_->parameters().values()) parameters_.push_back(parameter);
  if (config_.data_parallel.zero_stage == 1)
    owners_ = ShardOwners(ElementCounts(parameters_), group_->size());
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const torch::Tensor& parameter = parameters_[i];
    if (parameter.dim() >= 2) decayed.push_back(parameter);
    if (!owners_.empty() && owners_[i] != group_->rank()) continue;
    (parameter.dim() >= 2 ? decayed_share : not_decayed_share).push_back(parameter);
  }
  optimizer_ = MakeOptimizer(config_, decayed_share, not_decayed_share);

  if (group_) {
    // DDP's start: every rank begins from rank 0's weights (seeded alike, but a rank
    // resumed from another file would not be).
    group_->BroadcastFromFirst(parameters_);
    reducer_ = group_->MakeReducer(parameters_, config_.data_parallel);
  }
  if (config_.loss_scaling) scaler_.emplace(config_.scaler);
  if (config_.pruning.enabled()) pruner_.emplace(config_.pruning, decayed);
  // Fails early, in the constructor, where the device cannot autocast to the precision.
  { AutocastScope check(device_, config_.precision); }
  MakeLoader({});
}

Trainer::~Trainer() = default;

int64_t Trainer::optimizer_state_bytes() const { return OptimizerStateBytes(*optimizer_); }

std::optional<double> Trainer::weight_sparsity() const {
  if (!pruner_) return std::nullopt;
  return pruner_->Sparsity();
}

void Trainer::MakeLoader(LoaderPosition start) {
  LoaderOptions loader = config_.loader;
  loader.pin_memory = loader.pin_memory && device_.is_cuda();
  loader_.reset();  // joins the old workers first
  const DataShard shard = group_ ? DataShard{group_->rank(), group_->size()} : DataShard{};
  loader_ = std::make_unique<DataLoader>(train_, config_.batching, loader, config_.seed, text::kPad,
                                         start, shard);
}

StepResult Trainer::Step() {
  const auto start = std::chrono::steady_clock::now();
  StepResult result;
  std::vector<Batch> micro_batches;
  std::vector<int64_t> targets;
  int64_t total_targets = 0;
  for (int64_t i = 0; i < config_.accumulation; ++i) {
    Batch batch = loader_->Next();
    result.tokens += batch.NumTokens();
    result.padded_tokens += batch.batch_size() * batch.max_length();
    targets.push_back(TargetCount(batch));
    total_targets += targets.back();
    batch.tokens = batch.tokens.to(device_, /*non_blocking=*/config_.loader.pin_memory);
    micro_batches.push_back(std::move(batch));
  }

  // The step's loss is the mean over every target of every rank: each rank weighs its
  // micro-batches by their share of the group's targets, times the group's size, since
  // the Reducer averages the ranks' gradients.
  // The two blocking all-reduces of counts (here and after backward) are timed apart from
  // the Reducer's: each is a network round trip that no computation hides.
  const auto counted_sum = [&](const std::vector<double>& values) {
    const auto begin = std::chrono::steady_clock::now();
    std::vector<double> sums = group_->Sum(values);
    result.communication.count_allreduces += 1;
    result.communication.count_allreduce_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    return sums;
  };
  double loss_weight_scale = 1;
  if (group_) {
    total_targets = static_cast<int64_t>(counted_sum({static_cast<double>(total_targets)})[0]);
    loss_weight_scale = static_cast<double>(group_->size());
  }

  compat::ClearGradients(parameters_);
  result.loss_scale = scaler_ ? scaler_->scale() : 1.0;
  for (size_t i = 0; i < micro_batches.size(); ++i) {
    const double weight =
        total_targets == 0 ? 0.0 : static_cast<double>(targets[i]) / total_targets;
    const bool last = i + 1 == micro_batches.size();
    if (reducer_) reducer_->BeforeForward(/*synchronized=*/last);
    torch::Tensor loss, objective;
    const torch::Tensor teacher_logits = TeacherLogits(micro_batches[i]);
    {
      AutocastScope autocast(device_, config_.precision);
      const ForwardOutput output = variant_->Forward(micro_batches[i]);
      loss = output.loss.to(torch::kFloat32);
      objective = Objective(output, teacher_logits, micro_batches[i]);
    }
    result.loss += loss.item<double>() * weight;
    torch::Tensor scaled = objective * (weight * loss_weight_scale * result.loss_scale);
    if (reducer_ && last) reducer_->BeforeSynchronizedBackward(scaled);
    scaled.backward();
  }
  if (group_) {
    const auto sums = counted_sum({result.loss, static_cast<double>(result.tokens),
                                   static_cast<double>(result.padded_tokens)});
    result.loss = sums[0];
    result.tokens = static_cast<int64_t>(sums[1]);
    result.padded_tokens = static_cast<int64_t>(sums[2]);
    result.communication += reducer_->TakeStats();
  }

  const bool finite = !scaler_ || scaler_->UnscaleGradients(parameters_);
  result.learning_rate = LearningRateAt(config_.schedule, step_);
  result.grad_norm = std::numeric_limits<double>::quiet_NaN();
  if (finite) Update(result);
  result.skipped = !finite;
  if (scaler_) scaler_->Update(finite);
  result.step = ++step_;
  if (pruner_) pruner_->AfterStep(step_);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

void Trainer::SetTeacher(const CheckpointModel& teacher) {
  TORCH_CHECK(config_.distillation.enabled(), "a teacher for a pipeline that does not distil");
  TORCH_CHECK(teacher.model.vocab_size == config_.model.vocab_size, "the teacher's vocabulary (",
              teacher.model.vocab_size, ") is not the student's (", config_.model.vocab_size, ")");
  teacher_ = CreateVariant(teacher.variant);
  teacher_->Setup(teacher.model, teacher.weights, device_, torch::kFloat32,
                  teacher.variant_options);
  for (const auto& parameter : teacher_->parameters().values()) parameter.requires_grad_(false);
}

torch::Tensor Trainer::TeacherLogits(const Batch& batch) {
  const DistillationOptions& distillation = config_.distillation;
  if (!distillation.enabled() || distillation.weight == 0) return {};
  TORCH_CHECK(teacher_ != nullptr, "distill_from '", distillation.teacher,
              "': no teacher was set before the first step");
  torch::NoGradGuard no_grad;
  return teacher_->Forward(batch).logits.to(torch::kFloat32);
}

torch::Tensor Trainer::Objective(const ForwardOutput& output, const torch::Tensor& teacher_logits,
                                 const Batch& batch) {
  const torch::Tensor loss = output.loss.to(torch::kFloat32);
  if (!teacher_logits.defined()) return loss;
  TORCH_CHECK(output.logits.requires_grad(), "variant '", config_.variant,
              "' returns its logits without their gradient (its loss is fused); distil into a "
              "variant that returns them, such as batched");
  const DistillationOptions& distillation = config_.distillation;
  const torch::Tensor soft = DistillationLoss(output.logits.to(torch::kFloat32), teacher_logits,
                                              batch, distillation.temperature);
  return (1 - distillation.weight) * loss + distillation.weight * soft;
}

void Trainer::Update(StepResult& result) {
  // With clipping off, an infinite bound still returns the norm for the log.
  const double bound =
      config_.clip_norm > 0 ? config_.clip_norm : std::numeric_limits<double>::infinity();
  result.grad_norm = torch::nn::utils::clip_grad_norm_(parameters_, bound);
  for (auto& group : optimizer_->param_groups()) group.options().set_lr(result.learning_rate);
  optimizer_->step();
  if (owners_.empty()) return;
  // ZeRO-1: every rank's share from the rank that stepped it.
  const auto begin = std::chrono::steady_clock::now();
  result.communication.broadcast_bytes += group_->BroadcastFromOwners(parameters_, owners_);
  result.communication.broadcast_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
}

void Trainer::ForEachValidationBatch(const ValidationVisitor& visit) {
  torch::NoGradGuard no_grad;
  const int64_t rank = group_ ? group_->rank() : 0, ranks = group_ ? group_->size() : 1;
  for (size_t first = rank * config_.eval_batch_size; first < validation_.size();
       first += ranks * config_.eval_batch_size) {
    std::vector<int64_t> indices;
    for (size_t i = first; i < std::min(validation_.size(), first + config_.eval_batch_size); ++i)
      indices.push_back(static_cast<int64_t>(i));
    Batch batch = Collate(validation_, indices, text::kPad);
    batch.tokens = batch.tokens.to(device_);
    visit(batch, indices, variant_->Forward(batch));
  }
}

std::vector<double> Trainer::SumOverRanks(std::vector<double> values) {
  return group_ ? group_->Sum(values) : values;
}

double Trainer::Evaluate() {
  double loss_sum = 0;
  int64_t total_targets = 0;
  ForEachValidationBatch(
      [&](const Batch& batch, const std::vector<int64_t>&, const ForwardOutput& output) {
        const int64_t targets = TargetCount(batch);
        loss_sum += output.loss.item<double>() * targets;
        total_targets += targets;
      });
  const auto sums = SumOverRanks({loss_sum, static_cast<double>(total_targets)});
  loss_sum = sums[0];
  total_targets = static_cast<int64_t>(sums[1]);
  return total_targets == 0 ? 0.0 : loss_sum / total_targets;
}

CheckpointModel Trainer::Model() const {
  CheckpointModel model;
  model.variant = config_.variant;
  model.model = config_.model;
  model.step = step_;
  model.variant_options = config_.variant_options;
  for (const auto& item : variant_->parameters())
    model.weights.insert(item.key(), item.value().detach().cpu().clone());
  return model;
}

void Trainer::Save(const std::string& path) const {
  RefuseShardedCheckpoint();
  torch::serialize::OutputArchive archive;
  archive.write("format", c10::IValue(std::string(kCheckpointFormat)));
  archive.write("fingerprint", c10::IValue(config_.Fingerprint()));
  archive.write("variant", c10::IValue(config_.variant));
  archive.write("model.family", c10::IValue(config_.model.family));
  archive.write("model.vocab_size", c10::IValue(config_.model.vocab_size));
  archive.write("model.width", c10::IValue(config_.model.width));
  archive.write("model.layers", c10::IValue(config_.model.num_layers));
  archive.write("model.heads", c10::IValue(config_.model.num_heads));
  archive.write("model.ffn", c10::IValue(config_.model.ffn));
  for (const auto& item : variant_->parameters()) {
    archive.write("parameters." + item.key(), item.value().detach().cpu());
  }
  torch::serialize::OutputArchive optimizer_archive;
  optimizer_->save(optimizer_archive);
  archive.write("optimizer", optimizer_archive);
  archive.write("step", c10::IValue(step_));
  archive.write("loader.epoch", c10::IValue(loader_->position().epoch));
  archive.write("loader.batch", c10::IValue(loader_->position().batch));
  archive.write("scaler.scale", c10::IValue(scaler_ ? scaler_->scale() : 1.0));
  archive.write("scaler.good_steps", c10::IValue(scaler_ ? scaler_->good_steps() : int64_t{0}));
  archive.write("run.uuid", c10::IValue(run_uuid_));
  // Through the one atomic writer: a crash mid-write leaves the previous checkpoint intact,
  // and a symlink planted at the path (or at a predictable temporary) is refused.
  std::ostringstream bytes;
  archive.save_to(bytes);
  WriteFileAtomically(path, bytes.str());
}

void Trainer::RefuseShardedCheckpoint() const {
  if (owners_.empty()) return;
  throw std::invalid_argument(
      "zero = 1: each rank holds only its share of the optimizer state, and checkpoints hold "
      "one rank's state; train without zero to checkpoint");
}

void Trainer::Load(const std::string& path) {
  RefuseShardedCheckpoint();
  auto archive = OpenCheckpoint(path);
  const std::string fingerprint = ReadString(archive, "fingerprint");
  if (MatchForResume(fingerprint, config_.Fingerprint()).kind == ResumeMatch::kDifferent) {
    throw std::runtime_error(path + ": written by a different training configuration; it has\n  " +
                             fingerprint + "\nthis run has\n  " + config_.Fingerprint());
  }
  {
    torch::NoGradGuard no_grad;
    for (const auto& item : variant_->parameters()) {
      torch::Tensor stored;
      archive.read("parameters." + item.key(), stored);
      item.value().copy_(stored);
    }
  }
  torch::serialize::InputArchive optimizer_archive;
  archive.read("optimizer", optimizer_archive);
  optimizer_->load(optimizer_archive);
  step_ = ReadInt(archive, "step");
  if (pruner_) pruner_->RestoreMasks(step_);
  if (scaler_)
    scaler_->Restore(ReadDouble(archive, "scaler.scale"), ReadInt(archive, "scaler.good_steps"));
  MakeLoader({ReadInt(archive, "loader.epoch"), ReadInt(archive, "loader.batch")});
}

TrainingConfig EffectiveConfig(TrainingConfig config) {
  config.model.family = GlobalVariants().Get(config.variant).capabilities.family;
  if (config.precision == Precision::kFloat16) config.loss_scaling = true;
  return config;
}

CheckpointOrigin ReadCheckpointOrigin(const std::string& path) {
  auto archive = OpenCheckpoint(path);
  CheckpointOrigin origin;
  origin.fingerprint = ReadString(archive, "fingerprint");
  c10::IValue uuid;
  if (archive.try_read("run.uuid", uuid) && uuid.isString()) origin.run_uuid = uuid.toStringRef();
  origin.step = ReadInt(archive, "step");
  return origin;
}

namespace {
// A fingerprint's "name=value" terms, in order.
std::vector<std::pair<std::string, std::string>> FingerprintTerms(const std::string& fingerprint) {
  std::vector<std::pair<std::string, std::string>> terms;
  std::istringstream in(fingerprint);
  std::string term;
  while (in >> term) {
    const size_t equals = term.find('=');
    terms.emplace_back(term.substr(0, equals),
                       equals == std::string::npos ? "" : term.substr(equals + 1));
  }
  return terms;
}
}  // namespace

ResumeMatch MatchForResume(const std::string& checkpoint_fingerprint,
                           const std::string& resuming_fingerprint) {
  ResumeMatch match;
  const auto checkpoint = FingerprintTerms(checkpoint_fingerprint);
  const auto resuming = FingerprintTerms(resuming_fingerprint);
  if (checkpoint.size() != resuming.size()) return {ResumeMatch::kDifferent, "", ""};
  for (size_t i = 0; i < checkpoint.size(); ++i) {
    if (checkpoint[i] == resuming[i]) continue;
    if (checkpoint[i].first != "cycle" || resuming[i].first != "cycle") {
      return {ResumeMatch::kDifferent, "", ""};
    }
    match = {ResumeMatch::kScheduleLength, checkpoint[i].second, resuming[i].second};
  }
  return match;
}

CheckpointModel ReadCheckpointModel(const std::string& path) {
  auto archive = OpenCheckpoint(path);
  CheckpointModel result;
  result.variant = ReadString(archive, "variant");
  result.model.family = ReadString(archive, "model.family");
  result.model.vocab_size = ReadInt(archive, "model.vocab_size");
  result.model.width = ReadInt(archive, "model.width");
  result.model.num_layers = ReadInt(archive, "model.layers");
  result.model.num_heads = ReadInt(archive, "model.heads");
  // Checkpoints written before the key hold gelu models.
  if (c10::IValue ffn; archive.try_read("model.ffn", ffn) && ffn.isString()) {
    result.model.ffn = ffn.toStringRef();
  }
  result.step = ReadInt(archive, "step");
  // The family's initializer names the parameters and gives their shapes.
  const auto& family = GlobalFamilies().Get(result.model.family);
  for (const auto& item : family.init_weights(result.model, 0)) {
    torch::Tensor stored;
    archive.read("parameters." + item.key(), stored);
    TORCH_CHECK(stored.sizes() == item.value().sizes(), path, ": parameter ", item.key(),
                " has shape ", stored.sizes(), ", the model needs ", item.value().sizes());
    result.weights.insert(item.key(), stored);
  }
  return result;
}

}  // namespace seqbench::training
