// The α–β cost model of a ring all-reduce, for data parallelism beyond the ranks measured.
// On p ranks, a ring all-reduce of n bytes is a reduce-scatter and an all-gather of
// p − 1 steps each; every step sends n/p bytes to the next rank (Thakur, Rabenseifner and
// Gropp 2005; Patarasuk and Yuan 2009):
//     T(p, n) = 2(p − 1)·α + 2(p − 1)/p · n·β
// with α the latency of one message and β the time a link takes per byte. The model
// ignores contention, the reduction's arithmetic and the hierarchy of a real cluster's
// network: extrapolations from it are a model, not a measurement, and the reports say so.
//
// Thread-safety: pure functions; safe from any thread.
#pragma once

#include <cstdint>
#include <vector>

namespace seqbench::training {

struct RingModel {
  double alpha_s = 0;          // per message
  double beta_s_per_byte = 0;  // per byte on one link

  // T(p, n) above; 0 for one rank, which sends nothing.
  double AllReduceSeconds(int64_t ranks, double bytes) const {
    if (ranks <= 1) return 0;
    const double steps = 2.0 * static_cast<double>(ranks - 1);
    return steps * alpha_s + steps / static_cast<double>(ranks) * bytes * beta_s_per_byte;
  }
};

// α and β from all-reduce times measured on `ranks` ranks (> 1) at several sizes: a least-
// squares line t = a + b·n, so that α = a / 2(p − 1) and β = b·p / 2(p − 1). A negative
// intercept or slope (noise at sizes too close together) is clamped to 0. Throws
// std::invalid_argument for fewer than 2 points, sizes that differ, or one rank.
RingModel FitRingModel(int64_t ranks, const std::vector<double>& bytes,
                       const std::vector<double>& seconds);

// One data-parallel optimizer step on `ranks` ranks under weak scaling (every rank keeps
// its batch, so its compute time stays `compute_s`): the gradient's `buckets` all-reduces
// of `gradient_bytes` in all, plus `count_allreduces` all-reduces of a few bytes, none of
// them overlapped with compute. That makes the step an upper bound and the efficiency
// compute_s / step a lower bound.
struct StepModel {
  double compute_s = 0;
  double gradient_bytes = 0;
  int64_t buckets = 1;
  int64_t count_allreduces = 0;

  double StepSeconds(const RingModel& network, int64_t ranks) const;
  double Efficiency(const RingModel& network, int64_t ranks) const {
    return compute_s / StepSeconds(network, ranks);
  }
};

}  // namespace seqbench::training
