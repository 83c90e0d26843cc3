#include "reports/fit.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <stdexcept>

#include "harness/statistics.h"
#include "reports/markdown.h"

namespace seqbench {
namespace {

std::string PlusMinus(double exponent, double half_width) {
  if (std::isnan(exponent)) return "—";
  char text[64];
  if (std::isinf(half_width)) {
    std::snprintf(text, sizeof(text), "%.2f", exponent);
  } else {
    std::snprintf(text, sizeof(text), "%.2f ± %.2f", exponent, half_width);
  }
  return text;
}

}  // namespace

std::vector<FitRow> FitComplexity(const std::vector<CaseRecord>& cases, const std::string& x) {
  const WorkloadField* field = FindWorkloadField(x);
  if (field == nullptr || field->integer == nullptr) {
    throw std::invalid_argument(
        "--fit needs an integer workload field (seq_len, batch, "
        "layers, width, ...), got '" +
        x + "'");
  }
  // Series key: the variant and every other field; x set to 0 so that it drops out.
  std::vector<std::string> order;
  std::map<std::string, std::vector<const CaseRecord*>> series;
  for (const CaseRecord& c : cases) {
    if (c.status != kStatusOk || !c.MetricValue("runtime_median_s")) continue;
    Workload rest = c.identity.workload;
    rest.*(field->integer) = 0;
    const std::string key = c.identity.variant_name + " " + c.identity.options + " " + rest.Key();
    if (series.find(key) == series.end()) order.push_back(key);
    series[key].push_back(&c);
  }
  std::vector<FitRow> rows;
  for (const std::string& key : order) {
    std::vector<const CaseRecord*> points = series[key];
    if (points.size() < 3) continue;
    std::sort(points.begin(), points.end(), [&](const CaseRecord* a, const CaseRecord* b) {
      return a->identity.workload.*(field->integer) < b->identity.workload.*(field->integer);
    });
    FitRow row;
    row.variant = points.front()->identity.variant_name;
    row.workload = points.front()->identity.workload.Label(field->name);
    std::vector<double> times, memory;
    bool memory_complete = true;
    for (const CaseRecord* point : points) {
      row.xs.push_back(static_cast<double>(point->identity.workload.*(field->integer)));
      times.push_back(*point->MetricValue("runtime_median_s"));
      const auto bytes = point->MetricValue("activation_bytes");
      memory_complete = memory_complete && bytes && *bytes > 0;
      memory.push_back(bytes ? *bytes : 0);
    }
    const stats::PowerLawFit time_fit = stats::FitPowerLaw(row.xs, times);
    row.time_exponent = time_fit.exponent;
    row.time_half_width = time_fit.half_width;
    row.memory_exponent = row.memory_half_width = std::numeric_limits<double>::quiet_NaN();
    if (memory_complete) {
      const stats::PowerLawFit memory_fit = stats::FitPowerLaw(row.xs, memory);
      row.memory_exponent = memory_fit.exponent;
      row.memory_half_width = memory_fit.half_width;
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string RenderFitTable(const std::vector<FitRow>& rows, const std::string& x) {
  MarkdownTable table({"variant", "workload", x + " range", "points", "time exponent (95%)",
                       "activation memory exponent (95%)"});
  for (const FitRow& row : rows) {
    char range[64];
    std::snprintf(range, sizeof(range), "%.0f – %.0f", row.xs.front(), row.xs.back());
    table.AddRow({row.variant, row.workload, range, std::to_string(row.xs.size()),
                  PlusMinus(row.time_exponent, row.time_half_width),
                  PlusMinus(row.memory_exponent, row.memory_half_width)});
  }
  return table.Render();
}

}  // namespace seqbench
