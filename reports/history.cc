#include "reports/history.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "base/text.h"
#include "reports/escape/csv.h"
#include "reports/escape/json.h"
#include "reports/escape/markdown.h"
#include "reports/format.h"
#include "reports/markdown.h"
#include "reports/run_facts.h"
#include "stats/statistics.h"

namespace seqbench {

const std::vector<HistoryMetric>& HistoryMetrics() {
  static const std::vector<HistoryMetric> metrics = {
      {"runtime", "s",
       [](const CaseRecord& c) -> std::optional<double> {
         if (c.samples_s.empty()) return std::nullopt;
         return stats::Median(c.samples_s);
       },
       [](const CaseRecord& c) {  // the samples' interquartile range
         return std::make_pair(stats::Quantile(c.samples_s, 0.25),
                               stats::Quantile(c.samples_s, 0.75));
       }},
      {"tokens_per_s", "tokens/s", MedianThroughput},
      {"peak_memory", "bytes", [](const CaseRecord& c) { return c.MetricValue("peak_bytes"); }},
      {"activation_memory", "bytes",
       [](const CaseRecord& c) { return c.MetricValue("activation_bytes"); }},
      {"instructions", "instructions",
       [](const CaseRecord& c) { return c.MetricValue("instructions_per_step"); }},
  };
  return metrics;
}

const HistoryMetric* FindHistoryMetric(const std::string& name) {
  for (const HistoryMetric& metric : HistoryMetrics())
    if (name == metric.name) return &metric;
  return nullptr;
}

namespace {

// The suite's complete benchmark runs of every store, by start time, each once (a run
// merged into two of the stores counts once). Runs that do not measure the code as it is
// are left out: a test-only --test-slowdown run, and the sides of an A/B (seqbench ab),
// whose two binaries alternate.
using StoredRuns = std::vector<std::pair<const Store*, RunRecord>>;

StoredRuns SuiteRuns(const std::vector<const Store*>& stores, const HistoryRequest& request) {
  StoredRuns runs;
  std::set<std::string> seen;
  for (const Store* store : stores) {
    for (const RunRecord& listed : store->Runs()) {
      if (listed.suite_name != request.suite || listed.kind != kRunKindBenchmark ||
          listed.status != "complete" || !seen.insert(listed.uuid).second)
        continue;
      RunRecord run = *store->FindRun(listed.run_id);
      if (!run.Environment("test_slowdown").empty() || !run.Environment("ab_side").empty())
        continue;
      if (request.since && request.since->count(run.Environment("git_sha")) == 0) continue;
      runs.emplace_back(store, std::move(run));
    }
  }
  std::stable_sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) {
    return a.second.started_at < b.second.started_at;
  });
  return runs;
}

// Sorts `runs` by commit, stably (start order within a commit), when every run's commit is
// in `order`; whether it did.
bool SortByCommit(StoredRuns& runs, const std::vector<std::string>& order) {
  std::map<std::string, size_t> position;
  for (size_t i = 0; i < order.size(); ++i) position.emplace(order[i], i);
  for (const auto& entry : runs)
    if (position.count(entry.second.Environment("git_sha")) == 0) return false;
  std::stable_sort(runs.begin(), runs.end(), [&](const auto& a, const auto& b) {
    return position.at(a.second.Environment("git_sha")) <
           position.at(b.second.Environment("git_sha"));
  });
  return !runs.empty();
}

// A case's point in its run: the value, and the metric's band around it where it has one.
HistoryPoint PointOf(const Store& store, const RunRecord& run, const CaseRecord& c, double value,
                     const HistoryMetric& metric) {
  HistoryPoint point{run.run_id, store.path(),   run.Environment("git_sha"),
                     run.label,  run.started_at, value,
                     value,      value,          run.uuid};
  if (metric.band) std::tie(point.low, point.high) = metric.band(c);
  return point;
}

}  // namespace

std::vector<HistorySeries> BuildHistory(const std::vector<const Store*>& stores,
                                        const HistoryRequest& request) {
  // Per case key, its series in the order they began, each with the machine keys known so
  // far: a run joins the first series it is compatible with.
  std::map<std::string, std::vector<std::pair<Machine, HistorySeries>>> by_case;
  StoredRuns runs = SuiteRuns(stores, request);
  const bool by_commit = SortByCommit(runs, request.commit_order);
  size_t read = 0;
  for (const auto& [store, run] : runs) {
    if (request.on_progress) request.on_progress(read++, runs.size());
    const Machine machine = MachineOf(run);
    for (const CaseRecord& c : store->Cases(run.run_id)) {
      const std::optional<double> value = request.metric->of(c);
      if (c.status != kStatusOk || !value || !std::isfinite(*value) || !(*value > 0)) continue;
      auto& candidates = by_case[c.key()];
      auto series = std::find_if(candidates.begin(), candidates.end(),
                                 [&](const auto& s) { return Compatible(s.first, machine); });
      if (series == candidates.end()) {
        candidates.push_back({machine, HistorySeries{}});
        series = std::prev(candidates.end());
        series->second.case_key = c.key();
      }
      series->second.by_commit = by_commit;
      series->first.insert(machine.begin(), machine.end());
      series->second.points.push_back(PointOf(*store, run, c, *value, *request.metric));
    }
  }
  std::vector<HistorySeries> all;
  for (auto& [key, candidates] : by_case) {
    for (auto& [machine, series] : candidates) {
      series.machine = MachineText(machine);
      std::vector<double> values;
      for (const HistoryPoint& point : series.points) values.push_back(point.value);
      series.changes = stats::FindChangePoints(values, request.change_points);
      all.push_back(std::move(series));
    }
  }
  return all;
}

