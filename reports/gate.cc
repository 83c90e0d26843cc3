#include "reports/gate.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>

#include "base/text.h"
#include "reports/format.h"
#include "reports/markdown.h"

namespace seqbench {
namespace {

void Count(GateRow& row, const std::vector<CaseComparison>& comparisons, Gate gate) {
  ++row.compares;
  bool regression = false;
  for (const CaseComparison& c : comparisons) {
    regression = regression || IsRegression(c, gate);
    ++row.cases;
    row.slower += c.verdict == "slower";
    row.faster += c.verdict == "faster";
    row.same += c.verdict == "same";
    row.ambiguous += c.verdict == "ambiguous";
    row.more += c.count_verdict == "more";
    row.fewer += c.count_verdict == "fewer";
    row.same_count += c.count_verdict == "same";
    row.ambiguous_count += c.count_verdict == "ambiguous";
    row.nondeterministic += c.count_nondeterministic;
    row.uncounted += c.count_verdict.empty() || c.count_verdict == "not counted";
  }
  row.flagged += regression;
}

// Seconds since the epoch of a stored "YYYY-MM-DDTHH:MM:SSZ"; nullopt for anything else.
std::optional<double> UtcSeconds(const std::string& iso) {
  std::tm parts{};
  const char* end = strptime(iso.c_str(), "%Y-%m-%dT%H:%M:%SZ", &parts);
  if (end == nullptr || *end != '\0') return std::nullopt;
  return static_cast<double>(timegm(&parts));
}

// From `started` to `finished`; nullopt when either is not a stored time.
std::optional<double> WallSeconds(const std::string& started, const std::string& finished) {
  const auto begin = UtcSeconds(started), end = UtcSeconds(finished);
  if (!begin || !end) return std::nullopt;
  return *end - *begin;
}

// The label's factor: "x1.3" -> 1.3; "head+2" -> the extra head passes; nullopt else.
struct Planted {
  std::string what;
  double order = 0;
};
std::optional<Planted> ParsePlanted(const std::string& suffix) {
  const bool head = suffix.rfind("head+", 0) == 0;
  if (!head && suffix.rfind("x", 0) != 0) return std::nullopt;
  const std::string number = suffix.substr(head ? 5 : 1);
  char* end = nullptr;
  const double value = std::strtod(number.c_str(), &end);
  if (number.empty() || *end != '\0' || !std::isfinite(value) || value < 1) return std::nullopt;
  if (head)
    return Planted{"the shared head computed " + FormatSignificant(value, 3) + " extra time(s)",
                   1000 + value};
  return Planted{FormatSignificant(value, 3) + "x slower (whole extra steps)", value};
}

}  // namespace

std::vector<GateRow> MeasureGate(const Store& store, const std::string& suite,
                                 const std::string& prefix, const CompareSettings& settings,
                                 Gate gate) {
  const std::string base_label = prefix + " base";
  const std::string slowed_prefix = prefix + " ";
  struct Labelled {
    int64_t run_id;
    std::string commit;
  };
  std::vector<Labelled> base;
  std::map<double, std::pair<std::string, std::vector<Labelled>>> slowed;  // by order
  for (const RunRecord& listed : store.Runs()) {
    if (listed.status != "complete" || listed.suite_name != suite) continue;
    if (listed.label != base_label && listed.label.rfind(slowed_prefix, 0) != 0) continue;
    const RunRecord run = *store.FindRun(listed.run_id);  // with its environment
    const Labelled labelled{run.run_id, run.Environment("git_sha")};
    if (run.label == base_label) {
      base.push_back(labelled);
      continue;
    }
    if (const auto planted = ParsePlanted(run.label.substr(slowed_prefix.size()))) {
      slowed[planted->order].first = planted->what;
      slowed[planted->order].second.push_back(labelled);
    }
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
          CompareCases(store.Cases(base[i].run_id), store.Cases(base[i + 1].run_id), settings),
          gate);
  }
  rows.push_back(unchanged);
  // Each slowed run against the base run just before it of the same commit (its round,
  // as ci/measure_gate takes them), each base run at most once per factor.
  for (const auto& [order, planted] : slowed) {
    const auto& [what, runs] = planted;
    GateRow row;
    row.what = what + ": each against its round's base";
    std::set<int64_t> used;
    for (const Labelled& run : runs) {
      const Labelled* partner = nullptr;
      for (const Labelled& candidate : base) {
        if (candidate.run_id < run.run_id && candidate.commit == run.commit) partner = &candidate;
      }
      if (partner == nullptr || !used.insert(partner->run_id).second) continue;
      Count(row, CompareCases(store.Cases(partner->run_id), store.Cases(run.run_id), settings),
            gate);
    }
    rows.push_back(row);
  }
  return rows;
}

