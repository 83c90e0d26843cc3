// The vocabulary of a benchmark case's metrics: every name a case may carry, its unit and
// a one-line meaning. One table, read by everything that names a metric: the recorder
// (harness/case_record.cc) takes each unit from it, `report --format csv` its leading
// columns, and results/README.md's "Metrics" table lists the same names
// (tests/metrics_test.cc checks both ways). A new metric is one row here, plus the code that
// measures it. Training pipelines' metrics are a second table of the same shape,
// TrainingMetrics(), through which harness/training/pipeline.cc stores every one.
//
// Thread-safety: the table is built once, on first use, and never changes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "results/records.h"

namespace seqbench {

struct MetricSpec {
  // A name, or a family's pattern with one placeholder: "phase_<phase>_s",
  // "instructions_step_<k>" (<k> a positive integer, <phase> a kCasePhases name).
  const char* name;
  const char* unit;     // "s", "ratio", "count", "bytes", ...
  const char* meaning;  // one line; results/README.md says more
  // A fixed leading column of `report --format csv`, in table order (the other metrics a
  // run carries follow it, sorted by name).
  bool csv_column;
};

// Every row, the CSV's leading columns first in their order.
const std::vector<MetricSpec>& CaseMetrics();

// The row that names `name`, or whose pattern it matches; nullptr when none does.
const MetricSpec* FindCaseMetric(std::string_view name);

// A training pipeline's metrics: every name `seqbench train` stores, with its unit; the
// second table under results/README.md's "Metrics" lists the same names (placeholders:
// <D> a recall distance, <K> a registered variant key).
const std::vector<MetricSpec>& TrainingMetrics();
const MetricSpec* FindTrainingMetric(std::string_view name);
// `name` = `value` with its unit from TrainingMetrics(). Throws std::logic_error naming it
// when no row has it.
Metric TrainingMetric(const std::string& name, double value);

// `name`'s unit from its row. Throws std::logic_error naming it when no row has it: a
// metric recorded without its row in the table.
const char* MetricUnit(std::string_view name);

}  // namespace seqbench
