#include "reports/fit.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <stdexcept>

#include "reports/markdown.h"
#include "stats/statistics.h"

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

// "1.98× (1.85–2.10), 2.05× (…)": each doubling's ratio, in ascending x; "—" for none.
std::string DoublingList(const std::vector<Doubling>& doublings) {
  std::string text;
  for (const Doubling& d : doublings) {
    char one[96];
    if (d.has_interval) {
      std::snprintf(one, sizeof(one), "%.2f× (%.2f–%.2f)", d.ratio.estimate, d.ratio.low,
                    d.ratio.high);
    } else {
      std::snprintf(one, sizeof(one), "%.2f×", d.ratio.estimate);
    }
    text += (text.empty() ? "" : ", ") + std::string(one);
  }
  return text.empty() ? "—" : text;
}

const WorkloadField& IntegerField(const std::string& x) {
  const WorkloadField* field = FindWorkloadField(x);
  if (field == nullptr || field->integer == nullptr) {
    throw std::invalid_argument(
        "a series needs an integer workload field (seq_len, batch, layers, width, ...) to "
        "vary along, got '" +
        x + "'");
  }
  return *field;
}

}  // namespace

std::vector<Series> SeriesAlong(const std::vector<CaseRecord>& cases, const std::string& x) {
  const WorkloadField& field = IntegerField(x);
  // Series key: the variant and every other field; x set to 0 so that it drops out.
  std::vector<std::string> order;
  std::map<std::string, Series> series;
  for (const CaseRecord& c : cases) {
    if (c.status != kStatusOk || !c.MetricValue("runtime_median_s")) continue;
    Workload rest = c.identity.workload;
    rest.*(field.integer) = 0;
    const std::string key = c.identity.variant_name + " " + c.identity.options + " " + rest.Key();
    auto [entry, added] = series.try_emplace(key);
    if (added) {
      order.push_back(key);
      entry->second.variant = c.identity.variant_name;
      entry->second.workload = c.identity.workload.Label(field.name);
    }
    entry->second.cases.push_back(&c);
  }
  std::vector<Series> ordered;
  for (const std::string& key : order) {
    Series& one = series[key];
    std::sort(one.cases.begin(), one.cases.end(), [&](const CaseRecord* a, const CaseRecord* b) {
      return a->identity.workload.*(field.integer) < b->identity.workload.*(field.integer);
    });
    ordered.push_back(std::move(one));
  }
  return ordered;
}

std::vector<Doubling> Doublings(const Series& series, const std::string& x, double confidence) {
  const WorkloadField& field = IntegerField(x);
  std::vector<Doubling> doublings;
  for (size_t i = 1; i < series.cases.size(); ++i) {
    const CaseRecord& shorter = *series.cases[i - 1];
    const CaseRecord& longer = *series.cases[i];
    const int64_t from = shorter.identity.workload.*(field.integer);
    if (longer.identity.workload.*(field.integer) != 2 * from) continue;
    Doubling doubling;
    doubling.from = from;
    doubling.longer = &longer;
    if (shorter.samples_s.size() >= stats::kMinBootstrapSamples &&
        longer.samples_s.size() >= stats::kMinBootstrapSamples) {
      doubling.ratio =
          stats::BootstrapRatioOfMedians(shorter.samples_s, longer.samples_s, confidence);
      doubling.has_interval = true;
    } else {
      const double ratio =
          *longer.MetricValue("runtime_median_s") / *shorter.MetricValue("runtime_median_s");
      doubling.ratio = {ratio, ratio, ratio};
    }
    doublings.push_back(doubling);
  }
  return doublings;
}

std::vector<FitRow> FitComplexity(const std::vector<CaseRecord>& cases, const std::string& x) {
  const WorkloadField& field = IntegerField(x);
  std::vector<FitRow> rows;
  for (const Series& series : SeriesAlong(cases, x)) {
    if (series.cases.size() < 3) continue;
    FitRow row;
    row.variant = series.variant;
    row.workload = series.workload;
    std::vector<double> times, memory;
    bool memory_complete = true;
    for (const CaseRecord* point : series.cases) {
      row.xs.push_back(static_cast<double>(point->identity.workload.*(field.integer)));
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
    row.doublings = Doublings(series, x);
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string RenderFitTable(const std::vector<FitRow>& rows, const std::string& x) {
  MarkdownTable table({"variant", "workload", x + " range", "points", "time exponent (95%)",
                       "activation memory exponent (95%)", "time per doubling of " + x + " (95%)"});
  for (const FitRow& row : rows) {
    char range[64];
    std::snprintf(range, sizeof(range), "%.0f – %.0f", row.xs.front(), row.xs.back());
    table.AddRow({row.variant, row.workload, range, std::to_string(row.xs.size()),
                  PlusMinus(row.time_exponent, row.time_half_width),
                  PlusMinus(row.memory_exponent, row.memory_half_width),
                  DoublingList(row.doublings)});
  }
  return table.Render();
}

}  // namespace seqbench
