// How a benchmark run measures, as one value that travels unchanged: a suite's [measure]
// table sets it (harness/suite.h's Measurement is a RunSettings plus the knobs that are
// not stored), the run flags override it, the run record stores it (one column each), and
// `run --resume` refuses a command whose settings differ from the stored ones.
//
// A new setting is one member here, one row in SettingFields() (which the resume check and
// `show` read), and one row in the store's column table (results/run_columns.cc) with a
// migration.
//
// Thread-safety: plain values and a constant table; safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace seqbench {

struct RunSettings {
  int64_t repetitions = 0;  // timed samples per case (training: 0, one per step); with
                            // max_noise, the first batch and each further one
  int64_t warmup = 0;       // untimed steps before them
  double min_time_s = 0;    // each sample repeats the step until this long
  double max_noise = 0;     // adaptive stopping's target, a fraction; 0: fixed repetitions
  double max_time_s = 0;    // its timing budget per case; stored as 0 while max_noise is off
  std::string check_policy = "full";  // which cases were checked against the baseline

  // A suite's settings before its [measure] table and the flags: 10 samples after 2 warmup
  // steps, adaptive stopping off with a 30 s budget should it be turned on.
  static RunSettings SuiteDefaults();
  // As a run record stores them: the budget is kept only where adaptive stopping is on.
  RunSettings AsStored() const;
};

// One setting as the resume check and `show` name it: what it is, its value as a person
// reads it, and the flag that asks for a given value.
struct SettingField {
  const char* what;                              // "min time"
  std::string (*text)(const RunSettings&);       // "10ms"
  std::string (*flags_for)(const RunSettings&);  // "pass --min-time 10ms"
};
const std::vector<SettingField>& SettingFields();

// "what: the run has A, this command B (fix)": how a resume check names one difference
// (an empty value reads "none").
std::string Conflict(const std::string& what, const std::string& theirs, const std::string& ours,
                     const std::string& fix);
// A Conflict() for each setting that differs, in SettingFields() order.
std::vector<std::string> SettingConflicts(const RunSettings& stored, const RunSettings& requested);

}  // namespace seqbench
