// The identity of a case: which variant ran (name, registered key, options) on which
// workload (mode, model sizes, batch shape, dtype, device). It is the one thing resume,
// merge, compare, speedup, check and plots match cases on, and the one key they store.
//
// The workload's fields are declared once, in WorkloadFields(): name (the TOML key and
// the store column), command-line flag, short label, type, bounds and choices. Suite
// parsing, the canonical key, the store's columns, `where` filters and labels are all
// derived from that table, so a new field is one line there plus one member here.
//
// Thread-safety: value types and an immutable table; safe from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace seqbench {

// One point of a suite's workload grid, with the model sizes it runs resolved (a suite's
// [model] gives their defaults; [grid] and [[cases]] may override them).
struct Workload {
  std::string mode = "forward";  // train | forward | generate
  std::string dtype = "float32";
  std::string device = "cpu";
  int64_t threads = 1;  // LibTorch intra-op and BLAS threads the case runs with
  int64_t batch = 1;
  int64_t seq_len = 16;         // T; the prompt length P in generate mode
  int64_t min_len = 0;          // shortest sequence; 0 = no padding
  int64_t generate_tokens = 0;  // N, generate mode only
  int64_t layers = 2;           // L
  int64_t width = 128;          // D
  int64_t heads = 4;            // H
  int64_t vocab_size = 256;     // V
  // The feed-forward block's activation (attention family; other families have none).
  std::string ffn = "gelu";

  // Every field as name=value, in WorkloadFields() order, except a field added later at
  // its default (WorkloadField::omit_in_key): stable across releases, so that runs of
  // different dates compare, and unambiguous.
  std::string Key() const;
  // Short text for people: "mode=train dtype=float32 device=cpu B=4 T=32 L=2 D=64 H=4 V=64";
  // fields at their "omit" value (e.g. min_len=0) are left out, and so is `leave_out` (a
  // field the reader sees elsewhere, e.g. a fitted series' x).
  std::string Label(std::string_view leave_out = "") const;
  // A field as text ("" for an unknown name): what `where` filters compare with.
  std::string Field(std::string_view name) const;
  bool operator==(const Workload& other) const { return Key() == other.Key(); }
  bool operator!=(const Workload& other) const { return !(*this == other); }
};

struct WorkloadField {
  std::string_view name;   // TOML key, store column, `where` key
  std::string_view flag;   // command-line spelling, e.g. "--seq-len"
  std::string_view label;  // in Label(): "T"
  std::string_view meaning;
  // Exactly one of these is set: the member the field lives in.
  int64_t Workload::*integer = nullptr;
  std::string Workload::*text = nullptr;
  int64_t min = 0, max = 0;               // integer bounds, inclusive
  std::vector<std::string_view> choices;  // text values allowed
  std::string_view omit_in_label;         // value Label() leaves out ("" = never)
  // Value Key() leaves out ("" = never): fields added after runs were stored keep those
  // runs' keys valid at their default (v8's `ffn`).
  std::string_view omit_in_key;
  bool model_size = false;  // from [model] by default (layers, width, ...)

  std::string Get(const Workload& workload) const;
  // Sets the field from text; returns an error message ("" when it was set).
  std::string Set(Workload& workload, const std::string& value) const;
};

// The workload's fields in key order.
const std::vector<WorkloadField>& WorkloadFields();
// The field called `name`, or nullptr.
const WorkloadField* FindWorkloadField(std::string_view name);

struct CaseIdentity {
  std::string variant_name;  // unique within a suite
  std::string variant_key;   // the registered variant (or a training pipeline's variant)
  std::string options;       // the variant's options, "name=value,..." sorted by name
  Workload workload;

  // "fast[scan]{chunk_size=8} mode=train dtype=float32 ...": name, [registered key] where
  // it differs from the name, {options}, then every workload field. Unique within a run,
  // and the same for the same case in any run.
  std::string Key() const;
  bool operator==(const CaseIdentity& other) const { return Key() == other.Key(); }
};

// True when every filter's field of `workload` has the filter's value.
bool MatchesFilters(const Workload& workload, const std::map<std::string, std::string>& filters);

}  // namespace seqbench
