#!/usr/bin/env bash
# 4 `seqbench run` processes writing one database at once while a reader runs `show` in a
# loop: counts the processes that failed (a "database is locked" would be one) and checks
# that every case of every run was stored once.
# Usage: concurrent_writers.sh SEQBENCH SOURCE_DIR
set -u
S=${1:?usage: concurrent_writers.sh SEQBENCH SOURCE_DIR}
suite=${2:?}/suites/ci.toml
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
db=$work/shared.db
pids=()
for i in 1 2 3 4; do
  "$S" run "$suite" --db "$db" --in-process >"$work/w$i.log" 2>&1 &
  pids+=($!)
done
reads=0; read_failures=0
while [[ -n $(jobs -rp) ]]; do
  if [[ -e $db ]]; then
    if "$S" show --db "$db" >/dev/null 2>"$work/read.err"; then reads=$((reads + 1)); else
      read_failures=$((read_failures + 1)); cat "$work/read.err"; fi
  fi
  sleep 0.2
done
write_failures=0
for pid in "${pids[@]}"; do wait "$pid" || write_failures=$((write_failures + 1)); done
runs=$(sqlite3 "$db" "SELECT count(*) FROM runs WHERE status = 'complete'")
cases=$(sqlite3 "$db" "SELECT count(*) FROM cases")
echo "writers: 4, failed: $write_failures; reads: $reads, failed: $read_failures; complete runs: $runs; cases: $cases (expected $((4 * 17)))"
[[ $write_failures -eq 0 && $read_failures -eq 0 && $runs -eq 4 && $cases -eq 68 ]]
