#!/usr/bin/env bash
# End-to-end checks of `seqbench run` and the store through the real command line:
# bad input exits 2 before the database exists; an interrupted run resumes without
# losing or duplicating cases; shards merge into exactly the whole suite.
# Usage: run_store_test.sh SEQBENCH_BINARY SOURCE_DIR
set -euo pipefail
seqbench=$1
suites=$2/suites
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
count() { sqlite3 "$1" "$2"; }

# 0. --version names seqbench's version, the git SHA it was built from and LibTorch's.
"$seqbench" --version >"$work/version" || fail "--version exited non-zero"
grep -qE "^seqbench [0-9]+\.[0-9]+\.[0-9]+, git [0-9a-f]{7}.*, LibTorch [0-9]+\.[0-9]+" "$work/version" ||
  fail "--version: $(cat "$work/version")"

# 1. A malformed suite: exit 2, message with file and line, no database written.
printf 'name = "x"\ndescription = "y"\nfamily = "simple_rnn"\nbaseline = "baseline"\nrepetitons = 3\n' >"$work/bad.toml"
set +e
"$seqbench" run "$work/bad.toml" --db "$work/bad.db" 2>"$work/err"
rc=$?
set -e
[[ $rc -eq 2 ]] || fail "malformed suite exited $rc, expected 2"
grep -q "bad.toml:5:1: unknown key 'repetitons'" "$work/err" || fail "message: $(cat "$work/err")"
[[ ! -e "$work/bad.db" ]] || fail "a malformed suite created the database"

# 1b. A refused resume touches no database: a missing one is not created, and a
#     non-positive id is refused rather than read as "start a new run".
for resume in 999 0 -1; do
  set +e
  "$seqbench" run "$suites/ci.toml" --db "$work/never.db" --resume "$resume" 2>"$work/err"
  rc=$?
  set -e
  [[ $rc -eq 2 ]] || fail "--resume $resume exited $rc, expected 2: $(cat "$work/err")"
  grep -q -- "--resume\|run --resume" "$work/err" || fail "--resume $resume: $(cat "$work/err")"
  [[ ! -e "$work/never.db" ]] || fail "--resume $resume created the database"
done

# 1c. verify checks its flags as a suite checks its fields: exit 2, the flag named, no
#     c10 stack trace.
for flags in "--batch 0" "--seq-len -3" "--min-len 99" "--heads 5" "--vocab-size 1" "--vocab 1"; do
  set +e
  # shellcheck disable=SC2086  # the flag and its value, split on purpose
  "$seqbench" verify $flags >/dev/null 2>"$work/err"
  rc=$?
  set -e
  [[ $rc -eq 2 ]] && ! grep -q "Exception raised" "$work/err" && grep -q -- "${flags%% *}\|heads" "$work/err" ||
    fail "verify $flags: rc $rc, $(cat "$work/err")"
done

# 2. Interrupt after 4 cases, then resume: every case exactly once, run complete.
total=$("$seqbench" list --suites "$suites" | awk '$1 == "ci" {print $2}')
[[ $total -gt 4 ]] || fail "could not read the ci suite's case count ($total)"
set +e
"$seqbench" run "$suites/ci.toml" --db "$work/r.db" --repetitions 2 --stop-after 4 >"$work/out1"
rc=$?
set -e
[[ $rc -eq 1 ]] || fail "interrupted run exited $rc, expected 1"
[[ $(count "$work/r.db" "select status from runs") == interrupted ]] || fail "run not marked interrupted"
[[ $(count "$work/r.db" "select count(*) from cases") -eq 4 ]] || fail "expected 4 cases before resume"
"$seqbench" run "$suites/ci.toml" --db "$work/r.db" --repetitions 2 --resume 1 >"$work/out2"
[[ $(count "$work/r.db" "select count(*) from cases") -eq $total ]] || fail "resume: case count != $total"
[[ $(count "$work/r.db" "select count(distinct case_key) from cases") -eq $total ]] || fail "resume duplicated a case"
[[ $(count "$work/r.db" "select count(*) from runs") -eq 1 ]] || fail "resume created a new run"
[[ $(count "$work/r.db" "select status from runs") == complete ]] || fail "resumed run not complete"
[[ $(count "$work/r.db" "select count(*) from cases c where (select count(*) from samples s where s.case_id = c.case_id) != 2 and status in ('ok','mismatch')") -eq 0 ]] || fail "a timed case lacks its samples"
[[ $(count "$work/r.db" "select count(*) from environment where key in ('git_sha','torch_version','cpu_model','hostname','blas_library')") -eq 5 ]] || fail "environment incomplete"

