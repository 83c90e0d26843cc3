#!/usr/bin/env bash
# `seqbench history` end to end on a published database (20 A/A runs of suites/ci.toml):
# every format reads the same series, a planted step in a copy is found at its run, runs
# go in git's commit order where git knows their commits (--since REV keeps REV's on),
# bad input is exit 2 with the fix, and reading never writes the database.
# Usage: history_test.sh SEQBENCH_BINARY SOURCE_DIR
set -euo pipefail
seqbench=$1
source_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
db="$source_dir/results/published/gate.db"
before=$(sha256sum "$db")

"$seqbench" history --suite ci --db "$db" >"$work/md" || fail "history md"
grep -q "^| batched mode=train .* | none |$" "$work/md" || fail "an A/A series shows a change"
"$seqbench" history --suite ci --db "$db" --format csv >"$work/csv" || fail "history csv"
"$seqbench" history --suite ci --db "$db" --format json >"$work/json" || fail "history json"
points=$(python3 -c "import json,sys; print(sum(len(s['points']) for s in json.load(open('$work/json'))['series']))")
[[ $points -eq $(($(wc -l <"$work/csv") - 1)) ]] || fail "json has $points points, csv $(wc -l <"$work/csv")"

# A copy whose last ten runs of one case are 3x slower (the A/A series spread about 25%):
# found at the first of them, give or take one run.
cp "$db" "$work/step.db"
sqlite3 "$work/step.db" "UPDATE samples SET seconds = seconds * 3 WHERE case_id IN
  (SELECT case_id FROM cases WHERE variant_name = 'scan' AND mode = 'train' AND run_id IN
   (SELECT run_id FROM runs ORDER BY started_at DESC LIMIT 10))"
first=$(sqlite3 "$work/step.db" "SELECT run_id FROM (SELECT run_id, started_at FROM runs
  ORDER BY started_at DESC LIMIT 10) ORDER BY started_at LIMIT 1")
"$seqbench" history --suite ci --db "$work/step.db" --format csv >"$work/step.csv"
changes=$(python3 - "$work/step.csv" <<'PY'
import csv, sys
for row in csv.DictReader(open(sys.argv[1])):
    if row["change"]:
        print(row["case_key"].split(" ")[0], row["case_key"].split(" ")[1], row["run_id"],
              row["change"].split("×")[0])
PY
)
read -r key mode at ratio <<<"$changes"
[[ "$key $mode" == "scan{chunk_size=8} mode=train" && $at -ge $((first - 1)) && $at -le $((first + 1)) &&
  $(awk -v r="$ratio" 'BEGIN { print (r > 2.5 && r < 3.5) }') == 1 ]] || fail "the planted step at run $first: changes found: $changes"

# Commit order: in a repository with commits c1 <- c2 <- c3, runs stored (by start time)
# against c3, then c1, then c2 go in commit order; --since c2 keeps c2's and c3's; outside a
# repository they go in start order.
repo="$work/repo"
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1  # no signing or hooks of the user's
git init -q "$repo"
for c in 1 2 3; do git -C "$repo" -c user.name=t -c user.email=t@t commit -q --allow-empty -m "c$c"; done
sha() { git -C "$repo" rev-parse "HEAD~$((3 - $1))"; }
cp "$db" "$work/order.db"
runs=($(sqlite3 "$work/order.db" "SELECT run_id FROM runs WHERE suite_name = 'ci' ORDER BY started_at"))
third=$((${#runs[@]} / 3))
for i in "${!runs[@]}"; do
  commit=$(( i < third ? 3 : (i < 2 * third ? 1 : 2) ))
  sqlite3 "$work/order.db" "UPDATE environment SET value = '$(sha "$commit")'
    WHERE key = 'git_sha' AND run_id = ${runs[$i]}"
done
first_series() { python3 -c '
import csv, sys
rows = list(csv.DictReader(sys.stdin))
print(" ".join(r["run_id"] for r in rows if r["case_key"] == rows[0]["case_key"]))'; }
expected="${runs[*]:$third:$third} ${runs[*]:$((2 * third))} ${runs[*]:0:$third}"
got=$(cd "$repo" && "$seqbench" history --suite ci --db "$work/order.db" --format csv | first_series)
[[ $got == "$expected" ]] || fail "commit order: got $got, expected $expected"
(cd "$repo" && "$seqbench" history --suite ci --db "$work/order.db") >"$work/order.md"
grep -q "runs in commit order" "$work/order.md" || fail "the table does not say it is in commit order"
got=$(cd "$repo" && "$seqbench" history --suite ci --db "$work/order.db" --format csv --since "$(sha 2)" | first_series)
[[ $got == "${runs[*]:$((2 * third))} ${runs[*]:0:$third}" ]] || fail "--since c2 kept $got"
mkdir "$work/not_a_repo"
got=$(cd "$work/not_a_repo" && GIT_CEILING_DIRECTORIES="$work" "$seqbench" history --suite ci \
  --db "$work/order.db" --format csv | first_series)
[[ $got == "${runs[*]}" ]] || fail "outside a repository: got $got, expected start order"
# One run of a commit git does not know: start order again, and the table says so.
sqlite3 "$work/order.db" "UPDATE environment SET value = '$(printf 'f%.0s' {1..40})'
  WHERE key = 'git_sha' AND run_id = ${runs[0]}"
got=$(cd "$repo" && "$seqbench" history --suite ci --db "$work/order.db" --format csv | first_series)
[[ $got == "${runs[*]}" ]] || fail "an unknown commit: got $got, expected start order"
(cd "$repo" && "$seqbench" history --suite ci --db "$work/order.db") >"$work/order.md"
grep -q "runs in start order" "$work/order.md" || fail "the table does not say start order"

# Bad input: exit 2, the fix named, nothing written.
expect_2() {
  local what=$1 pattern=$2
  shift 2
  set +e
  "$seqbench" history "$@" >/dev/null 2>"$work/err"
  local rc=$?
  set -e
  [[ $rc -eq 2 ]] || fail "$what: exit $rc, not 2"
  grep -q "$pattern" "$work/err" || fail "$what: $(cat "$work/err")"
}
expect_2 "no suite" "give --suite NAME" --db "$db"
expect_2 "unknown suite" "no complete benchmark run of suite 'nope'" --suite nope --db "$db"
expect_2 "unknown metric" "unknown --metric 'latency'; give runtime|" --suite ci --db "$db" --metric latency
expect_2 "bad max-p" "max-p must be in (0, 1)" --suite ci --db "$db" --max-p 0
expect_2 "unknown revision" "git knows no such commit" --suite ci --db "$db" --since no-such-branch
expect_2 "missing database" "history" --suite ci --db "$work/none.db"
[[ ! -e $work/none.db ]] || fail "a missing database was created"
[[ $(sha256sum "$db") == "$before" ]] || fail "history wrote the database"
echo "history tests passed"
