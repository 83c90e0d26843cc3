// `seqbench history`: a suite's metric across its stored runs, case by case, with the
// change points found in each series (reports/history.h).
#include "reports/history.h"

#include <boost/program_options.hpp>
#include <iostream>

#include "cli/command.h"
#include "cli/progress.h"

namespace po = boost::program_options;

namespace seqbench::cli {
namespace {

std::string MetricNames() {
  std::string names;
  for (const HistoryMetric& metric : HistoryMetrics())
    names += (names.empty() ? "" : "|") + std::string(metric.name);
  return names;
}

struct HistoryFlags {
  std::vector<std::string> db_paths;
  std::string suite, metric = "runtime", format = "md", since;
  double max_p = 0, min_magnitude = 0;
};

// Git's topological order of every commit here, oldest first (none outside a repository:
// the runs then go in start order), and with --since REV the commits from REV on.
void AskGit(const std::string& since, HistoryRequest& request) {
  request.commit_order = GitCommitOrder();
  if (since.empty()) return;
  const auto commit = CommitSha(since);
  if (!commit)
    throw UsageError("history: --since '" + since +
                     "': git knows no such commit, branch or tag here (run it in the "
                     "repository the runs were measured from)");
  const auto descendants = GitLines({"rev-list", "--ancestry-path", "--all", "^" + *commit});
  request.since.emplace();
  if (descendants) request.since->insert(descendants->begin(), descendants->end());
  request.since->insert(*commit);
}

// The flags, each checked: unknown metric or format, a threshold out of range, a revision
// git does not know, exit 2.
std::optional<HistoryFlags> ParseHistoryFlags(const std::vector<std::string>& args,
                                              HistoryRequest& request) {
  HistoryFlags f;
  const stats::ChangePointOptions defaults;
  po::options_description options(
      "Usage: seqbench history --suite NAME [--metric " + MetricNames() +
      "]\n"
      "                        [--since REV] [--format md|csv|json] [--max-p P]\n"
      "                        [--min-magnitude M] [--db FILE]...\n\n"
      "For each case of the suite's complete benchmark runs, the series of one metric over\n"
      "the runs (every --db together) in commit order, git's topological order, where git\n"
      "here knows every run's commit, else in the order they started; split where the machine\n"
      "changes (CPU model and cores, GPU, LibTorch, BLAS library and core, ATen's CPU\n"
      "capability; a key an older run lacks is unknown, not a change), and the change\n"
      "points in each series: binary segmentation with Mann-Whitney's test, the p-value\n"
      "corrected for the splits tried. A change is reported with the ratio of medians after/\n"
      "before it and its bootstrap 95% interval. Defaults and how they were chosen:\n"
      "reports/README.md, \"Change points\".\n\nOptions");
  options.add_options()("help,h", "show this help");
  DeclareDatabases(options, f.db_paths);
  options.add_options()("suite", po::value(&f.suite), "the suite's name (required)")(
      "metric", po::value(&f.metric)->default_value("runtime"),
      "runtime (median step, s), tokens_per_s, peak_memory, activation_memory, instructions")(
      "format", po::value(&f.format)->default_value("md"), "md, csv or json")(
      "since", po::value(&f.since),
      "only runs of this commit (a SHA, branch or tag git knows here) and its descendants")(
      "max-p", po::value(&f.max_p)->default_value(defaults.max_p),
      "the corrected p-value a change must reach, in (0, 1)")(
      "min-magnitude", po::value(&f.min_magnitude)->default_value(defaults.min_magnitude),
      "the |ratio - 1| a change must reach, in [0, 10)");
  const auto values = ParseArguments(args, options, {}, {}, "history");
  if (!values) return std::nullopt;
  if (f.suite.empty()) throw UsageError("history: give --suite NAME (seqbench show lists runs)");
  request.suite = f.suite;
  request.metric = FindHistoryMetric(f.metric);
  if (request.metric == nullptr)
    throw UsageError("history: unknown --metric '" + f.metric + "'; give " + MetricNames());
  if (f.format != "md" && f.format != "csv" && f.format != "json")
    throw UsageError("history: unknown --format '" + f.format + "'; give md, csv or json");
  if (!(f.max_p > 0 && f.max_p < 1))
    throw UsageError("history: --max-p must be in (0, 1), e.g. 0.01");
  if (!(f.min_magnitude >= 0 && f.min_magnitude < 10))
    throw UsageError("history: --min-magnitude must be in [0, 10), e.g. 0.02");
  request.change_points.max_p = f.max_p;
  request.change_points.min_magnitude = f.min_magnitude;
  AskGit(f.since, request);
  return f;
}

}  // namespace

int RunHistory(const std::vector<std::string>& args) {
  HistoryRequest request;
  const std::optional<HistoryFlags> f = ParseHistoryFlags(args, request);
  if (!f) return 0;
  const std::vector<std::unique_ptr<Store>> stores = OpenExistingStores(f->db_paths, "history");
  TerminalProgress progress("history: reading runs");
  request.on_progress = [&progress](size_t done, size_t total) { progress.Update(done, total); };
  const std::vector<HistorySeries> series = BuildHistory(StorePointers(stores), request);
  progress.Finish();
  if (series.empty()) {
    throw UsageError("history: no complete benchmark run of suite '" + request.suite +
                     "' with a case that has " + request.metric->name +
                     " in the given databases (seqbench show lists runs)");
  }
  if (f->format == "csv") {
    std::cout << RenderHistoryCsv(series);
  } else if (f->format == "json") {
    std::cout << RenderHistoryJson(series, request);
  } else {
    std::cout << RenderHistoryMarkdown(series, request) << "\n";
  }
  return 0;
}

}  // namespace seqbench::cli
