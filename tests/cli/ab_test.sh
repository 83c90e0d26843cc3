#!/usr/bin/env bash
# seqbench ab end to end: two binaries (here one binary and its copy, an A/A run), in
# lockstep workers by default and in one process a side each round for a base binary that
# lacks run --lockstep; either way two linked runs whose cases carry one sample a round;
# compare recognises the pair and judges it round by round; the order is recorded and
# seeded; bad input exits 2 before anything runs.
# Usage: ab_test.sh SEQBENCH_BINARY SUITE (tests/data/tiny_counted.toml)
set -euo pipefail
seqbench=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
db=$work/ab.db
cp "$seqbench" "$work/base-seqbench"

cp "$2" "$work/tiny.toml"  # it counts instructions: ab times only, --count none a side

# 1. Bad input: exit 2, no database.
set +e
"$seqbench" ab "$work/tiny.toml" --db "$db" 2>"$work/err"; rc1=$?
"$seqbench" ab "$work/tiny.toml" --db "$db" --base-binary "$work/none" 2>>"$work/err"; rc2=$?
set -e
[[ $rc1 -eq 2 && $rc2 -eq 2 ]] || fail "bad input exited $rc1 and $rc2: $(cat "$work/err")"
grep -q "is not an executable file" "$work/err" || fail "$(cat "$work/err")"
[[ ! -e "$db" ]] || fail "bad input created the database"

