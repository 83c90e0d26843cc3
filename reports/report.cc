#include "reports/report.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "reports/escape/csv.h"
#include "reports/escape/json.h"
#include "reports/escape/markdown.h"
#include "reports/format.h"
#include "reports/hardware.h"
#include "reports/markdown.h"
#include "results/metrics.h"
#include "stats/statistics.h"

namespace seqbench {
namespace {

using nlohmann::json;

// The CSV's first metric columns: the metric table's (results/metrics.h) in its order;
// every other metric a case of the run carries follows, sorted by name (CsvMetricColumns),
// so that no stored metric is missed.
std::vector<std::string> LeadingMetricColumns() {
  std::vector<std::string> columns;
  for (const MetricSpec& spec : CaseMetrics())
    if (spec.csv_column) columns.push_back(spec.name);
  return columns;
}

// 3 significant figures without exponents: 1899.4 -> "1899", 8.233 -> "8.23".
std::string Throughput(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), value >= 100 ? "%.0f" : "%.3g", value);
  return text;
}

std::string SpeedupText(double ratio) {
  char text[32];
  std::snprintf(text, sizeof(text),
                ratio >= 100  ? "%.0f×"
                : ratio >= 10 ? "%.1f×"
                              : "%.2f×",
                ratio);
  return text;
}

std::string StatusCell(const CaseRecord& c) {
  if (c.status == "ok" && c.unchecked()) return "not checked";
  if (c.status == "ok") return "✓";
  if (c.status == "mismatch") return "✗ mismatch";
  return c.status + ": " + c.message;
}

std::string ModificationsCell(const CaseRecord& c) {
  std::string text = c.name();
  if (!c.identity.options.empty()) text += " (" + c.identity.options + ")";
  if (!c.description.empty()) text += ": " + c.description;
  return text;
}

std::string ShapeCell(const CaseRecord& c) {
  const Workload& w = c.workload();
  const std::string model = "L=" + std::to_string(w.layers) + " D=" + std::to_string(w.width) + " ";
  if (w.mode == "generate") {
    return model + "B=" + std::to_string(w.batch) + " P=" + std::to_string(w.seq_len) +
           " N=" + std::to_string(w.generate_tokens);
  }
  std::string text = model + "B=" + std::to_string(w.batch) + " T=" + std::to_string(w.seq_len);
  if (w.min_len > 0) text += " (min " + std::to_string(w.min_len) + ")";
  return text;
}

// The row a case's speedup is relative to: the baseline on the same workload, else the
// group's first baseline row; nullptr when the group has no baseline.
const CaseRecord* SpeedupReference(const CaseRecord& c, const std::vector<const CaseRecord*>& group,
                                   const std::string& baseline) {
  const CaseRecord* first = nullptr;
  for (const CaseRecord* other : group) {
    if (other->name() != baseline || other->samples_s.empty()) continue;
    if (other->workload() == c.workload()) return other;
    if (first == nullptr) first = other;
  }
  return first;
}

std::string DateOf(const std::string& timestamp) { return timestamp.substr(0, 10); }

// ", OpenBLAS Prescott kernels" (with "(OPENBLAS_CORETYPE=X)" where the variable chose
// them): a CPU table's GEMM rates depend on them as much as on the CPU. "" for another
// BLAS, or a run stored before seqbench recorded the core.
std::string BlasKernelsNote(const RunRecord& run) {
  const std::string core = run.Environment("blas_core");
  if (core.empty() || core == "not OpenBLAS") return "";
  const std::string chosen = run.Environment("env_openblas_coretype");
  return ", OpenBLAS " + core + " kernels" +
         (chosen.empty() || chosen == "unset" ? "" : " (OPENBLAS_CORETYPE=" + chosen + ")");
}

}  // namespace

std::optional<double> MedianThroughput(const CaseRecord& c) {
  if (c.samples_s.empty() || c.tokens_per_step <= 0) return std::nullopt;
  const double median = stats::Median(c.samples_s);
  if (!(median > 0)) return std::nullopt;
  return c.tokens_per_step / median;
}

std::optional<double> Speedup(const CaseRecord& candidate, const CaseRecord& reference) {
  const auto candidate_rate = MedianThroughput(candidate);
  const auto reference_rate = MedianThroughput(reference);
  if (!candidate_rate || !reference_rate) return std::nullopt;
  return *candidate_rate / *reference_rate;
}

