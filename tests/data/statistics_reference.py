#!/usr/bin/python3
# Reference values for tests/statistics_test.cc, computed by NumPy and SciPy so that
# stats/statistics.cc is checked against an implementation it shares no code with.
#
# Produced by (from the repository root, with Debian's python3-numpy and python3-scipy):
#   /usr/bin/python3 tests/data/statistics_reference.py
# with NumPy 1.24.2 and SciPy 1.10.1 (Debian bookworm packages). It writes
# tests/data/statistics_reference.json next to this script; rerunning it with the same
# versions reproduces the file byte for byte (fixed seed).
#
# The samples are positive, like timings, so that no statistic sits near zero where a
# relative tolerance would compare rounding noise.
import json
import math
import os

import numpy as np
import scipy
from scipy import stats

SEED = 1  # the first seed for which every guard below holds
QUANTILES = [0.1, 0.25, 0.75, 0.9]

rng = np.random.default_rng(SEED)


def rounded(values, decimals):
    return [round(float(v), decimals) for v in values]


# name -> values. Each sample gets every one-sample statistic; pairs below refer to them.
samples = {
    # Small sizes, where index arithmetic (n-1, the middle two) goes wrong first.
    "n1": [3.25],
    "n2": [1.5, 4.0],
    "n3": rounded(rng.uniform(1.0, 5.0, 3), 6),
    "n5": rounded(rng.normal(10.0, 2.0, 5), 6),
    "n9": rounded(rng.normal(12.0, 2.0, 9), 6),
    # Skewed: mean and median differ clearly, so a mean-for-median bug shows.
    "lognormal_40": rounded(rng.lognormal(0.0, 1.0, 40), 9),
    "outlier_15": rounded(rng.normal(10.0, 0.5, 14), 6) + [100.0],
    # Ties from rounding to one decimal, unequal sizes.
    "rounded_7": rounded(rng.normal(5.0, 0.3, 7), 1),
    "rounded_12": rounded(rng.normal(5.2, 0.3, 12), 1),
    # Many exact duplicates within and across the two samples: large tie groups make the
    # t^3 - t term of the variance matter.
    "duplicates_x": [float(v) for v in rng.choice([1.0, 2.0, 3.0, 4.0], 22, p=[.1, .4, .4, .1])],
    "duplicates_y": [float(v) for v in rng.choice([1.0, 2.0, 3.0, 4.0], 17, p=[.05, .25, .4, .3])],
    # Clearly separated (p < 0.01) and from one distribution (p > 0.5 for this seed).
    "shifted_a": rounded(rng.normal(20.0, 1.0, 20), 6),
    "shifted_b": rounded(rng.normal(21.5, 1.0, 20), 6),
    "same_a": rounded(rng.normal(20.0, 1.0, 15), 6),
    "same_b": rounded(rng.normal(20.0, 1.0, 18), 6),
    # All values equal: zero variance, where the U test must report p = 1.
    "constant_4": [2.5] * 4,
    "constant_3": [2.5] * 3,
}

pairs = [
    ("n2", "n3"),
    ("n5", "n9"),
    ("rounded_7", "rounded_12"),
    ("duplicates_x", "duplicates_y"),
    ("shifted_a", "shifted_b"),
    ("same_a", "same_b"),
    ("lognormal_40", "outlier_15"),
    ("constant_4", "constant_3"),
]


def finite_or_none(value):
    # NumPy's std(ddof=1) of one value is nan; JSON has no nan, and the C++ contract
    # there is 0, which the test checks instead.
    value = float(value)
    return value if math.isfinite(value) else None


def one_sample(values):
    a = np.asarray(values, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        std = a.std(ddof=1) if a.size > 1 else float("nan")
    q = {str(p): float(np.quantile(a, p)) for p in QUANTILES}
    mean = float(a.mean())
    return {
        "values": [float(v) for v in a],
        "mean": mean,
        "median": float(np.median(a)),
        "std": finite_or_none(std),
        "cv": finite_or_none(std / mean) if a.size > 1 else None,
        "min": float(a.min()),
        "max": float(a.max()),
        "quantiles": q,
        "iqr": float(np.quantile(a, 0.75) - np.quantile(a, 0.25)),
    }


def mwu_p(x, y, tie_power):
    """The asymptotic two-sided p-value, written out; tie_power=3 is the right one."""
    n1, n2 = len(x), len(y)
    n = n1 + n2
    ranks = stats.rankdata(np.concatenate([x, y]))
    u1 = ranks[:n1].sum() - n1 * (n1 + 1) / 2
    _, t = np.unique(np.concatenate([x, y]), return_counts=True)
    tie_term = float((t.astype(float) ** tie_power - t).sum())
    variance = n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1)))
    if variance <= 0:
        return u1, 1.0
    z = (abs(u1 - n1 * n2 / 2) - 0.5) / math.sqrt(variance)
    return u1, min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2)))


