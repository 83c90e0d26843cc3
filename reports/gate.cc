#include "reports/gate.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
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
  struct Labelled {
    int64_t run_id;
    std::string commit;
  };
  std::vector<Labelled> base;
  std::map<double, std::vector<Labelled>> slowed;  // factor -> runs, in run order
  for (const RunRecord& listed : store.Runs()) {
    if (listed.status != "complete" || listed.suite_name != suite) continue;
    if (listed.label != base_label && listed.label.rfind(slowed_prefix, 0) != 0) continue;
    const RunRecord run = *store.FindRun(listed.run_id);  // with its environment
    const Labelled labelled{run.run_id, run.Environment("git_sha")};
    if (run.label == base_label) {
      base.push_back(labelled);
      continue;
    }
    const std::string factor_text = run.label.substr(slowed_prefix.size());
    char* end = nullptr;
    const double factor = std::strtod(factor_text.c_str(), &end);
    if (!factor_text.empty() && *end == '\0' && std::isfinite(factor) && factor >= 1)
      slowed[factor].push_back(labelled);
  }
  if (base.size() < 2) {
    throw std::invalid_argument("gate: fewer than 2 complete runs of suite '" + suite +
                                "' labelled '" + base_label + "' in " + store.path() +
                                " (ci/measure_gate stores them)");
  }
  std::vector<GateRow> rows;
  GateRow unchanged;
  unchanged.what = "no change: each base run against the next of the same commit";
  for (size_t i = 0; i + 1 < base.size(); ++i) {
    if (base[i].commit != base[i + 1].commit) continue;
    Count(unchanged,
          CompareCases(store.Cases(base[i].run_id), store.Cases(base[i + 1].run_id), settings));
  }
  rows.push_back(unchanged);
  // Each slowed run against the base run just before it of the same commit (its round,
  // as ci/measure_gate takes them), each base run at most once per factor.
  for (const auto& [factor, runs] : slowed) {
    GateRow row;
    row.what = FormatSignificant(factor, 3) + "x slower: each slowed run against its round's base";
    std::set<int64_t> used;
    for (const Labelled& run : runs) {
      const Labelled* partner = nullptr;
      for (const Labelled& candidate : base) {
        if (candidate.run_id < run.run_id && candidate.commit == run.commit) partner = &candidate;
      }
      if (partner == nullptr || !used.insert(partner->run_id).second) continue;
      Count(row, CompareCases(store.Cases(partner->run_id), store.Cases(run.run_id), settings));
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