std::vector<GateRow> MeasureAbGate(const Store& store, const std::string& suite,
                                   const std::string& prefix, CompareSettings settings) {
  settings.paired = true;
  std::map<double, GateRow> by_factor;
  for (const RunRecord& listed : store.Runs()) {
    if (listed.status != "complete" || listed.suite_name != suite) continue;
    if (listed.label != prefix + " base") continue;
    const RunRecord base = *store.FindRun(listed.run_id);
    for (const RunRecord& other : store.Runs()) {
      if (other.label != prefix + " new" || other.suite_name != suite) continue;
      const RunRecord next = *store.FindRun(other.run_id);
      if (!IsAbPair(base, next)) continue;
      // "1.3x on cases matching .*": the new side's planted slowdown.
      const double factor = std::atof(next.Environment("test_slowdown").c_str());
      GateRow& row = by_factor[factor > 1 ? factor : 1];
      Count(row, CompareCases(store.Cases(base.run_id), store.Cases(next.run_id), settings),
            Gate::kTime);
      // From ab's own start where the pair records it (ab_started_at), else from the base
      // side's run, which began after the workers started and measured the machine limits.
      const std::string& finished = std::max(base.finished_at, next.finished_at);
      const std::string ab_started = base.Environment("ab_started_at");
      const auto wall = WallSeconds(ab_started.empty() ? base.started_at : ab_started, finished);
      if (wall) row.pair_wall_s.push_back(*wall);
    }
  }
  if (by_factor.empty())
    throw std::invalid_argument("gate: no A/B pair of suite '" + suite + "' labelled '" + prefix +
                                " base' in " + store.path() + " (seqbench ab stores them)");
  std::vector<GateRow> rows;
  for (auto& [factor, row] : by_factor) {
    row.what = factor == 1
                   ? "no change: base against the same binary (A/A)"
                   : "new side " + FormatSignificant(factor, 3) + "x slower (whole extra steps)";
    rows.push_back(row);
  }
  return rows;
}

std::vector<double> RunWallTimes(const Store& store, const std::string& suite,
                                 const std::string& label) {
  std::vector<double> walls;
  for (const RunRecord& run : store.Runs()) {
    if (run.status != "complete" || run.suite_name != suite || run.label != label) continue;
    if (const auto wall = WallSeconds(run.started_at, run.finished_at)) walls.push_back(*wall);
  }
  return walls;
}

std::string RenderGateTable(const std::vector<GateRow>& rows, const CompareSettings& settings,
                            Gate gate) {
  const bool time = gate != Gate::kCounts, counts = gate != Gate::kTime;
  std::vector<std::string> columns = {"compared", "compares", "flagged (exit 1)", "cases"};
  if (time) columns.insert(columns.end(), {"slower", "faster", "same", "ambiguous"});
  if (counts)
    columns.insert(columns.end(), {"more", "fewer", "same count", "ambiguous count", "uncounted",
                                   "nondeterministic"});
  const bool walls = std::any_of(rows.begin(), rows.end(),
                                 [](const GateRow& row) { return !row.pair_wall_s.empty(); });
  if (walls) columns.push_back("median wall time of a pair");
  MarkdownTable table(columns);
  for (const GateRow& row : rows) {
    std::vector<std::string> cells = {
        row.what, std::to_string(row.compares),
        std::to_string(row.flagged) + " of " + std::to_string(row.compares),
        std::to_string(row.cases)};
    if (time) {
      for (const int n : {row.slower, row.faster, row.same, row.ambiguous})
        cells.push_back(std::to_string(n));
    }
    if (counts) {
      for (const int n : {row.more, row.fewer, row.same_count, row.ambiguous_count, row.uncounted,
                          row.nondeterministic})
        cells.push_back(std::to_string(n));
    }
    if (walls)
      cells.push_back(row.pair_wall_s.empty()
                          ? "-"
                          : FormatSignificant(stats::Median(row.pair_wall_s), 3) + " s");
    table.AddRow(cells);
  }
  std::string settings_text =
      "`compare --gate " + GateName(gate) + "`" +
      (time ? " at `--threshold " + FormatSignificant(settings.threshold * 100, 3) + "%`, " +
                  FormatSignificant(settings.confidence * 100, 3) +
                  (settings.paired ? "% intervals of the median of the per-round ratios (A/B pairs)"
                                   : "% bootstrap intervals of the ratio of medians")
            : "") +
      (time && counts ? ";" : "") +
      (counts ? " at `--count-threshold " + FormatSignificant(settings.count_threshold * 100, 3) +
                    "%` on instructions per step"
              : "");
  return settings_text + ":\n\n" + table.Render();
}

