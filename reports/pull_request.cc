#include "reports/pull_request.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>

#include "base/text.h"
#include "reports/escape/markdown.h"
#include "reports/format.h"
#include "reports/markdown.h"

namespace seqbench {
namespace {

// Room kept for the line that says the comment was cut, and for closing a <details>.
constexpr size_t kCutReserve = 400;

bool Improved(const CaseComparison& c, Gate gate) {
  const bool fewer =
      c.count_verdict == "fewer" || (c.count_verdict.empty() && c.verdict == "faster");
  const bool faster = c.verdict == "faster";
  const bool judged = gate == Gate::kTime     ? faster
                      : gate == Gate::kCounts ? fewer
                                              : fewer || faster;
  return judged || c.memory_verdict == "smaller";
}

// A case the comment's table shows: it regressed or improved, or its count is ambiguous.
bool Moved(const CaseComparison& c, Gate gate) {
  return IsRegression(c, gate) || Improved(c, gate) || c.count_verdict == "ambiguous";
}

std::string FirstLine(const PullRequestTally& tally, const PullRequestContext& context) {
  const std::string gate =
      "gate: " + GateName(context.gate) + ", threshold " +
      FormatSignificant(
          100 * (context.gate == Gate::kTime ? context.threshold : context.count_threshold), 3) +
      "%";
  if (tally.regressed > 0)
    return "**❌ seqbench: " + std::to_string(tally.regressed) + " case" +
           (tally.regressed == 1 ? "" : "s") + " regressed** (" + gate + ")\n";
  return "**✅ seqbench: no regression** (" + gate + ")\n";
}

std::string Overview(const PullRequestTally& tally, const PullRequestContext& context) {
  std::string text = "\nBase " + escape::MarkdownText(context.base_name) + ", new " +
                     escape::MarkdownText(context.new_name) + ", suite " +
                     escape::MarkdownText(context.suite) + ": " + std::to_string(tally.regressed) +
                     " regressed, " + std::to_string(tally.improved) + " improved, " +
                     (tally.ambiguous > 0 ? std::to_string(tally.ambiguous) + " ambiguous, " : "") +
                     std::to_string(tally.unchanged) + " unchanged";
  if (tally.only_new > 0) text += ", " + std::to_string(tally.only_new) + " only in the new run";
  if (tally.only_base > 0) text += ", " + std::to_string(tally.only_base) + " only in the base run";
  text += ".";
  if (context.gate == Gate::kCounts)
    text += " Instructions are counted under callgrind and decide; time is advice.";
  text += "\n";
  for (const std::string& note : context.notes) text += "\n> " + escape::MarkdownText(note) + "\n";
  return text;
}

// The largest n <= most whose render(n) fits in `room` bytes (a render grows with n), by
// bisection: a few renders, not one a row.
size_t MostThatFit(size_t most, size_t room, const std::function<std::string(size_t)>& render) {
  size_t low = 0, high = most;
  while (low < high) {
    const size_t middle = (low + high + 1) / 2;
    if (render(middle).size() <= room) {
      low = middle;
    } else {
      high = middle - 1;
    }
  }
  return low;
}

std::vector<std::string> MovedRow(const CaseComparison& c, Gate gate) {
  char count[48] = "—", range[48] = "—", time[48] = "—", memory[48] = "—";
  if (c.count_ratio) std::snprintf(count, sizeof(count), "%.4f×", *c.count_ratio);
  if (c.count_range)
    std::snprintf(range, sizeof(range), "%.4f–%.4f", c.count_range->low, c.count_range->high);
  if (c.ratio > 0) std::snprintf(time, sizeof(time), "%.3f× %s", c.ratio, c.verdict.c_str());
  if (c.memory_ratio)
    std::snprintf(memory, sizeof(memory), "%.3f× %s", *c.memory_ratio, c.memory_verdict.c_str());
  const std::string verdict = IsRegression(c, gate) ? "regressed"
                              : Improved(c, gate)   ? "improved"
                                                    : "ambiguous";
  return {c.case_key, count,  range,  c.count_verdict.empty() ? "—" : c.count_verdict,
          time,       memory, verdict};
}

// The moved cases' table with as many rows as `room` bytes hold; `shown` says how many.
std::string MovedTable(const std::vector<CaseComparison>& comparisons, Gate gate, size_t room,
                       size_t& shown, size_t& moved) {
  std::vector<std::vector<std::string>> rows;
  for (const CaseComparison& c : comparisons)
    if (Moved(c, gate)) rows.push_back(MovedRow(c, gate));
  moved = rows.size();
  const std::vector<std::string> headers = {
      "case", "instructions", "range", "count verdict", "time (advice)", "memory", "verdict"};
  const auto render = [&](size_t n) {
    MarkdownTable table(headers);
    for (size_t i = 0; i < n; ++i) table.AddRow(rows[i]);
    return table.Render();
  };
  shown = MostThatFit(rows.size(), room, render);
  return shown == 0 ? "" : render(shown);
}

// Every case's comparison in a collapsed block, as many cases as `room` holds.
std::string AllCases(const std::vector<CaseComparison>& comparisons, bool counted, size_t room,
                     size_t& shown) {
  const auto block = [&](size_t n) {
    const std::vector<CaseComparison> first(comparisons.begin(), comparisons.begin() + n);
    return "\n<details><summary>All " + std::to_string(comparisons.size()) +
           " cases</summary>\n\n" + RenderCompareTable(first, counted) + "\n</details>\n";
  };
  shown = MostThatFit(comparisons.size(), room, block);
  return shown == 0 ? "" : block(shown);
}

std::string CutLine(const std::string& what) {
  return "\n*Cut here to stay under GitHub's 65,536-character limit for a comment: " + what +
         "; `seqbench compare` without `--format pr` prints them all.*\n";
}

}  // namespace

PullRequestTally TallyForPullRequest(const std::vector<CaseComparison>& comparisons, Gate gate) {
  PullRequestTally tally;
  for (const CaseComparison& c : comparisons) {
    if (c.verdict == "only in new")
      ++tally.only_new;
    else if (c.verdict == "only in base")
      ++tally.only_base;
    else if (IsRegression(c, gate))
      ++tally.regressed;
    else if (Improved(c, gate))
      ++tally.improved;
    else if (c.count_verdict == "ambiguous")
      ++tally.ambiguous;
    else
      ++tally.unchanged;
  }
  return tally;
}

std::string RenderPullRequestComment(const PullRequestContext& context,
                                     const std::vector<CaseComparison>& comparisons, size_t limit) {
  const PullRequestTally tally = TallyForPullRequest(comparisons, context.gate);
  const std::string first = FirstLine(tally, context);
  std::string text = first + Overview(tally, context);
  if (text.size() + kCutReserve > limit) {  // a limit too small for the overview (its notes)
    const std::string cut = first + CutLine("the overview and every table");
    return cut.size() <= limit ? cut : first.substr(0, std::min(first.size(), limit));
  }
  const auto room = [&] {
    return text.size() + kCutReserve < limit ? limit - kCutReserve - text.size() : 0;
  };
  size_t shown = 0, moved = 0;
  const std::string table = MovedTable(comparisons, context.gate, room(), shown, moved);
  text += moved == 0 ? "\nNo case moved past the threshold.\n" : "\n### Moved cases\n\n" + table;
  if (shown < moved) return text + CutLine(std::to_string(moved - shown) + " more moved cases");
  bool heading = false;
  for (const CaseComparison& c : comparisons) {
    if (c.moved_functions.empty()) continue;
    const std::string functions = "\n" + RenderMovedFunctions({c});
    const std::string title = heading ? "" : "\n### Functions that moved\n";
    if (title.size() + functions.size() > room())
      return text + CutLine("the functions of more cases are not shown");
    text += title + functions;
    heading = true;
  }
  const std::string all = AllCases(comparisons, context.counted, room(), shown);
  text += all;
  if (shown < comparisons.size())
    return text + CutLine(std::to_string(comparisons.size() - shown) + " more cases");
  return text;
}

}  // namespace seqbench
