// A Suite is a parsed, validated `suites/*.toml` file: the model, the variants, the
// workload grid and how to measure. Expand() turns it into the list of cases a run
// executes, in a fixed order; Shard() picks a deterministic subset of them. The file
// format is documented in suites/README.md.
//
// Thread-safety: immutable after parsing; safe to read from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "variants/core/variant.h"

namespace seqbench {

// A problem in a suite file, with where it is. what() reads
// "path:line:column: message", the format compilers use, so editors can jump to it.
class SuiteError : public std::runtime_error {
 public:
  SuiteError(std::string path, int64_t line, int64_t column, const std::string& message);
  const std::string& path() const { return path_; }
  int64_t line() const { return line_; }
  int64_t column() const { return column_; }
  const std::string& message() const { return message_; }

 private:
  std::string path_;
  int64_t line_, column_;
  std::string message_;
};

// One entry of the suite's variant list: a registered variant with options, under a
// name that is unique within the suite (the key, unless the suite names it).
struct VariantSpec {
  std::string name;
  std::string key;
  VariantOptions options;
};

// One point of the workload grid.
struct Workload {
  Mode mode = Mode::kForward;
  int64_t batch = 1;
  int64_t seq_len = 16;  // T; the prompt length P in generate mode
  int64_t min_len = 0;   // shortest sequence; 0 = no padding
  std::string dtype = "float32";
  std::string device = "cpu";
  int64_t generate_tokens = 0;  // N, generate mode only
  int64_t layers = 0;           // overrides the suite's [model] layers when > 0
  int64_t width = 0;            // overrides the suite's [model] width when > 0

  // "mode=train B=32 T=512 ...": stable text that names the workload in keys and output.
  std::string Describe() const;
};

struct CaseSpec {
  VariantSpec variant;
  Workload workload;

  // Unique within a suite and stable across runs: what resume, merge and compare match on.
  std::string Key() const;
};

struct Measurement {
  int64_t repetitions = 10;
  int64_t warmup = 2;     // untimed steps before the first repetition
  double min_time_s = 0;  // each repetition repeats the step until this much time
};

// A ratio the reports' check command evaluates on a finished run (suites/README.md).
struct Expectation {
  std::string what;     // "speedup", "memory_ratio" or "all_correct"
  std::string variant;  // the variant name the ratio is about
  std::string over;     // the variant name it is compared with
  std::optional<double> at_least, at_most;
  std::map<std::string, std::string> where;  // workload fields that select the cases
  int64_t line = 0;                          // for messages
};

struct Suite {
  std::string path;
  std::string text;  // the file's full text, stored with every run
  std::string name;
  std::string description;
  ModelConfig model;
  std::string baseline;  // variant name of the correctness reference
  uint64_t seed = 1;
  Measurement measurement;
  std::vector<VariantSpec> variants;
  std::vector<Workload> grid;              // the expanded cartesian product
  std::vector<std::string> grid_variants;  // names the grid runs (all, unless restricted)
  std::vector<CaseSpec> extra_cases;
  std::vector<Expectation> expectations;

  const VariantSpec& Variant(const std::string& name) const;
  // The suite's model with the workload's overrides applied.
  ModelConfig ModelFor(const Workload& workload) const;
  // Every grid variant at every grid point, then the extra cases; duplicates dropped.
  std::vector<CaseSpec> Expand() const;
};

// Parses and validates a suite. Throws SuiteError at the first problem: TOML syntax,
// unknown keys, wrong types, values out of range, unknown variants or families.
Suite ParseSuite(const std::string& text, const std::string& path);
Suite LoadSuiteFile(const std::string& path);
// A suite file's whole text (benchmark or training suite); an unreadable file is a
// SuiteError at line 1.
std::string ReadSuiteText(const std::string& path);

// Shard `index` of `count` (1-based index): the cases whose position modulo count is
// index - 1. Deterministic; shards are disjoint and together cover every case.
std::vector<CaseSpec> Shard(const std::vector<CaseSpec>& cases, int64_t index, int64_t count);

// A 64-bit FNV-1a hash as 16 hex digits: identifies a suite text across runs.
std::string ContentHash(const std::string& text);

}  // namespace seqbench
