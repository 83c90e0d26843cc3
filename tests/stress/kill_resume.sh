#!/usr/bin/env bash
# kill -9 at random moments of a ci.toml run, 10 landed kills in-process and 10 isolated,
# each followed by --resume, until the run completes; counts lost and duplicated cases.
set -u
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
S=${1:?usage: kill_resume.sh SEQBENCH SOURCE_DIR}
suite=${2:?}/suites/ci.toml
total=17
lost=0; dup=0; kills=0
for mode in --in-process --isolate; do
  db=$work/k9$mode.db; rm -f $db*
  $S run $suite --db $db $mode >/dev/null 2>&1 &
  pid=$!
  until [[ -e $db ]] && [[ $(sqlite3 $db "select count(*) from runs" 2>/dev/null) == 1 ]]; do sleep 0.1; done
  landed=0
  while [[ $landed -lt 10 ]]; do
    sleep $(awk -v s=$RANDOM 'BEGIN{srand(s); printf "%.2f", 0.2+rand()*1.5}')
    if kill -0 $pid 2>/dev/null; then kill -9 $pid; wait $pid 2>/dev/null; landed=$((landed+1)); kills=$((kills+1)); fi
    sleep 0.1
    pgrep -f -- "--run-case" >/dev/null && echo "orphan child after a kill"
    [[ $(sqlite3 $db "select status from runs") == complete ]] && break
    $S run $suite --db $db $mode --resume 1 >/dev/null 2>&1 &
    pid=$!
  done
  wait $pid 2>/dev/null
  [[ $(sqlite3 $db "select status from runs") == complete ]] || $S run $suite --db $db $mode --resume 1 >/dev/null 2>&1
  n=$(sqlite3 $db "select count(*) from cases"); d=$(sqlite3 $db "select count(distinct case_key) from cases")
  st=$(sqlite3 $db "select status from runs"); runs=$(sqlite3 $db "select count(*) from runs")
  echo "$mode: $landed kills landed; $n cases, $d distinct, run $st, $runs run(s)"
  lost=$((lost + total - d)); dup=$((dup + n - d))
done
echo "kills: $kills  lost: $lost  duplicated: $dup"