# Two linked runs of 6 samples a case from $db's runs $1 (base) and $2 (new), no counts.
check_pair() {
  pair=$(sqlite3 "$db" "SELECT e.value = r2.uuid FROM environment e JOIN runs r2 ON r2.run_id = $2
    WHERE e.run_id = $1 AND e.key = 'ab_pair'")
  [[ $pair -eq 1 ]] || fail "run $1 is not linked to run $2"
  [[ $(sqlite3 "$db" "SELECT value FROM environment WHERE run_id = $2 AND key = 'ab_side'") == new ]] ||
    fail "run $2 is not the new side"
  for run in "$1" "$2"; do
    samples=$(sqlite3 "$db" "SELECT min(n) || ' ' || max(n) FROM (SELECT count(*) AS n FROM samples
      JOIN cases USING (case_id) WHERE run_id = $run GROUP BY case_id)")
    [[ $samples == "6 6" ]] || fail "run $run: samples per case $samples, expected 6"
  done
  # No side counted (the suite asks for it; ab times only).
  [[ $(sqlite3 "$db" "SELECT count(*) FROM metrics m JOIN cases c USING (case_id)
    WHERE c.run_id IN ($1, $2) AND m.name = 'instructions_per_step'") -eq 0 ]] ||
    fail "the A/B sides counted instructions"
}

# 2. Lockstep (the default): six rounds, kept for a look; a pair a case and round, both
# orders taken.
"$seqbench" ab "$work/tiny.toml" --db "$db" --base-binary "$work/base-seqbench" --rounds 6 \
  --seed 5 --keep "$work/rounds" --filter 'mode=train' >"$work/ab.out" || fail "ab: $(cat "$work/ab.out")"
grep -q "lockstep workers" "$work/ab.out" || fail "not in lockstep: $(cat "$work/ab.out")"
[[ $(sqlite3 "$db" "SELECT count(*) FROM runs") -eq 2 ]] || fail "expected 2 runs"
check_pair 1 2
cases=$(sqlite3 "$db" "SELECT count(*) FROM cases WHERE run_id = 1")
order=$(sqlite3 "$db" "SELECT value FROM environment WHERE run_id = 1 AND key = 'ab_order'")
[[ $(wc -w <<<"$order") -eq $((6 * cases)) ]] || fail "order '$order' is not 6 x $cases pairs"
grep -qw BN <<<"$order" && grep -qw NB <<<"$order" || fail "order '$order' never alternates"
[[ -f "$work/rounds/base.log" && -f "$work/rounds/new.log" ]] || fail "--keep kept no logs"
# The machine's limits, measured once after both sides ended (not by each worker while the
# other measured too): the same entries in both runs, and said so.
for run in 1 2; do
  sqlite3 "$db" "SELECT value FROM environment WHERE run_id = $run AND key = 'machine_limits'" |
    grep -q "^measured once by ab after both sides ended" || fail "run $run: limits not measured once"
done
peaks() { sqlite3 "$db" "SELECT group_concat(key || '=' || value) FROM (SELECT key, value FROM
  environment WHERE run_id = $1 AND key LIKE 'peak_%' ORDER BY key)"; }
[[ -n $(peaks 1) && $(peaks 1) == "$(peaks 2)" ]] || fail "limits differ: $(peaks 1) / $(peaks 2)"

# 3. A base binary whose run lacks --lockstep (an older build): one process a side each
# round instead, one order entry a round.
cat >"$work/old-seqbench" <<EOF
#!/usr/bin/env bash
if [[ "\$1 \$2" == "run --help" ]]; then "$seqbench" run --help | grep -v -- --lockstep; exit 0; fi
exec "$seqbench" "\$@"
EOF
chmod +x "$work/old-seqbench"
"$seqbench" ab "$work/tiny.toml" --db "$db" --base-binary "$work/old-seqbench" --rounds 6 \
  --seed 5 --keep "$work/old-rounds" --filter 'mode=train' >"$work/old.out" ||
  fail "ab: $(cat "$work/old.out")"
grep -q "one process a side each round" "$work/old.out" || fail "$(cat "$work/old.out")"
check_pair 3 4
order=$(sqlite3 "$db" "SELECT value FROM environment WHERE run_id = 3 AND key = 'ab_order'")
[[ $(wc -w <<<"$order") -eq 6 ]] || fail "order '$order' is not 6 rounds"
[[ -f "$work/old-rounds/base.1.log" && -f "$work/old-rounds/new.6.log" ]] || fail "no round logs"

# 4. compare judges the pair on its rounds.
set +e
"$seqbench" compare 1 2 --db "$db" >"$work/compare.out" 2>&1
rc=$?
set -e
[[ $rc -le 1 ]] || fail "compare exited $rc: $(cat "$work/compare.out")"
grep -q "A/B pair" "$work/compare.out" || fail "compare did not pair: $(cat "$work/compare.out")"
grep -q "gate: time" "$work/compare.out" || fail "$(cat "$work/compare.out")"
# 5. Killed outright (SIGKILL): the folder stays, its owner gone; the next ab removes it.
mkdir "$work/tmp"
TMPDIR="$work/tmp" "$seqbench" ab "$work/tiny.toml" --db "$work/killed.db" \
  --base-binary "$work/base-seqbench" --rounds 200 --filter 'mode=train' >"$work/kill.out" 2>&1 &
ab_pid=$!
for _ in $(seq 600); do
  compgen -G "$work/tmp/seqbench-ab-*/base.log" >/dev/null && break
  sleep 0.1
done
compgen -G "$work/tmp/seqbench-ab-*/base.log" >/dev/null || fail "ab never started: $(cat "$work/kill.out")"
kill -KILL "$ab_pid"
set +e
wait "$ab_pid" 2>/dev/null
set -e
killed=$(ls -d "$work"/tmp/seqbench-ab-*)
[[ -f $killed/owner ]] || fail "a killed ab's folder has no owner file: $(ls -A "$killed")"
# An ab killed between making its folder and naming it (the folder is made as
# seqbench-ab-new-*, its owner file written, then renamed): an hour-old "new" folder is
# removed by the next ab; one made a moment ago (another ab starting) is left.
mkdir "$work/tmp/seqbench-ab-new-old123" "$work/tmp/seqbench-ab-new-now123"
touch -d '1 hour ago' "$work/tmp/seqbench-ab-new-old123"

# 5b. Interrupted: the private scratch folder under TMPDIR goes with it (--keep's stays),
# and so does the killed one's above.
TMPDIR="$work/tmp" "$seqbench" ab "$work/tiny.toml" --db "$work/interrupted.db" \
  --base-binary "$work/base-seqbench" --rounds 200 --filter 'mode=train' >"$work/int.out" 2>&1 &
ab_pid=$!
started() {  # a folder of the new ab's own with its base side's log
  local d
  for d in "$work"/tmp/seqbench-ab-*; do
    [[ $d != "$killed" && -f $d/base.log ]] && return 0
  done
  return 1
}
for _ in $(seq 600); do
  started && break
  sleep 0.1
done
started || fail "ab never started: $(cat "$work/int.out")"
[[ ! -e $killed ]] || fail "the next ab left the killed ab's folder $killed"
[[ ! -e $work/tmp/seqbench-ab-new-old123 ]] || fail "the next ab left an hour-old half-made folder"
[[ -d $work/tmp/seqbench-ab-new-now123 ]] || fail "the next ab removed a folder being made"
rmdir "$work/tmp/seqbench-ab-new-now123"
kill -INT "$ab_pid"
set +e
wait "$ab_pid"
set -e
leftover=$(ls -A "$work/tmp")
[[ -z $leftover ]] || fail "interrupted ab left $leftover in TMPDIR: $(cat "$work/int.out")"
grep -q "ab: interrupted (--keep DIR" "$work/int.out" || fail "$(cat "$work/int.out")"
echo "ab test: ok"
