#include "reports/scaling.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <stdexcept>

#include "base/text.h"
#include "reports/format.h"
#include "reports/markdown.h"
#include "reports/plot.h"
#include "stats/ring_model.h"

namespace seqbench {
namespace {

double MetricOrNan(const CaseRecord& c, const std::string& name) {
  return c.MetricValue(name).value_or(std::numeric_limits<double>::quiet_NaN());
}

training::RingModel Network(const ScalingRow& row) { return {row.alpha_s, row.beta_s_per_byte}; }

training::StepModel Step(const ScalingRow& row) {
  training::StepModel step;
  step.compute_s = row.compute_s();
  step.gradient_bytes = row.gradient_bytes;
  step.buckets = std::max<int64_t>(1, std::llround(row.buckets));
  step.count_allreduces = std::llround(row.count_allreduces);
  return step;
}

std::string Duration(double seconds) {
  if (seconds == 0) return "0";  // a fit's negative intercept, clamped
  return std::isfinite(seconds) ? FormatDuration(seconds) : "—";
}

std::string Percent(double ratio) {
  return std::isfinite(ratio) ? FormatSignificant(ratio * 100) + "%" : "—";
}

// 1/β as a link's bandwidth.
std::string Bandwidth(double beta_s_per_byte) {
  return beta_s_per_byte > 0 ? FormatSignificant(1e-9 / beta_s_per_byte) + " GB/s" : "—";
}

// The model needs the compute alone. With one bucket a step, the gradients travel after
// backward has produced the last of them, so the step is compute, that all-reduce and the
// counts' all-reduces in sequence. With several, the buckets' times overlap backward and
// one another (each counts its wait behind the previous one), and the stored figures do
// not separate compute from communication: those rows stay out of the model.
std::vector<ScalingRow> ModelRows(const std::vector<ScalingRow>& rows) {
  std::vector<ScalingRow> usable;
  for (const ScalingRow& row : rows) {
    if (row.buckets <= 1.0) usable.push_back(row);
  }
  if (usable.empty()) {
    throw std::invalid_argument(
        "no data-parallel pipeline sends its gradients in one bucket a step, which the model "
        "needs to separate compute from communication");
  }
  return usable;
}

}  // namespace

double ScalingRow::compute_s() const {
  return std::max(0.0, step_s - gradient_allreduce_s - count_allreduce_s);
}

std::vector<ScalingRow> ScalingRows(const std::vector<CaseRecord>& cases) {
  std::vector<ScalingRow> rows;
  for (const CaseRecord& c : cases) {
    if (c.status != kStatusOk || !(MetricOrNan(c, "ranks") > 1) ||
        !c.MetricValue("network_alpha_s"))
      continue;
    ScalingRow row;
    row.pipeline = c.name();
    row.options = c.description;
    row.ranks = std::llround(MetricOrNan(c, "ranks"));
    row.bucket_mb = MetricOrNan(c, "bucket_mb");
    row.alpha_s = MetricOrNan(c, "network_alpha_s");
    row.beta_s_per_byte = MetricOrNan(c, "network_beta_s_per_byte");
    row.tokens_per_s = MetricOrNan(c, "tokens_per_s");
    row.step_s = MetricOrNan(c, "runtime_mean_s");
    row.gradient_bytes = MetricOrNan(c, "allreduce_bytes_per_step");
    row.buckets = MetricOrNan(c, "allreduce_buckets_per_step");
    row.gradient_allreduce_s = MetricOrNan(c, "allreduce_s_per_step");
    row.count_allreduces = c.MetricValue("count_allreduces_per_step").value_or(0);
    row.count_allreduce_s = c.MetricValue("count_allreduce_s_per_step").value_or(0);
    row.efficiency = std::numeric_limits<double>::quiet_NaN();
    const auto reference = std::find_if(cases.begin(), cases.end(), [&](const CaseRecord& r) {
      return r.name() == c.reference && r.status == kStatusOk &&
             r.MetricValue("ranks").value_or(1) == 1;
    });
    if (reference != cases.end()) {
      row.efficiency = row.tokens_per_s / (row.ranks * MetricOrNan(*reference, "tokens_per_s"));
    }
    rows.push_back(row);
  }
  return rows;
}

std::string RenderScalingTable(const std::vector<ScalingRow>& rows) {
  if (rows.empty()) throw std::invalid_argument("no data-parallel pipeline with network metrics");
  MarkdownTable table({"pipeline", "ranks", "bucket", "α (fitted)", "1/β (fitted)", "tokens/s",
                       "efficiency", "step", "gradient all-reduce", "count all-reduces"});
  for (const ScalingRow& row : rows) {
    table.AddRow(
        {row.pipeline, std::to_string(row.ranks), FormatSignificant(row.bucket_mb) + " MiB",
         Duration(row.alpha_s), Bandwidth(row.beta_s_per_byte), FormatCount(row.tokens_per_s),
         Percent(row.efficiency), Duration(row.step_s),
         FormatSignificant(row.buckets) + " × " +
             FormatBytes(std::llround(row.gradient_bytes / std::max(1.0, row.buckets))) + ", " +
             Duration(row.gradient_allreduce_s),
         FormatSignificant(row.count_allreduces) + ", " + Duration(row.count_allreduce_s)});
  }
  return table.Render() +
         "\nα, 1/β: the ring all-reduce model's latency per message and bandwidth per link, "
         "fitted to all-reduces of 4 B to 1 MiB timed on the pipeline's own process group "
         "before it trained. efficiency: tokens/s ÷ (ranks × the one-rank reference's "
         "tokens/s), the same global batch split across the ranks. step: mean wall time "
         "per optimizer step. gradient all-reduce: buckets per step × bytes per bucket, and "
         "their summed time from launch to completion (overlapped with backward or not). "
         "count all-reduces: the blocking all-reduces of the step's target count and loss, "
         "and their time.\n";
}

std::string RenderScalingModel(const std::vector<ScalingRow>& all_rows,
                               const std::vector<int64_t>& extrapolate_to) {
  if (all_rows.empty())
    throw std::invalid_argument("no data-parallel pipeline with network metrics");
  const std::vector<ScalingRow> rows = ModelRows(all_rows);
  std::vector<std::string> headers = {"pipeline", "compute", "measured step"};
  for (const int64_t p : extrapolate_to) headers.push_back(std::to_string(p) + " ranks (model)");
  MarkdownTable table(headers);
  for (const ScalingRow& row : rows) {
    const training::StepModel step = Step(row);
    std::vector<std::string> cells = {row.pipeline, Duration(step.compute_s),
                                      Duration(row.step_s) + " on " + std::to_string(row.ranks)};
    for (const int64_t p : extrapolate_to) {
      cells.push_back(Duration(step.StepSeconds(Network(row), p)) + ", " +
                      Percent(step.Efficiency(Network(row), p)));
    }
    table.AddRow(cells);
  }
  return table.Render() +
         "\n**A model, not a measurement.** Each cell is the modelled step time on p ranks "
         "and its efficiency, compute ÷ step, under weak scaling (every rank keeps this "
         "pipeline's share of the batch): step(p) = compute + k·T(p, n/k) + c·T(p, 8 B), "
         "with the ring all-reduce T(p, n) = 2(p − 1)·α + 2(p − 1)/p · n·β, k gradient "
         "buckets of n bytes in all and c count all-reduces per step, none overlapped with "
         "compute (so the efficiency is a lower bound). compute: the measured step minus "
         "its measured all-reduce time; α, β, n, k and c: as measured in the table above. "
         "Only pipelines whose gradients travel in one bucket a step appear: with several, "
         "the buckets overlap backward and one another, and the stored times do not "
         "separate compute from communication. "
         "It leaves out contention, a cluster's hierarchy of links and the reduction's "
         "arithmetic.\n";
}

std::string BuildScalingPlotScript(const std::vector<ScalingRow>& rows,
                                   const ScalingPlotRequest& request) {
  if (rows.empty()) throw std::invalid_argument("no data-parallel pipeline with network metrics");
  std::string data, plot, script;
  int series = 0;
  const auto add_series = [&](const std::string& points, const std::string& title,
                              const std::string& style) {
    data += "$series" + std::to_string(series) + " << EOD\n" + points + "EOD\n";
    plot += std::string(series ? ", \\\n     " : "") + "$series" + std::to_string(series) +
            " using 1:2 with " + style + " title " + GnuplotQuoted(title);
    ++series;
  };
  char line[64];
  if (request.y == "efficiency") {
    const bool latency = request.x == "latency";
    if (!latency && request.x != "bandwidth") {
      throw std::invalid_argument("plot=efficiency takes x=bandwidth or x=latency, not '" +
                                  request.x + "'");
    }
    // The fitted network, not the emulation's setting: what the group really had.
    const auto x_of = [&](const ScalingRow& row) {
      return latency ? row.alpha_s * 1e3 : 1e-6 / row.beta_s_per_byte;
    };
    std::map<double, std::vector<const ScalingRow*>> by_bucket;
    for (const ScalingRow& row : rows) {
      if (std::isfinite(row.efficiency) && std::isfinite(x_of(row)) && x_of(row) > 0)
        by_bucket[row.bucket_mb].push_back(&row);
    }
    double x_min = std::numeric_limits<double>::infinity(), x_max = 0;
    for (auto& [bucket, members] : by_bucket) {
      std::sort(members.begin(), members.end(),
                [&](const ScalingRow* a, const ScalingRow* b) { return x_of(*a) < x_of(*b); });
      std::string points;
      for (const ScalingRow* row : members) {
        std::snprintf(line, sizeof(line), "%.10g %.10g\n", x_of(*row), row->efficiency * 100);
        points += line;
        x_min = std::min(x_min, x_of(*row));
        x_max = std::max(x_max, x_of(*row));
      }
      add_series(points, "buckets of " + FormatSignificant(bucket) + " MiB",
                 "linespoints lw 2 pt 7");
    }
    if (series == 0)
      throw std::invalid_argument("no pipeline has a one-rank reference to scale by");
    script = GnuplotPreamble(
        request.title,
        latency ? "fitted α, latency per message (ms)" : "fitted 1/β, bandwidth per link (MB/s)",
        "scaling efficiency (%), measured");
    script += "set yrange [0:*]\n";
    if (x_max / x_min >= 10) script += "set logscale x 10\n";
  } else if (request.y == "model_efficiency") {
    for (const ScalingRow& row : ModelRows(rows)) {
      std::string points;
      for (int64_t p = 1; p <= 512; p *= 2) {
        std::snprintf(line, sizeof(line), "%lld %.10g\n", static_cast<long long>(p),
                      Step(row).Efficiency(Network(row), p) * 100);
        points += line;
      }
      add_series(points, row.pipeline, "linespoints lw 2 pt 7");
    }
    script = GnuplotPreamble(request.title, "ranks (model beyond the measured ones)",
                             "efficiency (%), ring all-reduce model");
    script += "set logscale x 2\nset yrange [0:105]\n";
  } else {
    throw std::invalid_argument("unknown scaling plot '" + request.y +
                                "' (efficiency, model_efficiency)");
  }
  return script + data + "plot " + plot + "\n";
}

void RenderScalingPlot(const std::vector<ScalingRow>& rows, const ScalingPlotRequest& request) {
  RunGnuplot(BuildScalingPlotScript(rows, request), request.output);
}

}  // namespace seqbench
