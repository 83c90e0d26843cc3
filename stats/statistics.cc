#include "stats/statistics.h"

#include <algorithm>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>

namespace seqbench::stats {
namespace {

void RequireNonEmpty(const std::vector<double>& values, const char* function) {
  if (values.empty()) throw std::invalid_argument(std::string(function) + ": empty input");
}

void RequireProbability(double q, const char* function) {
  // Written so that a NaN q is rejected too.
  if (!(q >= 0.0 && q <= 1.0)) {
    throw std::invalid_argument(std::string(function) + ": q must be in [0, 1], got " +
                                std::to_string(q));
  }
}

// NumPy's _lerp, operation for operation: from the nearer end, so that the result is
// bit-identical to numpy.quantile and equals b exactly at t = 1.
double Lerp(double a, double b, double t) {
  const double diff = b - a;
  return t >= 0.5 ? b - diff * (1.0 - t) : a + diff * t;
}

// Selects the two order statistics it needs with nth_element rather than sorting, and
// leaves `values` reordered. Quantile, InterquartileRange and Summarize all go through
// here so that a Summary's fields equal the single functions bit for bit.
double QuantileInPlace(std::vector<double>& values, double q) {
  const size_t last = values.size() - 1;
  const double position = static_cast<double>(last) * q;
  const double below = std::floor(position);
  const auto lo = static_cast<size_t>(below);
  std::nth_element(values.begin(), values.begin() + lo, values.end());
  if (lo >= last) return values[last];
  const double a = values[lo];
  const double b = *std::min_element(values.begin() + lo + 1, values.end());
  return Lerp(a, b, position - below);
}

double MedianInPlace(std::vector<double>& values) {
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  const double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  const double lower = *std::max_element(values.begin(), values.begin() + mid);
  // (a + b) / 2 as NumPy computes it, not a + (b - a) / 2, to agree to the last bit.
  return (lower + upper) / 2.0;
}

}  // namespace

double Mean(const std::vector<double>& values) {
  RequireNonEmpty(values, "Mean");
  double sum = 0.0;
  for (const double value : values) sum += value;
  return sum / static_cast<double>(values.size());
}

double Median(std::vector<double> values) {
  RequireNonEmpty(values, "Median");
  return MedianInPlace(values);
}

double SampleStddev(const std::vector<double>& values) {
  RequireNonEmpty(values, "SampleStddev");
  if (values.size() < 2) return 0.0;
  // Two passes: the one-pass sum-of-squares formula cancels catastrophically on timings,
  // whose spread is tiny next to their magnitude.
  const double mean = Mean(values);
  double squares = 0.0;
  for (const double value : values) squares += (value - mean) * (value - mean);
  return std::sqrt(squares / static_cast<double>(values.size() - 1));
}

double CoefficientOfVariation(const std::vector<double>& values) {
  RequireNonEmpty(values, "CoefficientOfVariation");
  const double mean = Mean(values);
  if (mean == 0.0) return 0.0;
  return SampleStddev(values) / mean;
}

double Quantile(std::vector<double> values, double q) {
  RequireNonEmpty(values, "Quantile");
  RequireProbability(q, "Quantile");
  return QuantileInPlace(values, q);
}

double InterquartileRange(const std::vector<double>& values) {
  RequireNonEmpty(values, "InterquartileRange");
  std::vector<double> scratch = values;
  const double q3 = QuantileInPlace(scratch, 0.75);
  const double q1 = QuantileInPlace(scratch, 0.25);
  return q3 - q1;
}

double Min(const std::vector<double>& values) {
  RequireNonEmpty(values, "Min");
  return *std::min_element(values.begin(), values.end());
}

double Max(const std::vector<double>& values) {
  RequireNonEmpty(values, "Max");
  return *std::max_element(values.begin(), values.end());
}

namespace {
size_t CountOutside(const std::vector<double>& values, double low, double high) {
  return static_cast<size_t>(
      std::count_if(values.begin(), values.end(), [&](double v) { return v < low || v > high; }));
}
}  // namespace

Summary Summarize(const std::vector<double>& values) {
  RequireNonEmpty(values, "Summarize");
  Summary summary;
  summary.count = values.size();
  // Mean and stddev from the caller's order, so that they equal Mean() and SampleStddev()
  // bit for bit (a sum depends on the order of its terms).
  summary.mean = Mean(values);
  summary.stddev = SampleStddev(values);
  summary.cv = summary.mean == 0.0 ? 0.0 : summary.stddev / summary.mean;
  summary.min = Min(values);
  summary.max = Max(values);
  std::vector<double> scratch = values;
  summary.median = MedianInPlace(scratch);
  summary.q1 = QuantileInPlace(scratch, 0.25);
  summary.q3 = QuantileInPlace(scratch, 0.75);
  summary.iqr = summary.q3 - summary.q1;
  summary.outliers =
      CountOutside(values, summary.q1 - 1.5 * summary.iqr, summary.q3 + 1.5 * summary.iqr);
  return summary;
}

size_t TukeyOutliers(const std::vector<double>& values) {
  RequireNonEmpty(values, "TukeyOutliers");
  const double q1 = Quantile(values, 0.25), q3 = Quantile(values, 0.75);
  return CountOutside(values, q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1));
}

