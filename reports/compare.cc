#include "reports/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "base/text.h"
#include "reports/escape/markdown.h"
#include "reports/format.h"
#include "reports/markdown.h"
#include "reports/report.h"
#include "results/machine.h"
#include "stats/statistics.h"

namespace seqbench {

std::optional<Gate> ParseGate(const std::string& name) {
  for (const Gate gate : {Gate::kTime, Gate::kCounts, Gate::kBoth}) {
    if (GateName(gate) == name) return gate;
  }
  return std::nullopt;
}

std::string GateName(Gate gate) {
  switch (gate) {
    case Gate::kTime:
      return "time";
    case Gate::kCounts:
      return "counts";
    case Gate::kBoth:
      return "both";
  }
  return "time";
}

std::vector<double> CountedSteps(const CaseRecord& record) {
  std::vector<double> steps;
  for (size_t k = 1;; ++k) {
    const auto value = record.MetricValue("instructions_step_" + std::to_string(k));
    if (!value) return steps;
    steps.push_back(*value);
  }
}

bool HasCounts(const std::vector<CaseRecord>& cases) {
  return std::any_of(cases.begin(), cases.end(),
                     [](const CaseRecord& c) { return !CountedSteps(c).empty(); });
}

namespace {

// The ratios of new to base instructions the counted steps allow. The steps of one
// process differ (allocator and cache state; 0.5% seen), but the same steps of an
// unchanged binary count the same in every process, so step k is paired with step k;
// with other step counts, every step of one side with every step of the other.
std::vector<double> StepRatios(const std::vector<double>& base_steps,
                               const std::vector<double>& new_steps) {
  std::vector<double> ratios;
  const bool positive =
      std::all_of(base_steps.begin(), base_steps.end(), [](double count) { return count > 0; });
  if (!positive) return ratios;
  if (base_steps.size() == new_steps.size()) {
    for (size_t k = 0; k < base_steps.size(); ++k) ratios.push_back(new_steps[k] / base_steps[k]);
    return ratios;
  }
  for (const double mine : new_steps) {
    for (const double theirs : base_steps) ratios.push_back(mine / theirs);
  }
  return ratios;
}

// How far the counted steps disagree, as a fraction of the base's median step: paired,
// the range of the differences step k minus step k (0 for an unchanged binary, and about
// 0 for work added to every step alike, whatever the steps' own differences); unpaired,
// the wider side's range of its own steps.
double Disagreement(const std::vector<double>& base_steps, const std::vector<double>& new_steps) {
  const double scale = stats::Median(base_steps);
  const auto range = [](const std::vector<double>& values) {
    const auto [low, high] = std::minmax_element(values.begin(), values.end());
    return *high - *low;
  };
  if (base_steps.size() != new_steps.size())
    return std::max(range(base_steps), range(new_steps)) / scale;
  std::vector<double> differences;
  for (size_t k = 0; k < base_steps.size(); ++k)
    differences.push_back(new_steps[k] - base_steps[k]);
  return range(differences) / scale;
}

// The smallest self cost a side stored: a function absent there cost less than this; 0
// when the side stored every function (fewer than kStoredFunctions), so absent is 0.
double SmallestStored(const std::vector<FunctionCost>& functions) {
  if (functions.size() < kStoredFunctions) return 0;
  double smallest = functions.front().instructions;
  for (const FunctionCost& f : functions) smallest = std::min(smallest, f.instructions);
  return smallest;
}

// The functions whose self instructions per step changed most from b to n, when both
// sides stored their costliest functions. A function stored on one side only counts as 0
// on the other when that side stored every function, or when it cost more there than
// everything the other side kept (it would have been kept, had it cost that much); one
// that may merely have fallen below the other side's cut is left out, not shown as a move
// it may not have made.
std::vector<FunctionMove> MovedFunctions(const CaseRecord& b, const CaseRecord& n,
                                         double case_change) {
  std::map<std::string, FunctionMove> moves;
  std::map<std::string, int> sides;  // 1: base only, 2: new only, 3: both
  for (const FunctionCost& f : b.functions) {
    moves[f.function].base = f.instructions;
    sides[f.function] |= 1;
  }
  for (const FunctionCost& f : n.functions) {
    moves[f.function].next = f.instructions;
    sides[f.function] |= 2;
  }
  const double base_cut = SmallestStored(b.functions), new_cut = SmallestStored(n.functions);
  std::vector<FunctionMove> moved;
  for (auto& [name, move] : moves) {
    if (move.next == move.base) continue;
    if (sides[name] == 1 && move.base <= new_cut) continue;  // maybe just below new's cut
    if (sides[name] == 2 && move.next <= base_cut) continue;
    move.function = name;
    move.share = case_change != 0 ? (move.next - move.base) / case_change : 0;
    moved.push_back(move);
  }
  std::sort(moved.begin(), moved.end(), [](const FunctionMove& x, const FunctionMove& y) {
    const double a = std::fabs(x.next - x.base), c = std::fabs(y.next - y.base);
    return a != c ? a > c : x.function < y.function;
  });
  if (moved.size() > kMovedFunctions) moved.resize(kMovedFunctions);
  return moved;
}

// The counted-work part of a comparison, when both sides were counted: judged on the whole
// range of the step ratios, as the time verdict is on its interval.
void CompareCounts(const CaseRecord& b, const CaseRecord& n, const CompareSettings& settings,
                   CaseComparison& comparison) {
  const std::vector<double> base_steps = CountedSteps(b), new_steps = CountedSteps(n);
  if (!base_steps.empty() && new_steps.empty()) {
    comparison.count_verdict = "not counted";  // was counted: the counts gate cannot pass it
    return;
  }
  if (base_steps.empty() || new_steps.empty()) return;
  const std::vector<double> ratios = StepRatios(base_steps, new_steps);
  if (ratios.empty()) return;
  const auto [low, high] = std::minmax_element(ratios.begin(), ratios.end());
  const double ratio = stats::Median(new_steps) / stats::Median(base_steps);
  comparison.count_ratio = ratio;
  comparison.count_range = stats::Interval{ratio, *low, *high};
  comparison.count_spread = Disagreement(base_steps, new_steps);
  const double limit = settings.count_threshold;
  comparison.count_nondeterministic = comparison.count_spread > limit / 10;
  comparison.count_verdict = *low > 1 + limit                          ? "more"
                             : *high < 1 - limit                       ? "fewer"
                             : *low >= 1 - limit && *high <= 1 + limit ? "same"
                                                                       : "ambiguous";
  if (comparison.count_verdict != "same" && !b.functions.empty() && !n.functions.empty())
    comparison.moved_functions =
        MovedFunctions(b, n, stats::Median(new_steps) - stats::Median(base_steps));
}

// The time verdict: the ratio of medians (new / base, the inverse of the one speedup) and
// where its interval lies against the threshold: the bootstrap's, or for an A/B pair the
// paired interval over its rounds.
void JudgeTime(const CaseRecord& b, const CaseRecord& n, const CompareSettings& settings,
               CaseComparison& comparison) {
  comparison.ratio = 1 / Speedup(n, b).value_or(0);
  if (b.samples_s.size() < settings.min_samples || n.samples_s.size() < settings.min_samples) {
    comparison.verdict = "ambiguous";
    comparison.note = "cannot judge: " + std::to_string(b.samples_s.size()) + " and " +
                      std::to_string(n.samples_s.size()) + " samples, at least " +
                      std::to_string(settings.min_samples) + " a side";
  } else if (settings.paired && b.samples_s.size() != n.samples_s.size()) {
    comparison.verdict = "ambiguous";
    comparison.note = "cannot pair: " + std::to_string(b.samples_s.size()) + " and " +
                      std::to_string(n.samples_s.size()) + " rounds";
  } else {
    const std::optional<stats::Interval> paired =
        settings.paired ? stats::PairedRatioInterval(b.samples_s, n.samples_s, settings.confidence)
                        : std::nullopt;
    if (settings.paired && !paired) {
      comparison.verdict = "ambiguous";
      comparison.note = "too few rounds for a paired interval (6 or more at 95%)";
      return;
    }
    const stats::Interval interval =
        paired ? *paired
               : stats::BootstrapRatioOfMedians(b.samples_s, n.samples_s, settings.confidence);
    if (paired) comparison.ratio = paired->estimate;
    comparison.interval = interval;
    const double up = 1 + settings.threshold, down = 1 - settings.threshold;
    if (interval.low > up) {
      comparison.verdict = "slower";
    } else if (interval.high < down) {
      comparison.verdict = "faster";
    } else if (interval.low >= down && interval.high <= up) {
      comparison.verdict = "same";
    } else {
      comparison.verdict = "ambiguous";
      char note[128];
      std::snprintf(note, sizeof(note), "%g%% interval %.3f–%.3f reaches past ±%g%%",
                    settings.confidence * 100, interval.low, interval.high,
                    settings.threshold * 100);
      comparison.note = note;
    }
  }
}

// Peak memory, against the same threshold.
void JudgeMemory(const CaseRecord& b, const CaseRecord& n, const CompareSettings& settings,
                 CaseComparison& comparison) {
  const auto base_peak = b.MetricValue("peak_bytes");
  const auto new_peak = n.MetricValue("peak_bytes");
  if (base_peak && new_peak && *base_peak > 0) {
    comparison.memory_ratio = *new_peak / *base_peak;
    comparison.memory_verdict = *comparison.memory_ratio > 1 + settings.threshold   ? "larger"
                                : *comparison.memory_ratio < 1 - settings.threshold ? "smaller"
                                                                                    : "same";
  }
}

}  // namespace

std::vector<CaseComparison> CompareCases(const std::vector<CaseRecord>& base,
                                         const std::vector<CaseRecord>& next,
                                         const CompareSettings& settings) {
  std::map<std::string, const CaseRecord*> base_by_key;
  for (const CaseRecord& c : base) base_by_key[c.key()] = &c;
  std::vector<CaseComparison> comparisons;
  std::map<std::string, bool> matched;
  for (const CaseRecord& n : next) {
    CaseComparison comparison;
    comparison.case_key = n.key();
    const auto found = base_by_key.find(n.key());
    if (found == base_by_key.end()) {
      comparison.verdict = "only in new";
      comparisons.push_back(comparison);
      continue;
    }
    matched[n.key()] = true;
    const CaseRecord& b = *found->second;
    CompareCounts(b, n, settings, comparison);
    if (b.samples_s.empty() || n.samples_s.empty()) {
      comparison.verdict = "ambiguous";
      comparison.note = "no timings (status " + b.status + " / " + n.status + ")";
      comparisons.push_back(comparison);
      continue;
    }
    comparison.base_median_s = stats::Median(b.samples_s);
    comparison.new_median_s = stats::Median(n.samples_s);
    // new time / base time: the inverse of Speedup(new, base), the one definition.
    JudgeTime(b, n, settings, comparison);
    JudgeMemory(b, n, settings, comparison);
    comparisons.push_back(comparison);
  }
  for (const CaseRecord& b : base) {
    if (!matched.count(b.key())) {
      CaseComparison comparison;
      comparison.case_key = b.key();
      comparison.verdict = "only in base";
      comparisons.push_back(comparison);
    }
  }
  return comparisons;
}

bool IsAbPair(const RunRecord& base, const RunRecord& next) {
  return base.Environment("ab_side") == "base" && next.Environment("ab_side") == "new" &&
         base.Environment("ab_pair") == next.uuid && next.Environment("ab_pair") == base.uuid;
}

bool IsRegression(const CaseComparison& comparison, Gate gate) {
  const bool slower = comparison.verdict == "slower";
  // Under the counts gate a case counted on neither side (CUDA) is judged on its time,
  // and one the new run failed to count where the base was counted fails.
  const bool more = comparison.count_verdict == "more" ||
                    comparison.count_verdict == "not counted" ||
                    (comparison.count_verdict.empty() && slower);
  const bool judged = gate == Gate::kTime ? slower : gate == Gate::kCounts ? more : slower || more;
  return judged || comparison.memory_verdict == "larger";
}

std::vector<std::string> CountFingerprintDifferences(const RunRecord& base, const RunRecord& next) {
  std::vector<std::string> differences;
  for (const char* key : {"count_tool", "count_pinning", "count_blas_core", "count_blas_config",
                          "count_aten_cpu_capability", "count_glibc_version", "torch_version",
                          "blas_library", "compiler", "build_type"}) {
    const std::string a = base.Environment(key), b = next.Environment(key);
    if (a != b)
      differences.push_back(std::string(key) + ": " + (a.empty() ? "none" : a) + " -> " +
                            (b.empty() ? "none" : b));
  }
  return differences;
}

std::vector<std::string> EnvironmentDifferences(const RunRecord& base, const RunRecord& next) {
  std::vector<std::string> differences;
  for (const std::string& key : MachineKeysFor(MachineKeyUse::kEnvironment)) {
    const std::string a = base.Environment(key), b = next.Environment(key);
    if (a != b) differences.push_back(key + ": " + a + " -> " + b);
  }
  return differences;
}

GeometricMean GeometricMeanOf(const std::vector<CaseComparison>& comparisons,
                              std::optional<double> (*of)(const CaseComparison&)) {
  double log_sum = 0;
  GeometricMean mean;
  for (const CaseComparison& c : comparisons) {
    const std::optional<double> value = of(c);
    if (value && *value > 0) {
      log_sum += std::log(*value);
      ++mean.count;
    }
  }
  if (mean.count > 0) mean.value = std::exp(log_sum / mean.count);
  return mean;
}

std::optional<double> TimeRatio(const CaseComparison& c) {
  return c.ratio > 0 ? std::optional<double>(c.ratio) : std::nullopt;
}

std::optional<double> CountRatio(const CaseComparison& c) { return c.count_ratio; }

std::string RenderCompareTable(const std::vector<CaseComparison>& comparisons, bool counted) {
  std::vector<std::string> columns = {"case",     "base median", "new median", "ratio",
                                      "interval", "verdict",     "memory"};
  if (counted) columns.insert(columns.end(), {"instructions", "count verdict"});
  columns.push_back("note");
  MarkdownTable table(columns);
  for (const CaseComparison& c : comparisons) {
    char ratio[32] = "—", interval[48] = "—", memory[48] = "—", count[80] = "—";
    if (c.ratio > 0) std::snprintf(ratio, sizeof(ratio), "%.3f", c.ratio);
    if (c.interval)
      std::snprintf(interval, sizeof(interval), "%.3f–%.3f", c.interval->low, c.interval->high);
    if (c.memory_ratio)
      std::snprintf(memory, sizeof(memory), "%.3f× %s", *c.memory_ratio, c.memory_verdict.c_str());
    if (c.count_ratio && c.count_range)
      std::snprintf(count, sizeof(count), "%.4f× (%.4f–%.4f)%s", *c.count_ratio, c.count_range->low,
                    c.count_range->high, c.count_nondeterministic ? " nondeterministic" : "");
    std::vector<std::string> row = {c.case_key,
                                    c.base_median_s > 0 ? FormatDuration(c.base_median_s) : "—",
                                    c.new_median_s > 0 ? FormatDuration(c.new_median_s) : "—",
                                    ratio,
                                    interval,
                                    c.verdict,
                                    memory};
    if (counted) row.insert(row.end(), {count, c.count_verdict.empty() ? "—" : c.count_verdict});
    row.push_back(c.note);
    table.AddRow(row);
  }
  return table.Render();
}

namespace {

// A function's name in a table: a template's full name runs to thousands of characters;
// the first kShownName bytes (cut at a character's start) and an ellipsis.
std::string ShownFunctionName(const std::string& name) {
  constexpr size_t kShownName = 160;
  if (name.size() <= kShownName) return name;
  size_t cut = kShownName;
  while (cut > 0 && (static_cast<unsigned char>(name[cut]) & 0xC0) == 0x80) --cut;
  return name.substr(0, cut) + "…";
}

}  // namespace

std::string RenderMovedFunctions(const std::vector<CaseComparison>& comparisons) {
  std::string text;
  for (const CaseComparison& c : comparisons) {
    if (c.moved_functions.empty()) continue;
    text += (text.empty() ? "" : "\n") + std::string("Functions moved in ") +
            escape::MarkdownText(c.case_key) + " (instructions " + c.count_verdict + ", " +
            FormatSignificant(c.count_ratio.value_or(0), 5) + "×), self instructions per step:\n\n";
    MarkdownTable table({"function", "base", "new", "change", "share of the case's change"});
    for (const FunctionMove& f : c.moved_functions) {
      const double change = f.next - f.base;
      table.AddRow({ShownFunctionName(f.function), FormatExactCount(f.base),
                    FormatExactCount(f.next), (change > 0 ? "+" : "") + FormatExactCount(change),
                    f.share != 0 ? FormatSignificant(f.share * 100, 3) + "%" : "—"});
    }
    text += table.Render();
  }
  return text;
}

}  // namespace seqbench