std::optional<double> HardwarePeakGflops(const RunRecord& run, const Workload& w) {
  if (w.device != "cpu") return std::nullopt;  // no GPU table: its column stays empty
  const int64_t physical = std::atoll(run.Environment("cpu_physical_cores").c_str());
  const std::string flags = run.Environment("cpu_simd");
  return CpuPeakGflops({flags, std::atof(run.Environment("cpu_mhz").c_str()),
                        physical > 0 ? std::min(w.threads, physical) : w.threads, w.dtype});
}

std::optional<RooflinePoint> Roofline(const RunRecord& run, const CaseRecord& c) {
  const auto flops = c.MetricValue("step_flops");
  const auto bytes = c.MetricValue("step_bytes");
  if (!flops || !bytes || c.samples_s.empty()) return std::nullopt;
  const double median = stats::Median(c.samples_s);
  if (!(median > 0)) return std::nullopt;
  RooflinePoint point;
  point.gflops_per_s = *flops / median / 1e9;
  point.gbytes_per_s = *bytes / median / 1e9;
  const Workload& w = c.workload();
  const double peak_gflops =
      std::atof(run.Environment(PeakGemmKey(w.device, w.dtype, w.threads)).c_str());
  const double peak_gbs = std::atof(run.Environment(PeakStreamKey(w.device, w.threads)).c_str());
  if (peak_gflops > 0 && peak_gbs > 0) {
    const double compute_s = *flops / (peak_gflops * 1e9);
    const double memory_s = *bytes / (peak_gbs * 1e9);
    point.bound = compute_s >= memory_s ? "compute" : "memory";
    point.percent_of_peak = 100 * std::max(compute_s, memory_s) / median;
  }
  if (const auto hardware_gflops = HardwarePeakGflops(run, w)) {
    const double compute_s = *flops / (*hardware_gflops * 1e9);
    const double memory_s = peak_gbs > 0 ? *bytes / (peak_gbs * 1e9) : 0;
    point.percent_of_hardware_peak = 100 * std::max(compute_s, memory_s) / median;
  }
  return point;
}