pair_records = []
largest_tie_effect = 0.0
for first, second in pairs:
    x, y = samples[first], samples[second]
    result = stats.mannwhitneyu(x, y, alternative="two-sided", method="asymptotic",
                                use_continuity=True)
    u, p = float(result.statistic), float(result.pvalue)
    # The formula the C++ implements must reproduce SciPy here, or the spec is wrong.
    mine_u, mine_p = mwu_p(x, y, 3)
    assert mine_u == u, (first, second, mine_u, u)
    assert abs(mine_p - p) <= 1e-12 * max(p, 1e-300), (first, second, mine_p, p)
    _, wrong_p = mwu_p(x, y, 2)
    largest_tie_effect = max(largest_tie_effect, abs(wrong_p - p))
    pair_records.append({"first": first, "second": second, "u": u, "p_value": p})

by_name = {record["first"] + "/" + record["second"]: record for record in pair_records}
# Guards that keep the fixture discriminating.
assert largest_tie_effect > 1e-3, largest_tie_effect
assert by_name["shifted_a/shifted_b"]["p_value"] < 0.01, by_name["shifted_a/shifted_b"]
assert by_name["same_a/same_b"]["p_value"] > 0.5, by_name["same_a/same_b"]
assert by_name["constant_4/constant_3"]["p_value"] == 1.0
sample_records = {name: one_sample(values) for name, values in samples.items()}
for name in ("lognormal_40", "outlier_15"):
    record = sample_records[name]
    assert abs(record["mean"] - record["median"]) > 0.1 * record["median"], name



# Intervals (issue 46): each end computed exactly, so that a lopsided interval (one tail at
# the wrong quantile) or a one-tailed coverage cannot match. Drawn from their own generator,
# so that the samples above keep their values.
interval_rng = np.random.default_rng(46)
CONFIDENCES = [0.8, 0.9, 0.95]


