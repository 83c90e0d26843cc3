#!/usr/bin/env bash
# Counted instructions end to end (run --count instructions, compare --gate counts):
# two runs of one binary in separate processes, one of them from a copy in another folder
# with another environment, agree within 1e-4 on every case; a planted
# extra-work mutation inside the head every variant shares is flagged by the counts gate
# (exit 1) while the unchanged pair passes (exit 0); a run whose counting child saw other
# code (a fingerprint difference) is refused with exit 2, naming it; a counted ratio bound
# within one run ([[expect]] instructions_ratio) is checked; cycles-estimate keeps the
# instructions and adds an estimate; hw-instructions counts or says why not. Skipped
# (exit 77) without valgrind.
# Usage: count_test.sh SEQBENCH_BINARY SUITE (tests/data/tiny_counted.toml)
set -euo pipefail
seqbench=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
if ! command -v valgrind >/dev/null; then
  echo "skipped: valgrind is not installed (ci/install-deps installs it)"
  exit 77
fi
# Valgrind that cannot run the binary at all on this machine, even with the preload that
# run --count gives its child (harness/valgrind_preload: libhwy's RDTSCP on a VM whose
# CPUID hides it): its VEX decoder refuses an instruction some library's static
# initialiser executes, so nothing here can be counted, which is the machine's limit, not
# a defect of counting. Any other failure of the probe fails the test below.
preload=$(dirname "$seqbench")/libseqbench_valgrind_preload.so
[[ -f $preload ]] || fail "no $preload beside $seqbench (run --count preloads it)"
probe_log=$(mktemp)
if ! LD_PRELOAD=$preload valgrind --tool=none "$seqbench" --version >/dev/null 2>"$probe_log" &&
  grep -q "Unrecognised instruction" "$probe_log"; then
  echo "skipped: valgrind cannot run seqbench on this machine:" \
    "$(grep -m1 -A1 'Unrecognised instruction' "$probe_log" | tr '\n' ' ')"
  rm -f "$probe_log"
  exit 77
fi
rm -f "$probe_log"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
db=$work/count.db
cp "$2" "$work/tiny.toml"


"$seqbench" run "$work/tiny.toml" --db "$db" --in-process >"$work/run1.out" ||
  fail "counted run 1: $(cat "$work/run1.out")"
# Progress while the child counts (seconds a case under callgrind): the cases it has
# finished, with an ETA, read from the files it leaves; the child itself prints nothing.
grep -qE "^counted [1-4] of 4 case\(s\)  ETA " "$work/run1.out" ||
  fail "no progress while counting: $(cat "$work/run1.out")"
# Run 2 as another clone would run it: the binary and the suite 60 characters deeper, from
# another folder, with another environment (a CI variable, 3 kB more); none of it may
# move the counts.
deep=$work/a/clone/in/a/folder/much/deeper/than/the/first/one/build/release
mkdir -p "$deep"
cp "$seqbench" "$deep/seqbench"
cp "$preload" "$deep/"  # it lies beside the command, as in the build tree
cp "$work/tiny.toml" "$deep/suite.toml"
(cd "$deep" && CI=true PADDING=$(printf '%3000s' x) ./seqbench run suite.toml --db "$db" \
  --in-process >"$work/run2.out") || fail "counted run 2: $(cat "$work/run2.out")"
"$seqbench" run "$work/tiny.toml" --db "$db" --in-process --test-extra-head-passes 3 \
  >"$work/run3.out" 2>&1 || fail "mutated run: $(cat "$work/run3.out")"