MannWhitney MannWhitneyU(const std::vector<double>& first, const std::vector<double>& second) {
  if (first.empty() || second.empty()) return {};
  const double n1 = static_cast<double>(first.size());
  const double n2 = static_cast<double>(second.size());
  const double n = n1 + n2;

  // (value, from the first sample), sorted: runs of equal values are the tie groups.
  std::vector<std::pair<double, bool>> pooled;
  pooled.reserve(first.size() + second.size());
  for (const double value : first) pooled.emplace_back(value, true);
  for (const double value : second) pooled.emplace_back(value, false);
  std::sort(pooled.begin(), pooled.end());

  // Mean ranks are half-integers and tie counts integers: both sums below are exact in
  // double, so U1 equals SciPy's exactly and U1(x, y) + U1(y, x) = n1 n2 holds exactly.
  double first_rank_sum = 0.0;
  double tie_term = 0.0;
  for (size_t begin = 0; begin < pooled.size();) {
    size_t end = begin + 1;
    while (end < pooled.size() && pooled[end].first == pooled[begin].first) ++end;
    const double mean_rank = (static_cast<double>(begin + 1) + static_cast<double>(end)) / 2.0;
    const double t = static_cast<double>(end - begin);
    tie_term += t * t * t - t;
    for (size_t i = begin; i < end; ++i) {
      if (pooled[i].second) first_rank_sum += mean_rank;
    }
    begin = end;
  }

  MannWhitney result;
  result.u = first_rank_sum - n1 * (n1 + 1.0) / 2.0;
  const double variance = n1 * n2 / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)));
  // Every value equal: no ordering information at all.
  if (!(variance > 0.0)) return result;
  const double z = (std::abs(result.u - n1 * n2 / 2.0) - 0.5) / std::sqrt(variance);
  // z < 0 when U sits within the continuity correction of its mean: p is 1, not above it.
  result.p_value = std::min(1.0, std::erfc(std::max(z, 0.0) / std::sqrt(2.0)));
  return result;
}

Interval BootstrapRatioOfMedians(const std::vector<double>& first,
                                 const std::vector<double>& second, double confidence,
                                 int resamples, uint64_t seed) {
  RequireNonEmpty(first, "BootstrapRatioOfMedians");
  RequireNonEmpty(second, "BootstrapRatioOfMedians");
  if (!(confidence > 0.0 && confidence < 1.0)) {
    throw std::invalid_argument("BootstrapRatioOfMedians: confidence must be in (0, 1), got " +
                                std::to_string(confidence));
  }
  if (resamples < 1) throw std::invalid_argument("BootstrapRatioOfMedians: resamples < 1");
  Interval interval;
  const double base = Median(first);
  if (!(base > 0)) {
    throw std::invalid_argument("BootstrapRatioOfMedians: the first median is not positive");
  }
  interval.estimate = Median(second) / base;
  std::mt19937_64 generator(seed);
  std::vector<double> ratios, draw_first(first.size()), draw_second(second.size());
  ratios.reserve(static_cast<size_t>(resamples));
  const auto resample = [&](const std::vector<double>& from, std::vector<double>& into) {
    for (double& value : into) value = from[generator() % from.size()];
    return MedianInPlace(into);
  };
  for (int i = 0; i < resamples; ++i) {
    const double denominator = resample(first, draw_first);
    const double numerator = resample(second, draw_second);
    // A resampled median of 0 (possible only with zero samples) has no ratio: skipped.
    if (denominator > 0) ratios.push_back(numerator / denominator);
  }
  if (ratios.empty()) throw std::invalid_argument("BootstrapRatioOfMedians: no usable resample");
  interval.low = QuantileInPlace(ratios, (1.0 - confidence) / 2.0);
  interval.high = QuantileInPlace(ratios, (1.0 + confidence) / 2.0);
  return interval;
}

