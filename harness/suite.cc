#include "harness/suite.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "harness/instruction_count.h"
#include "harness/peer.h"
#include "harness/threads.h"
#include "harness/toml_reader.h"
#include "results/run_group.h"
#include "variants/core/registry.h"

namespace seqbench {

TypedWorkload Typed(const Workload& workload) {
  TypedWorkload typed;
  typed.mode = *ParseMode(workload.mode);
  typed.dtype = *ParseDtype(workload.dtype);
  typed.device = torch::Device(workload.device == "cuda" ? torch::kCUDA : torch::kCPU);
  return typed;
}

std::string OptionsText(const VariantOptions& options) {
  std::string text;
  for (const auto& [name, value] : options) {
    text += (text.empty() ? "" : ",") + name + "=" + std::to_string(value);
  }
  return text;
}

CaseIdentity CaseSpec::Identity() const {
  return CaseIdentity{variant.name, variant.key, OptionsText(variant.options), workload};
}

const VariantSpec& Suite::Variant(const std::string& name) const {
  for (const auto& spec : variants) {
    if (spec.name == name) return spec;
  }
  throw std::out_of_range("suite '" + this->name + "' has no variant named '" + name + "'");
}

ModelConfig Suite::ModelFor(const Workload& workload, const std::string& family) const {
  ModelConfig config;
  config.family = family.empty() ? model.family : family;
  config.vocab_size = workload.vocab_size;
  config.width = workload.width;
  config.num_layers = workload.layers;
  config.num_heads = workload.heads;
  config.ffn = workload.ffn;
  return config;
}

const std::string& Suite::ReferenceOf(const std::string& family) const {
  if (family == model.family) return baseline;
  const auto found = references.find(family);
  if (found == references.end()) {
    throw std::out_of_range("suite '" + name + "' has no reference for family '" + family + "'");
  }
  return found->second;
}

Workload Suite::DefaultWorkload() const {
  Workload workload;
  workload.threads = PhysicalCores();  // what LibTorch itself would default to
  workload.vocab_size = model.vocab_size;
  workload.width = model.width;
  workload.layers = model.num_layers;
  workload.heads = model.num_heads;
  workload.ffn = model.ffn;
  return workload;
}

std::vector<CaseSpec> Suite::Expand() const {
  std::vector<CaseSpec> cases;
  std::set<std::string> seen;
  const auto add = [&](CaseSpec spec) {
    if (seen.insert(spec.Key()).second) cases.push_back(std::move(spec));
  };
  for (const Workload& workload : grid) {
    for (const std::string& name : grid_variants) add(CaseSpec{Variant(name), workload});
  }
  for (const CaseSpec& extra : extra_cases) add(extra);
  return cases;
}

std::vector<CaseSpec> Shard(const std::vector<CaseSpec>& cases, int64_t index, int64_t count) {
  if (count < 1 || index < 1 || index > count) {
    throw std::invalid_argument("shard must be i/n with 1 <= i <= n, got " + std::to_string(index) +
                                "/" + std::to_string(count));
  }
  std::vector<CaseSpec> shard;
  for (size_t position = 0; position < cases.size(); ++position) {
    if (InShard(static_cast<int64_t>(position), ShardSpec{index, count}))
      shard.push_back(cases[position]);
  }
  return shard;
}

namespace {

// [measure] count = ["instructions"]: what `run --count` takes, as a list.
std::vector<std::string> ReadCountKinds(const TomlReader& reader, const toml::node& node) {
  const toml::array* kinds = node.as_array();
  if (kinds == nullptr)
    reader.Fail(node.source(), "'count' must be a list, e.g. count = [\"instructions\"]");
  std::vector<std::string> count;
  for (const toml::node& kind : *kinds) {
    const std::string name = reader.String(kind, "count");
    if (!FindCountKind(name))
      reader.Fail(kind.source(), "'count' knows " + CountKindNames() + ", got '" + name + "'");
    count.push_back(name);
  }
  if (const std::string conflict = CountKindsConflict(count); !conflict.empty())
    reader.Fail(node.source(), "'count': " + conflict);
  return count;
}

std::vector<std::string> WorkloadKeys() {
  std::vector<std::string> keys;
  for (const WorkloadField& field : WorkloadFields()) keys.emplace_back(field.name);
  return keys;
}

// One value of a workload field, checked against the field's type, bounds and choices.
std::string ReadField(const TomlReader& reader, const toml::node& node,
                      const WorkloadField& field) {
  const std::string name(field.name);
  if (field.text != nullptr) {
    return reader.Choice(node, name, {field.choices.begin(), field.choices.end()});
  }
  return std::to_string(reader.Integer(node, name, field.min, field.max));
}

constexpr int64_t kMaxSize = int64_t{1} << 30;
// More grid points than any suite could run in a day; the bound keeps a short file (a few
// long lists multiply) from expanding for hours before the first case.
constexpr size_t kMaxGridPoints = 10000;

VariantSpec ReadVariant(const TomlReader& reader, const toml::table& table,
                        const std::string& family, const std::set<std::string>& other_families) {
  reader.CheckKeys(table, "[[variants]]", {"key", "name", "options"});
  VariantSpec spec;
  const toml::node& key_node = reader.Required(table, "key", "[[variants]]");
  spec.key = reader.Name(key_node, "key");
  if (!GlobalVariants().Contains(spec.key)) {
    reader.Fail(key_node.source(), "unknown variant '" + spec.key +
                                       "'; known variants: " + GlobalVariants().JoinedKeys());
  }
  const Capabilities& caps = GlobalVariants().Get(spec.key).capabilities;
  if (caps.family != family && other_families.count(caps.family) == 0) {
    reader.Fail(key_node.source(), "variant '" + spec.key + "' is of family '" + caps.family +
                                       "', but this suite's family is '" + family +
                                       "'; to run it beside, name its reference in [references], "
                                       "e.g. " +
                                       caps.family + " = \"<variant name>\"");
  }
  spec.family = caps.family;
  spec.name = table.get("name") ? reader.Name(*table.get("name"), "name") : spec.key;
  if (const toml::node* options = table.get("options")) {
    if (!options->is_table()) {
      reader.Fail(options->source(), "'options' must be a table, e.g. { chunk_size = 16 }");
    }
    for (auto&& [option, value] : *options->as_table()) {
      const std::string name(option.str());
      if (caps.options.count(name) == 0) {
        std::vector<std::string> known;
        for (const auto& [known_name, meaning] : caps.options) known.push_back(known_name);
        reader.Fail(option.source(),
                    "variant '" + spec.key + "' has no option '" + name +
                        "'; it reads: " + (known.empty() ? "(none)" : Joined(known)));
      }
      spec.options[name] = reader.Integer(value, name, 1, kMaxSize);
    }
  }
  return spec;
}

void CheckWorkload(const TomlReader& reader, const toml::source_region& where, const Workload& w,
                   const Suite& suite) {
  std::set<std::string> families = {suite.model.family};
  for (const auto& [other, reference] : suite.references) families.insert(other);
  for (const std::string& name : families) {
    const FamilyEntry& family = GlobalFamilies().Get(name);
    try {
      if (family.validate) family.validate(suite.ModelFor(w, name));
    } catch (const std::exception& error) {
      reader.Fail(where,
                  "invalid model sizes for this workload (" + name + "): " + DescribeError(error));
    }
  }
  if (w.min_len > w.seq_len) {
    reader.Fail(where, "min_len (" + std::to_string(w.min_len) + ") must not exceed seq_len (" +
                           std::to_string(w.seq_len) + ")");
  }
  if (w.mode == "generate" && w.generate_tokens < 1) {
    reader.Fail(where, "generate mode needs 'generate_tokens' of at least 1");
  }
  if (w.mode == "generate" && w.min_len > 0) {
    reader.Fail(where, "generate mode takes prompts without padding: set min_len = 0");
  }
}

}  // namespace

namespace {

// `family` and [references]: the suite's model family, and the variant that checks each
// other family's cases. Returns the other families.
std::set<std::string> ReadFamilies(const TomlReader& reader, const toml::table& root,
                                   Suite& suite) {
  const toml::node& family_node = reader.Required(root, "family", "the suite");
  suite.model.family = reader.String(family_node, "family");
  if (!GlobalFamilies().Contains(suite.model.family)) {
    reader.Fail(family_node.source(), "unknown model family '" + suite.model.family +
                                          "'; known families: " + GlobalFamilies().JoinedKeys());
  }
  std::set<std::string> other_families;
  const toml::node* references_node = root.get("references");
  if (references_node != nullptr) {
    if (!references_node->is_table()) {
      reader.Fail(references_node->source(),
                  "'references' must be a table: [references] attention = \"naive\"");
    }
    for (auto&& [family_key, reference] : *references_node->as_table()) {
      const std::string family(family_key.str());
      if (!GlobalFamilies().Contains(family)) {
        reader.Fail(family_key.source(), "[references]: unknown model family '" + family +
                                             "'; known families: " + GlobalFamilies().JoinedKeys());
      }
      if (family == suite.model.family) {
        reader.Fail(family_key.source(), "[references]: '" + family +
                                             "' is the suite's own family; its reference is "
                                             "'baseline'");
      }
      suite.references[family] = reader.String(reference, family);
      other_families.insert(family);
    }
  }
  return other_families;
}

// [model]: the model sizes, which are workload fields (one set of names and bounds for
// both places), validated by the family.
void ReadModelTable(const TomlReader& reader, const toml::node& model_node, Suite& suite) {
  if (!model_node.is_table()) reader.Fail(model_node.source(), "'model' must be a table ([model])");
  const toml::table& model = *model_node.as_table();
  // The model sizes are workload fields: one set of names and bounds for both places.
  std::vector<std::string> size_keys;
  Workload sizes = suite.DefaultWorkload();
  for (const WorkloadField& field : WorkloadFields()) {
    if (!field.model_size) continue;
    size_keys.emplace_back(field.name);
    if (const toml::node* n = model.get(field.name)) {
      field.Set(sizes, ReadField(reader, *n, field));
    }
  }
  reader.CheckKeys(model, "[model]", size_keys);
  suite.model = suite.ModelFor(sizes);
  const FamilyEntry& family = GlobalFamilies().Get(suite.model.family);
  if (family.validate) {
    try {
      family.validate(suite.model);
    } catch (const std::exception& error) {
      reader.Fail(model.source(), "invalid [model]: " + DescribeError(error));
    }
  }
}

// [measure]: how each case is timed and counted, every key within its bound.
void ReadMeasureTable(const TomlReader& reader, const toml::node& measure_node, Suite& suite) {
  if (!measure_node.is_table())
    reader.Fail(measure_node.source(), "'measure' must be a table ([measure])");
  const toml::table& measure = *measure_node.as_table();
  reader.CheckKeys(measure, "[measure]",
                   {"repetitions", "warmup", "min_time_ms", "case_timeout_s", "max_noise",
                    "max_time_s", "count", "count_steps"});
  const auto integer = [&](const MeasureBound& bound, int64_t& field) {
    if (auto* n = measure.get(bound.key))
      field = reader.Integer(*n, bound.key, static_cast<int64_t>(bound.min),
                             static_cast<int64_t>(bound.max));
  };
  // A number within its bound; above it where `positive` (0 means "not set").
  const auto number = [&](const MeasureBound& bound, bool positive) -> std::optional<double> {
    const toml::node* n = measure.get(bound.key);
    if (n == nullptr) return std::nullopt;
    const double value = reader.Number(*n, bound.key, bound.min);
    if ((positive && !(value > bound.min)) || value > bound.max) {
      reader.Fail(n->source(), "'" + std::string(bound.key) + "' must be " +
                                   (positive ? "above " : "at least ") + FormatBound(bound.min) +
                                   " and at most " + FormatBound(bound.max));
    }
    return value;
  };
  integer(kRepetitionsBound, suite.measurement.repetitions);
  integer(kWarmupBound, suite.measurement.warmup);
  if (const auto ms = number(kMinTimeBound, false)) suite.measurement.min_time_s = *ms / 1e3;
  if (const auto s = number(kCaseTimeoutBound, true)) suite.measurement.case_timeout_s = *s;
  if (auto* n = measure.get("max_noise")) {
    // "3%" or 0.03, as on the command line.
    const std::optional<double> fraction =
        n->is_string()   ? ParseFraction(n->value<std::string>().value_or(""))
        : n->is_number() ? std::optional<double>(reader.Number(*n, "max_noise", 0))
                         : std::nullopt;
    if (!fraction || !(*fraction > 0 && *fraction < 1))
      reader.Fail(n->source(),
                  "'max_noise' must be a fraction in (0, 1) or a percentage, e.g. 0.03 or "
                  "\"3%\"");
    suite.measurement.max_noise = *fraction;
  }
  if (const auto s = number(kMaxTimeBound, true)) suite.measurement.max_time_s = *s;
  if (auto* n = measure.get("count")) suite.measurement.count = ReadCountKinds(reader, *n);
  integer(kCountStepsBound, suite.measurement.count_steps);
}

// [[variants]], `baseline` and the [references]' variants. Returns the variants' names.
std::set<std::string> ReadVariants(const TomlReader& reader, const toml::table& root,
                                   const std::set<std::string>& other_families, Suite& suite) {
  const toml::node& variants_node = reader.Required(root, "variants", "the suite");
  if (!variants_node.is_array_of_tables()) {
    reader.Fail(variants_node.source(),
                "'variants' must be an array of tables: [[variants]] key = \"...\"");
  }
  std::set<std::string> names;
  for (const toml::node& element : *variants_node.as_array()) {
    VariantSpec spec = ReadVariant(reader, *element.as_table(), suite.model.family, other_families);
    if (!names.insert(spec.name).second) {
      reader.Fail(element.source(), "duplicate variant name '" + spec.name +
                                        "' in [[variants]]; give one of them a distinct 'name'");
    }
    suite.variants.push_back(std::move(spec));
  }

  const toml::node& baseline_node = reader.Required(root, "baseline", "the suite");
  suite.baseline = reader.String(baseline_node, "baseline");
  if (names.count(suite.baseline) == 0) {
    reader.Fail(baseline_node.source(), "baseline '" + suite.baseline +
                                            "' is not one of the suite's [[variants]]: " +
                                            Joined({names.begin(), names.end()}));
  }

  for (const auto& entry : suite.references) {
    // Not a structured binding: C++17 lambdas cannot capture those (clang refuses).
    const std::string& family = entry.first;
    const std::string& reference = entry.second;
    const auto spec = std::find_if(suite.variants.begin(), suite.variants.end(),
                                   [&](const VariantSpec& v) { return v.name == reference; });
    if (spec == suite.variants.end() || spec->family != family) {
      reader.Fail(root.get("references")->source(),
                  "[references] " + family + " = '" + reference +
                      "' must name one of the suite's [[variants]] of family " + family);
    }
  }
  const auto baseline_spec =
      std::find_if(suite.variants.begin(), suite.variants.end(),
                   [&](const VariantSpec& v) { return v.name == suite.baseline; });
  if (baseline_spec->family != suite.model.family) {
    reader.Fail(baseline_node.source(), "baseline '" + suite.baseline + "' is of family '" +
                                            baseline_spec->family + "', not the suite's '" +
                                            suite.model.family + "'");
  }

  return names;
}

// [[peers]]: PyTorch programs timed beside the variants (harness/peer.h), under names
// shared with [[variants]]. Read after the variants, so that the baseline and the
// [references] can only be variants.
void ReadPeers(const TomlReader& reader, const toml::table& root, std::set<std::string>& names,
               Suite& suite) {
  const toml::node* peers = root.get("peers");
  if (peers == nullptr) return;
  if (!peers->is_array_of_tables()) {
    reader.Fail(peers->source(), "'peers' must be an array of tables: [[peers]] key = \"...\"");
  }
  for (const toml::node& element : *peers->as_array()) {
    const toml::table& table = *element.as_table();
    reader.CheckKeys(table, "[[peers]]", {"key", "name"});
    const toml::node& key_node = reader.Required(table, "key", "[[peers]]");
    VariantSpec spec;
    spec.key = reader.Name(key_node, "key");
    const PeerEntry* peer = FindPeer(spec.key);
    if (peer == nullptr) {
      reader.Fail(key_node.source(), "unknown peer '" + spec.key + "'; known peers: " + PeerKeys());
    }
    spec.family = std::string(peer->family);
    if (spec.family != suite.model.family && suite.references.count(spec.family) == 0) {
      reader.Fail(key_node.source(), "peer '" + spec.key + "' runs family '" + spec.family +
                                         "', not this suite's '" + suite.model.family + "'");
    }
    spec.name = table.get("name") ? reader.Name(*table.get("name"), "name") : spec.key;
    spec.peer = true;
    if (!names.insert(spec.name).second) {
      reader.Fail(element.source(), "duplicate name '" + spec.name +
                                        "' in [[peers]]; give one of them a distinct 'name'");
    }
    suite.variants.push_back(std::move(spec));
  }
}

// One grid: its variants at each point of the cartesian product of its fields.
void ExpandGrid(const TomlReader& reader, const toml::table& grid, const Suite& suite,
                const std::set<std::string>& names, std::vector<std::string>& grid_variants,
                std::vector<Workload>& grid_points) {
  const Workload defaults = suite.DefaultWorkload();
  std::vector<std::string> grid_keys = WorkloadKeys();
  grid_keys.push_back("variants");
  reader.CheckKeys(grid, "[grid]", grid_keys);
  for (const auto& name : reader.OneOrMany<std::string>(
           grid, "variants", {}, [&](const toml::node&n, const std::string&key) {
             const std::string value = reader.String(n, key);
             if (names.count(value) == 0) {
               reader.Fail(n.source(), "[grid] variants: '" + value +
                                           "' is not one of the suite's [[variants]]: " +
                                           Joined({names.begin(), names.end()}));
             }
             return value;
           })) {
    grid_variants.push_back(name);
  }
  if (grid_variants.empty()) {
    for (const auto& spec : suite.variants) grid_variants.push_back(spec.name);
  }
  // The cartesian product over the fields, in WorkloadFields() order (the last varies
  // fastest); a field the grid leaves out keeps its default.
  std::vector<Workload> points = {defaults};
  for (const WorkloadField& field : WorkloadFields()) {
    if (!grid.contains(field.name)) continue;
    const std::vector<std::string> values = reader.OneOrMany<std::string>(
        grid, std::string(field.name), {},
        [&](const toml::node& n, const std::string&) { return ReadField(reader, n, field); });
    if (points.size() * values.size() > kMaxGridPoints) {
      reader.Fail(grid.source(),
                  "[grid] multiplies out to more than " + std::to_string(kMaxGridPoints) +
                      " points (" + std::to_string(points.size()) + " x " +
                      std::to_string(values.size()) + " values of '" + std::string(field.name) +
                      "'): split it into several suites or use [[cases]]");
    }
    std::vector<Workload> expanded;
    for (const Workload& point : points) {
      for (const std::string& value : values) {
        Workload next = point;
        field.Set(next, value);
        expanded.push_back(next);
      }
    }
    points = std::move(expanded);
  }
  std::set<std::string> seen;
  for (Workload& w : points) {
    // Padding and token counts apply to some modes only; keep one copy.
    if (w.mode == "generate") w.min_len = 0;
    if (w.mode != "generate") w.generate_tokens = 0;
    CheckWorkload(reader, grid.source(), w, suite);
    if (seen.insert(w.Key()).second) grid_points.push_back(w);
  }
}

// [grid] (one grid: the suite's) or [[grid]] (several: each one's cases, as explicit
// cases).
void ReadGrids(const TomlReader& reader, const toml::node& grid_node,
               const std::set<std::string>& names, Suite& suite) {
  if (grid_node.is_table()) {
    ExpandGrid(reader, *grid_node.as_table(), suite, names, suite.grid_variants, suite.grid);
  } else if (grid_node.is_array_of_tables()) {
    // Several grids ([[grid]]), e.g. train up to one length and forward up to another:
    // each one's cases, in order, as explicit cases.
    for (const toml::node& element : *grid_node.as_array()) {
      std::vector<std::string> grid_variants;
      std::vector<Workload> grid_points;
      ExpandGrid(reader, *element.as_table(), suite, names, grid_variants, grid_points);
      for (const Workload& point : grid_points) {
        for (const std::string& name : grid_variants) {
          suite.extra_cases.push_back(CaseSpec{suite.Variant(name), point});
        }
      }
    }
  } else {
    reader.Fail(grid_node.source(), "'grid' must be a table ([grid]) or tables ([[grid]])");
  }
}

// [[cases]]: explicit cases, each a variant at one workload.
void ReadCases(const TomlReader& reader, const toml::node& cases_node,
               const std::set<std::string>& names, Suite& suite) {
  const Workload defaults = suite.DefaultWorkload();
  if (!cases_node.is_array_of_tables()) {
    reader.Fail(cases_node.source(), "'cases' must be an array of tables: [[cases]]");
  }
  for (const toml::node& element : *cases_node.as_array()) {
    const toml::table& table = *element.as_table();
    std::vector<std::string> keys = WorkloadKeys();
    keys.push_back("variant");
    reader.CheckKeys(table, "[[cases]]", keys);
    const toml::node& variant_node = reader.Required(table, "variant", "[[cases]]");
    const std::string name = reader.String(variant_node, "variant");
    if (names.count(name) == 0) {
      reader.Fail(variant_node.source(), "[[cases]] variant '" + name +
                                             "' is not one of the suite's [[variants]]: " +
                                             Joined({names.begin(), names.end()}));
    }
    Workload w = defaults;
    for (const WorkloadField& field : WorkloadFields()) {
      if (const toml::node* n = table.get(field.name)) field.Set(w, ReadField(reader, *n, field));
    }
    CheckWorkload(reader, table.source(), w, suite);
    suite.extra_cases.push_back(CaseSpec{suite.Variant(name), w});
  }
}

// [[expect]]: what `check` holds the run to, each optionally `where` a workload matches.
std::vector<Expectation> ReadSuiteExpectations(const TomlReader& reader, const toml::table& root,
                                               const std::set<std::string>& names,
                                               const Suite& suite) {
  const std::vector<std::string> workload_keys = WorkloadKeys();
  std::set<std::string> peers;
  for (const VariantSpec& spec : suite.variants)
    if (spec.peer) peers.insert(spec.name);
  return ReadExpectations(
      reader, root,
      {"speedup", "memory_ratio", "recompute_ratio", "instructions_ratio", "time_per_doubling",
       "gemm_floor", "all_correct"},
      names, "one of the suite's [[variants]]", {"where"},
      [&](const toml::table& table, Expectation& expectation) {
        const toml::node* where = table.get("where");
        if (where == nullptr) return;
        if (!where->is_table())
          reader.Fail(where->source(), "'where' must be a table, e.g. { batch = 1 }");
        reader.CheckKeys(*where->as_table(), "'where'", workload_keys);
        for (auto&& [key, value] : *where->as_table()) {
          const std::string field(key.str());
          if (value.is_integer()) {
            expectation.where[field] = std::to_string(value.as_integer()->get());
          } else {
            expectation.where[field] = reader.String(value, field);
          }
        }
      },
      peers);
}

}  // namespace

Suite ParseSuite(const std::string& text, const std::string& path) {
  TomlReader reader(path);
  const toml::table root = reader.Parse(text);
  if (const toml::node* pipelines = root.get("pipelines")) {
    reader.Fail(pipelines->source(),
                "this is a training suite ([[pipelines]]); run it with: seqbench train " + path);
  }
  reader.CheckKeys(root, "the suite",
                   {"name", "description", "family", "baseline", "references", "seed", "model",
                    "measure", "variants", "peers", "grid", "cases", "expect"});
  Suite suite;
  suite.path = path;
  suite.text = text;
  auto [name, description] = reader.ReadSuiteHeader(root, "the suite");
  suite.name = std::move(name);
  suite.description = std::move(description);
  const std::set<std::string> other_families = ReadFamilies(reader, root, suite);
  if (const toml::node* seed = root.get("seed")) {
    suite.seed = static_cast<uint64_t>(reader.Integer(*seed, "seed", 0, INT64_MAX));
  }
  if (const toml::node* model = root.get("model")) ReadModelTable(reader, *model, suite);
  if (const toml::node* measure = root.get("measure")) ReadMeasureTable(reader, *measure, suite);
  std::set<std::string> names = ReadVariants(reader, root, other_families, suite);
  ReadPeers(reader, root, names, suite);
  if (const toml::node* grid = root.get("grid")) ReadGrids(reader, *grid, names, suite);
  if (const toml::node* cases = root.get("cases")) ReadCases(reader, *cases, names, suite);
  if (suite.grid.empty() && suite.extra_cases.empty()) {
    reader.Fail(root.source(), "the suite has no cases: add a [grid] or [[cases]]");
  }
  suite.expectations = ReadSuiteExpectations(reader, root, names, suite);
  return suite;
}

std::string ReadSuiteText(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw SuiteError(path, 1, 1, "cannot open the suite file (does it exist?)");
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

Suite LoadSuiteFile(const std::string& path) { return ParseSuite(ReadSuiteText(path), path); }

std::string FormatBound(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.15g", value);
  return text;
}

std::string OutOfBound(const MeasureBound& bound, double value, const char* unit) {
  if (value >= bound.min && value <= bound.max) return "";
  return std::string(bound.flag) + " must be between " + FormatBound(bound.min) + unit + " and " +
         FormatBound(bound.max) + unit + ", got " + FormatBound(value) + unit;
}

std::optional<double> ParseFraction(const std::string& text) {
  static const std::regex number("([0-9]*\\.?[0-9]+)(%?)");
  std::smatch match;
  if (!std::regex_match(text, match, number)) return std::nullopt;
  double value = 0;
  try {
    value = std::stod(match[1]);
  } catch (const std::out_of_range&) {
    return std::nullopt;
  }
  return match[2].length() > 0 ? value / 100 : value;
}

}  // namespace seqbench
