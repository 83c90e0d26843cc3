#!/usr/bin/env bash
# End-to-end checks of `run --isolate`: a variant that segfaults, aborts, calls exit(0),
# hangs or produces NaN is recorded as that case's status and the run completes; a
# SIGTERM during an isolated case stops the run promptly as interrupted, and --resume
# (with --retry-failed) finishes it.
# Usage: isolation_test.sh SEQBENCH_BINARY FAULTY_PLUGIN
set -euo pipefail
seqbench=$1
plugin=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
status_of() { sqlite3 "$work/i.db" "SELECT status FROM cases WHERE variant_name = '$1'"; }
message_of() { sqlite3 "$work/i.db" "SELECT message FROM cases WHERE variant_name = '$1'"; }

cat >"$work/faulty.toml" <<'TOML'
name = "faulty"
description = "variants that take their process down"
family = "simple_rnn"
baseline = "baseline"
[model]
vocab_size = 16
width = 8
layers = 1
heads = 2
[measure]
repetitions = 2
warmup = 0
case_timeout_s = 20
[[variants]]
key = "baseline"
[[variants]]
key = "faulty_segfault"
[[variants]]
key = "faulty_abort"
[[variants]]
key = "faulty_exit"
[[variants]]
key = "faulty_hang"
[[variants]]
key = "faulty_nan"
[[variants]]
key = "batched"
[grid]
mode = "train"
batch = 2
seq_len = 6
TOML

# 1. Every failure is its case's status; the run completes; exit 1. --case-timeout 8
#    (over the suite's 20) bounds the hanging case and leaves a healthy one, about a second
#    here, room on a loaded machine.
set +e
"$seqbench" --plugin "$plugin" run "$work/faulty.toml" --db "$work/i.db" --case-timeout 8 >"$work/out" 2>&1
rc=$?
set -e
[[ $rc -eq 1 ]] || fail "exit $rc: $(cat "$work/out")"
[[ $(sqlite3 "$work/i.db" "SELECT status FROM runs") == complete ]] || fail "run not complete: $(cat "$work/out")"
[[ $(sqlite3 "$work/i.db" "SELECT count(*) FROM cases") -eq 7 ]] || fail "not every case stored"
[[ $(status_of faulty_segfault) == error && $(message_of faulty_segfault) == *"signal 11"* ]] || fail "segfault: $(message_of faulty_segfault)"
[[ $(status_of faulty_abort) == error && $(message_of faulty_abort) == *"signal 6"* ]] || fail "abort: $(message_of faulty_abort)"
[[ $(status_of faulty_exit) == error && $(message_of faulty_exit) == *"status 0 without storing"* ]] || fail "exit: $(message_of faulty_exit)"
[[ $(status_of faulty_hang) == timeout ]] || fail "hang: $(status_of faulty_hang) $(message_of faulty_hang)"
[[ $(status_of faulty_nan) == mismatch && $(message_of faulty_nan) == *"not finite"* ]] || fail "nan: $(message_of faulty_nan)"
[[ $(status_of batched) == ok && $(status_of baseline) == ok ]] || fail "healthy cases: $(cat "$work/out")"
grep -q "isolation|a child process per case, killed after 8 s" <(sqlite3 "$work/i.db" "SELECT key, value FROM environment") ||
  fail "isolation not recorded"
grep -q "timeout" <("$seqbench" show 1 --db "$work/i.db") || fail "show does not say timeout"

# 2. SIGINT to the whole process group (as a terminal's Ctrl-C) while the hanging case
#    runs: the run stops within a few seconds, marked interrupted, the case unstored (not a
#    "crash"); resuming with --retry-failed runs the failed cases again and completes.
setsid "$seqbench" --plugin "$plugin" run "$work/faulty.toml" --db "$work/t.db" --filter 'baseline|faulty_hang|batched' \
  --case-timeout 60 >"$work/out" 2>&1 &
pid=$!
for _ in $(seq 1 100); do  # until the hanging case has started (the first case is stored)
  [[ -e "$work/t.db" && $(sqlite3 "$work/t.db" "SELECT count(*) FROM cases" 2>/dev/null || echo 0) -ge 1 ]] && break
  sleep 0.2
done
sleep 1
start=$(date +%s)
kill -INT -- "-$pid"
set +e
wait "$pid"
rc=$?
set -e
elapsed=$(($(date +%s) - start))
[[ $rc -eq 1 ]] || fail "interrupted run exited $rc: $(cat "$work/out")"
[[ $elapsed -le 3 ]] || fail "SIGINT took ${elapsed}s to stop the run"
[[ $(sqlite3 "$work/t.db" "SELECT status FROM runs") == interrupted ]] || fail "run not interrupted"
[[ $(sqlite3 "$work/t.db" "SELECT count(*) FROM cases WHERE variant_name = 'faulty_hang'") -eq 0 ]] ||
  fail "the interrupted case was stored"
pgrep -f -- "$work/t.db" >/dev/null && fail "a child outlived the run"
set +e
"$seqbench" --plugin "$plugin" run "$work/faulty.toml" --db "$work/t.db" --filter 'baseline|faulty_hang|batched' \
  --case-timeout 6 --resume 1 >"$work/out" 2>&1
set -e
[[ $(sqlite3 "$work/t.db" "SELECT status FROM runs") == complete ]] || fail "resume did not complete: $(cat "$work/out")"
[[ $(sqlite3 "$work/t.db" "SELECT status FROM cases WHERE variant_name = 'faulty_hang'") == timeout ]] || fail "resume"
set +e
"$seqbench" --plugin "$plugin" run "$work/faulty.toml" --db "$work/t.db" --filter 'baseline|faulty_hang|batched' \
  --case-timeout 6 --resume 1 --retry-failed >"$work/out" 2>&1
set -e
grep -q "1 failed case(s) to run again" "$work/out" || fail "retry: $(cat "$work/out")"
[[ $(sqlite3 "$work/t.db" "SELECT count(*) FROM cases") -eq 3 ]] || fail "retry duplicated or lost a case"
echo "isolation_test: all checks passed"