# 3. Resuming with a changed suite file is refused.
sed 's/repetitions = 5/repetitions = 6/' "$suites/ci.toml" >"$work/ci_changed.toml"
set +e
"$seqbench" run "$work/ci_changed.toml" --db "$work/r.db" --resume 1 2>"$work/err"
rc=$?
set -e
[[ $rc -eq 2 ]] && grep -q "suite: the run has" "$work/err" || fail "changed suite resumed (rc $rc)"

# 3b. Resuming with other repetitions would mix 2 and 3 samples in one run: refused, with the
# flag that matches, and nothing written.
before=$(count "$work/r.db" "select count(*) from cases")
set +e
"$seqbench" run "$suites/ci.toml" --db "$work/r.db" --repetitions 3 --resume 1 2>"$work/err"
rc=$?
set -e
[[ $rc -eq 2 ]] && grep -q "repetitions: the run has 2, this command 3 (pass --repetitions 2)" "$work/err" ||
  fail "resume with other repetitions: rc $rc, $(cat "$work/err")"
[[ $(count "$work/r.db" "select count(*) from cases") -eq $before ]] || fail "refused resume wrote cases"
[[ $(count "$work/r.db" "select repetitions from runs where run_id = 1") -eq 2 ]] || fail "typed repetitions not stored"

# 3c. --threads sets LibTorch's and OpenBLAS's threads for every case; the store records
# what was in force, per case.
for threads in 1 2; do
  "$seqbench" run "$suites/ci.toml" --db "$work/threads.db" --repetitions 1 --threads "$threads" \
    --filter '^fused ' >/dev/null
  run=$(count "$work/threads.db" "select max(run_id) from runs")
  [[ $(count "$work/threads.db" "select distinct threads from cases where run_id = $run") == "$threads" ]] ||
    fail "--threads $threads: identity threads $(count "$work/threads.db" "select group_concat(distinct threads) from cases where run_id = $run")"
  in_force=$(count "$work/threads.db" "select group_concat(distinct m.value) from metrics m join cases c using (case_id) where c.run_id = $run and m.name = 'threads_intra_op'")
  [[ "$in_force" == "$threads" || "$in_force" == "$threads.0" ]] || fail "--threads $threads: LibTorch ran $in_force"
  # OpenBLAS's threads are read only where LibTorch runs on OpenBLAS (Debian's); pip's
  # CUDA LibTorch uses MKL ("not OpenBLAS"), whose threads the store does not record.
  if [[ $(count "$work/threads.db" "select value from environment where run_id = $run and key = 'blas_config'") == OpenBLAS* ]]; then
    blas=$(count "$work/threads.db" "select group_concat(distinct m.value) from metrics m join cases c using (case_id) where c.run_id = $run and m.name = 'threads_blas'")
    [[ "$blas" == "$threads" || "$blas" == "$threads.0" ]] || fail "--threads $threads: OpenBLAS ran $blas"
  fi
done
set +e
"$seqbench" run "$suites/ci.toml" --db "$work/threads.db" --threads 0 2>"$work/err"
rc=$?
set -e
[[ $rc -eq 2 ]] && grep -q -- "--threads must be between 1 and" "$work/err" || fail "--threads 0: rc $rc"

# 4. Two shards into two databases, merged twice: exactly the whole suite.
"$seqbench" run "$suites/ci.toml" --db "$work/s1.db" --repetitions 2 --shard 1/2 >/dev/null
"$seqbench" run "$suites/ci.toml" --db "$work/s2.db" --repetitions 2 --shard 2/2 >/dev/null
"$seqbench" merge "$work/s1.db" "$work/s2.db" --into "$work/all.db" >/dev/null
"$seqbench" merge "$work/s1.db" "$work/s2.db" --into "$work/all.db" >/dev/null
[[ $(count "$work/all.db" "select count(*) from cases") -eq $total ]] || fail "merged shards != $total cases"
[[ $(count "$work/all.db" "select count(distinct substr(case_key, 1)) from cases") -eq $total ]] || fail "merged shards overlap"
[[ $(count "$work/all.db" "select count(*) from runs") -eq 2 ]] || fail "merge duplicated runs"

