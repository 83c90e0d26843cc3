#!/usr/bin/env bash
# seqbench rm: a run goes whole (no case, sample, metric, step or environment row of it
# is left) or not at all; unknown ids, a shard whose group keeps others, one side of an A/B
# pair, a running run, and no --yes without a terminal are refused with exit 2 and the
# file unchanged; removing twice is refused the second time; a read-only file is left as
# it was.
# Usage: remove_test.sh SEQBENCH_BINARY SOURCE_DIR
set -euo pipefail
seqbench=$1
suite=$2/suites/ci.toml
work=$(mktemp -d)
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cd "$work"
db=$work/r.db
query() { sqlite3 "$db" "$1"; }
run=("$seqbench" run "$suite" --repetitions 2 --filter '^(baseline|batched) mode=forward' --in-process --db "$db")

# Exit 2 with $1 in the message, and r.db byte for byte as it was. stdin is not a
# terminal here (ctest gives none; </dev/null makes sure).
refused() {
  local expected=$1
  shift
  local before
  before=$(sha256sum "$db")
  set +e
  "$@" </dev/null >"$work/out" 2>"$work/err"
  local rc=$?
  set -e
  [[ $rc -eq 2 ]] || fail "$* exited $rc, expected 2: $(cat "$work/err")"
  grep -qF -- "$expected" "$work/err" || fail "$*: message lacks '$expected': $(cat "$work/err")"
  [[ $(sha256sum "$db") == "$before" ]] || fail "$* changed r.db"
}
# Rows of run $1 anywhere, and rows whose case or run is gone (orphans).
rows_of() {
  query "SELECT (SELECT COUNT(*) FROM runs WHERE run_id = $1)
              + (SELECT COUNT(*) FROM cases WHERE run_id = $1)
              + (SELECT COUNT(*) FROM environment WHERE run_id = $1)
              + (SELECT COUNT(*) FROM expectations WHERE run_id = $1)"
}
orphans() {
  query "SELECT (SELECT COUNT(*) FROM samples WHERE case_id NOT IN (SELECT case_id FROM cases))
              + (SELECT COUNT(*) FROM metrics WHERE case_id NOT IN (SELECT case_id FROM cases))
              + (SELECT COUNT(*) FROM case_functions WHERE case_id NOT IN (SELECT case_id FROM cases))
              + (SELECT COUNT(*) FROM environment WHERE run_id NOT IN (SELECT run_id FROM runs))
              + (SELECT COUNT(*) FROM cases WHERE run_id NOT IN (SELECT run_id FROM runs))"
}

# Runs 1 and 2 plain, 3 and 4 the two shards of group g1, 5 plain.
"${run[@]}" >/dev/null
"${run[@]}" >/dev/null
"${run[@]}" --group g1 --shard 1/2 >/dev/null
"${run[@]}" --group g1 --shard 2/2 >/dev/null
"${run[@]}" >/dev/null
[[ $(query "SELECT COUNT(*) FROM runs") -eq 5 ]] || fail "setup: $(query "SELECT COUNT(*) FROM runs") runs"
[[ $(query "SELECT COUNT(*) FROM samples JOIN cases USING (case_id) WHERE run_id = 3") -gt 0 ]] ||
  fail "setup: run 3 has no samples"
# Runs 1 and 2 as the two sides of an A/B pair, linked as seqbench ab links them.
query "INSERT INTO environment VALUES (1, 'ab_pair', (SELECT uuid FROM runs WHERE run_id = 2)),
                                      (2, 'ab_pair', (SELECT uuid FROM runs WHERE run_id = 1))"