def resampled_median_distribution(values):
    """The exact distribution of the median of n draws with replacement, n odd and the
    values distinct: the median is at most x_(k) when at least (n+1)/2 draws are, a binomial
    with p = k/n. Returns (sorted values, probabilities)."""
    x = np.sort(np.asarray(values, dtype=np.float64))
    n = x.size
    assert n % 2 == 1 and np.unique(x).size == n
    at_most = [stats.binom.sf((n + 1) // 2 - 1, n, k / n) for k in range(1, n + 1)]
    return x, np.diff(np.concatenate([[0.0], at_most]))


def exact_bootstrap_quantiles(first, second, levels):
    """The percentile bootstrap's ends with infinitely many resamples: quantiles of the
    exact distribution of median(second*) / median(first*). Each level's quantile is the
    smallest ratio whose cumulative probability reaches it; the fixture is kept only where
    no cumulative step lies within MARGIN of a level, so that a finite bootstrap (200000
    resamples in the test: a standard error of 0.00035 at 2.5%, MARGIN 7 of them) lands on
    the same ratio."""
    a, pa = resampled_median_distribution(first)
    b, pb = resampled_median_distribution(second)
    ratios = (b[None, :] / a[:, None]).ravel()
    weights = (pa[:, None] * pb[None, :]).ravel()
    order = np.argsort(ratios, kind="stable")
    ratios, cumulative = ratios[order], np.cumsum(weights[order])
    result = {}
    for level in levels:
        assert np.min(np.abs(cumulative - level)) > MARGIN, (level, cumulative)
        result[str(level)] = float(ratios[np.searchsorted(cumulative, level)])
    return result


MARGIN = 0.0025
bootstrap_records = []
for n1, n2 in [(5, 7), (9, 5)]:
    for attempt in range(10000):
        first = rounded(interval_rng.lognormal(0.0, 0.3, n1), 6)
        second = rounded(1.3 * interval_rng.lognormal(0.0, 0.3, n2), 6)
        levels = sorted({q for c in CONFIDENCES for q in ((1 - c) / 2, (1 + c) / 2, c)})
        try:
            ends = exact_bootstrap_quantiles(first, second, levels)
        except AssertionError:
            continue  # a cumulative step too near a level: draw again
        break
    else:
        raise SystemExit("no bootstrap fixture with every level clear of a step")
    records = []
    for c in CONFIDENCES:
        low, high = ends[str((1 - c) / 2)], ends[str((1 + c) / 2)]
        # Discriminating: a high end at the c quantile (one tail) is another ratio.
        assert ends[str(c)] != high, (c, ends)
        records.append({"confidence": c, "low": low, "high": high,
                        "one_tailed_high": ends[str(c)]})
    bootstrap_records.append({"first": first, "second": second,
                              "median_ratio": float(np.median(second) / np.median(first)),
                              "intervals": records})


def median_interval(values, confidence):
    """[x_(j), x_(n+1-j)] with the largest j whose two-sided binomial coverage
    1 - 2 P(Bin(n, 1/2) <= j-1) reaches the confidence (SciPy's binomial), or None."""
    n = len(values)
    best = 0
    for j in range(1, (n + 1) // 2 + 1):
        if 1 - 2 * stats.binom.cdf(j - 1, n, 0.5) >= confidence:
            best = j
    if best == 0:
        return None
    x = np.sort(np.asarray(values, dtype=np.float64))
    return {"confidence": confidence, "j": best, "low": float(x[best - 1]),
            "high": float(x[n - best])}


median_interval_records = []
one_tailed_differs = False
for n in [6, 10, 15, 20, 31]:
    values = rounded(interval_rng.lognormal(0.0, 0.5, n), 6)
    found = [median_interval(values, c) for c in CONFIDENCES + [0.99]]
    for c, interval in zip(CONFIDENCES + [0.99], found):
        if interval is None:
            continue
        # The one-tailed count (1 - P(Bin <= j-1)) would pick another j somewhere.
        one_tailed = max(j for j in range(1, (n + 1) // 2 + 1)
                         if 1 - stats.binom.cdf(j - 1, n, 0.5) >= c)
        one_tailed_differs |= one_tailed != interval["j"]
    median_interval_records.append({"values": values,
                                    "intervals": [i for i in found if i is not None]})
assert one_tailed_differs

# A power law's exponent and the half-width of its interval: SciPy's least-squares line on
# the logs, its slope's standard error, Student's t with n - 2 degrees of freedom.
power_law_x = [64.0, 128.0, 256.0, 512.0, 1024.0]
power_law_y = rounded([0.002 * x ** 1.1 * float(interval_rng.lognormal(0.0, 0.05))
                       for x in power_law_x], 9)
fit = stats.linregress(np.log(power_law_x), np.log(power_law_y))
power_law_records = []
for c in CONFIDENCES:
    half = float(stats.t.ppf(0.5 + c / 2, len(power_law_x) - 2) * fit.stderr)
    # Discriminating: the normal quantile, or the residuals over n, give other widths.
    assert abs(stats.norm.ppf(0.5 + c / 2) * fit.stderr - half) > 0.01 * half
    power_law_records.append({"confidence": c, "half_width": half})
power_law = {"x": power_law_x, "y": power_law_y, "exponent": float(fit.slope),
             "intervals": power_law_records}

reference = {
    "generated_by": "/usr/bin/python3 tests/data/statistics_reference.py",
    "numpy_version": np.__version__,
    "scipy_version": scipy.__version__,
    "seed": SEED,
    "samples": sample_records,
    "pairs": pair_records,
    "bootstrap_ratio_of_medians": bootstrap_records,
    "median_intervals": median_interval_records,
    "power_law": power_law,
}
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "statistics_reference.json")
with open(path, "w") as out:
    # json writes floats with repr(): the shortest string that round-trips, i.e. every bit.
    json.dump(reference, out, indent=1)
    out.write("\n")
print(f"wrote {path} ({os.path.getsize(path)} bytes); "
      f"largest |p(t^2-t) - p(t^3-t)| = {largest_tie_effect:.3g}")