# 5. show and the other read commands work on the result.
"$seqbench" show 1 --db "$work/r.db" >"$work/show"
grep -q "torch_version" "$work/show" || fail "show lacks the environment"
# Every stored setting, from the one table the resume check reads too.
settings=$(grep "^settings: " "$work/show") || fail "show lacks the settings: $(cat "$work/show")"
for what in "repetitions 2," "warmup " "min time " "max noise off" "check policy "; do
  [[ "$settings" == *"$what"* ]] || fail "show's settings lack '$what': $settings"
done
set +e
"$seqbench" show 1 --db "$work/missing.db" 2>/dev/null
rc=$?
set -e
[[ $rc -eq 2 ]] || fail "show on a missing database exited $rc, expected 2"
# 6. Reports from the resumed run: every format parses; README sections regenerate
#    idempotently; a section without a matching run is refused with exit 2.
# (Output goes to files first: with pipefail, `grep -q` closing the pipe early would fail
# the writer with SIGPIPE.)
"$seqbench" report 1 --db "$work/r.db" --format md >"$work/report.md"
grep -q "| S/N | Modifications |" "$work/report.md" || fail "report md"
"$seqbench" report 1 --db "$work/r.db" --format csv >"$work/report.csv"
[[ $(($(wc -l <"$work/report.csv") - 1)) -eq $total ]] || fail "report csv rows"
"$seqbench" report --latest --db "$work/r.db" --format json --out "$work/report.json"
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert len(d["cases"]) == int(sys.argv[2]), len(d["cases"]); assert d["run"]["repetitions"] == 2' \
  "$work/report.json" "$total" || fail "report json: not every case, or not the typed facts"
"$seqbench" report --latest --db "$work/r.db" --format gbench-json --out "$work/report.json"
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert sum(b["run_type"] == "iteration" for b in d["benchmarks"]) % 2 == 0' \
  "$work/report.json" || fail "report gbench-json: not 2 repetitions a case"
printf '# T\n\n<!-- seqbench:begin suite=ci device=cpu -->\n<!-- seqbench:end -->\nafter\n' >"$work/README.md"
"$seqbench" readme "$work/README.md" --db "$work/r.db" >"$work/out"
grep -q regenerated "$work/out" || fail "readme did not regenerate"
cp "$work/README.md" "$work/README.once"
"$seqbench" readme "$work/README.md" --db "$work/r.db" >"$work/out"
grep -q "up to date" "$work/out" || fail "readme not idempotent"
cmp -s "$work/README.md" "$work/README.once" || fail "second readme run changed the file"
grep -q "| S/N |" "$work/README.md" && tail -n1 "$work/README.md" | grep -qx after || fail "readme content"
printf '<!-- seqbench:begin suite=nosuch -->\n<!-- seqbench:end -->\n' >"$work/R2.md"
set +e
"$seqbench" readme "$work/R2.md" --db "$work/r.db" 2>"$work/err"
rc=$?
set -e
[[ $rc -eq 2 ]] && grep -q "R2.md:1: no complete run of suite 'nosuch'" "$work/err" || fail "readme without a run (rc $rc)"
# Several databases (CPU and GPU runs are published apart): each section from the first
# database with a matching run, whichever order they are given in.
sed 's/^name = "ci"/name = "other"/' "$suites/ci.toml" >"$work/other.toml"
first_case=$(sqlite3 "$work/r.db" "SELECT case_key FROM cases LIMIT 1" | cut -d' ' -f1)
"$seqbench" run "$work/other.toml" --db "$work/other.db" --repetitions 3 --filter "^$first_case " >/dev/null
printf '<!-- seqbench:begin suite=other -->\n<!-- seqbench:end -->\n<!-- seqbench:begin suite=ci -->\n<!-- seqbench:end -->\n' >"$work/R3.md"
cp "$work/R3.md" "$work/R4.md"
"$seqbench" readme "$work/R3.md" --db "$work/other.db" --db "$work/r.db" >/dev/null || fail "readme over two databases"
"$seqbench" readme "$work/R4.md" --db "$work/r.db" --db "$work/other.db" >/dev/null || fail "readme over two databases, swapped"
[[ $(grep -c "| S/N |" "$work/R3.md") -ge 2 ]] && cmp -s "$work/R3.md" "$work/R4.md" ||
  fail "two databases: sections missing or order-dependent"
