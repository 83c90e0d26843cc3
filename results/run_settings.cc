#include "results/run_settings.h"

#include <cstdio>

namespace seqbench {

RunSettings RunSettings::SuiteDefaults() {
  RunSettings settings;
  settings.repetitions = 10;
  settings.warmup = 2;
  settings.max_time_s = 30;
  return settings;
}

RunSettings RunSettings::AsStored() const {
  RunSettings stored = *this;
  if (!(stored.max_noise > 0)) stored.max_time_s = 0;
  return stored;
}

namespace {
// A minimum sample time as `run --min-time` takes it: "10ms".
std::string MinTimeText(const RunSettings& s) {
  char text[32];
  std::snprintf(text, sizeof(text), "%gms", s.min_time_s * 1e3);
  return text;
}

std::string NoiseText(const RunSettings& s) {
  char text[64] = "off";
  if (s.max_noise > 0)
    std::snprintf(text, sizeof(text), "%g%% within %gs", s.max_noise * 100, s.max_time_s);
  return text;
}

std::string NoiseFlags(const RunSettings& s) {
  if (!(s.max_noise > 0)) return "drop --max-noise";
  char text[96];
  std::snprintf(text, sizeof(text), "pass --max-noise %g%% --max-time %gs", s.max_noise * 100,
                s.max_time_s);
  return text;
}
}  // namespace

const std::vector<SettingField>& SettingFields() {
  static const std::vector<SettingField> fields = {
      {"repetitions", [](const RunSettings& s) { return std::to_string(s.repetitions); },
       [](const RunSettings& s) { return "pass --repetitions " + std::to_string(s.repetitions); }},
      {"warmup", [](const RunSettings& s) { return std::to_string(s.warmup); },
       [](const RunSettings& s) { return "pass --warmup " + std::to_string(s.warmup); }},
      {"min time", MinTimeText,
       [](const RunSettings& s) { return "pass --min-time " + MinTimeText(s); }},
      {"max noise", NoiseText, NoiseFlags},
      {"check policy", [](const RunSettings& s) { return s.check_policy; },
       [](const RunSettings& s) { return "pass --check " + s.check_policy; }},
  };
  return fields;
}

std::string Conflict(const std::string& what, const std::string& theirs, const std::string& ours,
                     const std::string& fix) {
  return what + ": the run has " + (theirs.empty() ? "none" : theirs) + ", this command " +
         (ours.empty() ? "none" : ours) + " (" + fix + ")";
}

std::vector<std::string> SettingConflicts(const RunSettings& stored, const RunSettings& requested) {
  std::vector<std::string> conflicts;
  for (const SettingField& field : SettingFields()) {
    const std::string theirs = field.text(stored), ours = field.text(requested);
    if (theirs != ours)
      conflicts.push_back(Conflict(field.what, theirs, ours, field.flags_for(stored)));
  }
  return conflicts;
}

}  // namespace seqbench
