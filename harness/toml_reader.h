// TomlReader: typed access to a parsed TOML file (suites, training suites) that fails
// with a SuiteError at the offending node, "path:line:column: message", so that every
// bad value in every file the harness reads is reported the same way.
//
// Thread-safety: immutable; safe from any thread.
#pragma once

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iomanip>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "harness/suite_error.h"
#include "results/records.h"

namespace seqbench {

inline const char* TypeName(const toml::node& node) {
  if (node.is_string()) return "a string";
  if (node.is_integer()) return "an integer";
  if (node.is_floating_point()) return "a float";
  if (node.is_boolean()) return "a boolean";
  if (node.is_array()) return "an array";
  if (node.is_table()) return "a table";
  return "a date/time";
}

inline std::string Joined(const std::vector<std::string>& items) {
  std::string joined;
  for (const auto& item : items) joined += (joined.empty() ? "" : ", ") + item;
  return joined;
}

class TomlReader {
 public:
  explicit TomlReader(std::string path) : path_(std::move(path)) {}

  // `text` as TOML, or a failure at the syntax error.
  toml::table Parse(const std::string& text) const {
    try {
      return toml::parse(text, path_);
    } catch (const toml::parse_error& error) {
      Fail(error.source(), "invalid TOML: " + std::string(error.description()));
    }
  }

  [[noreturn]] void Fail(const toml::source_region& where, const std::string& message) const {
    const int64_t line = where.begin.line > 0 ? where.begin.line : 1;
    const int64_t column = where.begin.column > 0 ? where.begin.column : 1;
    throw SuiteError(path_, line, column, message);
  }

  // Fails on any key of `table` outside `allowed`; `context` names the table in messages.
  void CheckKeys(const toml::table& table, const std::string& context,
                 const std::vector<std::string>& allowed) const {
    for (auto&& [key, value] : table) {
      if (std::find(allowed.begin(), allowed.end(), key.str()) == allowed.end()) {
        std::vector<std::string> sorted = allowed;
        std::sort(sorted.begin(), sorted.end());
        Fail(key.source(), "unknown key '" + std::string(key.str()) + "' in " + context +
                               "; expected one of: " + Joined(sorted));
      }
    }
  }

  const toml::node& Required(const toml::table& table, const std::string& key,
                             const std::string& context) const {
    const toml::node* node = table.get(key);
    if (node == nullptr) Fail(table.source(), "missing required key '" + key + "' in " + context);
    return *node;
  }

  std::string String(const toml::node& node, const std::string& key) const {
    if (!node.is_string())
      Fail(node.source(), "'" + key + "' must be a string, got " + TypeName(node));
    return node.as_string()->get();
  }

  // The header every suite file opens with, benchmark or training: its `name` (a Name) and
  // `description`, both required in `what` ("the suite"). Read in that order (a braced
  // list is evaluated left to right), so a missing name is reported first.
  struct SuiteHeader {
    std::string name, description;
  };
  SuiteHeader ReadSuiteHeader(const toml::table& root, const std::string& what) const {
    return {Name(Required(root, "name", what), "name"),
            String(Required(root, "description", what), "description")};
  }

  // A name that tables, plots and file names show: a string without control characters
  // (a newline in a plot label would start a new gnuplot command).
  std::string Name(const toml::node& node, const std::string& key) const {
    std::string value = String(node, key);
    for (const char c : value) {
      const auto byte = static_cast<unsigned char>(c);
      if (byte < 0x20 || byte == 0x7f) {
        Fail(node.source(), "'" + key + "' must not contain control characters such as a " +
                                "newline or tab; write it on one line");
      }
    }
    return value;
  }

  // A number as a person writes it: 0, 2.5, 1e+06 (not std::to_string's 0.000000).
  static std::string Plain(double value) {
    std::ostringstream text;
    text << std::setprecision(12) << value;
    return text.str();
  }

  int64_t Integer(const toml::node& node, const std::string& key, int64_t min, int64_t max) const {
    if (!node.is_integer()) {
      Fail(node.source(), "'" + key + "' must be an integer, got " + TypeName(node));
    }
    const int64_t value = node.as_integer()->get();
    if (value < min || value > max) {
      Fail(node.source(), "'" + key + "' must be between " + std::to_string(min) + " and " +
                              std::to_string(max) + ", got " + std::to_string(value));
    }
    return value;
  }

  // A finite number in [min, max]; the bounds are printed as the user would write them.
  double Number(const toml::node& node, const std::string& key, double min,
                double max = std::numeric_limits<double>::max()) const {
    if (!node.is_number())
      Fail(node.source(), "'" + key + "' must be a number, got " + TypeName(node));
    const double value = node.is_integer() ? static_cast<double>(node.as_integer()->get())
                                           : node.as_floating_point()->get();
    // TOML has inf and nan; no option of seqbench's means either.
    if (!std::isfinite(value)) {
      Fail(node.source(), "'" + key + "' must be a finite number, got " + Plain(value));
    }
    if (!(value >= min)) {
      Fail(node.source(), "'" + key + "' must be at least " + Plain(min) + ", got " + Plain(value));
    }
    if (!(value <= max)) {
      Fail(node.source(), "'" + key + "' must be at most " + Plain(max) + ", got " + Plain(value));
    }
    return value;
  }

  std::string Choice(const toml::node& node, const std::string& key,
                     const std::vector<std::string>& choices) const {
    const std::string value = String(node, key);
    if (std::find(choices.begin(), choices.end(), value) == choices.end()) {
      Fail(node.source(),
           "'" + key + "' must be one of " + Joined(choices) + ", got '" + value + "'");
    }
    return value;
  }

  // A grid field: one value or an array of them, each checked by `read`.
  template <typename T, typename Read>
  std::vector<T> OneOrMany(const toml::table& table, const std::string& key,
                           std::vector<T> fallback, Read read) const {
    const toml::node* node = table.get(key);
    if (node == nullptr) return fallback;
    std::vector<T> values;
    if (const toml::array* array = node->as_array()) {
      if (array->empty()) Fail(node->source(), "'" + key + "' must not be an empty array");
      for (const toml::node& element : *array) values.push_back(read(element, key));
    } else {
      values.push_back(read(*node, key));
    }
    return values;
  }

 private:
  std::string path_;
};

// Reads each [[expect]] entry the extra keys of which the caller reads itself.
using ExtraExpectationReader = std::function<void(const toml::table& entry, Expectation& e)>;

// The [[expect]] array of `root`, shared by benchmark and training suites: `what` one of
// `kinds`; for every kind but all_correct, a `variant` and an `over` from `names` (what
// they are, in messages: `names_are`, e.g. "a pipeline name") and at least one bound;
// time_per_doubling: `over` an integer workload field, `variant` optional; gemm_floor:
// `variant` alone (no `over`).
// `extra_keys` are allowed besides, and `read_extra` reads them. "peer:NAME" names one of
// `peers` (a suite's [[peers]], which `names` holds too) explicitly.
std::vector<Expectation> ReadExpectations(const TomlReader& reader, const toml::table& root,
                                          const std::vector<std::string>& kinds,
                                          const std::set<std::string>& names,
                                          const std::string& names_are,
                                          const std::vector<std::string>& extra_keys = {},
                                          const ExtraExpectationReader& read_extra = {},
                                          const std::set<std::string>& peers = {});

}  // namespace seqbench
