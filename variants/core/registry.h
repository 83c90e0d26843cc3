// Registries of model families and variants, keyed by name and kept sorted. Modelled on
// c10's Registry and google/benchmark's BENCHMARK(): each variant's file registers it
// with one macro at static-initialisation time, so adding a variant touches no list.
// An unknown key is an error that lists the valid keys; a duplicate key is a hard failure.
//
// Thread-safety: entries are added only during static initialisation and plugin loading,
// both single-threaded; afterwards the registries are read-only and safe to read from any
// thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "variants/core/variant.h"

namespace seqbench {

// Thrown for a key that is not registered; what() lists the registered keys.
class UnknownKeyError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Thrown when a key is registered twice.
class DuplicateKeyError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// A sorted map from key to Entry; Entry needs a `key` field. `kind` and `kinds` name one
// entry and several in messages ("model family", "model families").
template <typename Entry>
class Registry {
 public:
  Registry(std::string kind, std::string kinds)
      : kind_(std::move(kind)), kinds_(std::move(kinds)) {}

  void Add(Entry entry) {
    if (entry.key.empty()) throw std::invalid_argument("a " + kind_ + " key must not be empty");
    const auto [it, inserted] = entries_.emplace(entry.key, std::move(entry));
    if (!inserted) {
      throw DuplicateKeyError("duplicate " + kind_ + " key '" + it->first +
                              "': each key may be registered only once");
    }
  }

  void Remove(std::string_view key) {
    const auto it = entries_.find(key);
    if (it != entries_.end()) entries_.erase(it);
  }

  bool Contains(std::string_view key) const { return entries_.find(key) != entries_.end(); }

  const Entry& Get(std::string_view key) const {
    const auto it = entries_.find(key);
    if (it == entries_.end()) {
      std::string message =
          "unknown " + kind_ + " '" + std::string(key) + "'; known " + kinds_ + ": " + JoinedKeys();
      throw UnknownKeyError(message);
    }
    return it->second;
  }

  std::vector<std::string> Keys() const {
    std::vector<std::string> keys;
    for (const auto& [key, entry] : entries_) keys.push_back(key);
    return keys;
  }

  std::vector<const Entry*> Entries() const {
    std::vector<const Entry*> entries;
    for (const auto& [key, entry] : entries_) entries.push_back(&entry);
    return entries;
  }

  std::string JoinedKeys() const {
    std::string joined;
    for (const auto& [key, entry] : entries_) joined += (joined.empty() ? "" : ", ") + key;
    return joined.empty() ? "(none)" : joined;
  }

 private:
  std::string kind_, kinds_;
  std::map<std::string, Entry, std::less<>> entries_;
};

struct VariantEntry {
  std::string key;
  std::string description;  // one line: the variant's help, shown by `seqbench list`
  std::function<std::unique_ptr<Variant>()> factory;
  std::string origin;  // "built-in", or the plugin's path
  // Read once at registration (as c10's Registry keeps metadata beside the creator), so
  // that listing and filtering cases never construct a variant.
  Capabilities capabilities;
};

// A model family: its specification's name and the seeded initializer every variant of
// the family shares, so that one seed gives the same weights whichever variant is built.
struct FamilyEntry {
  std::string key;
  std::string description;
  std::function<ParameterSet(const ModelConfig&, uint64_t seed)> init_weights;
  // Throws (TORCH_CHECK) when a config is not valid for the family; cheap, no weights.
  std::function<void(const ModelConfig&)> validate;
  // The FLOPs and compulsory bytes of one step that evaluates `work` (Variant::Work) on
  // a model of `config`: the family's formula, shared by its variants.
  std::function<StepCost(const ModelConfig&, const StepWork&)> step_cost;
};

using VariantRegistry = Registry<VariantEntry>;
using FamilyRegistry = Registry<FamilyEntry>;

// The process-wide registries that the macros below fill.
VariantRegistry& GlobalVariants();
FamilyRegistry& GlobalFamilies();

// Builds a fresh, un-set-up instance of a registered variant; throws UnknownKeyError.
std::unique_ptr<Variant> CreateVariant(std::string_view key);

// Static registration objects behind the macros. A duplicate key aborts the process with
// a message, except while a plugin loads, where LoadPlugin() reports it as an error.
struct VariantRegistration {
  VariantRegistration(const char* key, const char* description,
                      std::function<std::unique_ptr<Variant>()> factory, Capabilities capabilities);
};
struct FamilyRegistration {
  FamilyRegistration(const char* key, const char* description,
                     std::function<ParameterSet(const ModelConfig&, uint64_t)> init_weights,
                     std::function<void(const ModelConfig&)> validate,
                     std::function<StepCost(const ModelConfig&, const StepWork&)> step_cost);
};

}  // namespace seqbench

#define SEQBENCH_CONCAT_INNER(a, b) a##b
#define SEQBENCH_CONCAT(a, b) SEQBENCH_CONCAT_INNER(a, b)

// Registers VariantClass (default-constructible, derived from seqbench::Variant) under
// `key`, with its capabilities, read once here. Use once, at namespace scope, in the
// variant's own .cc file. __COUNTER__ keeps two registrations in one file apart.
#define SEQBENCH_REGISTER_VARIANT(key, VariantClass, description)                                \
  static const ::seqbench::VariantRegistration SEQBENCH_CONCAT(seqbench_variant_, __COUNTER__)(  \
      key, description,                                                                          \
      []() -> std::unique_ptr<::seqbench::Variant> { return std::make_unique<VariantClass>(); }, \
      VariantClass().capabilities())

// Registers a model family, its shared weight initializer, its config check and its
// step cost formula.
#define SEQBENCH_REGISTER_FAMILY(key, init_weights, validate, step_cost, description)         \
  static const ::seqbench::FamilyRegistration SEQBENCH_CONCAT(seqbench_family_, __COUNTER__)( \
      key, description, init_weights, validate, step_cost)
