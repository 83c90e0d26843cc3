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
#include <string>
#include <vector>

#include "base/text.h"
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

// The case table's columns; "× GEMM floor" before "Correct" with `with_floor`.
std::vector<std::string> CaseTableHeaders(bool with_floor) {
  std::vector<std::string> headers = {"S/N",
                                      "Modifications",
                                      "Improvement Cat.",
                                      "Workload",
                                      "Runtime (mean ± std)",
                                      "Runtime (median, IQR)",
                                      "Peak memory usage",
                                      "Activation memory",
                                      "Speedup",
                                      "Tokens/s",
                                      "GFLOP/s",
                                      "GB/s",
                                      "% of BLAS peak",
                                      "% of HW peak"};
  if (with_floor) headers.push_back("× GEMM floor");
  headers.push_back("Correct");
  return headers;
}

// A case's roofline cells: GFLOP/s, GB/s, % of BLAS peak, % of HW peak and, with
// `with_floor`, × GEMM floor; "—" where unknown.
std::vector<std::string> RooflineCells(const std::optional<RooflinePoint>& roofline,
                                       bool with_floor) {
  std::vector<std::string> cells(with_floor ? 5 : 4, "—");
  if (!roofline) return cells;
  cells[0] = Throughput(roofline->gflops_per_s);
  cells[1] = Throughput(roofline->gbytes_per_s);
  if (roofline->percent_of_peak) {
    cells[2] = FormatSignificant(*roofline->percent_of_peak, 2) + "% (" + roofline->bound + ")";
  }
  if (roofline->percent_of_hardware_peak) {
    cells[3] = FormatSignificant(*roofline->percent_of_hardware_peak, 2) + "%";
  }
  if (with_floor && roofline->times_gemm_floor) {
    cells[4] = FormatSignificant(*roofline->times_gemm_floor, 3) + "×";
  }
  return cells;
}

// A case table's heading: the suite and group in bold, then where and when it ran.
std::string GroupHeading(const RunRecord& run, const std::string& group_name,
                         const std::string& device) {
  std::string hardware =
      device == "cuda" ? run.Environment("gpu_name") : run.Environment("cpu_model");
  if (hardware.empty()) hardware = device;
  if (device == "cpu") hardware += BlasKernelsNote(run);
  return "**" + escape::MarkdownText(run.suite_name + " · " + group_name) + "** — " +
         escape::MarkdownText(hardware + ", LibTorch " + run.Environment("torch_version") + ", " +
                              DayOf(run.started_at) + ", run " + std::to_string(run.run_id) +
                              " (git " + ShortSha(run.Environment("git_sha"), 7, "") +
                              (run.Environment("git_dirty") == "true" ? "-dirty" : "") + ")") +
         "\n\n";
}

}  // namespace

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
    text += GroupHeading(run, group_name, group.front()->workload().device);
    // "× GEMM floor" only where a case has one: runs stored before step_gemm_flops keep
    // their tables as they were.
    std::vector<std::optional<RooflinePoint>> rooflines;
    for (const CaseRecord* c : group) rooflines.push_back(Roofline(run, *c));
    const bool with_floor = std::any_of(rooflines.begin(), rooflines.end(), [](const auto& point) {
      return point && point->times_gemm_floor;
    });
    MarkdownTable table(CaseTableHeaders(with_floor));
    std::string reference_note;
    for (size_t i = 0; i < group.size(); ++i) {
      const CaseRecord* c = group[i];
      // Location and spread from the samples themselves (the same statistics as the
      // speedup), whatever metrics an older seqbench stored.
      std::string spread = "—", runtime = "—";
      if (!c->samples_s.empty()) {
        const stats::Summary summary = stats::Summarize(c->samples_s);
        spread = FormatDurationSpread(summary.mean, summary.stddev);
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
      std::vector<std::string> row = {
          std::to_string(i + 1),
          ModificationsCell(*c),
          c->category,
          ShapeCell(*c),
          spread,
          runtime,
          peak ? FormatBytes(static_cast<int64_t>(*peak)) : "—",
          activation ? FormatBytes(static_cast<int64_t>(*activation)) : "—",
          speedup,
          tokens ? Throughput(*tokens) : "—"};
      for (std::string& cell : RooflineCells(rooflines[i], with_floor)) {
        row.push_back(std::move(cell));
      }
      row.push_back(StatusCell(*c));
      table.AddRow(row);
    }
    text += table.Render();
    if (!reference_note.empty()) {
      text += "\n" + escape::MarkdownText(reference_note + " (same workload where it ran).") + "\n";
    }
    text += "\n";
  }
  return text;
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
  text += ",percent_of_peak,bound,percent_of_hardware_peak,times_gemm_floor\n";
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
    const bool has_floor = roofline && roofline->times_gemm_floor;
    line += "," + (has_floor ? FormatSignificant(*roofline->times_gemm_floor, 6) : std::string());
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
      if (roofline->times_gemm_floor) {
        entry["roofline"]["times_gemm_floor"] = *roofline->times_gemm_floor;
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

}  // namespace seqbench
