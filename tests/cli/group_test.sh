#!/usr/bin/env bash
# Run groups through the command line: the shards of one group read as one run by
# report, check, show, compare, plot and readme (the same cases and columns as the
# suite run whole); a group with a missing, unfinished or duplicated shard, or with shards
# from two machines, is refused naming them (exit 2, nothing written); a shard run again
# resumes its own run, or does nothing once it is complete.
# Usage: group_test.sh SEQBENCH_BINARY SOURCE_DIR
set -euo pipefail
seqbench=$1
suite=$2/suites/ci.toml
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cd "$work"
run=("$seqbench" run "$suite" --repetitions 2 --filter forward --in-process)

# Exit 2, the message containing $1, the database unchanged.
refused() {
  local expected=$1
  shift
  local before=""
  [[ -e "$work/g.db" ]] && before=$(sha256sum "$work/g.db")
  set +e
  "$@" >"$work/stdout" 2>"$work/err"
  local rc=$?
  set -e
  [[ $rc -eq 2 ]] || fail "$* exited $rc, expected 2: $(cat "$work/err")"
  grep -qF -- "$expected" "$work/err" || fail "$*: message lacks '$expected': $(cat "$work/err")"
  [[ -z $before || $(sha256sum "$work/g.db") == "$before" ]] || fail "$* changed g.db"
}
csv_keys() { "$seqbench" report "$@" --format csv | python3 -c '
import csv, sys
rows = list(csv.DictReader(sys.stdin))
print(sorted(rows[0].keys()))
for r in rows: print(r["case_key"])'; }  # in the report's order: suite order

# 1. Bad input.
refused "--group names the shards of one run" "${run[@]}" --db "$work/g.db" --group g1
refused "--group 'a/b' must be" "${run[@]}" --db "$work/g.db" --group a/b --shard 1/2
refused "a counted run cannot be a group's shard" "${run[@]}" --db "$work/g.db" --group g1 \
  --shard 1/2 --count instructions
[[ ! -e "$work/g.db" ]] || fail "a refused run created the database"

# 2. The whole suite, and shards 1 and 3 of 3: shard 2 is missing.
"${run[@]}" --db "$work/whole.db" >/dev/null
"${run[@]}" --db "$work/g.db" --group g1 --shard 1/3 >/dev/null
"${run[@]}" --db "$work/g.db" --group g1 --shard 3/3 >/dev/null
refused "no run of group 'nosuch'" "$seqbench" report --group nosuch --db "$work/g.db"
refused "shard(s) 2 of 3 missing" "$seqbench" report --group g1 --db "$work/g.db"
refused "give one of RUN_ID, --group" "$seqbench" report 1 --group g1 --db "$work/g.db"
refused "shards of a group are read with --group" "$seqbench" report --latest --db "$work/g.db"

# 3. Shard 2 stopped after one case: unfinished, then resumed by the same command, then
#    nothing to do.
"${run[@]}" --db "$work/g.db" --group g1 --shard 2/3 --stop-after 1 >/dev/null || true
refused "shard 2/3 (run 3) is interrupted" "$seqbench" check --group g1 --db "$work/g.db"
"${run[@]}" --db "$work/g.db" --group g1 --shard 2/3 >"$work/resumed"
grep -q "resuming shard 2/3 of group g1" "$work/resumed" || fail "no resume: $(cat "$work/resumed")"
"${run[@]}" --db "$work/g.db" --group g1 --shard 2/3 >"$work/again"
grep -q "is complete in .*nothing to do" "$work/again" || fail "ran again: $(cat "$work/again")"
[[ $(sqlite3 "$work/g.db" "select count(*) from runs") -eq 3 ]] || fail "a shard stored twice"
refused "is complete in $work/g.db (run 3), measured otherwise" \
  "$seqbench" run "$suite" --repetitions 3 --filter forward --in-process --db "$work/g.db" \
  --group g1 --shard 2/3

# 4. The group reads as the whole suite: same case keys in the same order, same columns.
csv_keys --db "$work/whole.db" --latest >"$work/whole.keys"
csv_keys --db "$work/g.db" --group g1 >"$work/group.keys"
diff "$work/whole.keys" "$work/group.keys" || fail "the group's cases or columns differ"
"$seqbench" show --group g1 --db "$work/g.db" >"$work/show"  # a file: grep -q would cut a pipe
grep -q "^group 'g1'  complete" "$work/show" || fail "show --group: $(head -3 "$work/show")"
set +e
"$seqbench" check --group g1 --db "$work/g.db" >"$work/check"
rc=$?
set -e
[[ $rc -le 1 ]] && grep -q "check of group 'g1'" "$work/check" || fail "check --group exited $rc"
"$seqbench" compare --base-db "$work/whole.db" 1 --group g1 --db "$work/g.db" --format json \
  --gate time >"$work/compare.json" || [[ $? -eq 1 ]] || fail "compare --group failed"
python3 - "$work/compare.json" "$work/whole.keys" <<'PY' || fail "compare did not match every case"
import json, sys
matched = [c for c in json.load(open(sys.argv[1]))["cases"] if c.get("verdict")]
assert len(matched) == len(open(sys.argv[2]).read().split("\n")) - 2, len(matched)
PY
# gnuplot is part of ci/install-deps; the GPU machine does not carry it (ci/gpu/README.md).
if command -v gnuplot >/dev/null; then
  "$seqbench" plot --group g1 --db "$work/g.db" --x batch --y runtime >/dev/null 2>&1
  [[ -s group-g1_runtime.svg ]] || fail "plot --group wrote no group-g1_runtime.svg"
else
  echo "group_test: no gnuplot on PATH: plot --group not tried"
fi

# 5. README sections render from the group as from the whole run.
printf '<!-- seqbench:begin suite=ci mode=forward -->\n<!-- seqbench:end -->\n' >"$work/whole.md"
cp "$work/whole.md" "$work/group.md"
"$seqbench" readme "$work/whole.md" --db "$work/whole.db" >/dev/null
"$seqbench" readme "$work/group.md" --db "$work/g.db" >/dev/null
shape() { grep '^|' "$1" | cut -d'|' -f2 | sort; }  # the first column: the variants
[[ $(grep -c '^|' "$work/whole.md") -gt 2 ]] || fail "no table in $(cat "$work/whole.md")"
diff <(shape "$work/whole.md") <(shape "$work/group.md") || fail "readme rows differ"
diff <(grep '^| variant\|^|--' "$work/whole.md") <(grep '^| variant\|^|--' "$work/group.md") ||
  fail "readme columns differ"

# 6. A shard from another CPU: refused naming the field; split on request.
sqlite3 "$work/g.db" "update environment set value = 'another cpu' where run_id = 3 and key = 'cpu_model'"
refused "cpu_model: " "$seqbench" report --group g1 --db "$work/g.db"
"$seqbench" report --group g1 --db "$work/g.db" --allow-mixed-machines >"$work/split.md"
[[ $(grep -c "^## group 'g1'" "$work/split.md") -eq 2 ]] || fail "split: $(head -20 "$work/split.md")"
grep -q "cpu_model=another cpu" "$work/split.md" || fail "the split names no machine"
echo "group tests passed"
