#include "stats/change_points.h"

#include <algorithm>
#include <cmath>

namespace seqbench::stats {
namespace {

std::vector<double> Slice(const std::vector<double>& values, size_t begin, size_t end) {
  return std::vector<double>(values.begin() + begin, values.begin() + end);
}

// The split of values[begin, end) with the smallest Mann-Whitney p-value, at least `side`
// points from either end, with that p corrected for the splits tried; split 0 where the
// segment is too short.
struct Split {
  size_t at = 0;
  double corrected_p = 1;
};
Split BestSplit(const std::vector<double>& values, size_t begin, size_t end, size_t side) {
  Split best;
  if (end - begin < 2 * side) return best;
  double best_p = 2;
  for (size_t split = begin + side; split + side <= end; ++split) {
    const double p = MannWhitneyU(Slice(values, begin, split), Slice(values, split, end)).p_value;
    if (p < best_p) best_p = p, best.at = split;
  }
  const double tried = static_cast<double>(end - begin - 2 * side + 1);
  best.corrected_p = std::min(1.0, best_p * tried);
  return best;
}

// The change at `split` of values[begin, end), if it passes `options`.
std::optional<ChangePoint> Judge(const std::vector<double>& values, size_t begin, size_t end,
                                 const Split& split, const ChangePointOptions& options) {
  if (split.at == 0 || split.corrected_p > options.max_p) return std::nullopt;
  const std::vector<double> before = Slice(values, begin, split.at);
  const std::vector<double> after = Slice(values, split.at, end);
  const double median_before = Median(before), median_after = Median(after);
  if (!(median_before > 0) || !std::isfinite(median_after)) return std::nullopt;
  if (std::fabs(median_after / median_before - 1) < options.min_magnitude) return std::nullopt;
  ChangePoint change;
  change.index = split.at;
  change.ratio = BootstrapRatioOfMedians(before, after);
  change.p_value = split.corrected_p;
  return change;
}

void Segment(const std::vector<double>& values, size_t begin, size_t end,
             const ChangePointOptions& options, std::vector<ChangePoint>& found) {
  const size_t side = std::max<size_t>(options.min_side, 1);
  const std::optional<ChangePoint> change =
      Judge(values, begin, end, BestSplit(values, begin, end, side), options);
  if (!change) return;
  found.push_back(*change);
  Segment(values, begin, change->index, options, found);
  Segment(values, change->index, end, options, found);
}

// Each change placed again between its neighbours, and judged against them. Against a
// segment that mixes two later steps, segmentation can place the first of a staircase's
// steps early (its p is smallest where the mixed side is largest); between its final
// neighbours, the best split is the step's own. A change that no longer passes is dropped.
void Refine(const std::vector<double>& values, const ChangePointOptions& options,
            std::vector<ChangePoint>& found) {
  const size_t side = std::max<size_t>(options.min_side, 1);
  for (int pass = 0; pass < 3; ++pass) {
    std::vector<ChangePoint> refined;
    for (size_t i = 0; i < found.size(); ++i) {
      const size_t begin = refined.empty() ? 0 : refined.back().index;
      const size_t end = i + 1 < found.size() ? found[i + 1].index : values.size();
      if (auto change = Judge(values, begin, end, BestSplit(values, begin, end, side), options))
        refined.push_back(*change);
    }
    const bool same =
        refined.size() == found.size() &&
        std::equal(refined.begin(), refined.end(), found.begin(),
                   [](const ChangePoint& a, const ChangePoint& b) { return a.index == b.index; });
    found = std::move(refined);
    if (same) return;
  }
}

}  // namespace

std::vector<ChangePoint> FindChangePoints(const std::vector<double>& values,
                                          const ChangePointOptions& options) {
  std::vector<ChangePoint> found;
  Segment(values, 0, values.size(), options, found);
  std::sort(found.begin(), found.end(),
            [](const ChangePoint& a, const ChangePoint& b) { return a.index < b.index; });
  Refine(values, options, found);
  return found;
}

}  // namespace seqbench::stats
