#!/usr/bin/env bash
# Tidy access from Python (results/README.md, "From Python"): the case_results view gives
# pandas one typed row per case, and the README's recipe, run as written, pivots a run's
# median step times into speedups over its baseline that agree with seqbench's own
# `report --format csv`. Also: the view has every workload field and fixed CSV metric as a
# column (tests/store_test.cc checks that an older or stale view is rebuilt). Skipped
# (exit 77) where no python3 imports pandas (Debian's python3-pandas).
# Usage: pandas_test.sh SEQBENCH_BINARY SOURCE_DIR
set -euo pipefail
seqbench=$1
source_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
python=""
for candidate in "${SEQBENCH_PYTHON:-}" python3 /usr/bin/python3; do
  [[ -n $candidate ]] && "$candidate" -c 'import pandas' 2>/dev/null && { python=$candidate; break; }
done
[[ -n $python ]] || { echo "no python3 imports pandas: skipped"; exit 77; }

cat >"$work/tiny.toml" <<'TOML'
name = "tiny_pandas"
description = "three variants at two lengths"
family = "simple_rnn"
baseline = "baseline"
[model]
vocab_size = 32
width = 16
layers = 1
heads = 2
[measure]
repetitions = 3
warmup = 1
[[variants]]
key = "baseline"
[[variants]]
key = "batched"
[[variants]]
key = "scan"
[grid]
mode = "train"
batch = 2
seq_len = [8, 16]
TOML
"$seqbench" run "$work/tiny.toml" --db "$work/r.db" --label "pandas <b>" >/dev/null 2>&1 ||
  fail "the tiny run"
"$seqbench" report --latest --db "$work/r.db" --format csv >"$work/report.csv"

# The recipe exactly as results/README.md shows it (between its python fences under
# "From Python"), with the database's path put in.
recipe=$(awk '/^### From Python/{f=1} f && /^```python$/{p=1; next} p && /^```$/{exit} p' \
  "$source_dir/results/README.md")
[[ -n $recipe ]] || fail "results/README.md has no python recipe under 'From Python'"
DB="$work/r.db" CSV="$work/report.csv" RECIPE="$recipe" "$python" - <<'PY' || fail "the recipe"
import csv, os, sqlite3
import pandas
db = os.environ["DB"]
namespace = {"db": db}
exec(os.environ["RECIPE"].replace('"results/seqbench.db"', repr(db)), namespace)
rows = namespace["rows"]
speedups = namespace["speedups"]
# One typed row per case, the run's facts beside it.
assert len(rows) == 6, len(rows)
assert str(rows["runtime_median_s"].dtype) == "float64", rows.dtypes
assert str(rows["seq_len"].dtype) == "int64", rows.dtypes
assert set(rows["label"]) == {"pandas <b>"}, set(rows["label"])
assert rows["git_sha"].notna().all()
# The pivot: one row per length, one column per variant, baseline 1.0.
assert list(speedups.index) == [8, 16], speedups.index
assert sorted(speedups.columns) == ["baseline", "batched", "scan"], speedups.columns
assert (speedups["baseline"] == 1.0).all()
# seqbench's own speedup is the ratio of median throughputs, which on one workload is the
# ratio of median step times: the pivot must agree with the CSV's medians.
with open(os.environ["CSV"]) as f:
    medians = {(r["variant_name"], int(r["seq_len"])): float(r["runtime_median_s"])
               for r in csv.DictReader(f)}
for (length, variant), value in speedups.stack().items():
    expected = medians[("baseline", length)] / medians[(variant, length)]
    assert abs(value - expected) <= 1e-9 * expected, (variant, length, value, expected)
print("recipe ok")
PY

# The view's columns are the tables': every workload field and every fixed CSV metric.
columns=$(sqlite3 "$work/r.db" "SELECT name FROM pragma_table_info('case_results')")
for column in mode dtype device batch seq_len min_len layers width heads vocab_size ffn \
  runtime_median_s tokens_per_s peak_bytes activation_bytes correct step_flops; do
  grep -qx "$column" <<<"$columns" || fail "case_results lacks $column"
done
echo "pandas tests passed"
