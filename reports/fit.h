// Measured complexity: for each variant and workload of a run that differ only in one
// workload field x (seq_len, usually), the power law time ∝ x^k and memory ∝ x^k fitted
// over the stored cases (stats::FitPowerLaw), so that an analysis can say "measured
// exponent 1.02 ± 0.05" beside a claimed O(T). `report --fit FIELD` prints the table and a
// README section `fit=FIELD` renders it.
//
// Thread-safety: pure functions over records; safe from any thread.
#pragma once

#include <string>
#include <vector>

#include "results/store.h"

namespace seqbench {

// One fitted series: a variant at the workloads that differ only in `x`.
struct FitRow {
  std::string variant;       // the case's variant name
  std::string workload;      // the other fields, as Workload::Label() with x left out
  std::vector<double> xs;    // the field's values, ascending
  double time_exponent = 0;  // of the median step time
  double time_half_width = 0;
  // Of the activation bytes (peak during a step minus what was live before); NaN when a
  // point lacks them.
  double memory_exponent = 0;
  double memory_half_width = 0;
};

// Fits every series of `cases` (status ok) with at least 3 values of `x`, in order of
// first appearance. Throws std::invalid_argument for a field that is not an integer
// workload field.
std::vector<FitRow> FitComplexity(const std::vector<CaseRecord>& cases, const std::string& x);

// A Markdown table of the rows: exponent ± half-width (95%), the x range and points.
std::string RenderFitTable(const std::vector<FitRow>& rows, const std::string& x);

}  // namespace seqbench
