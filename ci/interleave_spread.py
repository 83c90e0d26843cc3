"""The spread, across runs, of the within-run ratios of runs labelled "interleave off" and
"interleave on" (ci/measure_interleave): for each variant and workload, the ratio of its
median step time to the baseline's median step time on the same workload in the same run
(the inverse of the speedup `check` judges), then, across the runs of each kind, that
ratio's IQR/median (NumPy's linear quantiles) and max/min. Reads seqbench's store only."""
import sqlite3
import statistics
import sys


def quantile(values, q):
    values = sorted(values)
    position = (len(values) - 1) * q
    low = int(position)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (position - low)


def main(path):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    ratios = {}  # (label, variant, workload) -> [ratio per run]
    runs = db.execute("SELECT run_id, label FROM runs WHERE status = 'complete' AND "
                      "label IN ('interleave off', 'interleave on') ORDER BY run_id").fetchall()
    for run_id, label in runs:
        medians = {}
        for variant, workload, median in db.execute(
                "SELECT c.variant_name, c.mode || ' B=' || c.batch || ' T=' || c.seq_len, "
                "m.value FROM cases c JOIN metrics m ON m.case_id = c.case_id "
                "WHERE c.run_id = ? AND m.name = 'runtime_median_s' AND c.status = 'ok'",
                (run_id,)):
            medians[(variant, workload)] = median
        for (variant, workload), median in medians.items():
            base = medians.get(("baseline", workload))
            if variant != "baseline" and base:
                ratios.setdefault((label, variant, workload), []).append(median / base)
    print(f"{len(runs)} runs of {path}")
    print("| repetition order | runs | ratios | median IQR/median | median max/min | worst max/min |")
    print("|---|---|---|---|---|---|")
    for label in ("interleave off", "interleave on"):
        series = [v for (l, _, _), v in ratios.items() if l == label and len(v) >= 3]
        if not series:
            continue
        relative_iqr = [(quantile(v, 0.75) - quantile(v, 0.25)) / statistics.median(v)
                        for v in series]
        spread = [max(v) / min(v) for v in series]
        count = sum(1 for _, l in runs if l == label)
        order = "interleaved (--interleave)" if label == "interleave on" else "case after case"
        print(f"| {order} | {count} | {len(series)} | {statistics.median(relative_iqr):.3f} | "
              f"{statistics.median(spread):.3f} | {max(spread):.3f} |")


if __name__ == "__main__":
    main(sys.argv[1])