# 1. Bad input and refusals: exit 2, nothing changed.
refused "name the runs to remove" "$seqbench" rm --db "$db"
refused "'x1' is not a run id" "$seqbench" rm x1 --db "$db" --yes
refused "'0' is not a run id" "$seqbench" rm 0 --db "$db" --yes
refused "no results database at" "$seqbench" rm 1 --db "$work/none.db" --yes
[[ ! -e $work/none.db ]] || fail "rm created a database"
refused "no run 99 in" "$seqbench" rm 5 99 --db "$db" --yes
refused "give --yes" "$seqbench" rm 5 --db "$db"
refused "shard of group 'g1', which keeps run(s) 4" "$seqbench" rm 3 --db "$db" --yes
refused "whose other side, run 2, stays" "$seqbench" rm 1 --db "$db" --yes
query "UPDATE runs SET status = 'running' WHERE run_id = 5"
refused "run 5 is marked running" "$seqbench" rm 5 --db "$db" --yes

# 2. What others need goes together, or with --force; each run whole.
"$seqbench" rm 3 4 3 --db "$db" --yes >"$work/out" || fail "rm 3 4: $(cat "$work/out")"
grep -q "removed run 3 (suite ci" "$work/out" || fail "rm 3 4 said: $(cat "$work/out")"
[[ $(grep -c "^removed run" "$work/out") -eq 2 ]] || fail "3 given twice: $(cat "$work/out")"
for id in 3 4; do [[ $(rows_of $id) -eq 0 ]] || fail "run $id: $(rows_of $id) rows left"; done
[[ $(orphans) -eq 0 ]] || fail "$(orphans) orphaned rows"
"$seqbench" rm 1 2 --db "$db" --yes >/dev/null
"$seqbench" rm 5 --db "$db" --yes --force >/dev/null
[[ $(query "SELECT COUNT(*) FROM runs") -eq 0 ]] || fail "runs left: $(query "SELECT run_id FROM runs")"
[[ $(orphans) -eq 0 ]] || fail "$(orphans) orphaned rows"
"$seqbench" show --db "$db" >/dev/null || fail "show after rm"

# 3. Twice: the second is an unknown run.
refused "no run 5 in" "$seqbench" rm 5 --db "$db" --yes

# 4. A read-only file: by its permissions for a user; for root, whom permissions do not
# stop, on a read-only bind mount of the folder in a mount namespace of its own (where
# unshare(1) may make one), else skipped.
"${run[@]}" >/dev/null
fresh=$(query "SELECT MAX(run_id) FROM runs")  # ids of removed runs are used again
before=$(sha256sum "$db")
read_only_rc=""
if [[ $(id -u) -ne 0 ]]; then
  chmod a-w "$db" "$work"
  set +e
  "$seqbench" rm "$fresh" --db "$db" --yes >/dev/null 2>"$work/err"
  read_only_rc=$?
  set -e
  chmod u+w "$work" "$db"
elif unshare -m true 2>/dev/null; then
  set +e
  SB="$seqbench" DIR="$work" DB="$db" RUN="$fresh" unshare -m bash -c \
    'mount --bind "$DIR" "$DIR" && mount -o remount,ro,bind "$DIR" &&
     exec "$SB" rm "$RUN" --db "$DB" --yes' >/dev/null 2>"$work/err"
  read_only_rc=$?
  set -e
fi
if [[ -n $read_only_rc ]]; then
  [[ $read_only_rc -ne 0 ]] || fail "rm on a read-only file exited 0"
  grep -qF "$db" "$work/err" || fail "rm on a read-only file does not name it: $(cat "$work/err")"
  [[ $(sha256sum "$db") == "$before" ]] || fail "rm changed a read-only file"
  [[ $(rows_of "$fresh") -gt 0 ]] || fail "run $fresh gone from a read-only file"
  echo "read-only file: refused (exit $read_only_rc), unchanged"
else
  echo "read-only file: skipped (root without unshare)"
fi

# 5. Interrupted: a run of 20,000 cases and 1,000,000 samples (made in SQL from a measured
# case), removed by rm killed at several moments. Whatever the moment, the run is there
# whole or gone whole.
big=$work/big.db
"$seqbench" run "$suite" --repetitions 2 --filter '^baseline mode=forward' --in-process \
  --db "$big" >/dev/null
