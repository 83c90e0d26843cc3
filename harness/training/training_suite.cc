#include "harness/training/training_suite.h"

#include <set>
#include <sstream>

#include "harness/text_data.h"
#include "harness/toml_reader.h"
#include "variants/core/registry.h"
#include "variants/core/torch_compat.h"

namespace seqbench::training {
namespace {

const std::vector<std::string> kTrainKeys = {"variant",
                                             "variant_options",
                                             "steps",
                                             "eval_every",
                                             "timing_warmup",
                                             "batching",
                                             "batch_size",
                                             "pool_batches",
                                             "token_budget",
                                             "workers",
                                             "prefetch",
                                             "pin_memory",
                                             "accumulation",
                                             "amp",
                                             "optimizer",
                                             "offload",
                                             "momentum",
                                             "trust_coefficient",
                                             "prune_sparsity",
                                             "prune_start",
                                             "prune_end",
                                             "prune_every",
                                             "loss_scaling",
                                             "initial_loss_scale",
                                             "growth_interval",
                                             "learning_rate",
                                             "warmup_steps",
                                             "cycle_steps",
                                             "min_lr_ratio",
                                             "restarts",
                                             "cycle_multiplier",
                                             "weight_decay",
                                             "beta1",
                                             "beta2",
                                             "clip_norm",
                                             "eval_batch_size",
                                             "seed",
                                             "device",
                                             "ranks",
                                             "bucket_mb",
                                             "compression",
                                             "members",
                                             "zero",
                                             "distill_from",
                                             "distill_temperature",
                                             "distill_weight"};

bool Boolean(const TomlReader& reader, const toml::node& node, const std::string& key) {
  if (!node.is_boolean()) reader.Fail(node.source(), "'" + key + "' must be true or false");
  return node.as_boolean()->get();
}

const std::vector<std::string> kModelKeys = {"width", "layers", "heads", "ffn"};

// Applies [model] (or a pipeline's `model = { ... }`) over `model`.
void ApplyModelKeys(const TomlReader& reader, const toml::table& table, ModelConfig& model) {
  if (auto* n = table.get("width")) model.width = reader.Integer(*n, "width", 1, 1 << 16);
  if (auto* n = table.get("layers")) model.num_layers = reader.Integer(*n, "layers", 1, 1024);
  if (auto* n = table.get("heads")) model.num_heads = reader.Integer(*n, "heads", 1, 1 << 16);
  if (auto* n = table.get("ffn")) model.ffn = reader.Choice(*n, "ffn", {"gelu", "swiglu", "geglu"});
}

// [data]'s recall_* keys, and that max_length holds the longest recall sample.
void ReadRecallOptions(const TomlReader& reader, const toml::table& data, DataOptions& options) {
  const toml::node* distances = data.get("recall_distances");
  const toml::node* pairs = data.get("recall_pairs");
  if (options.corpus != "recall") {
    if (distances || pairs) {
      reader.Fail((distances ? distances : pairs)->source(),
                  "recall_distances and recall_pairs need corpus = \"recall\"");
    }
    return;
  }
  if (pairs) options.recall.pairs = reader.Integer(*pairs, "recall_pairs", 1, 26);
  if (distances == nullptr) {
    reader.Fail(data.source(),
                "corpus = \"recall\" needs recall_distances, e.g. recall_distances = [16, 64]");
  }
  const toml::array* array = distances->as_array();
  if (array == nullptr || array->empty()) {
    reader.Fail(distances->source(),
                "'recall_distances' must be a non-empty array of distances such as [16, 64], "
                "got " +
                    std::string(array ? "an empty array" : TypeName(*distances)));
  }
  options.recall.distances.clear();
  for (const toml::node& element : *array) {
    const int64_t distance = reader.Integer(element, "recall_distances", 1, 1 << 20);
    if (distance < 2 * options.recall.pairs) {
      reader.Fail(element.source(), "recall distance " + std::to_string(distance) +
                                        " must be at least 2 x recall_pairs (" +
                                        std::to_string(2 * options.recall.pairs) +
                                        ") so that filler separates the pairs from the query");
    }
    // A repeat would get twice the samples and share its scores' row unseen.
    if (std::find(options.recall.distances.begin(), options.recall.distances.end(), distance) !=
        options.recall.distances.end()) {
      reader.Fail(element.source(),
                  "recall distance " + std::to_string(distance) + " is given twice");
    }
    options.recall.distances.push_back(distance);
  }
  if (RecallMaxLength(options.recall) > options.max_length) {
    const toml::node* max_length = data.get("max_length");
    reader.Fail((max_length ? max_length : distances)->source(),
                "the longest recall sample has " + std::to_string(RecallMaxLength(options.recall)) +
                    " tokens but max_length is " + std::to_string(options.max_length) +
                    "; raise max_length to at least that");
  }
}

// A key of the model, the steps, the batches and the loader; false if `key` is none.
bool ApplyStepKey(const TomlReader& reader, const std::string& key, const toml::node& value,
                  PipelineSpec& spec) {
  TrainingConfig& c = spec.config;
  if (key == "variant") {
    c.variant = reader.String(value, key);
    if (!GlobalVariants().Contains(c.variant)) {
      reader.Fail(value.source(), "unknown variant '" + c.variant +
                                      "'; known variants: " + GlobalVariants().JoinedKeys());
    }
    const Capabilities& caps = GlobalVariants().Get(c.variant).capabilities;
    if (!caps.Supports(Mode::kTrain)) {
      reader.Fail(value.source(), "variant '" + c.variant + "' does not support train mode");
    }
    c.model.family = caps.family;
  } else if (key == "variant_options") {
    if (!value.is_table()) reader.Fail(value.source(), "'variant_options' must be a table");
    c.variant_options.clear();
    for (auto&& [option, option_value] : *value.as_table()) {
      c.variant_options[std::string(option.str())] =
          reader.Integer(option_value, std::string(option.str()), 1, kMaxCount);
    }
  } else if (key == "steps") {
    spec.steps = reader.Integer(value, key, 1, kMaxCount);
  } else if (key == "eval_every") {
    spec.eval_every = reader.Integer(value, key, 1, kMaxCount);
  } else if (key == "timing_warmup") {
    spec.timing_warmup = reader.Integer(value, key, 0, kMaxCount);
  } else if (key == "batching") {
    c.batching.policy = *ParseBatchingPolicy(
        reader.Choice(value, key, {"fixed", "bucketed", "token_budget", "curriculum"}));
  } else if (key == "batch_size") {
    c.batching.batch_size = reader.Integer(value, key, 1, kMaxCount);
  } else if (key == "pool_batches") {
    c.batching.pool_batches = reader.Integer(value, key, 1, kMaxCount);
  } else if (key == "token_budget") {
    c.batching.token_budget = reader.Integer(value, key, 2, kMaxCount);
  } else if (key == "workers") {
    c.loader.workers = reader.Integer(value, key, 0, 64);
  } else if (key == "prefetch") {
    c.loader.prefetch = reader.Integer(value, key, 1, 1024);
  } else if (key == "pin_memory") {
    c.loader.pin_memory = Boolean(reader, value, key);
  } else if (key == "accumulation") {
    c.accumulation = reader.Integer(value, key, 1, 4096);
  } else if (key == "amp") {
    c.precision = *ParsePrecision(reader.Choice(value, key, {"fp32", "bf16", "fp16"}));
  } else if (key == "eval_batch_size") {
    c.eval_batch_size = reader.Integer(value, key, 1, kMaxCount);
  } else if (key == "seed") {
    c.seed = static_cast<uint64_t>(reader.Integer(value, key, 0, INT64_MAX));
  } else if (key == "device") {
    c.device = reader.Choice(value, key, {"cpu", "cuda"});
  } else {
    return false;
  }
  return true;
}

// A key of the optimizer, its precision and its learning-rate schedule; false if none.
bool ApplyOptimizerKey(const TomlReader& reader, const std::string& key, const toml::node& value,
                       PipelineSpec& spec) {
  TrainingConfig& c = spec.config;
  if (key == "optimizer") {
    c.optimizer =
        *ParseOptimizerKind(reader.Choice(value, key, {"adamw", "adamw8bit", "lamb", "lars"}));
  } else if (key == "momentum") {  // LARS's
    c.lars.momentum = reader.Number(value, key, 0);
    if (c.lars.momentum >= 1) reader.Fail(value.source(), "'momentum' must be below 1");
  } else if (key == "trust_coefficient") {  // LARS's η
    c.lars.trust_coefficient = reader.Number(value, key, 0);
    if (c.lars.trust_coefficient <= 0) {
      reader.Fail(value.source(), "'trust_coefficient' must be above 0");
    }
  } else if (key == "offload") {
    c.offload_optimizer = reader.Choice(value, key, {"none", "cpu"}) == "cpu";
  } else if (key == "loss_scaling") {
    c.loss_scaling = Boolean(reader, value, key);
  } else if (key == "initial_loss_scale") {
    c.scaler.initial_scale = reader.Number(value, key, 1, 3.4e38);  // float32's range
  } else if (key == "growth_interval") {
    c.scaler.growth_interval = reader.Integer(value, key, 1, kMaxCount);
  } else if (key == "learning_rate") {
    c.schedule.peak = reader.Number(value, key, 0);
    if (c.schedule.peak <= 0) reader.Fail(value.source(), "'learning_rate' must be above 0");
  } else if (key == "warmup_steps") {
    c.schedule.warmup_steps = reader.Integer(value, key, 0, kMaxCount);
  } else if (key == "cycle_steps") {
    c.schedule.cycle_steps = reader.Integer(value, key, 1, kMaxCount);
  } else if (key == "min_lr_ratio") {
    c.schedule.min_ratio = reader.Number(value, key, 0);
    if (c.schedule.min_ratio > 1) reader.Fail(value.source(), "'min_lr_ratio' must be <= 1");
  } else if (key == "restarts") {
    c.schedule.restarts = Boolean(reader, value, key);
  } else if (key == "cycle_multiplier") {
    c.schedule.cycle_multiplier = reader.Number(value, key, 1, 1000);
  } else if (key == "weight_decay") {
    c.weight_decay = reader.Number(value, key, 0);
  } else if (key == "beta1" || key == "beta2") {
    const double beta = reader.Number(value, key, 0);
    if (beta >= 1) reader.Fail(value.source(), "'" + key + "' must be below 1");
    (key == "beta1" ? c.beta1 : c.beta2) = beta;
  } else if (key == "clip_norm") {
    c.clip_norm = reader.Number(value, key, 0);
  } else {
    return false;
  }
  return true;
}

// A key of data parallelism: the ranks, the members, the gradient buckets; false if none.
bool ApplyDataParallelKey(const TomlReader& reader, const std::string& key, const toml::node& value,
                          PipelineSpec& spec) {
  TrainingConfig& c = spec.config;
  if (key == "ranks") {
    c.data_parallel.ranks = reader.Integer(value, key, 1, 1024);
    spec.ranks_from_world = false;
    if (!c.data_parallel.members.empty() &&
        static_cast<int64_t>(c.data_parallel.members.size()) != c.data_parallel.ranks) {
      reader.Fail(value.source(),
                  "'ranks' is " + std::to_string(c.data_parallel.ranks) + " but 'members' names " +
                      std::to_string(c.data_parallel.members.size()) + " ranks: give one of them");
    }
  } else if (key == "members") {
    // The world ranks that train the pipeline: rank 0 (which writes the results) and
    // others in ascending order, e.g. [0, 2] for the peer behind the network study's
    // second link.
    const toml::array* array = value.as_array();
    if (array == nullptr || array->empty()) {
      reader.Fail(value.source(),
                  std::string("'members' must be an array of world ranks such as [0, 2], got ") +
                      TypeName(value));
    }
    std::vector<int64_t> members;
    for (const toml::node& element : *array) {
      const int64_t member = reader.Integer(element, key, 0, 1023);
      if (members.empty() ? member != 0 : member <= members.back()) {
        reader.Fail(element.source(),
                    "'members' must start at rank 0 (which writes the results) and ascend, "
                    "e.g. [0, 2]");
      }
      members.push_back(member);
    }
    c.data_parallel.members = members;
    c.data_parallel.ranks = static_cast<int64_t>(members.size());
    spec.ranks_from_world = false;
  } else if (key == "bucket_mb") {
    // Up to 1 TiB: the Reducer's cap is bytes in an int64_t.
    c.data_parallel.bucket_mb = reader.Number(value, key, 0, 1 << 20);
    if (c.data_parallel.bucket_mb <= 0) reader.Fail(value.source(), "'bucket_mb' must be above 0");
  } else if (key == "compression") {
    const std::string choice = reader.Choice(value, key, {"none", "fp16"});
    c.data_parallel.compression = choice == "none" ? "" : choice;
  } else if (key == "zero") {  // ZeRO's stage; 2 and 3 (gradients, parameters) are not built
    c.data_parallel.zero_stage = reader.Integer(value, key, 0, 1);
  } else {
    return false;
  }
  return true;
}

// A key of gradual magnitude pruning (pruning.h); false if none.
bool ApplyPruningKey(const TomlReader& reader, const std::string& key, const toml::node& value,
                     PruningOptions& pruning) {
  if (key == "prune_sparsity") {
    pruning.sparsity = reader.Number(value, key, 0);
    if (pruning.sparsity >= 1) {
      reader.Fail(value.source(),
                  "'prune_sparsity' is the fraction of each matrix at zero: below 1");
    }
  } else if (key == "prune_start") {
    pruning.start = reader.Integer(value, key, 0, kMaxCount);
  } else if (key == "prune_end") {
    pruning.end = reader.Integer(value, key, 1, kMaxCount);
  } else if (key == "prune_every") {
    pruning.every = reader.Integer(value, key, 1, kMaxCount);
  } else {
    return false;
  }
  return true;
}

// A key of knowledge distillation (distillation.h); false if none. The teacher is
// resolved against the suite's pipelines later (ResolveTeachers).
bool ApplyDistillationKey(const TomlReader& reader, const std::string& key, const toml::node& value,
                          DistillationOptions& distillation) {
  if (key == "distill_from") {
    distillation.teacher = reader.String(value, key);
    if (distillation.teacher.empty()) {
      reader.Fail(value.source(), "'distill_from' names the teacher pipeline; it is empty");
    }
  } else if (key == "distill_temperature") {
    distillation.temperature = reader.Number(value, key, 0, 1000);
    if (distillation.temperature <= 0) {
      reader.Fail(value.source(), "'distill_temperature' must be above 0");
    }
  } else if (key == "distill_weight") {
    distillation.weight = reader.Number(value, key, 0, 1);
  } else {
    return false;
  }
  return true;
}

// Applies the keys of `table` ([train] or one [[pipelines]] entry) over `spec`, and adds
// each to `given`: a rule about a key (LARS's keys need LARS; a cycle given is not derived
// from steps) asks whether it was written, not whether its value differs from a default.
// The caller has checked that every key is known; name, reference, model and
// evaluate_with are its own.
void ApplyTrainKeys(const TomlReader& reader, const toml::table& table, PipelineSpec& spec,
                    std::set<std::string>& given) {
  for (auto&& [key_node, value] : table) {
    const std::string key(key_node.str());
    given.insert(key);
    if (ApplyStepKey(reader, key, value, spec)) continue;
    if (ApplyOptimizerKey(reader, key, value, spec)) continue;
    if (ApplyPruningKey(reader, key, value, spec.config.pruning)) continue;
    if (ApplyDistillationKey(reader, key, value, spec.config.distillation)) continue;
    ApplyDataParallelKey(reader, key, value, spec);
  }
}

// A pipeline's `evaluate_with = ["int8_dynamic", ...]`: variants of its family that run
// forward in float32 on its device, each named once.
void ReadEvaluateWith(const TomlReader& reader, const toml::node& node, PipelineSpec& spec) {
  const toml::array* array = node.as_array();
  if (array == nullptr || array->empty()) {
    reader.Fail(node.source(),
                "'evaluate_with' must be a non-empty array of variant names such as "
                "[\"int8_dynamic\"], got " +
                    std::string(TypeName(node)));
  }
  const TrainingConfig& c = spec.config;
  const c10::DeviceType device = torch::Device(c.device).type();
  for (const toml::node& element : *array) {
    const std::string key = reader.String(element, "evaluate_with");
    if (!GlobalVariants().Contains(key)) {
      reader.Fail(element.source(), "unknown variant '" + key +
                                        "'; known variants: " + GlobalVariants().JoinedKeys());
    }
    const Capabilities& caps = GlobalVariants().Get(key).capabilities;
    std::string problem;
    if (caps.family != c.model.family) {
      problem =
          "is of family '" + caps.family + "', the pipeline's model is '" + c.model.family + "'";
    } else if (!caps.Supports(Mode::kForward)) {
      problem = "does not run forward";
    } else if (!caps.Supports(device)) {
      problem = "does not run on " + c.device;
    } else if (!caps.Supports(torch::kFloat32)) {
      problem = "does not run in float32";
    }
    if (!problem.empty()) {
      reader.Fail(element.source(), "pipeline '" + spec.name + "': evaluate_with variant '" + key +
                                        "' " + problem +
                                        "; give forward variants of the same family");
    }
    if (std::find(spec.evaluate_with.begin(), spec.evaluate_with.end(), key) !=
        spec.evaluate_with.end()) {
      reader.Fail(element.source(), "evaluate_with names '" + key + "' twice");
    }
    spec.evaluate_with.push_back(key);
  }
}

// Pruning's keys against each other and the pipeline's steps.
void CheckPruning(const TomlReader& reader, const toml::table& table, const PipelineSpec& spec,
                  const std::set<std::string>& given) {
  const PruningOptions& p = spec.config.pruning;
  const std::string pipeline = "pipeline '" + spec.name + "': ";
  // A shape with no sparsity written anywhere is a mistake; [train]'s shape under a
  // pipeline that sets prune_sparsity = 0 is that pipeline opting out.
  if (!p.enabled()) {
    for (const char* key : {"prune_start", "prune_end", "prune_every"}) {
      if (given.count(key) > 0 && given.count("prune_sparsity") == 0) {
        reader.Fail(table.source(), pipeline + key + " shapes pruning, which is off: add " +
                                        "prune_sparsity = 0.5 (say) or drop it");
      }
    }
    return;
  }
  if (p.end > spec.steps) {
    reader.Fail(table.source(), pipeline + "prune_end (" + std::to_string(p.end) +
                                    ") is past its steps (" + std::to_string(spec.steps) + ")");
  }
  if (p.start >= p.end) {
    reader.Fail(table.source(), pipeline + "prune_start (" + std::to_string(p.start) +
                                    ") must come before prune_end (" + std::to_string(p.end) + ")");
  }
}

// Checks what needs the whole pipeline (after [train] and the entry are both applied).
void CheckPipeline(const TomlReader& reader, const toml::table& table, const PipelineSpec& spec,
                   const std::set<std::string>& given, const DataOptions& data) {
  const TrainingConfig& c = spec.config;
  const Capabilities& caps = GlobalVariants().Get(c.variant).capabilities;
  for (const auto& [option, value] : c.variant_options) {
    if (caps.options.count(option) == 0) {
      std::vector<std::string> known;
      for (const auto& [name, meaning] : caps.options) known.push_back(name);
      reader.Fail(table.source(), "pipeline '" + spec.name + "': variant '" + c.variant +
                                      "' has no option '" + option +
                                      "'; it reads: " + (known.empty() ? "(none)" : Joined(known)));
    }
  }
  try {
    GlobalFamilies().Get(c.model.family).validate(c.model);
  } catch (const std::exception& error) {
    reader.Fail(table.source(), "pipeline '" + spec.name + "': invalid [model] for family '" +
                                    c.model.family + "': " + DescribeError(error));
  }
  if (c.batching.policy == BatchingPolicy::kTokenBudget &&
      c.batching.token_budget < data.max_length) {
    reader.Fail(table.source(), "pipeline '" + spec.name + "': token_budget (" +
                                    std::to_string(c.batching.token_budget) +
                                    ") must be at least [data] max_length (" +
                                    std::to_string(data.max_length) +
                                    ") so that every sample fits a batch");
  }
  if (c.precision != Precision::kFloat32 && c.device == "cpu" &&
      !compat::AutocastSupports(c10::DeviceType::CPU, AutocastDtype(c.precision))) {
    reader.Fail(table.source(), "pipeline '" + spec.name + "': amp = \"" +
                                    std::string(PrecisionName(c.precision)) +
                                    "\" is not supported on the CPU by LibTorch " +
                                    compat::TorchVersion() + "; use bf16, or device = \"cuda\"");
  }
  if (c.offload_optimizer && c.optimizer != OptimizerKind::kAdamW) {
    reader.Fail(table.source(), "pipeline '" + spec.name +
                                    "': offload = \"cpu\" moves AdamW's float32 moments to the "
                                    "host; it does not combine with optimizer = \"" +
                                    std::string(OptimizerKindName(c.optimizer)) +
                                    "\" (drop one of them)");
  }
  if (c.optimizer != OptimizerKind::kLars &&
      (given.count("momentum") > 0 || given.count("trust_coefficient") > 0)) {
    reader.Fail(table.source(), "pipeline '" + spec.name +
                                    "': momentum and trust_coefficient are LARS's; add "
                                    "optimizer = \"lars\" or drop them");
  }
  if (c.data_parallel.zero_stage > 0 && !spec.ranks_from_world && c.data_parallel.ranks == 1) {
    reader.Fail(table.source(), "pipeline '" + spec.name +
                                    "': zero = 1 shards the optimizer state over the ranks; give "
                                    "ranks = 2 or more, or drop zero");
  }
  if (!c.distillation.enabled() &&
      (given.count("distill_temperature") > 0 || given.count("distill_weight") > 0)) {
    reader.Fail(table.source(), "pipeline '" + spec.name +
                                    "': distill_temperature and distill_weight shape "
                                    "distillation; add distill_from = \"TEACHER\" or drop them");
  }
  CheckPruning(reader, table, spec, given);
  if (spec.timing_warmup >= spec.steps) {
    reader.Fail(table.source(), "pipeline '" + spec.name + "': timing_warmup (" +
                                    std::to_string(spec.timing_warmup) +
                                    ") leaves no timed steps out of " + std::to_string(spec.steps));
  }
}

}  // namespace

std::string PipelineSpec::Describe() const {
  const TrainingConfig& c = config;
  std::ostringstream text;
  text << "variant=" << c.variant;
  for (const auto& [name, value] : c.variant_options) text << " " << name << "=" << value;
  if (model_overridden) {
    text << " D=" << c.model.width << " L=" << c.model.num_layers << " H=" << c.model.num_heads;
  }
  if (c.model.ffn != "gelu" && c.model.family == "attention") text << " ffn=" << c.model.ffn;
  text << " batching=" << BatchingPolicyName(c.batching.policy);
  if (c.batching.policy == BatchingPolicy::kTokenBudget) {
    text << " budget=" << c.batching.token_budget;
  } else {
    text << " B=" << c.batching.batch_size;
  }
  text << " workers=" << c.loader.workers << " accumulation=" << c.accumulation
       << " amp=" << PrecisionName(c.precision);
  if (c.loss_scaling && c.precision != Precision::kFloat16) text << " loss_scaling";
  if (c.optimizer != OptimizerKind::kAdamW) text << " optimizer=" << OptimizerKindName(c.optimizer);
  // The layer-wise optimizers run at their own learning rates: name them.
  if (c.optimizer == OptimizerKind::kLamb || c.optimizer == OptimizerKind::kLars) {
    text << " peak_lr=" << c.schedule.peak;
  }
  if (c.optimizer == OptimizerKind::kLars) {
    text << " momentum=" << c.lars.momentum << " trust=" << c.lars.trust_coefficient;
  }
  if (c.offload_optimizer) text << " offload=cpu";
  if (c.pruning.enabled()) {
    text << " prune=" << c.pruning.sparsity << "@" << c.pruning.start << ".." << c.pruning.end
         << "/" << c.pruning.every;
  }
  // Only what departs from warmup + cosine, decay and clipping, which most pipelines keep.
  if (c.weight_decay == 0) text << " weight_decay=0";
  if (c.schedule.restarts) {
    text << " lr=sgdr";
  } else if (c.schedule.warmup_steps == 0 && c.schedule.min_ratio == 1) {
    text << " lr=constant";
  }
  if (c.clip_norm == 0) text << " clip=off";
  if (c.data_parallel.ranks > 1) {
    text << " ranks=" << c.data_parallel.ranks << " bucket_mb=" << c.data_parallel.bucket_mb;
    if (!c.data_parallel.members.empty()) {
      text << " members=";
      for (size_t i = 0; i < c.data_parallel.members.size(); ++i)
        text << (i ? "," : "") << c.data_parallel.members[i];
    }
    if (!c.data_parallel.compression.empty())
      text << " compression=" << c.data_parallel.compression;
    if (c.data_parallel.zero_stage > 0) text << " zero=" << c.data_parallel.zero_stage;
  }
  if (c.distillation.enabled()) {
    text << " distill=" << c.distillation.teacher << " T=" << c.distillation.temperature
         << " alpha=" << c.distillation.weight;
  }
  return text.str();
}

const PipelineSpec& TrainingSuite::Pipeline(const std::string& pipeline_name) const {
  for (const auto& pipeline : pipelines) {
    if (pipeline.name == pipeline_name) return pipeline;
  }
  std::vector<std::string> known;
  for (const auto& pipeline : pipelines) known.push_back(pipeline.name);
  throw std::out_of_range("training suite '" + name + "' has no pipeline '" + pipeline_name +
                          "'; its pipelines: " + Joined(known));
}

bool IsTrainingSuiteText(const std::string& text) {
  try {
    return toml::parse(text).contains("pipelines");
  } catch (const toml::parse_error&) {
    return false;
  }
}

namespace {

// [data]: the corpus and how it is cut.
void ReadDataKeys(const TomlReader& reader, const toml::table& data, TrainingSuite& suite) {
  reader.CheckKeys(
      data, "[data]",
      {"corpus", "path", "max_length", "validation_samples", "max_samples", "synthetic_samples",
       "synthetic_min_length", "synthetic_lengths", "synthetic_median_length", "synthetic_sigma",
       "recall_distances", "recall_pairs", "seed"});
  if (auto* n = data.get("corpus")) {
    suite.data.corpus = reader.Choice(
        *n, "corpus",
        {"fortunes", "edict", "rotten_tomatoes", "daily_dialog", "synthetic", "recall"});
  }
  if (auto* n = data.get("path")) suite.data.path = reader.String(*n, "path");
  if (auto* n = data.get("max_length"))
    suite.data.max_length = reader.Integer(*n, "max_length", 2, 1 << 20);
  if (auto* n = data.get("validation_samples"))
    suite.data.validation_samples = reader.Integer(*n, "validation_samples", 1, kMaxCount);
  if (auto* n = data.get("max_samples"))
    suite.data.max_samples = reader.Integer(*n, "max_samples", 0, kMaxCount);
  if (auto* n = data.get("synthetic_samples"))
    suite.data.synthetic_samples = reader.Integer(*n, "synthetic_samples", 1, kMaxCount);
  if (auto* n = data.get("synthetic_min_length"))
    suite.data.synthetic_min_length = reader.Integer(*n, "synthetic_min_length", 2, 1 << 20);
  if (auto* n = data.get("synthetic_lengths")) {
    suite.data.synthetic_lengths =
        reader.Choice(*n, "synthetic_lengths", {"uniform", "lognormal", "fixed"});
  }
  if (auto* n = data.get("synthetic_median_length")) {
    suite.data.synthetic_median_length = reader.Integer(*n, "synthetic_median_length", 2, 1 << 20);
  }
  if (auto* n = data.get("synthetic_sigma")) {
    suite.data.synthetic_sigma = reader.Number(*n, "synthetic_sigma", 0);
  }
  if (auto* n = data.get("seed")) suite.data_seed = reader.Integer(*n, "seed", 0, INT64_MAX);
  ReadRecallOptions(reader, data, suite.data);
}

// One [[pipelines]] entry over the suite's defaults; its name must be new to `names`.
PipelineSpec ReadPipeline(const TomlReader& reader, const toml::table& table,
                          const PipelineSpec& defaults, const std::set<std::string>& default_given,
                          const DataOptions& data, std::set<std::string>& names) {
  std::vector<std::string> pipeline_keys = kTrainKeys;
  pipeline_keys.insert(pipeline_keys.end(), {"name", "reference", "model", "evaluate_with"});
  reader.CheckKeys(table, "[[pipelines]]", pipeline_keys);
  PipelineSpec spec = defaults;
  spec.line = table.source().begin.line;
  const toml::node& name_node = reader.Required(table, "name", "[[pipelines]]");
  spec.name = reader.Name(name_node, "name");
  if (spec.name.empty() || spec.name.find_first_of(" \t") != std::string::npos) {
    reader.Fail(name_node.source(), "a pipeline name must be non-empty, without spaces");
  }
  if (!names.insert(spec.name).second) {
    reader.Fail(name_node.source(), "duplicate pipeline name '" + spec.name + "'");
  }
  std::set<std::string> given = default_given;
  ApplyTrainKeys(reader, table, spec, given);
  // A pipeline's own sizes over [model]'s, e.g. to match another family's parameter count.
  if (const toml::node* n = table.get("model")) {
    if (!n->is_table()) {
      reader.Fail(n->source(), "'model' must be a table such as { layers = 5 }, got " +
                                   std::string(TypeName(*n)));
    }
    reader.CheckKeys(*n->as_table(), "a pipeline's model", kModelKeys);
    ApplyModelKeys(reader, *n->as_table(), spec.config.model);
    spec.model_overridden = true;
  }
  if (const toml::node* n = table.get("evaluate_with")) ReadEvaluateWith(reader, *n, spec);
  // The cosine decays over the whole run unless the suite says otherwise.
  spec.cycle_follows_steps = given.count("cycle_steps") == 0;
  // Pruning reaches its sparsity at the last step unless the suite says otherwise.
  if (given.count("prune_end") == 0) spec.config.pruning.end = spec.steps;
  if (spec.cycle_follows_steps) spec.config.schedule.cycle_steps = spec.DefaultCycleSteps();
  CheckPipeline(reader, table, spec, given, data);
  return spec;
}

// The suite's reference pipeline (default: the first) and each pipeline's own.
void ResolveReferences(const TomlReader& reader, const toml::table& root,
                       const toml::array& pipeline_tables, const std::set<std::string>& names,
                       TrainingSuite& suite) {
  suite.reference = suite.pipelines.front().name;
  if (auto* n = root.get("reference")) {
    suite.reference = reader.String(*n, "reference");
    if (names.count(suite.reference) == 0) {
      reader.Fail(n->source(), "reference '" + suite.reference + "' is not a pipeline name");
    }
  }
  for (size_t i = 0; i < suite.pipelines.size(); ++i) {
    PipelineSpec& spec = suite.pipelines[i];
    spec.reference = suite.reference;
    if (auto* n = pipeline_tables[i].as_table()->get("reference")) {
      spec.reference = reader.String(*n, "reference");
      if (names.count(spec.reference) == 0) {
        reader.Fail(n->source(), "pipeline '" + spec.name + "': reference '" + spec.reference +
                                     "' is not a pipeline name; the pipelines: " +
                                     Joined(std::vector<std::string>(names.begin(), names.end())));
      }
    }
  }
}

// Each distilling pipeline's teacher: an earlier pipeline of the suite, which then keeps
// its trained model for it (keep_model).
void ResolveTeachers(const TomlReader& reader, const toml::array& pipeline_tables,
                     TrainingSuite& suite) {
  for (size_t i = 0; i < suite.pipelines.size(); ++i) {
    const PipelineSpec& spec = suite.pipelines[i];
    if (!spec.config.distillation.enabled()) continue;
    const std::string& teacher = spec.config.distillation.teacher;
    const auto found =
        std::find_if(suite.pipelines.begin(), suite.pipelines.begin() + i,
                     [&](const PipelineSpec& earlier) { return earlier.name == teacher; });
    if (found == suite.pipelines.begin() + i) {
      reader.Fail(pipeline_tables[i].source(),
                  "pipeline '" + spec.name + "': distill_from '" + teacher +
                      "' is not a pipeline before this one; the teacher trains first");
    }
    found->keep_model = true;
  }
}

}  // namespace

TrainingSuite ParseTrainingSuite(const std::string& text, const std::string& path) {
  TomlReader reader(path);
  const toml::table root = reader.Parse(text);
  reader.CheckKeys(
      root, "the training suite",
      {"name", "description", "reference", "data", "model", "train", "pipelines", "expect"});
  TrainingSuite suite;
  suite.path = path;
  suite.text = text;
  auto [name, description] = reader.ReadSuiteHeader(root, "the training suite");
  suite.name = std::move(name);
  suite.description = std::move(description);
  const auto table_or_empty = [&](const char* key) -> const toml::table& {
    static const toml::table empty;
    const toml::node* node = root.get(key);
    if (node == nullptr) return empty;
    if (!node->is_table())
      reader.Fail(node->source(), std::string("'") + key + "' must be a table");
    return *node->as_table();
  };
  ReadDataKeys(reader, table_or_empty("data"), suite);

  PipelineSpec defaults;
  defaults.config.model.family = "simple_rnn";
  defaults.config.model.vocab_size = text::kVocabularySize;
  const toml::table& model = table_or_empty("model");
  reader.CheckKeys(model, "[model]", kModelKeys);
  ApplyModelKeys(reader, model, defaults.config.model);
  const toml::table& train = table_or_empty("train");
  reader.CheckKeys(train, "[train]", kTrainKeys);
  std::set<std::string> default_given;
  ApplyTrainKeys(reader, train, defaults, default_given);

  const toml::node& pipelines = reader.Required(root, "pipelines", "the training suite");
  if (!pipelines.is_array_of_tables() || pipelines.as_array()->empty()) {
    reader.Fail(pipelines.source(), "'pipelines' must be one or more [[pipelines]] tables");
  }
  std::set<std::string> names;
  for (const toml::node& element : *pipelines.as_array()) {
    suite.pipelines.push_back(
        ReadPipeline(reader, *element.as_table(), defaults, default_given, suite.data, names));
  }
  ResolveReferences(reader, root, *pipelines.as_array(), names, suite);
  ResolveTeachers(reader, *pipelines.as_array(), suite);
  suite.expectations = ReadExpectations(reader, root,
                                        {"throughput", "memory_ratio", "optimizer_state_ratio",
                                         "loss_match", "validation_loss_ratio", "all_correct"},
                                        names, "a pipeline name");
  return suite;
}

TrainingSuite LoadTrainingSuiteFile(const std::string& path) {
  return ParseTrainingSuite(ReadSuiteText(path), path);
}

}  // namespace seqbench::training