namespace {

const char* const kExpectations[] = {"same", "more", "fewer", "mixed", "moved"};

// The newest complete run of `suite` whose git_sha starts with `commit`, with its
// environment.
RunRecord RunAtCommit(const Store& store, const std::string& suite, const std::string& commit) {
  std::optional<RunRecord> found;
  for (const RunRecord& listed : store.Runs()) {
    if (listed.status != "complete" || listed.suite_name != suite) continue;
    RunRecord run = *store.FindRun(listed.run_id);
    if (run.Environment("git_sha").rfind(commit, 0) == 0) found = std::move(run);
  }
  if (!found)
    throw std::invalid_argument("gate: no complete run of suite '" + suite + "' at commit " +
                                commit + " in " + store.path() +
                                " (ci/measure_gate_pairs counts one)");
  return *found;
}

// What the case verdicts of one compare add up to (CommitPairRow::observed).
std::string ObservedMove(const GateRow& verdicts) {
  if (verdicts.more > 0 && verdicts.fewer > 0) return "mixed";
  if (verdicts.more > 0) return "more";
  if (verdicts.fewer > 0) return "fewer";
  if (verdicts.ambiguous_count > 0) return "ambiguous";
  return "same";
}

bool Agrees(const std::string& expected, const std::string& observed) {
  if (expected == "moved") return observed == "more" || observed == "fewer" || observed == "mixed";
  return expected == observed;
}

CommitPairRow MeasureCommitPair(const Store& store, const std::string& suite,
                                const CommitPair& pair, const CompareSettings& settings) {
  CommitPairRow row;
  row.pair = pair;
  const RunRecord base = RunAtCommit(store, suite, pair.base);
  const RunRecord head = RunAtCommit(store, suite, pair.head);
  const auto base_wall = WallSeconds(base.started_at, base.finished_at);
  const auto head_wall = WallSeconds(head.started_at, head.finished_at);
  if (base_wall && head_wall) row.count_wall_s = *base_wall + *head_wall;
  if (!CountFingerprintDifferences(base, head).empty()) {
    row.observed = "not comparable";
    return row;
  }
  const std::vector<CaseComparison> comparisons =
      CompareCases(store.Cases(base.run_id), store.Cases(head.run_id), settings);
  Count(row.verdicts, comparisons, Gate::kCounts);
  row.counts = GeometricMeanOf(comparisons, CountRatio);
  row.observed = ObservedMove(row.verdicts);
  row.agrees = Agrees(pair.expected, row.observed);
  return row;
}

}  // namespace

std::vector<CommitPair> ParseCommitPairs(const std::string& text) {
  std::vector<CommitPair> pairs;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string entry = text.substr(start, comma - start);
    start = comma + 1;
    const size_t dots = entry.find(".."), colon = entry.find(':');
    const bool shaped = dots != std::string::npos && colon != std::string::npos && dots > 0 &&
                        colon > dots + 2 && colon + 1 < entry.size();
    if (!shaped) throw std::invalid_argument("pairs: '" + entry + "' is not BASE..HEAD:EXPECTED");
    CommitPair pair{entry.substr(0, dots), entry.substr(dots + 2, colon - dots - 2),
                    entry.substr(colon + 1)};
    if (std::find(std::begin(kExpectations), std::end(kExpectations), pair.expected) ==
        std::end(kExpectations))
      throw std::invalid_argument("pairs: '" + entry +
                                  "' expects none of same, more, fewer, mixed or moved");
    pairs.push_back(pair);
  }
  return pairs;
}

std::vector<CommitPairRow> MeasureCommitPairs(const Store& store, const std::string& suite,
                                              const std::vector<CommitPair>& pairs,
                                              const CompareSettings& settings) {
  std::vector<CommitPairRow> rows;
  for (const CommitPair& pair : pairs)
    rows.push_back(MeasureCommitPair(store, suite, pair, settings));
  return rows;
}

std::string RenderCommitPairTable(const std::vector<CommitPairRow>& rows,
                                  const CompareSettings& settings) {
  MarkdownTable table({"base", "head", "expected (from the diff)", "observed", "agrees",
                       "flagged (exit 1)", "more", "fewer", "same count", "ambiguous count",
                       "instructions (geometric mean)", "counting wall time (both runs)"});
  int agreeing = 0;
  for (const CommitPairRow& row : rows) {
    agreeing += row.agrees;
    const GateRow& v = row.verdicts;
    table.AddRow({row.pair.base, row.pair.head, row.pair.expected, row.observed,
                  row.agrees ? "yes" : "no", v.flagged > 0 ? "yes" : "no", std::to_string(v.more),
                  std::to_string(v.fewer), std::to_string(v.same_count),
                  std::to_string(v.ambiguous_count),
                  row.counts.value ? FormatSignificant(*row.counts.value, 4) + "x over " +
                                         std::to_string(row.counts.count) + " cases"
                                   : "-",
                  row.count_wall_s ? FormatSignificant(*row.count_wall_s, 3) + " s" : "-"});
  }
  return "`compare --gate counts` at `--count-threshold " +
         FormatSignificant(settings.count_threshold * 100, 3) +
         "%` on instructions per step, each head against its base; " + std::to_string(agreeing) +
         " of " + std::to_string(rows.size()) + " verdicts as labelled:\n\n" + table.Render();
}

}  // namespace seqbench
