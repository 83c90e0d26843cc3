#include "stats/ring_model.h"

#include <algorithm>
#include <stdexcept>

#include "stats/statistics.h"

namespace seqbench::training {

RingModel FitRingModel(int64_t ranks, const std::vector<double>& bytes,
                       const std::vector<double>& seconds) {
  if (ranks < 2) throw std::invalid_argument("the ring model needs all-reduces of 2 or more ranks");
  const stats::LineFit line = stats::FitLine(bytes, seconds);
  const double steps = 2.0 * static_cast<double>(ranks - 1);
  RingModel model;
  model.alpha_s = std::max(0.0, line.intercept) / steps;
  model.beta_s_per_byte = std::max(0.0, line.slope) * static_cast<double>(ranks) / steps;
  return model;
}

double StepModel::StepSeconds(const RingModel& network, int64_t ranks) const {
  const int64_t gradient_messages = std::max<int64_t>(1, buckets);
  // Each bucket is an all-reduce of its own: k buckets pay k latencies, the bytes once.
  const double gradient =
      gradient_messages * network.AllReduceSeconds(ranks, gradient_bytes / gradient_messages);
  const double counts = count_allreduces * network.AllReduceSeconds(ranks, 8.0);
  return compute_s + gradient + counts;
}

}  // namespace seqbench::training
