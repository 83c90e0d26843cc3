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

#include "harness/suite_error.h"
#include "results/case_identity.h"
#include "results/records.h"
#include "variants/core/variant.h"

namespace seqbench {

// One entry of the suite's variant list: a registered variant with options, under a
// name that is unique within the suite (the key, unless the suite names it).
struct VariantSpec {
  std::string name;
  std::string key;
  VariantOptions options;
  std::string family;  // the registered variant's model family
  bool peer = false;   // a [[peers]] entry: `key` names a PeerEntry (harness/peer.h)
};

// A workload's mode, dtype and device as the types the variants and LibTorch take. The
// workload holds them as the text the suite and the store hold; a case resolves them once,
// where CaseRunner::Prepare begins, and every later step reads the types. ParseSuite has
// refused any other text, so resolving a parsed suite's workload cannot fail.
struct TypedWorkload {
  Mode mode = Mode::kForward;
  torch::ScalarType dtype = torch::kFloat32;
  torch::Device device = torch::kCPU;
};
TypedWorkload Typed(const Workload& workload);

struct CaseSpec {
  VariantSpec variant;
  Workload workload;

  // The case's one identity (results/case_identity.h): what resume, merge, compare,
  // check and plots match on.
  CaseIdentity Identity() const;
  std::string Key() const { return Identity().Key(); }
};

// A variant's options as stored: "name=value,..." in name order.
std::string OptionsText(const VariantOptions& options);

// A suite's [measure] table with the run flags' overrides: the settings a run stores
// (results/run_settings.h: repetitions, warmup, min time, adaptive stopping's max_noise
// and max_time_s, check policy) and the knobs below, which it does not.
struct Measurement : RunSettings {
  Measurement() : RunSettings(RunSettings::SuiteDefaults()) {}
  // run --isolate: seconds before a case is killed as `timeout`; 0: DefaultCaseTimeout()
  double case_timeout_s = 0;
  // Adaptive stopping (max_noise > 0) repeats until the median's 95% interval
  // (stats::MedianInterval) is within ±max_noise of it, or until the case has spent
  // max_time_s timing; `repetitions` is then the first batch and each further batch.
  // Test-only (run --test-slowdown): each timed step of the cases whose key matches
  // `test_slowdown_filter` does test_slowdown times its work, by running whole extra
  // steps (never a sleep), so that the gate's power can be measured against a known
  // factor. 0: off. When on, every case times 10 steps a sample (a multiple of 10 with
  // --min-time), so that factors in tenths are exact per sample and the cases it does not
  // slow are measured alike.
  double test_slowdown = 0;
  std::string test_slowdown_filter;
  // Counted work (run --count): after a case is timed, `count_steps` of its steps after its
  // warmup are counted in a child under callgrind (harness/instruction_count.h). Empty: off;
  // else CountKind names (harness/instruction_count.h).
  std::vector<std::string> count;
  int64_t count_steps = 3;
};

// Adaptive stopping never takes more samples than this, whatever the budget.
inline constexpr int64_t kMaxAdaptiveRepetitions = 1000;

// The bounds of a [measure] number, one entry for the suite key and the flag that
// overrides it (run --repetitions, ...), so that both refuse the same values. The upper
// bounds keep a typo from running for days: a repetition of a second's steps 100,000 times
// is already a day.
struct MeasureBound {
  const char* key;   // the suite key in [measure]
  const char* flag;  // the run flag
  double min, max;   // inclusive
};
inline constexpr MeasureBound kRepetitionsBound{"repetitions", "--repetitions", 1, 100000};
inline constexpr MeasureBound kWarmupBound{"warmup", "--warmup", 0, 100000};
inline constexpr MeasureBound kCountStepsBound{"count_steps", "--count-steps", 1, 100};
inline constexpr MeasureBound kMinTimeBound{"min_time_ms", "--min-time", 0, 3.6e6};  // ms: 1 h
inline constexpr MeasureBound kMaxTimeBound{"max_time_s", "--max-time", 0, 86400};   // s: 1 day
inline constexpr MeasureBound kCaseTimeoutBound{"case_timeout_s", "--case-timeout", 0, 86400};
// "--repetitions must be between 1 and 100000, got 7000000": empty when `value` is within.
std::string OutOfBound(const MeasureBound& bound, double value, const char* unit = "");
// A bound's value as a person reads it: "100000", "3600000", "0.5".
std::string FormatBound(double value);

struct Suite {
  std::string path;
  std::string text;  // the file's full text, stored with every run
  std::string name;
  std::string description;
  ModelConfig model;     // model.family: the suite's family
  std::string baseline;  // variant name of the correctness reference, and of speedups
  // Other families whose variants the suite runs beside its own ([references]), each with
  // the variant name its variants are checked against. Speedups stay over `baseline`.
  std::map<std::string, std::string> references;
  uint64_t seed = 1;
  Measurement measurement;
  std::vector<VariantSpec> variants;
  std::vector<Workload> grid;              // the expanded cartesian product
  std::vector<std::string> grid_variants;  // names the grid runs (all, unless restricted)
  std::vector<CaseSpec> extra_cases;
  std::vector<Expectation> expectations;

  const VariantSpec& Variant(const std::string& name) const;
  // The model a workload runs: `family` (default: the suite's) with the workload's sizes.
  ModelConfig ModelFor(const Workload& workload, const std::string& family = "") const;
  // The variant name that cases of `family` are checked against: `baseline` for the
  // suite's family, its [references] entry for another.
  const std::string& ReferenceOf(const std::string& family) const;
  // A workload with every field at its default (threads: this machine's physical cores)
  // and the model sizes of [model].
  Workload DefaultWorkload() const;
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

// A fraction as users write it, on the command line and in suites: "5%" or "0.05" (0.05
// either way). nullopt for anything else; callers judge the range.
std::optional<double> ParseFraction(const std::string& text);

}  // namespace seqbench