grep -q "^\*\*other " "$work/R3.md" && grep -q "^\*\*ci " "$work/R3.md" || fail "two databases: a section from the wrong run"
set +e
"$seqbench" readme "$work/R2.md" --db "$work/other.db" --db "$work/r.db" 2>"$work/err"
rc=$?
set -e
[[ $rc -eq 2 ]] && grep -q "no complete run of suite 'nosuch'" "$work/err" || fail "readme over two databases without a run (rc $rc)"
# compare: a run against itself is never slower or faster (exit 0; with 3 samples its
# interval is wide: "ambiguous" or "same"); a threshold is 5% or 0.05, and a
# bare 5 (500%?) is refused with the two spellings that would be meant.
# With 2 samples a side (r.db) no case is judged.
"$seqbench" compare 1 1 --db "$work/other.db" --threshold 0.05 >"$work/cmp" || fail "compare 1 1: $(cat "$work/cmp")"
grep -q "no regression" "$work/cmp" && ! grep -qE "\| (slower|faster) \|" "$work/cmp" ||
  fail "a run against itself: $(cat "$work/cmp")"
"$seqbench" compare 1 1 --db "$work/r.db" --threshold 5% >"$work/cmp" || fail "compare 1 1: $(cat "$work/cmp")"
[[ $(grep -c "cannot judge: 2 and 2 samples" "$work/cmp") -eq $total ]] || fail "2 samples judged: $(cat "$work/cmp")"
set +e
"$seqbench" compare 1 1 --db "$work/r.db" --threshold 5 2>"$work/err"
rc=$?
set -e
[[ $rc -eq 2 ]] && grep -q "write 5% or 0.05" "$work/err" || fail "compare --threshold 5: rc $rc, $(cat "$work/err")"
set +e
"$seqbench" check --latest --db "$work/r.db" >"$work/check"
rc=$?
set -e
[[ $rc -le 1 ]] && grep -q "✓ | every case correct" "$work/check" || fail "check (rc $rc): $(cat "$work/check")"

# 7. check reads the run's stored facts, not its suite text nor today's registry: a run
#    whose suite text is gone and whose variants no longer exist checks the same.
cp "$work/r.db" "$work/renamed.db"
count "$work/renamed.db" "update runs set suite_text = 'not TOML [', suite_hash = ''; update cases set variant_key = 'removed_' || variant_key" >/dev/null
set +e
"$seqbench" check 1 --db "$work/renamed.db" >"$work/check_renamed"
rc_renamed=$?
"$seqbench" check 1 --db "$work/r.db" >"$work/check_original"
rc_original=$?
set -e
[[ $rc_renamed -eq $rc_original ]] && cmp -s "$work/check_renamed" "$work/check_original" ||
  fail "check depends on the suite text or registry: $(diff "$work/check_original" "$work/check_renamed")"
# 8. A database from a newer seqbench is refused with exit 2 by readers and writers
#    alike, and left byte for byte as it was (no WAL switch, no migration).
cp "$work/r.db" "$work/newer.db"
count "$work/newer.db" "PRAGMA journal_mode = DELETE; UPDATE schema_version SET version = 99" >/dev/null
sum_before=$(md5sum <"$work/newer.db")
for command in "show 1" "report 1" "check 1" "run $suites/ci.toml"; do
  set +e
  # shellcheck disable=SC2086  # the command and its arguments, split on purpose
  "$seqbench" $command --db "$work/newer.db" >/dev/null 2>"$work/err"
  rc=$?
  set -e
  [[ $rc -eq 2 ]] && grep -q "schema version 99 is newer" "$work/err" ||
    fail "$command on a newer database: rc $rc, $(cat "$work/err")"
done
[[ $(md5sum <"$work/newer.db") == "$sum_before" ]] || fail "a refused newer database was modified"
[[ $(count "$work/newer.db" "PRAGMA journal_mode") == delete ]] || fail "converted to WAL"
# 9. Selecting runs as a user names them: --label, --git, --suite, --latest mean the same
#    in every command; compare takes its base by label or branch, refuses runs of another
#    suite unless allowed, and writes JSON for machines.
one_case="^$first_case "
"$seqbench" run "$suites/ci.toml" --db "$work/sel.db" --filter "$one_case" --repetitions 3 --label base >/dev/null
"$seqbench" run "$suites/ci.toml" --db "$work/sel.db" --filter "$one_case" --repetitions 3 --label pr \
  --warmup 2 --min-time 1ms >/dev/null
