// A suite's history across runs: for each case identity, the series of one metric over
// the stored runs of the suite, in run order (started_at), split where the machine
// changes (MachineKeys()), with the change points found in each (stats/change_points.h).
// `seqbench history` renders it as Markdown, CSV or JSON.
//
// The runs are ordered by commit where the caller gives git's topological order of the
// store's commits (a store does not hold the commit graph, and reports/ reads nothing but
// the store), else by their start time.
//
// Thread-safety: pure functions over the stores they are given.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "results/machine.h"
#include "results/store.h"
#include "stats/change_points.h"

namespace seqbench {

// What a series measures, per case and run.
struct HistoryMetric {
  const char* name;  // as `history --metric` takes it
  const char* unit;
  // The case's value in its run; nullopt where it has none (a skipped case, no samples).
  std::optional<double> (*of)(const CaseRecord& c);
  // The spread around it the site draws as a band, {low, high}; null: none (the value).
  std::pair<double, double> (*band)(const CaseRecord& c) = nullptr;
};
// runtime (median step, s), tokens_per_s, peak_memory, activation_memory (bytes),
// instructions (per step, from run --count).
const std::vector<HistoryMetric>& HistoryMetrics();
const HistoryMetric* FindHistoryMetric(const std::string& name);

struct HistoryPoint {
  int64_t run_id = 0;
  std::string database;  // the store it came from
  std::string git_sha, label, started_at;
  double value = 0;
  double low = 0, high = 0;  // HistoryMetric::band (runtime: the samples' quartiles); else value
  std::string run_uuid;      // the run's, which names its site page
};

struct HistorySeries {
  bool by_commit = false;  // points in commit order (HistoryRequest::commit_order), else in
                           // start order
  std::string case_key;
  std::string machine;  // "cpu_model=..., blas_core=...": the MachineKeys() values
  std::vector<HistoryPoint> points;
  std::vector<stats::ChangePoint> changes;  // indices into points
};

struct HistoryRequest {
  std::string suite;  // required: the suite's name
  const HistoryMetric* metric = nullptr;
  stats::ChangePointOptions change_points;
  // Commits in git's topological order, oldest first (the command line asks git; reports/
  // reads only the store). When every run's commit is among them, runs are ordered by
  // commit, then by start time; else (or empty) by start time alone.
  std::vector<std::string> commit_order;
  // With `history --since REV`: only runs of these commits (REV and its descendants).
  std::optional<std::set<std::string>> since;
  // Called before each run's cases are read, with how many of the suite's runs are read
  // (the caller's progress line); on the calling thread. May be empty.
  std::function<void(size_t done, size_t total)> on_progress;
};

// Every series of `request.suite`'s complete benchmark runs in `stores` (each run once, by
// uuid; no --test-slowdown run, no A/B side), by case key, then by the series' first run.
// A run joins a case's series unless a machine key both recorded differs (a key only one
// recorded is unknown, not different). A case's value counts only where the case is ok and
// the value is finite and positive.
std::vector<HistorySeries> BuildHistory(const std::vector<const Store*>& stores,
                                        const HistoryRequest& request);

std::string RenderHistoryMarkdown(const std::vector<HistorySeries>& series,
                                  const HistoryRequest& request);
// A paragraph for a README: how many series over how many runs and machines, and a table
// of the series with a change (or that none has one).
std::string RenderHistorySummary(const std::vector<HistorySeries>& series,
                                 const HistoryRequest& request);
std::string RenderHistoryCsv(const std::vector<HistorySeries>& series);
std::string RenderHistoryJson(const std::vector<HistorySeries>& series,
                              const HistoryRequest& request);

}  // namespace seqbench
