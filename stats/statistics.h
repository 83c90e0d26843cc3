// The one place where seqbench turns samples (repetition timings, memory peaks) into
// numbers: location, spread, quantiles, and the Mann–Whitney U test used to call a change
// real. Every definition matches NumPy/SciPy's default (checked against them in
// tests/statistics_test.cc), so that a number in a report means what an analyst
// recomputing it in Python would get.
//
// Thread-safety: pure functions; safe from any thread. Nothing here holds state, and the
// inputs are taken by const reference or by value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace seqbench::stats {

// Every function below except MannWhitneyU throws std::invalid_argument, naming itself,
// on an empty input: a statistic of no samples would otherwise be a silent 0 or NaN in a
// report.

double Mean(const std::vector<double>& values);
// Of an even count, the mean of the middle two (NumPy's median).
double Median(std::vector<double> values);
// With the n-1 (Bessel) denominator, NumPy's std(ddof=1); 0 when n < 2, where a spread
// of one sample is "none seen" rather than undefined.
double SampleStddev(const std::vector<double>& values);
// SampleStddev / Mean; 0 when the mean is 0, so that an all-zero sample is not a NaN.
double CoefficientOfVariation(const std::vector<double>& values);
// q in [0, 1] (std::invalid_argument otherwise). Linear interpolation between order
// statistics at (n-1)q: NumPy's default method "linear", Hyndman–Fan type 7.
double Quantile(std::vector<double> values, double q);
// Quantile(0.75) - Quantile(0.25).
double InterquartileRange(const std::vector<double>& values);
double Min(const std::vector<double>& values);
double Max(const std::vector<double>& values);

// Tukey's rule: the values below Q1 - 1.5 IQR or above Q3 + 1.5 IQR (Quantile's Q1, Q3).
size_t TukeyOutliers(const std::vector<double>& values);

struct Summary {
  size_t count = 0;
  double mean = 0, median = 0, stddev = 0, cv = 0, min = 0, max = 0, q1 = 0, q3 = 0, iqr = 0;
  size_t outliers = 0;  // TukeyOutliers
  // iqr / median (0 when the median is 0): the spread the noise levels below judge.
  double RelativeIqr() const { return median == 0.0 ? 0.0 : iqr / median; }
};
// All of the above with one copy of the input; each field equals its function.
Summary Summarize(const std::vector<double>& values);

// How noisy a case's timings are, by torch.utils.benchmark's levels of IQR / median: above
// 10% its median is not to be trusted to a few percent, above 25% not at all.
inline constexpr double kNoisyRelativeIqr = 0.10;
inline constexpr double kVeryNoisyRelativeIqr = 0.25;

struct MannWhitney {
  double u = 0;        // U statistic of the first sample (scipy's U1 = rank sum of x - n1(n1+1)/2)
  double p_value = 1;  // two-sided, normal approximation with tie and continuity correction
};
// Equals scipy.stats.mannwhitneyu(x, y, alternative="two-sided", method="asymptotic",
// use_continuity=True): ties take their mean rank and shrink the variance by
// sum(t^3 - t) / (n(n-1)). When every value is equal the variance is 0 and p = 1. An empty
// side returns {0, 1}, "no evidence", instead of throwing: comparing against a run that
// lacks a case is routine, not an error.
MannWhitney MannWhitneyU(const std::vector<double>& first, const std::vector<double>& second);

// Fewer samples on a side than this and a bootstrap cannot see their spread: compare and
// check give no interval-based verdict below it.
inline constexpr size_t kMinBootstrapSamples = 3;

// A point estimate and a confidence interval around it.
struct Interval {
  double estimate = 0;  // from all the samples
  double low = 0, high = 0;
};

// Percentile bootstrap interval of Median(second) / Median(first) at `confidence`: each of
// `resamples` times, both sides are resampled with replacement and the ratio of their
// medians kept; the interval runs from the (1-c)/2 to the (1+c)/2 quantile of those
// ratios. It is what `compare` and `check` judge on: it exists at a handful of samples
// (wide, rather than "cannot judge") and says how sure a verdict is. Reproducible on any
// machine: the draws come from std::mt19937_64 seeded with `seed` (its output is fixed by
// the standard), indices by modulo. Throws std::invalid_argument on an empty side, a
// Median(first) that is not positive, a confidence outside (0, 1) or resamples < 1.
Interval BootstrapRatioOfMedians(const std::vector<double>& first,
                                 const std::vector<double>& second, double confidence = 0.95,
                                 int resamples = 2000, uint64_t seed = 1);

// The distribution-free interval of the median from order statistics: [x_(j), x_(n+1-j)]
// (1-based, sorted) with the largest j whose binomial coverage 1 - 2 P(Bin(n, 1/2) <= j-1)
// is at least `confidence`. Needs no assumption about the timing distribution, which is
// skewed. nullopt when even [min, max] covers less (n < 6 at 95%). Throws
// std::invalid_argument on an empty input or a confidence outside (0, 1).
std::optional<Interval> MedianInterval(const std::vector<double>& values, double confidence = 0.95);
// The paired analysis of an A/B run (seqbench ab): round r timed the base and the new
// side one after the other, so their ratio new[r] / base[r] cancels whatever the machine
// did to both in that round. The estimate is the median of the per-round ratios, the
// interval MedianInterval's over them (distribution-free). nullopt where MedianInterval
// is (fewer than 6 rounds at 95%). Throws std::invalid_argument for sizes that differ or a
// base that is not positive.
std::optional<Interval> PairedRatioInterval(const std::vector<double>& base,
                                            const std::vector<double>& next,
                                            double confidence = 0.95);

// How far MedianInterval reaches from the median, as a fraction of it, on its wider side
// (the interval of skewed timings is lopsided): the noise `run --max-noise` repeats a case
// until it is under, so that both ends lie within ±target. nullopt where MedianInterval
// is, or the median is not positive.
std::optional<double> MedianRelativeHalfWidth(const std::vector<double>& values,
                                              double confidence = 0.95);

// The least-squares line y = intercept + slope·x. Throws std::invalid_argument for fewer
// than 2 points, sizes that differ, or x that are all equal.
struct LineFit {
  double intercept = 0;
  double slope = 0;
};
LineFit FitLine(const std::vector<double>& x, const std::vector<double>& y);

// A power law y = c·x^k fitted by least squares on log(y) = log(c) + k·log(x): the
// exponent k and the half-width of its confidence interval (Student's t with n - 2 degrees
// of freedom on the slope's standard error; infinite with 2 points, which fit exactly).
// What `report --fit` states against a variant's claimed complexity (O(T): k = 1). Throws
// std::invalid_argument for fewer than 2 points, sizes that differ, a value that is not
// positive, or x that are all equal.
struct PowerLawFit {
  double exponent = 0;
  double half_width = 0;
  double confidence = 0.95;
  size_t points = 0;
};
PowerLawFit FitPowerLaw(const std::vector<double>& x, const std::vector<double>& y,
                        double confidence = 0.95);

}  // namespace seqbench::stats