namespace {

std::string TableSha(const std::string& sha) { return ShortSha(sha, 10, "-"); }

std::string ChangeText(const stats::ChangePoint& change) {
  return FormatSignificant(change.ratio.estimate, 3) + "× (" +
         FormatSignificant(change.ratio.low, 3) + "–" + FormatSignificant(change.ratio.high, 3) +
         "), p " + FormatSignificant(change.p_value, 2);
}

}  // namespace

std::string RenderHistoryMarkdown(const std::vector<HistorySeries>& series,
                                  const HistoryRequest& request) {
  std::string text =
      "**history of suite " + escape::MarkdownText(request.suite) + "**, " + request.metric->name +
      " (" + request.metric->unit + "), runs in " +
      (series.front().by_commit ? "commit order (git's topological order)" : "start order") +
      "; a change is the ratio of medians after/before it, its 95% interval "
      "and corrected p\n\n";
  MarkdownTable table({"case", "machine", "runs", "first", "last", "changes"});
  for (const HistorySeries& s : series) {
    std::string changes;
    for (const stats::ChangePoint& change : s.changes) {
      const HistoryPoint& at = s.points[change.index];
      changes += (changes.empty() ? "" : "; ") + ChangeText(change) + " at run " +
                 std::to_string(at.run_id) + " (" + TableSha(at.git_sha) + ")";
    }
    table.AddRow({s.case_key, s.machine, std::to_string(s.points.size()),
                  FormatSignificant(s.points.front().value, 3),
                  FormatSignificant(s.points.back().value, 3), changes.empty() ? "none" : changes});
  }
  return text + table.Render();
}

std::string RenderHistorySummary(const std::vector<HistorySeries>& series,
                                 const HistoryRequest& request) {
  std::set<int64_t> runs;
  std::set<std::string> machines;
  MarkdownTable table({"case", "runs", "changes"});
  for (const HistorySeries& s : series) {
    for (const HistoryPoint& point : s.points) runs.insert(point.run_id);
    machines.insert(s.machine);
    std::string changes;
    for (const stats::ChangePoint& change : s.changes) {
      const HistoryPoint& at = s.points[change.index];
      changes += (changes.empty() ? "" : "; ") + ChangeText(change) + " at run " +
                 std::to_string(at.run_id);
    }
    if (!changes.empty()) table.AddRow({s.case_key, std::to_string(s.points.size()), changes});
  }
  const size_t changed = table.rows();
  std::string text =
      escape::MarkdownCode("seqbench history --suite " + request.suite + " --metric " +
                           request.metric->name) +
      ": " + std::to_string(series.size()) + " series over " + std::to_string(runs.size()) +
      " runs on " + std::to_string(machines.size()) + " machine(s), in " +
      (series.front().by_commit ? "commit" : "start") + " order; " +
      (changed == 0 ? "no change in any series.\n"
                    : "a change in " + std::to_string(changed) + ":\n\n" + table.Render());
  return text;
}

std::string RenderHistoryCsv(const std::vector<HistorySeries>& series) {
  std::string text = "case_key,machine,database,run_id,git_sha,label,started_at,value,change\n";
  for (const HistorySeries& s : series) {
    for (size_t i = 0; i < s.points.size(); ++i) {
      const HistoryPoint& p = s.points[i];
      std::string change;
      for (const stats::ChangePoint& c : s.changes)
        if (c.index == i) change = ChangeText(c);
      for (const std::string& field : {s.case_key, s.machine, p.database, std::to_string(p.run_id),
                                       p.git_sha, p.label, p.started_at}) {
        text += escape::CsvField(field) + ",";
      }
      text += FormatSignificant(p.value, 6) + "," + escape::CsvField(change) + "\n";
    }
  }
  return text;
}

std::string RenderHistoryJson(const std::vector<HistorySeries>& series,
                              const HistoryRequest& request) {
  nlohmann::json document = {
      {"suite", request.suite},
      {"metric", request.metric->name},
      {"unit", request.metric->unit},
      {"order", !series.empty() && series.front().by_commit ? "commit" : "start"},
      {"series", nlohmann::json::array()}};
  for (const HistorySeries& s : series) {
    nlohmann::json points = nlohmann::json::array(), changes = nlohmann::json::array();
    for (const HistoryPoint& p : s.points) {
      points.push_back({{"database", p.database},
                        {"run_id", p.run_id},
                        {"git_sha", p.git_sha},
                        {"label", p.label},
                        {"started_at", p.started_at},
                        {"value", p.value}});
    }
    for (const stats::ChangePoint& c : s.changes) {
      changes.push_back({{"index", c.index},
                         {"run_id", s.points[c.index].run_id},
                         {"ratio", c.ratio.estimate},
                         {"ratio_low", c.ratio.low},
                         {"ratio_high", c.ratio.high},
                         {"p_value", c.p_value}});
    }
    document["series"].push_back({{"case_key", s.case_key},
                                  {"machine", s.machine},
                                  {"points", points},
                                  {"changes", changes}});
  }
  return escape::DumpJson(document) + "\n";
}

}  // namespace seqbench