std::string RenderMarkdown(const RunRecord& run, const std::vector<CaseRecord>& cases) {
  const std::string& baseline = run.baseline;
  // Groups in first-appearance order: one table per mode, dtype and device.
  std::vector<std::string> order;
  std::map<std::string, std::vector<const CaseRecord*>> groups;
  for (const CaseRecord& c : cases) {
    const Workload& w = c.workload();
    const std::string group = w.mode + " · " + w.dtype + " · " + w.device + " · " +
                              std::to_string(w.threads) + (w.threads == 1 ? " thread" : " threads");
    if (!groups.count(group)) order.push_back(group);
    groups[group].push_back(&c);
  }
  std::string text;
  for (const std::string& group_name : order) {
    const auto& group = groups[group_name];
    const std::string device = group.front()->workload().device;
    std::string hardware =
        device == "cuda" ? run.Environment("gpu_name") : run.Environment("cpu_model");
    if (hardware.empty()) hardware = device;
    if (device == "cpu") hardware += BlasKernelsNote(run);
    text +=
        "**" + escape::MarkdownText(run.suite_name + " · " + group_name) + "** — " +
        escape::MarkdownText(hardware + ", LibTorch " + run.Environment("torch_version") + ", " +
                             DateOf(run.started_at) + ", run " + std::to_string(run.run_id) +
                             " (git " + run.Environment("git_sha").substr(0, 7) +
                             (run.Environment("git_dirty") == "true" ? "-dirty" : "") + ")") +
        "\n\n";
    MarkdownTable table({"S/N", "Modifications", "Improvement Cat.", "Workload",
                         "Runtime (median, IQR)", "Peak memory usage", "Activation memory",
                         "Speedup", "Tokens/s", "GFLOP/s", "GB/s", "% of BLAS peak", "% of HW peak",
                         "Correct"});
    std::string reference_note;
    int serial = 1;
    for (const CaseRecord* c : group) {
      // Location and spread from the samples themselves (the same statistics as the
      // speedup), whatever metrics an older seqbench stored.
      std::string runtime = "—";
      if (!c->samples_s.empty()) {
        const stats::Summary summary = stats::Summarize(c->samples_s);
        runtime = FormatDuration(summary.median) + " (IQR " + FormatDuration(summary.iqr) + ")";
      }
      const auto tokens = MedianThroughput(*c);
      const auto peak = c->MetricValue("peak_bytes");
      const auto activation = c->MetricValue("activation_bytes");
      std::string speedup = "—";
      const CaseRecord* reference = SpeedupReference(*c, group, baseline);
      if (const auto ratio = reference ? Speedup(*c, *reference) : std::nullopt) {
        speedup = SpeedupText(*ratio);
        if (reference->workload() != c->workload() || reference_note.empty()) {
          reference_note =
              "Speedup: median tokens/s over " + baseline + "'s at " + ShapeCell(*reference);
        }
      }
      const auto roofline = Roofline(run, *c);
      std::string percent = "—";
      if (roofline && roofline->percent_of_peak) {
        percent = FormatSignificant(*roofline->percent_of_peak, 2) + "% (" + roofline->bound + ")";
      }
      std::string hardware_percent = "—";
      if (roofline && roofline->percent_of_hardware_peak) {
        hardware_percent = FormatSignificant(*roofline->percent_of_hardware_peak, 2) + "%";
      }
      table.AddRow({std::to_string(serial++), ModificationsCell(*c), c->category, ShapeCell(*c),
                    runtime, peak ? FormatBytes(static_cast<int64_t>(*peak)) : "—",
                    activation ? FormatBytes(static_cast<int64_t>(*activation)) : "—", speedup,
                    tokens ? Throughput(*tokens) : "—",
                    roofline ? Throughput(roofline->gflops_per_s) : "—",
                    roofline ? Throughput(roofline->gbytes_per_s) : "—", percent, hardware_percent,
                    StatusCell(*c)});
    }
    text += table.Render();
    if (!reference_note.empty()) {
      text += "\n" + escape::MarkdownText(reference_note + " (same workload where it ran).") + "\n";
    }
    text += "\n";
  }
  return text;
}

TimedShare TimedShareOf(const RunRecord& run, const std::vector<CaseRecord>& cases) {
  TimedShare total;
  for (const CaseRecord& c : cases) {
    const int64_t steps_per_sample = run.kind == kRunKindTraining ? 1 : c.iterations;
    for (const double seconds : c.samples_s) total.timed_s += seconds * steps_per_sample;
    total.wall_s += c.wall_s;
  }
  return total;
}

std::string RenderPhaseTable(const RunRecord& run, const std::vector<CaseRecord>& cases) {
  std::vector<std::string> headers = {"case"};
  for (const char* phase : kCasePhases) headers.emplace_back(phase);
  headers.insert(headers.end(), {"of which samples", "other", "wall", "samples / wall"});
  MarkdownTable table(headers);
  const size_t phases = std::size(kCasePhases);
  std::vector<double> totals(phases, 0);
  TimedShare all;
  const auto row = [&](const std::string& name, const std::vector<std::optional<double>>& times,
                       const TimedShare& share) {
    std::vector<std::string> cells = {name};
    double covered = 0;
    bool any = false;
    for (const auto& seconds : times) {
      cells.push_back(seconds ? FormatDuration(*seconds) : "–");
      covered += seconds.value_or(0);
      any = any || seconds.has_value();
    }
    cells.push_back(FormatDuration(share.timed_s));
    cells.push_back(any ? FormatDuration(std::max(0.0, share.wall_s - covered)) : "–");
    cells.push_back(FormatDuration(share.wall_s));
    cells.push_back(FormatSignificant(share.share() * 100) + "%");
    table.AddRow(cells);
  };
  for (const CaseRecord& c : cases) {
    std::vector<std::optional<double>> times;
    for (size_t i = 0; i < phases; ++i) {
      times.push_back(c.MetricValue(std::string("phase_") + kCasePhases[i] + "_s"));
      totals[i] += times.back().value_or(0);
    }
    const TimedShare share = TimedShareOf(run, {c});
    all.timed_s += share.timed_s;
    all.wall_s += share.wall_s;
    row(c.name() + " " + ShapeCell(c) + " " + c.workload().mode, times, share);
  }
  row("all cases", std::vector<std::optional<double>>(totals.begin(), totals.end()), all);
  return table.Render();
}

