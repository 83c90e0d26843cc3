// Measured complexity: for each variant and workload of a run that differ only in one
// workload field x (seq_len, usually), the power law time ∝ x^k and memory ∝ x^k fitted
// over the stored cases (stats::FitPowerLaw), so that an analysis can say "measured
// exponent 1.02 ± 0.05" beside a claimed O(T); and, where x doubles from one case to the
// next, the step time's ratio across that doubling with its bootstrap interval, which is
// what a bound such as "≤ 2.3× per doubling" is judged on (reports/check.h,
// what = "time_per_doubling"). `report --fit FIELD` prints the table and a README section
// `fit=FIELD` renders it.
//
// Thread-safety: pure functions over records; safe from any thread.
#pragma once

#include <string>
#include <vector>

#include "results/records.h"
#include "stats/statistics.h"

namespace seqbench {

// The cases of one variant that differ only in workload field x, ascending in x.
struct Series {
  std::string variant;                   // the case's variant name
  std::string workload;                  // the other fields, as Workload::Label() with x left out
  std::vector<const CaseRecord*> cases;  // status ok, with a median; into the caller's cases
};

// Groups `cases` (status ok, with a median) into series along `x`, in order of first
// appearance; a series may have a single case. Throws std::invalid_argument for a field
// that is not an integer workload field.
std::vector<Series> SeriesAlong(const std::vector<CaseRecord>& cases, const std::string& x);

// One doubling of x within a series: Median(step times at 2x) / Median(step times at x).
struct Doubling {
  int64_t from = 0;  // x; the other case is at 2x
  // The ratio and its percentile-bootstrap interval at `confidence`
  // (stats::BootstrapRatioOfMedians); with fewer than stats::kMinBootstrapSamples samples
  // a side, low = high = estimate (no spread to judge by) and has_interval is false.
  stats::Interval ratio;
  bool has_interval = false;
  const CaseRecord* longer = nullptr;  // the case at 2x
};

// Every doubling of x in `series` (consecutive cases whose x doubles; other steps are
// skipped), in ascending x.
std::vector<Doubling> Doublings(const Series& series, const std::string& x,
                                double confidence = 0.95);

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
  std::vector<Doubling> doublings;  // at 95%
};

// Fits every series of `cases` (status ok) with at least 3 values of `x`, in order of
// first appearance. Throws std::invalid_argument for a field that is not an integer
// workload field.
std::vector<FitRow> FitComplexity(const std::vector<CaseRecord>& cases, const std::string& x);

// A Markdown table of the rows: exponent ± half-width (95%), the x range and points, and
// the time ratio of every doubling with its 95% interval.
std::string RenderFitTable(const std::vector<FitRow>& rows, const std::string& x);

}  // namespace seqbench
