// The metric vocabulary is one table (results/metrics.h): every name the recorder stores
// has a row, results/README.md's "Metrics" table lists exactly the table's names, and the
// CSV's leading columns are the table's, in its order.
#include "results/metrics.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "harness/case_record.h"
#include "reports/report.h"

namespace seqbench {
namespace {

// The names in the first column of table `which` (0: the first) under "## Metrics" in
// results/README.md.
std::vector<std::string> ReadmeMetricNames(int which = 0) {
  std::ifstream file(std::string(SEQBENCH_SOURCE_DIR) + "/results/README.md");
  REQUIRE(file.good());
  std::vector<std::string> names;
  bool in_section = false, in_table = false;
  for (std::string line; std::getline(file, line);) {
    if (line.rfind("## ", 0) == 0) in_section = line == "## Metrics";
    if (!in_section) continue;
    if (line.rfind("|", 0) != 0) {
      if (in_table && which-- == 0) break;  // the table asked for ended
      in_table = false;
      continue;
    }
    in_table = true;
    if (which > 0) continue;
    const std::string first_cell = line.substr(1, line.find('|', 1) - 1);
    const std::regex quoted("`([^`]+)`");
    for (std::sregex_iterator m(first_cell.begin(), first_cell.end(), quoted), end; m != end; ++m)
      names.push_back((*m)[1]);
  }
  return names;
}

TEST_CASE("results/README.md's training table lists exactly TrainingMetrics()' names",
          "[metrics]") {
  const std::vector<std::string> readme = ReadmeMetricNames(1);
  REQUIRE(readme.size() > 20);
  std::set<std::string> listed(readme.begin(), readme.end());
  for (const std::string& name : readme) {
    INFO(name << " is in results/README.md's training metrics table");
    bool has_row = false;
    for (const MetricSpec& row : TrainingMetrics()) has_row = has_row || name == row.name;
    CHECK(has_row);
  }
  for (const MetricSpec& row : TrainingMetrics()) {
    INFO(row.name << " has a row in results/metrics.cc's TrainingMetrics()");
    CHECK(listed.count(row.name) == 1);
  }
  // The placeholders stand for what pipeline.cc fills in, and only that.
  CHECK(TrainingMetric("recall_accuracy_d12", 0.5).unit == "ratio");
  CHECK(TrainingMetric("inference_weight_bytes_lstm_int8_dynamic", 1).unit == "bytes");
  CHECK(FindTrainingMetric("recall_accuracy_dx") == nullptr);
  CHECK(FindTrainingMetric("inference_loss_") == nullptr);
  CHECK(FindTrainingMetric("inference_loss_My-Plugin") != nullptr);  // a plugin's key
  CHECK_THROWS_WITH(TrainingMetric("nope", 1), Catch::Contains("TrainingMetrics()"));
}

TEST_CASE("results/README.md lists exactly the metric table's names", "[metrics]") {
  const std::vector<std::string> readme = ReadmeMetricNames();
  REQUIRE(readme.size() > 20);
  std::set<const MetricSpec*> covered;
  for (const std::string& name : readme) {
    INFO(name << " is in results/README.md's Metrics table");
    const MetricSpec* spec = FindCaseMetric(name);
    // A family's row is listed as its pattern or by its members.
    if (spec == nullptr) {
      for (const MetricSpec& row : CaseMetrics())
        if (name == row.name) spec = &row;
    }
    CHECK(spec != nullptr);
    covered.insert(spec);
  }
  for (const MetricSpec& row : CaseMetrics()) {
    INFO(row.name << " has a row in results/metrics.cc");
    CHECK(covered.count(&row) == 1);
  }
}

TEST_CASE("a metric's unit comes from its row and a name without a row is refused", "[metrics]") {
  CHECK(std::string(MetricUnit("runtime_median_s")) == "s");
  CHECK(std::string(MetricUnit("phase_check_s")) == "s");
  CHECK(std::string(FindCaseMetric("instructions_step_12")->name) == "instructions_step_<k>");
  CHECK(FindCaseMetric("instructions_step_0") == nullptr);
  CHECK(FindCaseMetric("instructions_step_") == nullptr);
  CHECK(FindCaseMetric("phase_lunch_s") == nullptr);
  CHECK_THROWS_WITH(MetricUnit("example_metric"), Catch::Contains("example_metric"));
  // Everything the recorder stores has its row (else MetricUnit throws): a case with every
  // optional part present.
  CaseResult result;
  result.spec.workload.mode = "train";
  result.timing.samples_s = {0.2, 0.3, 0.25};
  result.tokens_per_step = 64;
  result.cost.flops = 1e9;
  result.cost.bytes = 1e6;
  result.work.mode = Mode::kTrain;
  result.work.positions = 10;
  result.work.recomputed_positions = 5;
  for (const char* phase : kCasePhases) result.phases_s[phase] = 0.1;
  result.threads = {2, 2, 2};
  result.memory.peak_bytes = result.memory.activation_bytes = result.memory.max_rss_bytes = 1;
  result.peak_rss_bytes = 1;
  result.checked = true;
  // The units follow the names' own conventions: a table row with a wrong unit fails.
  const auto check_units = [](const CaseRecord& record) {
    for (const Metric& metric : record.metrics) {
      INFO(metric.name << " [" << metric.unit << "]");
      const std::string& name = metric.name;
      const auto ends = [&](const std::string& suffix) {
        return name.size() > suffix.size() &&
               name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
      };
      if (ends("_s") && !ends("_per_s")) CHECK(metric.unit == "s");
      if (ends("_bytes")) CHECK(metric.unit == "bytes");
      if (name.rfind("threads_", 0) == 0) CHECK(metric.unit == "count");
      if (ends("_rel") || ends("_cv") || ends("_iqr") || ends("_factor"))
        CHECK(metric.unit == "ratio");
    }
  };
  CaseRecord record;
  REQUIRE_NOTHROW(record = ToRecord(result, 0));
  CHECK(record.metrics.size() > 30);
  check_units(record);
  // Generate mode stores the mismatched tokens instead of the logits' differences.
  result.spec.workload.mode = "generate";
  result.work.mode = Mode::kGenerate;
  REQUIRE_NOTHROW(record = ToRecord(result, 0));
  CHECK(record.MetricValue("mismatched_tokens").has_value());
  check_units(record);
}

TEST_CASE("the CSV leads with the metric table's columns, in its order", "[metrics]") {
  RunRecord run;
  run.suite_name = "demo";
  CaseRecord c;
  c.identity.variant_name = c.identity.variant_key = "fused";
  c.status = kStatusOk;
  c.metrics = {{"threads_blas", 1, "count"}, {"runtime_median_s", 0.2, "s"}};
  std::istringstream csv(RenderCsv(run, {c}));
  std::string header;
  std::getline(csv, header);
  std::string expected;
  for (const MetricSpec& row : CaseMetrics())
    if (row.csv_column) expected += std::string(expected.empty() ? "" : ",") + row.name;
  const size_t at = header.find("runtime_mean_s");
  REQUIRE(at != std::string::npos);
  CHECK(header.substr(at, expected.size()) == expected);
  // The run's other metrics after them, sorted; then the roofline's columns.
  CHECK(header.substr(at + expected.size()) ==
        ",threads_blas,percent_of_peak,bound,percent_of_hardware_peak,times_gemm_floor");
}

}  // namespace
}  // namespace seqbench
