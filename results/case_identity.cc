#include "results/case_identity.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

namespace seqbench {
namespace {

constexpr int64_t kMaxSize = int64_t{1} << 30;

WorkloadField Integer(std::string_view name, std::string_view flag, std::string_view label,
                      std::string_view meaning, int64_t Workload::*member, int64_t min, int64_t max,
                      std::string_view omit = "", bool model_size = false) {
  WorkloadField field;
  field.name = name;
  field.flag = flag;
  field.label = label;
  field.meaning = meaning;
  field.integer = member;
  field.min = min;
  field.max = max;
  field.omit_in_label = omit;
  field.model_size = model_size;
  return field;
}

WorkloadField Text(std::string_view name, std::string_view flag, std::string_view label,
                   std::string_view meaning, std::string Workload::*member,
                   std::vector<std::string_view> choices, std::string_view omit = "",
                   bool model_size = false) {
  WorkloadField field;
  field.name = name;
  field.flag = flag;
  field.label = label;
  field.meaning = meaning;
  field.text = member;
  field.choices = std::move(choices);
  field.omit_in_label = omit;
  field.omit_in_key = omit;
  field.model_size = model_size;
  return field;
}

}  // namespace

const std::vector<WorkloadField>& WorkloadFields() {
  // Key and grid-expansion order: the last field varies fastest.
  static const std::vector<WorkloadField> fields = {
      Text("mode", "--mode", "mode", "what one step does", &Workload::mode,
           {"train", "forward", "generate"}),
      Text("dtype", "--dtype", "dtype", "parameter and activation type", &Workload::dtype,
           {"float32", "float64"}),
      Text("device", "--device", "device", "where the case runs", &Workload::device,
           {"cpu", "cuda"}),
      Integer("threads", "--threads", "threads", "LibTorch intra-op and OpenBLAS threads",
              &Workload::threads, 1, 1024),
      Integer("batch", "--batch", "B", "sequences per batch", &Workload::batch, 1, kMaxSize),
      Integer("seq_len", "--seq-len", "T", "padded length (prompt length P in generate mode)",
              &Workload::seq_len, 1, kMaxSize),
      Integer("min_len", "--min-len", "min_len", "shortest sequence; 0: no padding",
              &Workload::min_len, 0, kMaxSize, "0"),
      // 0 (the default) outside generate mode; a suite that sets it sets at least 1.
      Integer("generate_tokens", "--generate-tokens", "N", "tokens generated (generate mode)",
              &Workload::generate_tokens, 1, kMaxSize, "0"),
      Integer("layers", "--layers", "L", "model layers", &Workload::layers, 1, 1024, "", true),
      Integer("width", "--width", "D", "model width", &Workload::width, 1, kMaxSize, "", true),
      Integer("heads", "--heads", "H", "heads (head width D/H)", &Workload::heads, 1, kMaxSize, "",
              true),
      Integer("vocab_size", "--vocab-size", "V", "vocabulary size", &Workload::vocab_size, 2,
              kMaxSize, "", true),
      Text("ffn", "--ffn", "ffn", "feed-forward activation (attention family)", &Workload::ffn,
           {"gelu", "swiglu", "geglu"}, "gelu", true),
  };
  return fields;
}

const WorkloadField* FindWorkloadField(std::string_view name) {
  for (const WorkloadField& field : WorkloadFields()) {
    if (field.name == name) return &field;
  }
  return nullptr;
}

std::string WorkloadField::Get(const Workload& workload) const {
  return integer != nullptr ? std::to_string(workload.*integer) : workload.*text;
}

std::string WorkloadField::Set(Workload& workload, const std::string& value) const {
  if (text != nullptr) {
    if (std::find(choices.begin(), choices.end(), value) == choices.end()) {
      std::string allowed;
      for (const auto choice : choices)
        allowed += (allowed.empty() ? "" : ", ") + std::string(choice);
      return "'" + std::string(name) + "' must be one of " + allowed + ", got '" + value + "'";
    }
    workload.*text = value;
    return "";
  }
  errno = 0;
  char* end = nullptr;
  const long long parsed = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno == ERANGE || parsed < min || parsed > max) {
    return "'" + std::string(name) + "' must be an integer between " + std::to_string(min) +
           " and " + std::to_string(max) + ", got '" + value + "'";
  }
  workload.*integer = parsed;
  return "";
}

std::string Workload::Key() const {
  std::string key;
  for (const WorkloadField& field : WorkloadFields()) {
    const std::string value = field.Get(*this);
    if (!field.omit_in_key.empty() && value == field.omit_in_key) continue;
    key += (key.empty() ? "" : " ") + std::string(field.name) + "=" + value;
  }
  return key;
}

std::string Workload::Label(std::string_view leave_out) const {
  std::string label;
  for (const WorkloadField& field : WorkloadFields()) {
    if (field.name == leave_out) continue;
    const std::string value = field.Get(*this);
    if (!field.omit_in_label.empty() && value == field.omit_in_label) continue;
    // The generated-token count means nothing outside generate mode.
    if (field.name == "generate_tokens" && mode != "generate") continue;
    label += (label.empty() ? "" : " ") + std::string(field.label) + "=" + value;
  }
  return label;
}

std::string Workload::Field(std::string_view name) const {
  const WorkloadField* field = FindWorkloadField(name);
  return field == nullptr ? "" : field->Get(*this);
}

std::string CaseIdentity::Key() const {
  // The registered key only where it differs from the name, to keep common keys short.
  return variant_name + (variant_key == variant_name ? "" : "[" + variant_key + "]") +
         (options.empty() ? "" : "{" + options + "}") + " " + workload.Key();
}

bool MatchesFilters(const Workload& workload, const std::map<std::string, std::string>& filters) {
  return std::all_of(filters.begin(), filters.end(), [&](const auto& filter) {
    const WorkloadField* field = FindWorkloadField(filter.first);
    return field != nullptr && field->Get(workload) == filter.second;
  });
}

}  // namespace seqbench