std::vector<std::string> RunWarnings(const RunRecord& run, const std::vector<CaseRecord>& cases) {
  std::vector<std::string> warnings = run.warnings;
  // The BLAS kernels matter where a case ran on the CPU (or before any case is stored).
  const bool on_cpu = cases.empty() ||
                      std::any_of(cases.begin(), cases.end(),
                                  [](const CaseRecord& c) { return c.workload().device == "cpu"; });
  const std::string blas =
      on_cpu ? BlasCoreWarning(run.Environment("blas_core"), run.Environment("cpu_simd"),
                               run.Environment("env_openblas_coretype"))
             : "";
  if (!blas.empty()) warnings.push_back(blas);
  // A training pipeline's samples are steps of different batches, spread by design.
  if (run.kind == kRunKindTraining) return warnings;
  for (const CaseRecord& c : cases) {
    if (c.samples_s.empty()) continue;  // failed or skipped: its status says so
    const std::string name = c.name() + " " + ShapeCell(c) + " " + c.workload().mode;
    const stats::Summary summary = stats::Summarize(c.samples_s);
    if (summary.count < stats::kMinBootstrapSamples) {
      warnings.push_back(
          name + ": " + std::to_string(summary.count) + " sample(s), fewer than the " +
          std::to_string(stats::kMinBootstrapSamples) + " a verdict needs: raise repetitions");
      continue;
    }
    if (run.settings.max_noise > 0) {
      const auto noise = stats::MedianRelativeHalfWidth(c.samples_s);
      if (!noise || *noise > run.settings.max_noise) {
        warnings.push_back(name + ": did not reach --max-noise " +
                           FormatSignificant(100 * run.settings.max_noise, 3) + "% within " +
                           FormatSignificant(run.settings.max_time_s, 3) +
                           " s: the median's interval is ±" +
                           (noise ? FormatSignificant(100 * *noise, 3) + "%" : "unknown") +
                           " after " + std::to_string(summary.count) + " samples");
      }
    }
    const double spread = summary.RelativeIqr();
    if (spread <= stats::kNoisyRelativeIqr) continue;
    const bool very = spread > stats::kVeryNoisyRelativeIqr;
    warnings.push_back(
        name + ": " + (very ? "very noisy" : "noisy") + ", IQR/median " +
        FormatSignificant(100 * spread, 3) + "% (over " +
        FormatSignificant(100 * (very ? stats::kVeryNoisyRelativeIqr : stats::kNoisyRelativeIqr),
                          2) +
        "%), " + std::to_string(summary.outliers) + " Tukey outlier(s) in " +
        std::to_string(summary.count) + " samples");
  }
  return warnings;
}

std::string RenderWarnings(const std::vector<std::string>& warnings) {
  if (warnings.empty()) return "";
  std::string text = "**Warnings** (" + std::to_string(warnings.size()) + ")\n\n";
  for (const std::string& warning : warnings) text += "- " + escape::MarkdownText(warning) + "\n";
  return text + "\n";
}

// LeadingMetricColumns, then the run's other metrics by name.
std::vector<std::string> CsvMetricColumns(const std::vector<CaseRecord>& cases) {
  std::vector<std::string> columns = LeadingMetricColumns();
  std::set<std::string> others;
  for (const CaseRecord& c : cases)
    for (const Metric& metric : c.metrics)
      if (std::find(columns.begin(), columns.end(), metric.name) == columns.end())
        others.insert(metric.name);
  columns.insert(columns.end(), others.begin(), others.end());
  return columns;
}

