#!/usr/bin/python3
# Reference values for tests/statistics_test.cc, computed by NumPy and SciPy so that
# harness/statistics.cc is checked against an implementation it shares no code with.
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

reference = {
    "generated_by": "/usr/bin/python3 tests/data/statistics_reference.py",
    "numpy_version": np.__version__,
    "scipy_version": scipy.__version__,
    "seed": SEED,
    "samples": sample_records,
    "pairs": pair_records,
}
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "statistics_reference.json")
with open(path, "w") as out:
    # json writes floats with repr(): the shortest string that round-trips, i.e. every bit.
    json.dump(reference, out, indent=1)
    out.write("\n")
print(f"wrote {path} ({os.path.getsize(path)} bytes); "
      f"largest |p(t^2-t) - p(t^3-t)| = {largest_tie_effect:.3g}")
