// Google Benchmark's JSON format for a stored run (RenderGbenchJson, reports/report.h).
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "reports/escape/json.h"
#include "reports/report.h"
#include "stats/statistics.h"

namespace seqbench {

using nlohmann::json;

namespace {

// Every case's times in nanoseconds: tools/compare.py prints whole numbers and pairs a
// case only when both files use the same unit, so a unit chosen by the measurement would
// drop a case that crossed a boundary between runs (a fixed ms printed "3 -> 3" for a 13%
// change).
std::pair<const char*, double> TimeUnitFor(double) { return {"ns", 1e9}; }

// "0.52 0.31 0.20" (the run's start) as google/benchmark's load_avg array.
json LoadAverages(const std::string& text) {
  json values = json::array();
  std::istringstream stream(text);
  double value = 0;
  while (stream >> value) values.push_back(value);
  return values.size() == 3 ? values : json::array();
}

}  // namespace

namespace {

// Google Benchmark's context object, from what the run recorded through
// google/benchmark's own CPUInfo; facts an older run did not record are left out rather
// than invented.
json GbenchContext(const RunRecord& run) {
  json context = {{"date", run.started_at},
                  {"host_name", run.Environment("hostname")},
                  {"executable", "seqbench run " + run.suite_path},
                  {"num_cpus", std::atoi(run.Environment("cpu_logical_cores").c_str())}};
  if (const std::string mhz = run.Environment("cpu_mhz"); !mhz.empty())
    context["mhz_per_cpu"] = std::atoll(mhz.c_str());
  // Known only where the kernel exposes a governor; google/benchmark leaves it out too.
  if (const std::string governor = run.Environment("cpu_governor");
      !governor.empty() && governor != "unavailable")
    context["cpu_scaling_enabled"] = governor != "performance";
  const std::string caches = run.Environment("cpu_caches");
  context["caches"] = caches.empty() ? json::array() : json::parse(caches, nullptr, false);
  if (context["caches"].is_discarded()) context["caches"] = json::array();
  context["load_avg"] = LoadAverages(run.Environment("load_avg_start"));
  if (const std::string version = run.Environment("gbench_version"); !version.empty())
    context["library_version"] = version;
  context["library_build_type"] = run.Environment("build_type") == "Debug" ? "debug" : "release";
  context["json_schema_version"] = 1;
  // Custom context, as google/benchmark writes AddCustomContext: strings.
  context["seqbench_run_id"] = std::to_string(run.run_id);
  context["seqbench_suite"] = run.suite_name;
  if (!run.label.empty()) context["seqbench_label"] = run.label;
  return context;
}

// User counters, as google/benchmark writes them beside the times, a value per
// repetition: rates per second of that repetition's step (items_per_second is its name for
// tokens/s), and the case's memory in bytes.
std::map<std::string, std::vector<double>> GbenchCounters(const CaseRecord& c) {
  std::map<std::string, std::vector<double>> counters;
  const auto add_rate = [&](const char* counter, std::optional<double> per_step) {
    if (!per_step || *per_step <= 0) return;
    std::vector<double>& rates = counters[counter];
    for (const double seconds : c.samples_s) rates.push_back(*per_step / seconds);
  };
  const bool all_positive = std::all_of(c.samples_s.begin(), c.samples_s.end(),
                                        [](double seconds) { return seconds > 0; });
  if (all_positive) {
    add_rate("items_per_second", static_cast<double>(c.tokens_per_step));
    add_rate("FLOPS", c.MetricValue("step_flops"));
    add_rate("bytes_per_second", c.MetricValue("step_bytes"));
  }
  for (const char* memory : {"peak_bytes", "activation_bytes"}) {
    if (const auto bytes = c.MetricValue(memory))
      counters[memory] = std::vector<double>(c.samples_s.size(), *bytes);
  }
  return counters;
}

// `name` of a statistic of `values`: mean, median, stddev, cv, min or max.
double GbenchStatistic(const std::vector<double>& values, const std::string& name) {
  const stats::Summary summary = stats::Summarize(values);
  const std::map<std::string, double> statistic = {
      {"mean", summary.mean}, {"median", summary.median}, {"stddev", summary.stddev},
      {"cv", summary.cv},     {"min", summary.min},       {"max", summary.max},
      {"iqr", summary.iqr}};
  return statistic.at(name);
}

// One case's entries: a repetition each ("iteration"), then one per aggregate. seqbench
// times wall clock only, so cpu_time repeats real_time.
void AddGbenchEntries(const CaseRecord& c, int64_t family_index, json& benchmarks) {
  std::string name = c.key();
  std::replace(name.begin(), name.end(), ' ', '/');
  const int64_t repetitions = std::max<int64_t>(1, static_cast<int64_t>(c.samples_s.size()));
  const auto [unit, per_second] = TimeUnitFor(c.samples_s.empty() ? 1 : stats::Median(c.samples_s));
  json base = {{"name", name},
               {"family_index", family_index},
               {"per_family_instance_index", 0},
               {"run_name", name},
               {"run_type", "iteration"},
               {"repetitions", repetitions},
               {"repetition_index", 0},
               {"threads", 1}};
  // A case that did not finish ok says so as google/benchmark says it: a skip
  // (SkipWithMessage) for `skipped`, an error (SkipWithError) for the rest, with the
  // stored message. Mismatched cases keep their (wrong-answer) times.
  if (c.status == kStatusSkipped) {
    base["skipped"] = true;
    base["skip_message"] = c.message;
  } else if (c.status != kStatusOk) {
    base["error_occurred"] = true;
    base["error_message"] = c.status + (c.message.empty() ? "" : ": " + c.message);
  }
  if (c.samples_s.empty()) {  // nothing timed: zero times, as google/benchmark writes them
    base["iterations"] = 0;
    base["real_time"] = base["cpu_time"] = 0.0;
    base["time_unit"] = unit;
    benchmarks.push_back(base);
    return;
  }
  const auto entry = [&, unit = unit, per_second = per_second](int64_t repetition_index,
                                                               double seconds) {
    json item = base;
    item["repetition_index"] = repetition_index;
    item["iterations"] = c.iterations;
    item["real_time"] = seconds * per_second;
    item["cpu_time"] = seconds * per_second;
    item["time_unit"] = unit;
    return item;
  };
  const auto counters = GbenchCounters(c);
  for (int64_t i = 0; i < static_cast<int64_t>(c.samples_s.size()); ++i) {
    json item = entry(i, c.samples_s[i]);
    for (const auto& [counter, values] : counters) item[counter] = values[i];
    benchmarks.push_back(item);
  }
  // "iqr" is a user statistic, as ComputeStatistics("iqr", ...) would add it: the spread
  // seqbench's tables show beside the median.
  for (const std::string aggregate : {"mean", "median", "stddev", "cv", "min", "max", "iqr"}) {
    const bool is_cv = aggregate == "cv";
    json item = entry(0, GbenchStatistic(c.samples_s, aggregate));
    item.erase("repetition_index");
    item["name"] = name + "_" + aggregate;
    item["run_type"] = "aggregate";
    item["aggregate_name"] = aggregate;
    item["aggregate_unit"] = is_cv ? "percentage" : "time";
    item["iterations"] = repetitions;
    if (is_cv) item["real_time"] = item["cpu_time"] = GbenchStatistic(c.samples_s, "cv");
    // Aggregates carry the same statistic of the counters.
    for (const auto& [counter, values] : counters)
      item[counter] = GbenchStatistic(values, aggregate);
    benchmarks.push_back(item);
  }
}

}  // namespace

std::string RenderGbenchJson(const RunRecord& run, const std::vector<CaseRecord>& cases) {
  // Google Benchmark's JSONReporter layout (json_schema_version 1): a context object and
  // one entry per repetition ("iteration") plus one per aggregate.
  json benchmarks = json::array();
  int64_t family_index = 0;
  for (const CaseRecord& c : cases) AddGbenchEntries(c, family_index++, benchmarks);
  return escape::DumpJson(json{{"context", GbenchContext(run)}, {"benchmarks", benchmarks}}) + "\n";
}

}  // namespace seqbench
