#include "reports/gate.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <stdexcept>

#include "reports/format.h"
#include "reports/markdown.h"

namespace seqbench {
namespace {

void Count(GateRow& row, const std::vector<CaseComparison>& comparisons) {
  ++row.compares;
  bool regression = false;
  for (const CaseComparison& c : comparisons) {
    regression = regression || IsRegression(c);
    ++row.cases;
    row.slower += c.verdict == "slower";
    row.faster += c.verdict == "faster";
    row.same += c.verdict == "same";
    row.ambiguous += c.verdict == "ambiguous";
  }
  row.flagged += regression;
}

}  // namespace

std::vector<GateRow> MeasureGate(const Store& store, const std::string& suite,
                                 const std::string& prefix, const CompareSettings& settings) {
  const std::string base_label = prefix + " base";
  const std::string slowed_prefix = prefix + " x";
  std::vector<int64_t> base;
  std::map<double, std::vector<int64_t>> slowed;  // factor -> runs, in run order
  for (const RunRecord& run : store.Runs()) {
    if (run.status != "complete" || run.suite_name != suite) continue;
    if (run.label == base_label) {
      base.push_back(run.run_id);
    } else if (run.label.rfind(slowed_prefix, 0) == 0) {
      const std::string factor_text = run.label.substr(slowed_prefix.size());
      char* end = nullptr;
      const double factor = std::strtod(factor_text.c_str(), &end);
      if (!factor_text.empty() && *end == '\0') slowed[factor].push_back(run.run_id);
    }
  }
  if (base.size() < 2) {
    throw std::invalid_argument("gate: fewer than 2 complete runs of suite '" + suite +
                                "' labelled '" + base_label + "' in " + store.path() +
                                " (ci/measure_gate stores them)");
  }
  std::vector<GateRow> rows;
  GateRow unchanged;
  unchanged.what = "no change: base run i against base run i+1";
  for (size_t i = 0; i + 1 < base.size(); ++i) {
    Count(unchanged, CompareCases(store.Cases(base[i]), store.Cases(base[i + 1]), settings));
  }
  rows.push_back(unchanged);
  for (const auto& [factor, runs] : slowed) {
    GateRow row;
    row.what = FormatSignificant(factor, 3) + "x slower: base run i against slowed run i";
    for (size_t i = 0; i < runs.size() && i < base.size(); ++i) {
      Count(row, CompareCases(store.Cases(base[i]), store.Cases(runs[i]), settings));
    }
    rows.push_back(row);
  }
  return rows;
}

std::string RenderGateTable(const std::vector<GateRow>& rows, const CompareSettings& settings) {
  MarkdownTable table({"compared", "compares", "flagged (exit 1)", "cases", "slower", "faster",
                       "same", "ambiguous"});
  for (const GateRow& row : rows) {
    table.AddRow({row.what, std::to_string(row.compares),
                  std::to_string(row.flagged) + " of " + std::to_string(row.compares),
                  std::to_string(row.cases), std::to_string(row.slower), std::to_string(row.faster),
                  std::to_string(row.same), std::to_string(row.ambiguous)});
  }
  return "`compare` at `--threshold " + FormatSignificant(settings.threshold * 100, 3) + "%`, " +
         FormatSignificant(settings.confidence * 100, 3) +
         "% bootstrap intervals of the ratio of medians:\n\n" + table.Render();
}

}  // namespace seqbench