std::string RenderCsv(const RunRecord& run, const std::vector<CaseRecord>& cases) {
  const std::vector<std::string> metric_columns = CsvMetricColumns(cases);
  std::string text = "run_id,suite,case_key,variant_name,variant_key,category,options";
  for (const WorkloadField& field : WorkloadFields()) text += "," + std::string(field.name);
  text += ",status,message,reference,iterations,repetitions,tokens_per_step,wall_s";
  for (const auto& metric : metric_columns) text += "," + escape::CsvField(metric);
  text += ",percent_of_peak,bound,percent_of_hardware_peak\n";
  for (const CaseRecord& c : cases) {
    std::vector<std::string> fields = {
        std::to_string(run.run_id), run.suite_name, c.key(),           c.name(),
        c.identity.variant_key,     c.category,     c.identity.options};
    for (const WorkloadField& field : WorkloadFields()) fields.push_back(field.Get(c.workload()));
    for (std::string value : {c.status, c.message, c.reference, std::to_string(c.iterations),
                              std::to_string(c.samples_s.size()), std::to_string(c.tokens_per_step),
                              FormatSignificant(c.wall_s, 6)}) {
      fields.push_back(std::move(value));
    }
    std::string line;
    for (const auto& field : fields) line += (line.empty() ? "" : ",") + escape::CsvField(field);
    for (const auto& metric : metric_columns) {
      const auto value = c.MetricValue(metric);
      line += "," + (value ? FormatSignificant(*value, 10) : std::string());
    }
    const auto roofline = Roofline(run, c);
    const bool has_peak = roofline && roofline->percent_of_peak;
    line += "," + (has_peak ? FormatSignificant(*roofline->percent_of_peak, 6) : std::string());
    line += "," + (has_peak ? roofline->bound : std::string());
    const bool has_hardware = roofline && roofline->percent_of_hardware_peak;
    line += "," + (has_hardware ? FormatSignificant(*roofline->percent_of_hardware_peak, 6)
                                : std::string());
    text += line + "\n";
  }
  return text;
}

std::string RenderJson(const RunRecord& run, const std::vector<CaseRecord>& cases) {
  json environment = json::object();
  for (const auto& [key, value] : run.environment) environment[key] = value;
  json document = {{"run",
                    {{"run_id", run.run_id},
                     {"uuid", run.uuid},
                     {"suite", run.suite_name},
                     {"suite_path", run.suite_path},
                     {"suite_hash", run.suite_hash},
                     {"command_line", run.command_line},
                     {"shard", run.shard},
                     {"seed", run.seed},
                     {"status", run.status},
                     {"started_at", run.started_at},
                     {"finished_at", run.finished_at},
                     {"kind", run.kind},
                     {"baseline", run.baseline},
                     {"repetitions", run.settings.repetitions},
                     {"warmup", run.settings.warmup},
                     {"min_time_s", run.settings.min_time_s},
                     {"threads", run.threads},
                     {"check_policy", run.settings.check_policy},
                     {"environment", environment},
                     {"warnings", run.warnings}}},
                   {"cases", json::array()}};
  for (const CaseRecord& c : cases) {
    json metrics = json::object();
    for (const Metric& metric : c.metrics)
      metrics[metric.name] = {{"value", metric.value}, {"unit", metric.unit}};
    json entry = {{"case_key", c.key()},
                  {"variant_name", c.name()},
                  {"variant_key", c.identity.variant_key},
                  {"category", c.category},
                  {"description", c.description},
                  {"options", c.identity.options},
                  {"status", c.status},
                  {"message", c.message},
                  {"reference", c.reference},
                  {"iterations", c.iterations},
                  {"tokens_per_step", c.tokens_per_step},
                  {"wall_s", c.wall_s},
                  {"samples_s", c.samples_s},
                  {"metrics", metrics}};
    if (const auto roofline = Roofline(run, c); roofline && roofline->percent_of_peak) {
      entry["roofline"] = {{"gflops_per_s", roofline->gflops_per_s},
                           {"gbytes_per_s", roofline->gbytes_per_s},
                           {"percent_of_peak", *roofline->percent_of_peak},
                           {"bound", roofline->bound}};
      if (roofline->percent_of_hardware_peak) {
        entry["roofline"]["percent_of_hardware_peak"] = *roofline->percent_of_hardware_peak;
      }
    }
    for (const WorkloadField& field : WorkloadFields()) {
      if (field.integer != nullptr) {
        entry[std::string(field.name)] = c.workload().*field.integer;
      } else {
        entry[std::string(field.name)] = c.workload().*field.text;
      }
    }
    document["cases"].push_back(std::move(entry));
  }
  return escape::DumpJson(document) + "\n";
}

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
      {"cv", summary.cv},     {"min", summary.min},       {"max", summary.max}};
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
  for (const std::string aggregate : {"mean", "median", "stddev", "cv", "min", "max"}) {
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