[[ $(count "$work/sel.db" "SELECT label || ' ' || warmup || ' ' || min_time_s FROM runs WHERE run_id = 2") == "pr 2 0.001" ]] ||
  fail "run --label/--warmup/--min-time not stored: $(count "$work/sel.db" "SELECT * FROM runs")"
[[ $(count "$work/sel.db" "SELECT count(*) FROM environment WHERE run_id = 2 AND key IN ('load_avg_start', 'load_avg_end', 'busy_processes_start', 'busy_processes_end', 'case_filter')") -eq 5 ]] ||
  fail "the run's load at start and end, and its filter, are not recorded"
grep -q "^run 1 " <("$seqbench" show --label base --db "$work/sel.db") || fail "show --label base is not run 1"
grep -q "^run 2 .*label pr\|^run 2 " <("$seqbench" show --latest --db "$work/sel.db") || fail "show --latest is not run 2"
sha=$(count "$work/sel.db" "SELECT substr(value, 1, 8) FROM environment WHERE run_id = 2 AND key = 'git_sha'")
grep -q "run 2" <("$seqbench" report --git "$sha" --suite ci --db "$work/sel.db") || fail "report --git $sha is not run 2"
set +e
"$seqbench" report --label nosuch --db "$work/sel.db" 2>"$work/err"
rc=$?
"$seqbench" report 1 --label base --db "$work/sel.db" 2>"$work/err2"
rc2=$?
set -e
[[ $rc -eq 2 ]] && grep -q "no complete run with label 'nosuch'" "$work/err" || fail "report --label nosuch: rc $rc, $(cat "$work/err")"
[[ $rc2 -eq 2 ]] && grep -q "give one of RUN_ID, --group, or --latest" "$work/err2" || fail "RUN_ID with --label: rc $rc2, $(cat "$work/err2")"
"$seqbench" compare --base-latest-on base --latest --db "$work/sel.db" --format json >"$work/cmp.json" ||
  [[ $? -eq 1 ]] || fail "compare --base-latest-on base --format json failed"
tr -d ' \n' <"$work/cmp.json" | grep -q '"base":{[^}]*"label":"base"' &&
  tr -d ' \n' <"$work/cmp.json" | grep -q '"new":{[^}]*"label":"pr"' &&
  grep -q '"geometric_mean_ratio"' "$work/cmp.json" && grep -q '"interval"' "$work/cmp.json" ||
  fail "compare JSON: $(cat "$work/cmp.json")"
if git -C "$2" rev-parse --verify -q HEAD >/dev/null && [[ $(count "$work/sel.db" "SELECT value FROM environment WHERE run_id = 1 AND key = 'git_sha'") == $(git -C "$2" rev-parse HEAD) ]]; then
  # A branch: the newest complete run of the suite from a commit on its history, not
  # the new run itself.
  (cd "$2" && "$seqbench" compare --base-latest-on HEAD 2 --db "$work/sel.db") >"$work/cmp" ||
    [[ $? -eq 1 ]] || fail "compare --base-latest-on HEAD"
  grep -q "compare run 1 (base) with run 2 (new)" "$work/cmp" || fail "--base-latest-on HEAD: $(head -2 "$work/cmp")"
fi
set +e
"$seqbench" compare 1 2 --base-db "$work/other.db" --db "$work/sel.db" >/dev/null 2>"$work/err"
rc=$?
set -e
[[ $rc -eq 2 ]] && grep -q -- "--allow-different-suites" "$work/err" || fail "compare across suites: rc $rc, $(cat "$work/err")"
"$seqbench" compare 1 2 --base-db "$work/other.db" --db "$work/sel.db" --allow-different-suites >"$work/cmp" 2>"$work/err" ||
  [[ $? -eq 1 ]] || fail "compare --allow-different-suites: $(cat "$work/err")"
grep -q "different suites: other and ci" "$work/err" || fail "compare across suites does not say so: $(cat "$work/err")"
# Resuming with other options is refused, naming the flag that would match.
set +e
"$seqbench" run "$suites/ci.toml" --db "$work/sel.db" --filter "$one_case" --repetitions 3 --resume 2 2>"$work/err"
rc=$?
set -e
[[ $rc -eq 2 ]] && grep -q -- "--label 'pr'" "$work/err" && grep -q -- "--min-time 1ms" "$work/err" && grep -q -- "--warmup 2" "$work/err" ||
  fail "resume with other options: rc $rc, $(cat "$work/err")"
echo "run/store/report CLI checks passed"
