#include "results/legacy_facts.h"

#include <toml++/toml.h>

#include <cstdlib>

namespace seqbench::legacy {
namespace {

// The byte tokenizer's vocabulary (harness/text_data.h) when v4 training runs were written.
constexpr int64_t kLegacyTrainingVocabulary = 260;

std::string EnvironmentValue(const std::vector<std::pair<std::string, std::string>>& environment,
                             const std::string& key) {
  for (const auto& [name, value] : environment) {
    if (name == key) return value;
  }
  return "";
}

template <typename T>
void ReadIfPresent(const toml::table* table, const char* key, T& value) {
  if (table == nullptr) return;
  if (const auto found = (*table)[key].value<T>()) value = *found;
}

}  // namespace

LegacyFacts ReadLegacyFacts(const std::string& suite_text,
                            const std::vector<std::pair<std::string, std::string>>& environment) {
  LegacyFacts facts;
  toml::table root;
  try {
    root = toml::parse(suite_text);
  } catch (const toml::parse_error&) {
    return facts;  // a run of an unparsable suite never started: defaults are honest enough
  }
  const toml::table* model = root["model"].as_table();
  if (const toml::array* pipelines = root["pipelines"].as_array()) {
    facts.kind = kRunKindTraining;
    facts.repetitions = 0;
    facts.warmup = 0;
    facts.vocab_size = kLegacyTrainingVocabulary;
    facts.width = 128;
    if (const auto reference = root["reference"].value<std::string>()) {
      facts.baseline = *reference;
    } else if (!pipelines->empty() && pipelines->front().is_table()) {
      facts.baseline = (*pipelines->front().as_table())["name"].value_or(std::string());
    }
  } else {
    facts.baseline = root["baseline"].value_or(std::string("baseline"));
    const toml::table* measure = root["measure"].as_table();
    ReadIfPresent(measure, "repetitions", facts.repetitions);
    ReadIfPresent(measure, "warmup", facts.warmup);
    double min_time_ms = 0;
    ReadIfPresent(measure, "min_time_ms", min_time_ms);
    facts.min_time_s = min_time_ms / 1e3;
    ReadIfPresent(model, "vocab_size", facts.vocab_size);
  }
  // --repetitions on the command line overrode the suite; v1-v4 kept the value in force here.
  if (const std::string stored = EnvironmentValue(environment, "repetitions"); !stored.empty()) {
    facts.repetitions = std::atoll(stored.c_str());
  }
  if (const std::string stored = EnvironmentValue(environment, "warmup"); !stored.empty()) {
    facts.warmup = std::atoll(stored.c_str());
  }
  ReadIfPresent(model, "width", facts.width);
  ReadIfPresent(model, "layers", facts.layers);
  ReadIfPresent(model, "heads", facts.heads);

  if (const toml::array* expect = root["expect"].as_array()) {
    for (const toml::node& node : *expect) {
      const toml::table* table = node.as_table();
      if (table == nullptr) continue;
      Expectation e;
      e.what = (*table)["what"].value_or(std::string());
      e.variant = (*table)["variant"].value_or(std::string());
      e.over = (*table)["over"].value_or(std::string());
      e.at_least = (*table)["at_least"].value<double>();
      e.at_most = (*table)["at_most"].value<double>();
      e.line = table->source().begin.line;
      if (const toml::table* where = (*table)["where"].as_table()) {
        for (auto&& [key, value] : *where) {
          if (const auto integer = value.value<int64_t>()) {
            e.where[std::string(key.str())] = std::to_string(*integer);
          } else {
            e.where[std::string(key.str())] = value.value_or(std::string());
          }
        }
      }
      facts.expectations.push_back(std::move(e));
    }
  }
  return facts;
}

}  // namespace seqbench::legacy