sqlite3 "$big" "
  WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
  INSERT INTO cases (run_id, case_key, position, variant_name, variant_key, options, mode,
                     dtype, device, batch, seq_len, min_len, generate_tokens, status, message,
                     reference, iterations, tokens_per_step, wall_s)
  SELECT c.run_id, c.case_key || ' copy=' || n.i, c.position + n.i, c.variant_name,
         c.variant_key, c.options, c.mode, c.dtype, c.device, c.batch, c.seq_len, c.min_len,
         c.generate_tokens, c.status, c.message, c.reference, c.iterations, c.tokens_per_step,
         c.wall_s
  FROM cases c, n WHERE c.run_id = 1;
  WITH RECURSIVE r(j) AS (SELECT 0 UNION ALL SELECT j + 1 FROM r WHERE j < 49)
  INSERT OR IGNORE INTO samples SELECT c.case_id, r.j, 0.001 * (r.j + 1) FROM cases c, r;"
cases_before=$(sqlite3 "$big" "SELECT COUNT(*) FROM cases WHERE run_id = 1")
samples_before=$(sqlite3 "$big" "SELECT COUNT(*) FROM samples")
[[ $samples_before -ge 1000000 ]] || fail "setup: $samples_before samples"
# How long a removal takes uninterrupted (LibTorch's load, then the removal and VACUUM):
# the kills land at fractions of it, so they reach into the removal however fast it is.
cp "$big" "$work/k.db"
started=$(date +%s.%N)
"$seqbench" rm 1 --db "$work/k.db" --yes >/dev/null 2>&1 || fail "rm of the big run"
full=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
landed=0
for signal in KILL INT; do
  for fraction in 0.4 0.55 0.7 0.85 0.95; do
    delay=$(awk -v f="$fraction" -v t="$full" 'BEGIN { print f * t }')
    cp "$big" "$work/k.db"
    "$seqbench" rm 1 --db "$work/k.db" --yes >/dev/null 2>&1 &
    pid=$!
    sleep "$delay"
    kill -s "$signal" "$pid" 2>/dev/null && landed=$((landed + 1))
    wait "$pid" 2>/dev/null || true
    [[ $(sqlite3 "$work/k.db" "PRAGMA integrity_check") == ok ]] ||
      fail "rm killed ($signal) after $delay s: the file fails its integrity check"
    db=$work/k.db
    [[ $(orphans) -eq 0 ]] || fail "rm killed ($signal) after $delay s: $(orphans) orphan rows"
    now_cases=$(query "SELECT COUNT(*) FROM cases WHERE run_id = 1")
    now_samples=$(query "SELECT COUNT(*) FROM samples")
    runs=$(query "SELECT COUNT(*) FROM runs WHERE run_id = 1")
    if [[ $runs -eq 1 ]]; then
      [[ $now_cases -eq $cases_before && $now_samples -eq $samples_before ]] ||
        fail "rm killed ($signal) after $delay s: run 1 half removed ($now_cases cases, $now_samples samples)"
    else
      [[ $now_cases -eq 0 && $now_samples -eq 0 ]] ||
        fail "rm killed ($signal) after $delay s: run 1 gone, $now_cases cases and $now_samples samples left"
    fi
  done
done
echo "interrupted: $landed of 10 kills landed while rm ran; every file whole"
# Left to finish, the file shrinks at once, and rm says the size it has.
"$seqbench" rm 1 --db "$big" --yes >"$work/out" 2>&1 || fail "rm of the big run: $(cat "$work/out")"
size=$(stat -c %s "$big")
[[ $size -lt 1048576 ]] || fail "the file is $size bytes after removing its one run and vacuuming"
grep -qE "is now [0-9.]+ (B|KiB)$" "$work/out" || fail "rm reports another size: $(cat "$work/out")"
echo "ok"