# 1. Every case counted in both runs, and the two agree within 0.1%.
counted=$(sqlite3 "$db" "SELECT count(*) FROM metrics m JOIN cases c USING (case_id)
  WHERE m.name = 'instructions_per_step' AND c.run_id IN (1, 2) AND m.value > 0")
[[ $counted -eq 8 ]] || fail "expected 8 counted cases over runs 1 and 2, got $counted"
worst=$(sqlite3 "$db" "SELECT max(abs(b.value - a.value) / a.value)
  FROM metrics a JOIN cases ca ON ca.case_id = a.case_id
  JOIN cases cb ON cb.case_key = ca.case_key AND cb.run_id = 2
  JOIN metrics b ON b.case_id = cb.case_id AND b.name = a.name
  WHERE ca.run_id = 1 AND a.name = 'instructions_per_step'")
# Within 1e-4: ten times under the smallest layout effect the relocated child removed (a
# 3 kB variable moved a case by 0.1%, the binary 40 characters deeper by 1.5%), a tenth of
# the issue's 0.1%. Not to the instruction: on this VM the two runs agree exactly, but on
# the project's CI machine one case of run 2 differed by 1.6e-6 (about 40 instructions of
# 25 million), something outside the child's files, path and environment, which the
# counts gate's 1% threshold and its 0.1% nondeterminism cut both absorb.
awk -v w="$worst" 'BEGIN { exit !(w <= 1e-4) }' || fail "runs 1 and 2 disagree by $worst"
[[ $worst == 0 || $worst == 0.0 ]] || echo "note: runs 1 and 2 differ by $worst (within 1e-4)"
sqlite3 "$db" "SELECT value FROM environment WHERE run_id = 1 AND key = 'count_blas_core'" |
  grep -q . || fail "run 1 records no count_blas_core"

# 2. The counts gate: the unchanged pair passes, the mutated head is flagged.
"$seqbench" compare 1 2 --db "$db" --gate counts >"$work/same.out" ||
  fail "unchanged pair flagged: $(cat "$work/same.out")"
grep -q "no regression (gate counts" "$work/same.out" || fail "$(cat "$work/same.out")"
# ... with every step of every case counted alike: no disagreement, no ambiguity.
grep -q "instructions: same: 4  geometric mean 1 over" "$work/same.out" ||
  fail "the unchanged pair is not 4 cases the same: $(cat "$work/same.out")"
! grep -q "nondeterministic" "$work/same.out" ||
  fail "the unchanged pair's steps disagree: $(cat "$work/same.out")"
set +e
"$seqbench" compare 1 3 --db "$db" --gate counts >"$work/more.out" 2>&1
rc=$?
set -e
[[ $rc -eq 1 ]] || fail "mutated head: compare exited $rc, expected 1: $(cat "$work/more.out")"
grep -q "| more |" "$work/more.out" || fail "no case judged 'more': $(cat "$work/more.out")"

# 3. The counted expectation within one run holds.
"$seqbench" check 1 --db "$db" >"$work/check.out" || fail "check: $(cat "$work/check.out")"
grep -q "instructions per step / baseline" "$work/check.out" || fail "$(cat "$work/check.out")"

# 4. A fingerprint difference refuses the counted comparison (exit 2, naming the key), and
#    leaves the time gate to judge with a warning.
cp "$db" "$work/other.db"
sqlite3 "$work/other.db" "UPDATE environment SET value = 'SkylakeX'
  WHERE run_id = 2 AND key = 'count_blas_core'"
set +e
"$seqbench" compare 1 2 --db "$work/other.db" --gate counts >"$work/refused.out" 2>&1
rc=$?
set -e
[[ $rc -eq 2 ]] || fail "fingerprint mismatch exited $rc, expected 2: $(cat "$work/refused.out")"
grep -q "count_blas_core: .* -> SkylakeX" "$work/refused.out" ||
  fail "the refusal does not name what differs: $(cat "$work/refused.out")"

# 5. Not counted where it cannot be: no valgrind on PATH stores the reason, the run goes on.
PATH=/nonexistent "$seqbench" run "$work/tiny.toml" --db "$db" --in-process --filter 'fused.*train' \
  >"$work/novalgrind.out" || fail "run without valgrind: $(cat "$work/novalgrind.out")"
sqlite3 "$db" "SELECT message FROM cases WHERE run_id = 4" | grep -q "not counted: valgrind" ||
  fail "no reason stored for the uncounted case"

# 6. A slowed case counts per step, not per sample: --test-slowdown 1.5 adds one whole step
#    every second, so a counted sample is 2 steps of 3 steps' work; per step that is 1.5
#    times the unslowed count (per sample it would be 3 times).
"$seqbench" run "$work/tiny.toml" --db "$db" --in-process --filter 'fused.*train' \
  --test-slowdown 1.5 >"$work/slowed.out" 2>&1 || fail "slowed run: $(cat "$work/slowed.out")"
ratio=$(sqlite3 "$db" "SELECT b.value / a.value FROM metrics a JOIN cases ca USING (case_id),
  metrics b JOIN cases cb ON cb.case_id = b.case_id
  WHERE ca.run_id = 1 AND cb.run_id = 5 AND ca.case_key = cb.case_key
    AND a.name = 'instructions_per_step' AND b.name = a.name")
awk -v r="$ratio" 'BEGIN { exit !(r > 1.48 && r < 1.52) }' ||
  fail "slowed by 1.5: counted $ratio times the unslowed steps"
# 7. cycles-estimate: the same instructions as run 1 within 0.5% (the cache simulator
#    observes, it does not change the code that runs), a cycle estimate of at least one
#    cycle an instruction, and the pinned cache sizes recorded. The two counts are not
#    identical: they agreed within 0.1% until the binary linked one more shared library
#    (cmark-gfm, for `seqbench site`), after which the ratio was 0.99894 in two clones,
#    every run. The process's layout reaches the counted steps under one tool setting
#    and not the other, by less than the counts gate's 1% threshold.
"$seqbench" run "$work/tiny.toml" --db "$db" --in-process --filter 'fused.*train' \
  --count instructions,cycles-estimate >"$work/cycles.out" 2>&1 || fail "cycles run: $(cat "$work/cycles.out")"
read -r ir_ratio cycles_ratio < <(sqlite3 -separator ' ' "$db" "SELECT b.value / a.value, c.value / b.value
  FROM cases ca JOIN metrics a ON a.case_id = ca.case_id AND a.name = 'instructions_per_step'
  JOIN cases cb ON cb.case_key = ca.case_key AND cb.run_id = 6
  JOIN metrics b ON b.case_id = cb.case_id AND b.name = 'instructions_per_step'
  JOIN metrics c ON c.case_id = cb.case_id AND c.name = 'cycles_estimate_per_step'
  WHERE ca.run_id = 1") || true  # nothing read: judged missing below
awk -v r="$ir_ratio" 'BEGIN { exit !(r > 0.995 && r < 1.005) }' ||
  fail "instructions under the cache simulator are ${ir_ratio:-missing} times run 1's"
awk -v r="$cycles_ratio" 'BEGIN { exit !(r >= 1) }' || fail "cycles / instructions = ${cycles_ratio:-missing}"
sqlite3 "$db" "SELECT value FROM environment WHERE run_id = 6 AND key = 'count_cache'" |
  grep -q -- "--LL=8388608,16,64" || fail "run 6 records no pinned cache"

# 8. hw-instructions: counted natively where the kernel offers a counter, else stored as
#    not counted with perf_event_open's reason; the run ends ok either way. It does not
#    combine with callgrind's kinds (exit 2).
"$seqbench" run "$work/tiny.toml" --db "$db" --in-process --filter 'fused.*train' \
  --count hw-instructions >"$work/hw.out" 2>&1 || fail "hw run: $(cat "$work/hw.out")"
hw=$(sqlite3 "$db" "SELECT count(*) FROM metrics JOIN cases USING (case_id)
  WHERE run_id = 7 AND name = 'hw_instructions_per_step' AND value > 0")
[[ $hw -eq 1 ]] || sqlite3 "$db" "SELECT message FROM cases WHERE run_id = 7" |
  grep -q "not counted: perf_event_open" || fail "hw-instructions neither counted nor explained"
set +e
"$seqbench" run "$work/tiny.toml" --db "$db" --count instructions,hw-instructions 2>"$work/err"
rc=$?
set -e
[[ $rc -eq 2 ]] && grep -q "cannot be combined" "$work/err" || fail "combined kinds: rc $rc, $(cat "$work/err")"
echo "count test: ok"
