// seqbench::stats against NumPy 1.24.2 / SciPy 1.10.1. The reference values in
// tests/data/statistics_reference.json come from tests/data/statistics_reference.py
// (`/usr/bin/python3 tests/data/statistics_reference.py`, fixed seed); rerun it after
// changing a case. The property tests below catch what a fixture alone might not: a
// population stddev, a wrong median of an even count, an asymmetric U test.

#include "stats/statistics.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "stats/ring_model.h"

namespace seqbench::stats {
namespace {

using Catch::Matchers::WithinRel;

constexpr double kTolerance = 1e-12;
constexpr double kPValueTolerance = 1e-9;

const nlohmann::json& Reference() {
  static const nlohmann::json reference = [] {
    const std::string path = SEQBENCH_SOURCE_DIR "/tests/data/statistics_reference.json";
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open " + path);
    return nlohmann::json::parse(in);
  }();
  return reference;
}

std::vector<double> Values(const std::string& sample) {
  return Reference().at("samples").at(sample).at("values").get<std::vector<double>>();
}

// The message of the std::invalid_argument that `call` throws, or "" when it throws none.
std::string InvalidArgumentMessage(const std::function<void()>& call) {
  try {
    call();
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return "";
}

TEST_CASE("statistics: one-sample statistics match NumPy", "[statistics]") {
  const auto& samples = Reference().at("samples");
  REQUIRE(samples.size() >= 10);
  for (const auto& [name, reference] : samples.items()) {
    INFO("sample " << name);
    const auto values = reference.at("values").get<std::vector<double>>();
    CHECK_THAT(Mean(values), WithinRel(reference.at("mean").get<double>(), kTolerance));
    CHECK_THAT(Median(values), WithinRel(reference.at("median").get<double>(), kTolerance));
    CHECK_THAT(Min(values), WithinRel(reference.at("min").get<double>(), kTolerance));
    CHECK_THAT(Max(values), WithinRel(reference.at("max").get<double>(), kTolerance));
    CHECK_THAT(InterquartileRange(values),
               WithinRel(reference.at("iqr").get<double>(), kTolerance));
    // NumPy's std(ddof=1) of one value is NaN (null in the fixture); ours is 0 by contract.
    const double stddev = reference.at("std").is_null() ? 0.0 : reference.at("std").get<double>();
    const double cv = reference.at("cv").is_null() ? 0.0 : reference.at("cv").get<double>();
    CHECK_THAT(SampleStddev(values), WithinRel(stddev, kTolerance));
    CHECK_THAT(CoefficientOfVariation(values), WithinRel(cv, kTolerance));
    for (const auto& [q, expected] : reference.at("quantiles").items()) {
      INFO("q = " << q);
      CHECK_THAT(Quantile(values, std::stod(q)), WithinRel(expected.get<double>(), kTolerance));
    }

    const Summary summary = Summarize(values);
    CHECK(summary.count == values.size());
    CHECK(summary.mean == Mean(values));
    CHECK(summary.median == Median(values));
    CHECK(summary.stddev == SampleStddev(values));
    CHECK(summary.cv == CoefficientOfVariation(values));
    CHECK(summary.min == Min(values));
    CHECK(summary.max == Max(values));
    CHECK(summary.q1 == Quantile(values, 0.25));
    CHECK(summary.q3 == Quantile(values, 0.75));
    CHECK(summary.iqr == InterquartileRange(values));

    // Tukey's fences from NumPy's quartiles, counted here: no code shared with ours.
    const double q1 = reference.at("quantiles").at("0.25").get<double>();
    const double q3 = reference.at("quantiles").at("0.75").get<double>();
    const auto outside = std::count_if(values.begin(), values.end(), [&](double v) {
      return v < q1 - 1.5 * (q3 - q1) || v > q3 + 1.5 * (q3 - q1);
    });
    CHECK(TukeyOutliers(values) == static_cast<size_t>(outside));
    CHECK(summary.outliers == TukeyOutliers(values));
    CHECK(summary.RelativeIqr() == summary.iqr / summary.median);
  }
  // The fixture has outliers to count, and not everywhere.
  CHECK(TukeyOutliers(Values("outlier_15")) >= 1);
  CHECK(TukeyOutliers({1, 2, 3, 4, 100}) == 1);  // Q1 2, Q3 4: fences -1 and 7
  CHECK(TukeyOutliers({1, 2, 3, 4, 5}) == 0);
}

TEST_CASE("statistics: Mann-Whitney U matches SciPy", "[statistics]") {
  const auto& pairs = Reference().at("pairs");
  REQUIRE(pairs.size() >= 6);
  for (const auto& pair : pairs) {
    const auto first_name = pair.at("first").get<std::string>();
    const auto second_name = pair.at("second").get<std::string>();
    INFO(first_name << " vs " << second_name);
    const MannWhitney test = MannWhitneyU(Values(first_name), Values(second_name));
    CHECK_THAT(test.u, WithinRel(pair.at("u").get<double>(), kTolerance));
    CHECK_THAT(test.p_value, WithinRel(pair.at("p_value").get<double>(), kPValueTolerance));
  }
}

TEST_CASE("statistics: the fixture stays discriminating", "[statistics]") {
  // A fixture whose mean equals its median cannot tell Median from Mean, nor one with
  // only middling p-values a sign error in the tail.
  for (const std::string name : {"lognormal_40", "outlier_15"}) {
    INFO(name);
    const auto values = Values(name);
    CHECK(std::abs(Mean(values) - Median(values)) > 0.1 * Median(values));
  }
  double smallest_p = 1, largest_p = 0;
  for (const auto& pair : Reference().at("pairs")) {
    const double p = pair.at("p_value").get<double>();
    if (p == 1.0) continue;  // the all-equal case
    smallest_p = std::min(smallest_p, p);
    largest_p = std::max(largest_p, p);
  }
  CHECK(smallest_p < 0.01);
  CHECK(largest_p > 0.5);
}

TEST_CASE("statistics: SampleStddev divides by n - 1", "[statistics]") {
  // Squared deviations from 2.5 sum to 5: sample variance 5/3, population variance 5/4.
  const std::vector<double> values = {1, 2, 3, 4};
  CHECK_THAT(SampleStddev(values), WithinRel(std::sqrt(5.0 / 3.0), kTolerance));
  CHECK_THAT(CoefficientOfVariation(values), WithinRel(std::sqrt(5.0 / 3.0) / 2.5, kTolerance));
  CHECK(SampleStddev({7.0}) == 0.0);
}

TEST_CASE("statistics: Median of an even count averages the middle two", "[statistics]") {
  CHECK(Median({4, 1, 3, 2}) == 2.5);
  CHECK(Median({100, 1, 10, 2}) == 6.0);
  CHECK(Median({5, 3, 9}) == 5.0);
  const Summary summary = Summarize({100, 1, 10, 2});
  CHECK(summary.median == 6.0);
}

TEST_CASE("statistics: Quantile(0) is the minimum and Quantile(1) the maximum", "[statistics]") {
  for (const auto& [name, reference] : Reference().at("samples").items()) {
    INFO(name);
    const auto values = reference.at("values").get<std::vector<double>>();
    CHECK(Quantile(values, 0.0) == Min(values));
    CHECK(Quantile(values, 1.0) == Max(values));
  }
  // Type 7 on {1, 2, 3, 4}: position (n - 1) q = 0.75 between 1 and 2.
  CHECK_THAT(Quantile({4, 3, 2, 1}, 0.25), WithinRel(1.75, kTolerance));
}

TEST_CASE("statistics: CoefficientOfVariation is 0 when the mean is 0", "[statistics]") {
  CHECK(CoefficientOfVariation({-1.0, 1.0}) == 0.0);
  CHECK(Summarize({-1.0, 1.0}).cv == 0.0);
}

TEST_CASE("statistics: empty input throws invalid_argument naming the function", "[statistics]") {
  const std::vector<double> empty;
  CHECK(InvalidArgumentMessage([&] { Mean(empty); }).find("Mean") != std::string::npos);
  CHECK(InvalidArgumentMessage([&] { Median(empty); }).find("Median") != std::string::npos);
  CHECK(InvalidArgumentMessage([&] { SampleStddev(empty); }).find("SampleStddev") !=
        std::string::npos);
  CHECK(InvalidArgumentMessage([&] {
          CoefficientOfVariation(empty);
        }).find("CoefficientOfVariation") != std::string::npos);
  CHECK(InvalidArgumentMessage([&] { Quantile(empty, 0.5); }).find("Quantile") !=
        std::string::npos);
  CHECK(InvalidArgumentMessage([&] { InterquartileRange(empty); }).find("InterquartileRange") !=
        std::string::npos);
  CHECK(InvalidArgumentMessage([&] { Min(empty); }).find("Min") != std::string::npos);
  CHECK(InvalidArgumentMessage([&] { Max(empty); }).find("Max") != std::string::npos);
  CHECK(InvalidArgumentMessage([&] { Summarize(empty); }).find("Summarize") != std::string::npos);
}

TEST_CASE("statistics: Quantile rejects q outside [0, 1]", "[statistics]") {
  const std::vector<double> values = {1, 2, 3};
  CHECK_THROWS_AS(Quantile(values, -0.01), std::invalid_argument);
  CHECK_THROWS_AS(Quantile(values, 1.01), std::invalid_argument);
  CHECK_THROWS_AS(Quantile(values, std::numeric_limits<double>::quiet_NaN()),
                  std::invalid_argument);
}

TEST_CASE("statistics: MannWhitneyU is symmetric in its samples", "[statistics]") {
  for (const auto& pair : Reference().at("pairs")) {
    const auto x = Values(pair.at("first").get<std::string>());
    const auto y = Values(pair.at("second").get<std::string>());
    INFO(pair.at("first").get<std::string>() << " vs " << pair.at("second").get<std::string>());
    const MannWhitney forward = MannWhitneyU(x, y);
    const MannWhitney backward = MannWhitneyU(y, x);
    CHECK(forward.p_value == backward.p_value);
    CHECK(forward.u + backward.u == static_cast<double>(x.size() * y.size()));
  }
}

TEST_CASE("statistics: MannWhitneyU without evidence reports p = 1", "[statistics]") {
  const MannWhitney empty_first = MannWhitneyU({}, {1.0, 2.0});
  CHECK(empty_first.u == 0.0);
  CHECK(empty_first.p_value == 1.0);
  const MannWhitney empty_second = MannWhitneyU({1.0, 2.0}, {});
  CHECK(empty_second.u == 0.0);
  CHECK(empty_second.p_value == 1.0);
  CHECK(MannWhitneyU({3.0, 3.0}, {3.0, 3.0, 3.0}).p_value == 1.0);
}

TEST_CASE("statistics: the bootstrap interval of a ratio of medians covers the true ratio",
          "[statistics][bootstrap]") {
  // 200 simulated pairs of runs (seeded; no clock): step times lognormal with 10% spread
  // around medians 1 and 1.3, i.e. a 1.3x slowdown. A 95% interval must cover 1.3 in at
  // least 90% of them, at the 5 samples of suites/ci.toml and at 10 (193 and 195 here).
  std::mt19937_64 generator(7);
  std::normal_distribution<double> noise(0.0, 0.1);
  for (const size_t n : {size_t{5}, size_t{10}}) {
    int covered = 0, slower = 0;
    for (int draw = 0; draw < 200; ++draw) {
      std::vector<double> base(n), next(n);
      for (double& value : base) value = std::exp(noise(generator));
      for (double& value : next) value = 1.3 * std::exp(noise(generator));
      const Interval interval = BootstrapRatioOfMedians(base, next, 0.95, 2000, draw + 1);
      CHECK(interval.estimate == Median(next) / Median(base));
      covered += interval.low <= 1.3 && 1.3 <= interval.high;
      slower += interval.low > 1.05;  // what compare calls slower at a 5% threshold
    }
    INFO(n << " samples a side: " << covered << " of 200 intervals cover 1.3, " << slower
           << " lie wholly above 1.05");
    CHECK(covered >= 180);
    // The gate's power against a 1.3x slowdown at 10% noise: 19 times in 20 needs 10
    // samples a side (194 of 200 here); at 5 it is about 3 in 4 (145 of 200).
    CHECK(slower >= (n >= 10 ? 190 : 130));
  }
}

TEST_CASE("statistics: the bootstrap interval is reproducible and refuses what it cannot do",
          "[statistics][bootstrap]") {
  const std::vector<double> base = {1.0, 1.1, 0.9, 1.05, 0.95}, next = {2.0, 2.3, 1.9, 2.1, 2.2};
  const Interval once = BootstrapRatioOfMedians(base, next);
  const Interval again = BootstrapRatioOfMedians(base, next);
  CHECK(once.low == again.low);
  CHECK(once.high == again.high);
  CHECK(once.estimate == Approx(2.1));
  CHECK(once.low <= once.estimate);
  CHECK(once.high >= once.estimate);
  CHECK(once.low > 1.5);  // two runs apart by 2x are told apart at 5 samples
  // Identical samples: no spread, the interval is the ratio itself.
  const Interval flat = BootstrapRatioOfMedians({2, 2, 2}, {3, 3, 3});
  CHECK(flat.low == Approx(1.5));
  CHECK(flat.high == Approx(1.5));
  // A wider confidence gives a wider interval.
  const Interval wide = BootstrapRatioOfMedians(base, next, 0.99);
  CHECK(wide.low <= once.low);
  CHECK(wide.high >= once.high);
  CHECK_THROWS_AS(BootstrapRatioOfMedians({}, next), std::invalid_argument);
  CHECK_THROWS_AS(BootstrapRatioOfMedians({0.0, 0.0}, next), std::invalid_argument);
  CHECK_THROWS_AS(BootstrapRatioOfMedians(base, next, 1.0), std::invalid_argument);
  CHECK_THROWS_AS(BootstrapRatioOfMedians(base, next, 0.95, 0), std::invalid_argument);
}

TEST_CASE("statistics: interval ends equal the exact bootstrap, binomial and t references",
          "[statistics][bootstrap][median_interval]") {
  // Each end against tests/data/statistics_reference.json: the percentile bootstrap's
  // quantiles from the exact distribution of the resampled medians (odd, unequal sizes),
  // and the order-statistic interval from SciPy's binomial. The fixture keeps every level
  // 7 standard errors of a 200000-resample bootstrap away from a step of that distribution,
  // so the ends are equal, not close; and an end at the one-tailed level is another ratio.
  for (const auto& pair : Reference().at("bootstrap_ratio_of_medians")) {
    const auto first = pair.at("first").get<std::vector<double>>();
    const auto second = pair.at("second").get<std::vector<double>>();
    INFO(first.size() << " and " << second.size() << " samples");
    for (const auto& expected : pair.at("intervals")) {
      const double confidence = expected.at("confidence").get<double>();
      INFO("confidence " << confidence);
      const Interval interval = BootstrapRatioOfMedians(first, second, confidence, 200000, 46);
      CHECK(interval.estimate == pair.at("median_ratio").get<double>());
      CHECK(interval.low == expected.at("low").get<double>());
      CHECK(interval.high == expected.at("high").get<double>());
      CHECK(expected.at("one_tailed_high").get<double>() != expected.at("high").get<double>());
    }
  }
  const auto& law = Reference().at("power_law");
  for (const auto& expected : law.at("intervals")) {
    const double confidence = expected.at("confidence").get<double>();
    INFO("power law at " << confidence);
    const PowerLawFit fit = FitPowerLaw(law.at("x").get<std::vector<double>>(),
                                        law.at("y").get<std::vector<double>>(), confidence);
    CHECK_THAT(fit.exponent, WithinRel(law.at("exponent").get<double>(), kTolerance));
    CHECK_THAT(fit.half_width, WithinRel(expected.at("half_width").get<double>(), 1e-6));
  }
  for (const auto& sample : Reference().at("median_intervals")) {
    const auto values = sample.at("values").get<std::vector<double>>();
    for (const auto& expected : sample.at("intervals")) {
      const double confidence = expected.at("confidence").get<double>();
      INFO(values.size() << " values at " << confidence);
      const auto interval = MedianInterval(values, confidence);
      REQUIRE(interval);
      CHECK(interval->low == expected.at("low").get<double>());
      CHECK(interval->high == expected.at("high").get<double>());
    }
  }
}

TEST_CASE("statistics: each tail of an interval misses as often as its level says",
          "[statistics][bootstrap][median_interval]") {
  // Coverage alone cannot tell a 90% interval from a lopsided one (both ends at the wrong
  // quantiles, misses all on one side). Seeded draws, each tail's misses counted apart.
  std::mt19937_64 generator(46);
  constexpr int kDraws = 2000;

  SECTION("the order-statistic interval: each tail exactly P(Bin(20, 1/2) <= 5)") {
    // n = 20 at 90%: j = 6, so each end misses the true median with probability
    // (1 + 20 + 190 + 1140 + 4845 + 15504) / 2^20 = 21700 / 1048576 = 0.0207: 41.4 of 2000
    // draws, standard deviation 6.4. A one-tailed coverage would pick j = 7 (0.058 a tail).
    const double tail = 21700.0 / 1048576.0;
    std::lognormal_distribution<double> step(0.0, 0.3);  // true median 1
    int low_misses = 0, high_misses = 0;
    for (int draw = 0; draw < kDraws; ++draw) {
      std::vector<double> samples(20);
      for (double& value : samples) value = step(generator);
      const auto interval = MedianInterval(samples, 0.90);
      REQUIRE(interval);
      low_misses += interval->low > 1;
      high_misses += interval->high < 1;
    }
    const double expected = tail * kDraws, sd = std::sqrt(kDraws * tail * (1 - tail));
    INFO(low_misses << " low and " << high_misses << " high misses; " << expected << " each");
    CHECK(std::abs(low_misses - expected) <= 4 * sd);
    CHECK(std::abs(high_misses - expected) <= 4 * sd);
  }

  SECTION("the bootstrap: tails alike, neither above its 5%") {
    // 15 and 21 samples (unequal sizes), lognormal, a true ratio of 1.3, at 90%. The
    // percentile bootstrap of a median is not exact at these sizes (each tail near 3.5% in
    // NumPy simulations of the same method), so each tail is held to at most 5% plus 4
    // standard deviations of 2000 draws (139), and the two tails to each other within 4
    // standard deviations of their difference, sqrt(low + high): a high end at the 90%
    // quantile misses about twice as often on its side.
    std::normal_distribution<double> noise(0.0, 0.1);
    int low_misses = 0, high_misses = 0;
    for (int draw = 0; draw < kDraws; ++draw) {
      std::vector<double> base(15), next(21);
      for (double& value : base) value = std::exp(noise(generator));
      for (double& value : next) value = 1.3 * std::exp(noise(generator));
      const Interval interval = BootstrapRatioOfMedians(base, next, 0.90, 1000, draw + 1);
      low_misses += interval.low > 1.3;
      high_misses += interval.high < 1.3;
    }
    INFO(low_misses << " low and " << high_misses << " high misses of " << kDraws);
    const double nominal = 0.05 * kDraws, sd = std::sqrt(kDraws * 0.05 * 0.95);
    CHECK(low_misses <= nominal + 4 * sd);
    CHECK(high_misses <= nominal + 4 * sd);
    CHECK(low_misses >= nominal / 3);  // not a far wider interval than asked for either
    CHECK(high_misses >= nominal / 3);
    CHECK(std::abs(low_misses - high_misses) <= 4 * std::sqrt(low_misses + high_misses));
  }
}

}  // namespace

TEST_CASE("statistics: the median's order-statistic interval", "[statistics][median_interval]") {
  // n = 10 at 95%: P(Bin(10, 1/2) <= 1) = 11/1024, coverage 0.979 for [x(2), x(9)]; j = 3
  // would cover only 1 - 2 * 56/1024 = 0.891. Unsorted input, mean != median.
  const std::vector<double> ten = {9, 1, 8, 2, 7, 3, 6, 4, 5, 100};
  const auto interval = MedianInterval(ten, 0.95);
  REQUIRE(interval);
  CHECK(interval->low == 2);
  CHECK(interval->high == 9);
  CHECK(interval->estimate == 5.5);
  // At 80% the same ten give j = 3: coverage 0.891 >= 0.8, j = 4 gives 0.656.
  CHECK(MedianInterval(ten, 0.80)->low == 3);
  CHECK(MedianInterval(ten, 0.80)->high == 8);
  // Five samples: even [min, max] covers only 1 - 2/32 = 0.9375 < 0.95.
  CHECK_FALSE(MedianInterval({1, 2, 3, 4, 5}, 0.95));
  CHECK(MedianInterval({1, 2, 3, 4, 5, 6}, 0.95)->low == 1);          // 1 - 2/64 = 0.969
  CHECK(*MedianRelativeHalfWidth(ten, 0.95) == Approx(9 / 5.5 - 1));  // the wider side
  // Lopsided, as skewed timings are: [2, 20] around 5.5 reaches 2.64 up and 0.64 down.
  const std::vector<double> skewed = {20, 1, 8, 2, 7, 3, 6, 4, 5, 100};
  CHECK(*MedianRelativeHalfWidth(skewed, 0.95) == Approx(20 / 5.5 - 1));
  CHECK_THROWS_AS(MedianInterval({}, 0.95), std::invalid_argument);
  CHECK_THROWS_AS(MedianInterval(ten, 1.0), std::invalid_argument);

  // Coverage, seeded: 200 draws of 20 lognormal step times whose true median is 1.
  std::mt19937_64 generator(11);
  std::lognormal_distribution<double> step(0.0, 0.2);
  int covered = 0;
  for (int draw = 0; draw < 200; ++draw) {
    std::vector<double> samples(20);
    for (double& value : samples) value = step(generator);
    const auto found = MedianInterval(samples, 0.95);
    REQUIRE(found);
    covered += found->low <= 1 && 1 <= found->high;
  }
  INFO(covered << " of 200 intervals cover the true median");
  CHECK(covered >= 180);
}

}  // namespace seqbench::stats

namespace seqbench {
namespace {

TEST_CASE("power-law fit: exact laws, and a 95% interval that covers 95% of noisy draws",
          "[statistics][fit]") {
  const std::vector<double> lengths = {128, 256, 512, 1024, 2048};
  std::vector<double> quadratic;
  for (const double t : lengths) quadratic.push_back(3e-9 * t * t);
  const stats::PowerLawFit exact = stats::FitPowerLaw(lengths, quadratic);
  CHECK(exact.exponent == Approx(2.0).margin(1e-12));
  CHECK(exact.half_width == Approx(0.0).margin(1e-9));
  CHECK(exact.points == 5);
  // Two points fit exactly and say nothing about the error.
  CHECK(std::isinf(stats::FitPowerLaw({1, 2}, {3, 6}).half_width));
  CHECK_THROWS_AS(stats::FitPowerLaw({1, 2}, {3}), std::invalid_argument);
  CHECK_THROWS_AS(stats::FitPowerLaw({1, 2, 4}, {3, 0, 5}), std::invalid_argument);
  CHECK_THROWS_AS(stats::FitPowerLaw({2, 2, 2}, {3, 4, 5}), std::invalid_argument);

  // y = x^1.5 with lognormal noise (sigma 0.2) at 5 lengths, 400 seeded draws: the true
  // exponent lies inside the interval in about 95% of them. With the normal quantile (1.96)
  // in place of Student's t with 3 degrees of freedom (3.18), coverage drops to 85.5% (P(|t3|
  // <= 1.96)): about 342 of 400.
  std::mt19937_64 generator(5);
  std::normal_distribution<double> noise(0.0, 0.2);
  int covered = 0;
  constexpr int kDraws = 400;
  for (int draw = 0; draw < kDraws; ++draw) {
    std::vector<double> times;
    for (const double t : lengths) times.push_back(std::pow(t, 1.5) * std::exp(noise(generator)));
    const stats::PowerLawFit fit = stats::FitPowerLaw(lengths, times);
    if (std::abs(fit.exponent - 1.5) <= fit.half_width) ++covered;
  }
  INFO(covered << " of " << kDraws << " intervals cover the true exponent");
  CHECK(covered >= 0.91 * kDraws);
  CHECK(covered <= 0.99 * kDraws);
}

TEST_CASE("line fit: the least-squares line of points off any line", "[statistics][fit]") {
  // x = 1, 2, 3, 4; y = 1, 3, 2, 5: the normal equations by hand give slope 1.1 and
  // intercept 2.75 - 1.1 * 2.5 = 0 (sxy = 5.5, sxx = 5).
  const stats::LineFit fit = stats::FitLine({1, 2, 3, 4}, {1, 3, 2, 5});
  CHECK(fit.slope == Approx(1.1).margin(1e-12));
  CHECK(fit.intercept == Approx(0.0).margin(1e-12));
  const stats::LineFit shifted = stats::FitLine({0, 10}, {7, 2});
  CHECK(shifted.slope == Approx(-0.5));
  CHECK(shifted.intercept == Approx(7.0));
  CHECK_THROWS_AS(stats::FitLine({3, 3}, {1, 2}), std::invalid_argument);
}

TEST_CASE("ring all-reduce model: α and β come back from times the formula made",
          "[statistics][fit][distributed]") {
  const training::RingModel truth{2e-4, 1.0 / 5e8};  // 0.2 ms a message, 500 MB/s a link
  // T(p, n) = 2(p-1)α + 2(p-1)/p·n·β, written out independently of AllReduceSeconds.
  const auto ring = [&](int64_t p, double n) {
    return 2.0 * (p - 1) * truth.alpha_s + 2.0 * (p - 1) / p * n * truth.beta_s_per_byte;
  };
  const std::vector<double> sizes = {4, 65536, 262144, 1048576};
  for (const int64_t ranks : {2, 3, 8}) {
    INFO(ranks << " ranks");
    std::vector<double> times;
    for (const double n : sizes) times.push_back(ring(ranks, n));
    const training::RingModel fitted = training::FitRingModel(ranks, sizes, times);
    CHECK(fitted.alpha_s == Approx(truth.alpha_s).epsilon(1e-9));
    CHECK(fitted.beta_s_per_byte == Approx(truth.beta_s_per_byte).epsilon(1e-9));
    CHECK(truth.AllReduceSeconds(ranks, 1e6) == Approx(ring(ranks, 1e6)).epsilon(1e-12));
  }
  CHECK(truth.AllReduceSeconds(1, 1e9) == 0);
  CHECK_THROWS_AS(training::FitRingModel(1, sizes, sizes), std::invalid_argument);

  // A step of 10 ms compute, 1 MB of gradients in 4 buckets and 2 count all-reduces: one
  // rank is all compute; with more ranks the latency terms grow and efficiency falls.
  const training::StepModel step{0.010, 1e6, 4, 2};
  CHECK(step.Efficiency(truth, 1) == 1.0);
  const double p8 = 0.010 + 4 * ring(8, 2.5e5) + 2 * ring(8, 8);
  CHECK(step.StepSeconds(truth, 8) == Approx(p8).epsilon(1e-12));
  CHECK(step.Efficiency(truth, 64) < step.Efficiency(truth, 8));
}

}  // namespace
}  // namespace seqbench
