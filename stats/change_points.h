// Change points in a series of measurements taken across commits: where its level
// moved, by how much, and how sure that is. Binary segmentation, as E-divisive (Matteson
// & James 2014) and Apache Otava (ex Hunter) do: over a segment, every split leaving at
// least `min_side` points a side is tested, the split with the strongest evidence is kept
// if it passes, and both halves are searched again.
//
// The test at a split is Mann-Whitney's U (stats::MannWhitneyU, two-sided): rank-based,
// so a lognormal timing's long tail does not fake a change, and deterministic (Otava chose
// a closed-form test over E-divisive's permutations for that reason). The p-value of the
// best split is Bonferroni-corrected by the number of splits tried, since the best of many
// tries is smaller than any one. A change also needs its ratio of medians (after /
// before) to move by at least `min_magnitude`. Last, as Otava re-tests each change against
// its neighbours, every change is placed again at the best split between the changes
// beside it (segmentation places a staircase's later step early against a mixed segment),
// and dropped if it no longer passes.
//
// Thread-safety: pure functions; safe from any thread.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "stats/statistics.h"

namespace seqbench::stats {

struct ChangePointOptions {
  double max_p = 0.05;          // the corrected p-value a change must reach
  double min_magnitude = 0.02;  // |after / before - 1| a change must reach
  size_t min_side = 4;          // points on each side of a split
};

struct ChangePoint {
  size_t index = 0;    // the first point after the change
  Interval ratio;      // Median(after) / Median(before), bootstrap 95% interval
  double p_value = 1;  // corrected: the split's Mann-Whitney p times the splits tried
};

// The changes in `values` (in series order), sorted by index. Values are positive (step
// times, throughputs, bytes, counts): a split whose earlier median is not positive, or
// whose later one is not finite, is no change. A series shorter than 2 * min_side has none.
std::vector<ChangePoint> FindChangePoints(const std::vector<double>& values,
                                          const ChangePointOptions& options = {});

}  // namespace seqbench::stats
