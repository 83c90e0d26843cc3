#include "reports/check.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "base/text.h"
#include "reports/fit.h"
#include "reports/format.h"
#include "reports/report.h"
#include "reports/run_facts.h"
#include "stats/statistics.h"

namespace seqbench {
namespace {

bool Matches(const CaseRecord& c, const std::map<std::string, std::string>& where) {
  return MatchesFilters(c.workload(), where);
}

// The bootstrap interval of Speedup(candidate, other). On one workload the ratio of median
// throughputs is Median(other's step times) / Median(candidate's), scaled by the two cases'
// tokens per step. Empty below stats::kMinBootstrapSamples a side.
std::optional<stats::Interval> SpeedupInterval(const CaseRecord& candidate,
                                               const CaseRecord& other) {
  if (candidate.samples_s.size() < stats::kMinBootstrapSamples ||
      other.samples_s.size() < stats::kMinBootstrapSamples) {
    return std::nullopt;
  }
  if (candidate.tokens_per_step <= 0 || other.tokens_per_step <= 0) return std::nullopt;
  stats::Interval interval =
      stats::BootstrapRatioOfMedians(candidate.samples_s, other.samples_s, kCheckConfidence);
  const double tokens = double(candidate.tokens_per_step) / double(other.tokens_per_step);
  interval.estimate *= tokens;
  interval.low *= tokens;
  interval.high *= tokens;
  return interval;
}

bool WithinBounds(const Expectation& e, double reach_down, double reach_up) {
  return (!e.at_least || reach_up >= *e.at_least) && (!e.at_most || reach_down <= *e.at_most);
}

std::string IntervalText(const stats::Interval& interval) {
  return FormatSignificant(kCheckConfidence * 100) + "% interval " +
         FormatSignificant(interval.low) + "–" + FormatSignificant(interval.high);
}

// Why a ratio has no value: an uncounted run says how to count it, rather than only that
// nothing was measured.
std::string NoMeasurement(const std::string& metric) {
  if (metric == "instructions_per_step") return "not counted (run --count instructions)";
  return "no measurement";
}

// time_per_doubling: every doubling of e.over among the matching cases, each judged like a
// speedup on its bootstrap interval. A matching case that did not end ok leaves a length
// unmeasured, and so falls short.
ExpectationOutcome EvaluateDoublings(const Expectation& e, const std::vector<CaseRecord>& cases,
                                     const std::string& where) {
  ExpectationOutcome outcome;
  outcome.expectation = "time per doubling of " + e.over + " of " +
                        (e.variant.empty() ? "every variant" : e.variant) + " " + DescribeBound(e) +
                        where;
  std::vector<CaseRecord> matching;
  std::vector<std::string> unmeasured;
  for (const CaseRecord& c : cases) {
    if ((!e.variant.empty() && c.name() != e.variant) || !Matches(c, e.where)) continue;
    if (c.status == kStatusSkipped) continue;
    if (c.status != kStatusOk) unmeasured.push_back(c.name() + " " + c.workload().Label());
    matching.push_back(c);
  }
  const auto describe = [&](const Doubling& d) {
    return FormatSignificant(d.ratio.estimate) + "×" +
           (d.has_interval ? " (" + IntervalText(d.ratio) + ")" : "") + " for " + d.longer->name() +
           " " + e.over + " " + std::to_string(d.from) + "→" + std::to_string(2 * d.from) + " at " +
           d.longer->workload().Label(e.over);
  };
  int64_t total = 0;
  std::vector<std::string> short_of_bound;
  std::optional<Doubling> extreme;  // the one nearest to falling short
  for (const Series& series : SeriesAlong(matching, e.over)) {
    for (const Doubling& d : Doublings(series, e.over, kCheckConfidence)) {
      ++total;
      if (!WithinBounds(e, d.ratio.low, d.ratio.high)) short_of_bound.push_back(describe(d));
      const bool further = !extreme || (e.at_most ? d.ratio.estimate > extreme->ratio.estimate
                                                  : d.ratio.estimate < extreme->ratio.estimate);
      if (further) extreme = d;
    }
  }
  outcome.measured = total == 0
                         ? "no two cases of one variant and workload whose " + e.over + " doubles"
                         : std::to_string(total) + " doubling(s); " +
                               (e.at_most ? "largest " : "smallest ") + describe(*extreme);
  for (const std::string& miss : short_of_bound)
    outcome.measured += "; short of the bound: " + miss;
  for (const std::string& name : unmeasured) outcome.measured += "; not measured: " + name;
  outcome.held = total > 0 && short_of_bound.empty() && unmeasured.empty();
  return outcome;
}

}  // namespace

std::string DescribeBound(const Expectation& e) {
  std::string text;
  if (e.at_least) text += ">= " + FormatSignificant(*e.at_least);
  if (e.at_most)
    text += std::string(text.empty() ? "" : " and ") + "<= " + FormatSignificant(*e.at_most);
  return text;
}

namespace {

// all_correct: every matching case ok (skipped ones aside), and at least one checked.
ExpectationOutcome EvaluateAllCorrect(const Expectation& e, const std::vector<CaseRecord>& cases,
                                      const std::string& where) {
  ExpectationOutcome outcome;
  outcome.expectation = "every case correct" + where;
  int64_t bad = 0, skipped = 0, unchecked = 0, total = 0;
  std::string first_bad;
  for (const CaseRecord& c : cases) {
    if (!Matches(c, e.where)) continue;
    ++total;
    if (c.status == "skipped") ++skipped;
    // Timed under --check sample/none without a comparison: neither correct nor not.
    if (c.status == "ok" && c.unchecked()) ++unchecked;
    if (c.status == "ok" || c.status == "skipped") continue;
    ++bad;
    if (first_bad.empty())
      first_bad = c.name() + " " + c.workload().Label() + " (" + c.status + ")";
  }
  outcome.held = bad == 0 && total > skipped + unchecked;
  outcome.measured = std::to_string(total - bad - skipped - unchecked) + " ok, " +
                     std::to_string(bad) + " not" +
                     (skipped ? ", " + std::to_string(skipped) + " skipped" : "") +
                     (unchecked ? ", " + std::to_string(unchecked) + " not checked" : "") +
                     (first_bad.empty() ? "" : "; first: " + first_bad);
  return outcome;
}

// The kinds that are one metric of `variant` over the same metric of `over`.
struct RatioKind {
  const char *what, *metric, *quantity;
};
constexpr RatioKind kRatioKinds[] = {
    {"memory_ratio", "activation_bytes", " activation memory / "},
    {"recompute_ratio", "recompute_factor", " recomputation / "},
    {"instructions_ratio", "instructions_per_step", " instructions per step / "},
};

// One pair's measurement ("1.83× (1.7–1.9) at B=4 ...") and whether it holds the bound.
std::string MeasurePair(const Expectation& e, const RatioKind& kind, const CaseRecord& candidate,
                        const CaseRecord& other, bool& holds) {
  const bool speedup = e.what == "speedup";
  const std::string metric = kind.metric;
  std::optional<double> ratio;
  std::optional<stats::Interval> interval;
  if (speedup) {
    ratio = Speedup(candidate, other);
    if (ratio) interval = SpeedupInterval(candidate, other);
  } else {
    const auto mine = candidate.MetricValue(metric);
    const auto theirs = other.MetricValue(metric);
    if (mine && theirs && *theirs > 0) ratio = *mine / *theirs;
    // Neither recomputes: equal, where 0/0 would say nothing.
    if (mine && theirs && *mine == 0 && *theirs == 0) ratio = 1;
  }
  const bool usable = ratio && candidate.status == "ok" && other.status == "ok";
  // A timing bound falls short only when the whole interval misses it: a point estimate
  // just past the bound, within the noise, is not a failure (nor proof of success).
  const double reach_up = interval ? interval->high : ratio.value_or(0);
  const double reach_down = interval ? interval->low : ratio.value_or(0);
  holds = usable && WithinBounds(e, reach_down, reach_up);
  const bool point_holds = usable && WithinBounds(e, *ratio, *ratio);
  std::string spread;
  if (interval) {
    spread = " (" + IntervalText(*interval) +
             (holds && !point_holds ? ", within noise of the bound" : "") + ")";
  }
  return (ratio ? FormatSignificant(*ratio) + "×" + spread : NoMeasurement(metric)) +
         (usable ? "" : " (status " + candidate.status + "/" + other.status + ")") + " at " +
         candidate.workload().Label();
}

// Judges every case of `variant` that the expectation's filter matches: `judge(c, holds)`
// returns the case's measurement, or nothing when the case has no part in it (a ratio's
// case without a partner). Held when at least one case took part and every one held;
// `none` is the measurement when none took part.
template <typename Judge>
void JudgeEachCase(const Expectation& e, const std::vector<CaseRecord>& cases,
                   const std::string& none, const Judge& judge, ExpectationOutcome& outcome) {
  bool any = false, all_hold = true;
  for (const CaseRecord& c : cases) {
    if (c.name() != e.variant || !Matches(c, e.where)) continue;
    bool holds = false;
    const std::optional<std::string> measured = judge(c, holds);
    if (!measured) continue;
    any = true;
    all_hold = all_hold && holds;
    outcome.measured += std::string(outcome.measured.empty() ? "" : "; ") + *measured;
  }
  if (!any) outcome.measured = none;
  outcome.held = any && all_hold;
}

// speedup and the ratio kinds: every matching pair of `variant` and `over` cases on one
// workload holds the bound.
ExpectationOutcome EvaluateRatio(const Expectation& e, const std::vector<CaseRecord>& cases,
                                 const std::string& where) {
  const RatioKind* kind = &kRatioKinds[0];
  for (const RatioKind& candidate : kRatioKinds) {
    if (e.what == candidate.what) kind = &candidate;
  }
  ExpectationOutcome outcome;
  outcome.expectation = (e.what == "speedup" ? e.variant + " speedup over " + e.over
                                             : e.variant + kind->quantity + e.over) +
                        " " + DescribeBound(e) + where;
  JudgeEachCase(
      e, cases, "no pair of " + e.variant + " and " + e.over + " cases on one workload",
      [&](const CaseRecord& candidate, bool& holds) -> std::optional<std::string> {
        const auto other = std::find_if(cases.begin(), cases.end(), [&](const CaseRecord& c) {
          return c.name() == e.over && c.workload() == candidate.workload();
        });
        if (other == cases.end()) return std::nullopt;
        return MeasurePair(e, *kind, candidate, *other, holds);
      },
      outcome);
  return outcome;
}

// gemm_floor: every case of `variant` within the bound, on the run's own GEMM rate.
ExpectationOutcome EvaluateGemmFloor(const Expectation& e, const std::vector<CaseRecord>& cases,
                                     const RunRecord* run, const std::string& where) {
  ExpectationOutcome outcome;
  outcome.expectation = e.variant + " × GEMM floor " + DescribeBound(e) + where;
  JudgeEachCase(
      e, cases, "no case of " + e.variant,
      [&](const CaseRecord& c, bool& holds) -> std::optional<std::string> {
        const std::optional<RooflinePoint> point =
            run != nullptr ? Roofline(*run, c) : std::optional<RooflinePoint>();
        const std::optional<double> floor = point ? point->times_gemm_floor : std::nullopt;
        holds = floor && c.status == kStatusOk && WithinBounds(e, *floor, *floor);
        return (floor ? FormatSignificant(*floor) + "×"
                      : "no GEMM floor (no GEMM rate in the run, or no "
                        "step_gemm_flops in the case)") +
               (c.status == kStatusOk ? "" : " (status " + c.status + ")") + " at " +
               c.workload().Label();
      },
      outcome);
  return outcome;
}

}  // namespace

std::vector<ExpectationOutcome> EvaluateExpectations(const std::vector<Expectation>& expectations,
                                                     const std::vector<CaseRecord>& cases,
                                                     const RunRecord* run) {
  std::vector<ExpectationOutcome> outcomes;
  for (const Expectation& e : expectations) {
    std::string where;
    for (const auto& [key, value] : e.where)
      where += (where.empty() ? " where " : ", ") + key + "=" + value;
    if (e.what == "all_correct") {
      outcomes.push_back(EvaluateAllCorrect(e, cases, where));
    } else if (e.what == "time_per_doubling") {
      outcomes.push_back(EvaluateDoublings(e, cases, where));
    } else if (e.what == "gemm_floor") {
      outcomes.push_back(EvaluateGemmFloor(e, cases, run, where));
    } else {
      outcomes.push_back(EvaluateRatio(e, cases, where));
    }
  }
  return outcomes;
}

}  // namespace seqbench