std::optional<Interval> MedianInterval(const std::vector<double>& values, double confidence) {
  if (values.empty()) throw std::invalid_argument("MedianInterval: no values");
  if (!(confidence > 0 && confidence < 1))
    throw std::invalid_argument("MedianInterval: confidence must lie in (0, 1)");
  const size_t n = values.size();
  // P(Bin(n, 1/2) <= k) for k = 0, 1, ...: the binomial terms in logs, so that large n
  // does not overflow.
  std::vector<double> below(n + 1);
  double cumulative = 0;
  for (size_t k = 0; k <= n; ++k) {
    const double log_term =
        std::lgamma(n + 1.0) - std::lgamma(k + 1.0) - std::lgamma(n - k + 1.0) - n * std::log(2.0);
    cumulative += std::exp(log_term);
    below[k] = cumulative;
  }
  size_t best = 0;  // the largest j (1-based) that covers enough; 0: none does
  for (size_t j = 1; 2 * j <= n + 1; ++j) {
    if (1 - 2 * below[j - 1] >= confidence) best = j;
  }
  if (best == 0) return std::nullopt;
  std::vector<double> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  Interval interval;
  interval.estimate = Median(values);
  interval.low = sorted[best - 1];
  interval.high = sorted[n - best];
  return interval;
}

std::optional<double> MedianRelativeHalfWidth(const std::vector<double>& values,
                                              double confidence) {
  const std::optional<Interval> interval = MedianInterval(values, confidence);
  if (!interval || !(interval->estimate > 0)) return std::nullopt;
  return std::max(interval->high / interval->estimate - 1, 1 - interval->low / interval->estimate);
}

LineFit FitLine(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size() || x.size() < 2) {
    throw std::invalid_argument("a line fit needs at least 2 (x, y) pairs");
  }
  const double mean_x = Mean(x), mean_y = Mean(y);
  double sxx = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxx += (x[i] - mean_x) * (x[i] - mean_x);
    sxy += (x[i] - mean_x) * (y[i] - mean_y);
  }
  if (!(sxx > 0)) throw std::invalid_argument("a line fit needs at least two distinct x");
  LineFit fit;
  fit.slope = sxy / sxx;
  fit.intercept = mean_y - fit.slope * mean_x;
  return fit;
}

PowerLawFit FitPowerLaw(const std::vector<double>& x, const std::vector<double>& y,
                        double confidence) {
  if (x.size() != y.size() || x.size() < 2) {
    throw std::invalid_argument("a power-law fit needs at least 2 (x, y) pairs");
  }
  if (!(confidence > 0 && confidence < 1)) {
    throw std::invalid_argument("confidence must lie in (0, 1)");
  }
  std::vector<double> log_x, log_y;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!(x[i] > 0) || !(y[i] > 0)) {
      throw std::invalid_argument("a power-law fit needs positive values");
    }
    log_x.push_back(std::log(x[i]));
    log_y.push_back(std::log(y[i]));
  }
  const double mean_x = Mean(log_x), mean_y = Mean(log_y);
  double sxx = 0;
  for (size_t i = 0; i < x.size(); ++i) sxx += (log_x[i] - mean_x) * (log_x[i] - mean_x);
  if (!(sxx > 0)) throw std::invalid_argument("a power-law fit needs at least two distinct x");
  PowerLawFit fit;
  fit.exponent = FitLine(log_x, log_y).slope;
  fit.confidence = confidence;
  fit.points = x.size();
  const size_t dof = x.size() - 2;
  if (dof == 0) {
    fit.half_width = std::numeric_limits<double>::infinity();
    return fit;
  }
  double residuals = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double r = log_y[i] - mean_y - fit.exponent * (log_x[i] - mean_x);
    residuals += r * r;
  }
  const double standard_error = std::sqrt(residuals / static_cast<double>(dof) / sxx);
  const boost::math::students_t t(static_cast<double>(dof));
  fit.half_width = boost::math::quantile(t, 0.5 + confidence / 2) * standard_error;
  return fit;
}

std::optional<Interval> PairedRatioInterval(const std::vector<double>& base,
                                            const std::vector<double>& next, double confidence) {
  if (base.size() != next.size() || base.empty())
    throw std::invalid_argument(
        "paired ratio: the sides must have the same, non-zero number of rounds");
  std::vector<double> ratios;
  for (size_t r = 0; r < base.size(); ++r) {
    if (!(base[r] > 0))
      throw std::invalid_argument("paired ratio: a base time that is not positive");
    ratios.push_back(next[r] / base[r]);
  }
  std::optional<Interval> interval = MedianInterval(ratios, confidence);
  if (interval) interval->estimate = Median(ratios);
  return interval;
}

}  // namespace seqbench::stats
