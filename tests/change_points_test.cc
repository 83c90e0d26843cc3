// Change points (stats/change_points.h) on seeded synthetic series: flat noise gives few
// false changes at the defaults, a step is found at its commit, and a series that moves
// twice is split twice. The rates are measured over many seeded series, as the issue's
// targets are rates; reports/README.md, "Change points", gives the measured table.
#include "stats/change_points.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

namespace seqbench::stats {
namespace {

// `before` points at 1 then `after` at `step`, each times a lognormal of log-spread sigma.
std::vector<double> Series(size_t before, size_t after, double step, double sigma, uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::normal_distribution<double> noise(0.0, sigma);
  std::vector<double> values;
  for (size_t i = 0; i < before + after; ++i)
    values.push_back((i < before ? 1.0 : step) * std::exp(noise(generator)));
  return values;
}

struct Rates {
  double any = 0;      // series with at least one change
  double at_step = 0;  // series with a change within one point of the step
};

Rates Measure(size_t before, size_t after, double step, double sigma, int series) {
  Rates rates;
  for (int s = 0; s < series; ++s) {
    const auto changes = FindChangePoints(Series(before, after, step, sigma, 1000 + s));
    rates.any += changes.empty() ? 0 : 1;
    for (const ChangePoint& change : changes) {
      if (std::abs(static_cast<long>(change.index) - static_cast<long>(before)) <= 1) {
        rates.at_step += 1;
        break;
      }
    }
  }
  rates.any /= series;
  rates.at_step /= series;
  return rates;
}

TEST_CASE("change points: flat lognormal noise gives a false change in at most 5% of series",
          "[change_points]") {
  for (const double sigma : {0.1, 0.3}) {
    const Rates flat = Measure(10, 10, 1.0, sigma, 400);
    INFO("sigma " << sigma << ": " << flat.any * 100 << "% of flat series had a change");
    CHECK(flat.any <= 0.05);
  }
}

TEST_CASE("change points: a 10% step with 10 points a side is found at its commit",
          "[change_points]") {
  // The noise at which a run's median is a point: 2% (a quiet machine's medians, or the
  // counts gate's instructions).
  const Rates step = Measure(10, 10, 1.1, 0.02, 400);
  INFO(step.at_step * 100 << "% found within one point of the step");
  CHECK(step.at_step >= 0.95);
  // Two regressions in a row: two changes, in order, each with its own ratio.
  std::vector<double> values = Series(8, 8, 1.3, 0.01, 7);
  for (double value : Series(0, 8, 1.3 * 1.3, 0.01, 8)) values.push_back(value);
  const auto changes = FindChangePoints(values);
  REQUIRE(changes.size() == 2);
  CHECK(changes[0].index == 8);
  CHECK(changes[1].index == 16);
  CHECK(changes[0].ratio.estimate == Approx(1.3).epsilon(0.03));
  CHECK(changes[1].ratio.estimate == Approx(1.3).epsilon(0.03));
  CHECK(changes[0].ratio.low <= changes[0].ratio.estimate);
  CHECK(changes[0].p_value <= 0.05);
}

TEST_CASE("change points: too short a series, or too small a move, is no change",
          "[change_points]") {
  CHECK(FindChangePoints({}).empty());
  CHECK(FindChangePoints({1, 1, 1, 2, 2, 2}).empty());            // 3 a side under min_side 4
  CHECK(FindChangePoints(std::vector<double>(20, 3.0)).empty());  // constant: p = 1
  // Zeros before a step: no ratio to report, no change (and no throw).
  std::vector<double> zeros(10, 0.0);
  zeros.insert(zeros.end(), 10, 1.0);
  CHECK(FindChangePoints(zeros).empty());
  // A clean 1% step: significant, but under min_magnitude (2%).
  CHECK(FindChangePoints(Series(10, 10, 1.01, 0.0001, 3)).empty());
  ChangePointOptions loose;
  loose.min_magnitude = 0.005;
  CHECK(FindChangePoints(Series(10, 10, 1.01, 0.0001, 3), loose).size() == 1);
}

// The table in reports/README.md, "Change points": seqbench_tests "[.change_points_table]".
TEST_CASE("change points: the rates table at the defaults", "[.change_points_table]") {
  std::printf("| log-spread sigma | flat: series with a change | 10%% step: found at it ±1 |\n");
  std::printf("|---|---|---|\n");
  for (const double sigma : {0.01, 0.02, 0.03, 0.05, 0.1, 0.3}) {
    const Rates flat = Measure(10, 10, 1.0, sigma, 1000);
    const Rates step = Measure(10, 10, 1.1, sigma, 1000);
    std::printf("| %.2f | %.1f%% | %.1f%% |\n", sigma, 100 * flat.any, 100 * step.at_step);
  }
}

}  // namespace
}  // namespace seqbench::stats
