#!/usr/bin/env bash
# `seqbench slurm` without a cluster: the dry run prints scripts that run each shard into
# its own database under one group; bad input (shard counts, group ids, run flags the
# command owns, no sbatch on PATH, a submission the controller refuses) exits 2 with
# nothing written; an accepted submission chains the gather job after the array.
# (tests/scale/slurm.sh runs the jobs on a real Slurm.)
# Usage: slurm_test.sh SEQBENCH_BINARY SOURCE_DIR
set -euo pipefail
seqbench=$1
suite=$2/suites/ci.toml
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cd "$work"

# Exit 2, the message containing $1, nothing under $work/out.
refused() {
  local expected=$1
  shift
  set +e
  "$@" >"$work/stdout" 2>"$work/err"
  local rc=$?
  set -e
  [[ $rc -eq 2 ]] || fail "$* exited $rc, expected 2: $(cat "$work/err")"
  grep -qF -- "$expected" "$work/err" || fail "$*: message lacks '$expected': $(cat "$work/err")"
  [[ ! -e "$work/out" ]] || fail "$* wrote $(ls -R "$work/out")"
}

# 1. The dry run: the array script, the gather script, the sbatch lines; nothing written.
"$seqbench" slurm "$suite" --shards 3 --group g1 --db-dir "$work/out" --dry-run -- \
  --repetitions 2 --label "it's" >"$work/dry"
[[ ! -e "$work/out" ]] || fail "--dry-run wrote $work/out"
grep -qF -- "--shard \"\${SLURM_ARRAY_TASK_ID}\"'/3'" "$work/dry" && grep -qF -- "'--group' 'g1'" "$work/dry" ||
  fail "array: $(cat "$work/dry")"
grep -qF -- "'--label' 'it'\\''s'" "$work/dry" || fail "run flags not quoted: $(cat "$work/dry")"
grep -qF -- "'--dependency' 'afterany:ARRAY_JOB_ID' '$work/out/gather.sh'" "$work/dry" ||
  fail "gather's sbatch line: $(cat "$work/dry")"
grep -qF -- "for db in '$work/out/shard-1.db' '$work/out/shard-2.db' '$work/out/shard-3.db'" "$work/dry" &&
  grep -qF -- "merge \"\${shards[@]}\" --into '$work/out/group-g1.db'" "$work/dry" ||
  fail "gather: $(cat "$work/dry")"
grep -qF -- "report --group 'g1'" "$work/dry" || fail "gather reports no group"
grep -qF -- "'--array' '1-3' '--requeue' '--hold'" "$work/dry" || fail "sbatch line: $(cat "$work/dry")"

# 2. Bad input: exit 2, nothing written.
refused "--shards must be 1 to" "$seqbench" slurm "$suite" --shards 0 --db-dir "$work/out"
refused "--shards must be 1 to" "$seqbench" slurm "$suite" --shards 100000 --db-dir "$work/out"
refused "--group 'a/b' must be" "$seqbench" slurm "$suite" --shards 2 --group a/b --db-dir "$work/out"
refused "--shard (here --shard) is set for each task" "$seqbench" slurm "$suite" --shards 2 --db-dir "$work/out" -- --shard 1/2
refused "--group (here --gro=x) is set" "$seqbench" slurm "$suite" --shards 2 --db-dir "$work/out" -- --gro=x
# seqbench's own flags for the children it starts (ChildRun's hidden ones), abbreviated too.
refused "--run-case (here --run-ca=x) is seqbench's own" "$seqbench" slurm "$suite" --shards 2 --db-dir "$work/out" -- --run-ca=x
refused "--lockstep (here --lockstep) is seqbench's own" "$seqbench" slurm "$suite" --shards 2 --db-dir "$work/out" -- --lockstep p
# Run flags every task would refuse: checked here, before anything is submitted.
refused "task 1 of 2 would refuse its command: run: --repetitions" "$seqbench" slurm "$suite" --shards 2 --db-dir "$work/out" -- --repetitions 0
refused "would refuse its command: run: a counted run cannot be a group's shard" "$seqbench" slurm "$suite" --shards 2 --db-dir "$work/out" -- --count instructions
refused "would refuse its command: run: --check must be" "$seqbench" slurm "$suite" --shards 2 --db-dir "$work/out" -- --check maybe
refused "would refuse its command: run: no case of" "$seqbench" slurm "$suite" --shards 2 --db-dir "$work/out" -- --filter 'no_such_variant_anywhere'
refused "would refuse its command: run: --check sample decides" "$seqbench" slurm "$suite" --shards 2 --db-dir "$work/out" -- --isolate --check sample
refused "would refuse its command: run: --help" "$seqbench" slurm "$suite" --shards 2 --db-dir "$work/out" -- --help
refused "backslash" "$seqbench" slurm "$suite" --shards 2 --db-dir "$work/out\\x"
refused "cannot open the suite file" "$seqbench" slurm "$work/nosuch.toml" --shards 2 --db-dir "$work/out"
refused "sbatch is not on PATH" env PATH=/nonexistent "$seqbench" slurm "$suite" --shards 2 --db-dir "$work/out"

# 3. A controller that refuses the submission: its words, exit 2, no database.
mkdir "$work/bin"
for tool in scontrol scancel; do  # they log what they are asked, beside sbatch's calls
  printf '#!/bin/bash\necho "%s $*" >>"%s/tools.log"\n' "$tool" "$work" >"$work/bin/$tool"
  chmod +x "$work/bin/$tool"
done
cat >"$work/bin/sbatch" <<'FAKE'
#!/bin/bash
echo "sbatch: error: invalid partition specified: nosuch" >&2
exit 1
FAKE
chmod +x "$work/bin/sbatch"
set +e
PATH="$work/bin:$PATH" "$seqbench" slurm "$suite" --shards 2 --partition nosuch --db-dir "$work/out" 2>"$work/err"
rc=$?
set -e
[[ $rc -eq 2 ]] || fail "a refused submission exited $rc: $(cat "$work/err")"
grep -qF "invalid partition specified: nosuch" "$work/err" || fail "refusal: $(cat "$work/err")"
[[ -z $(find "$work/out" -name '*.db') ]] || fail "a refused submission left a database"
rm -rf "$work/out"

# 3b. The array accepted (held), the gather job refused: the array is cancelled, not left
#     to run without it.
cat >"$work/bin/sbatch" <<FAKE
#!/bin/bash
if [[ " \$* " == *" --dependency "* ]]; then echo "sbatch: error: dependency refused" >&2; exit 1; fi
echo 31
FAKE
set +e
PATH="$work/bin:$PATH" "$seqbench" slurm "$suite" --shards 2 --db-dir "$work/out" 2>"$work/err"
rc=$?
set -e
[[ $rc -eq 2 ]] && grep -q "array job 31 cancelled" "$work/err" || fail "gather refused: $rc $(cat "$work/err")"
grep -qx "scancel 31" "$work/tools.log" || fail "the held array was not cancelled: $(cat "$work/tools.log")"
rm -rf "$work/out" "$work/tools.log"

# 4. An accepted one: the array first, then the gather job after it (afterany).
cat >"$work/bin/sbatch" <<FAKE
#!/bin/bash
printf '%s\n' "\$@" >>"$work/sbatch.log"
echo "sbatch" >>"$work/tools.log"
echo "---" >>"$work/sbatch.log"
n=\$(grep -c -- '---' "$work/sbatch.log")
echo "\$((40 + n));cluster"
FAKE
PATH="$work/bin:$PATH" "$seqbench" slurm "$suite" --shards 2 --group g2 --db-dir "$work/out" >"$work/submitted"
grep -q "array job 41" "$work/submitted" || fail "job ids: $(cat "$work/submitted")"
grep -q "gather job 42" "$work/submitted" || fail "job ids: $(cat "$work/submitted")"
grep -q "squeue -j 41,42" "$work/submitted" || fail "watch: $(cat "$work/submitted")"
grep -qx "afterany:41" "$work/sbatch.log" || fail "no afterany dependency: $(cat "$work/sbatch.log")"
grep -qx -- "--requeue" "$work/sbatch.log" || fail "the array is not requeued"
grep -qx -- "--hold" "$work/sbatch.log" || fail "the array is not submitted held"
[[ $(tr '\n' ' ' <"$work/tools.log") == "sbatch sbatch scontrol release 41 " ]] ||
  fail "not array, gather, then release: $(cat "$work/tools.log")"

# 5. The same folder again: its shard databases would resume as complete; refused.
touch "$work/out/shard-1.db"
set +e
PATH="$work/bin:$PATH" "$seqbench" slurm "$suite" --shards 2 --group g2 --db-dir "$work/out" 2>"$work/err"
rc=$?
set -e
[[ $rc -eq 2 ]] && grep -q "shard-1.db exists" "$work/err" || fail "a used folder: $rc $(cat "$work/err")"
# ... and one whose jobs are only queued (its scripts, no database yet).
mkdir "$work/pending" && touch "$work/pending/array.sh"
set +e
PATH="$work/bin:$PATH" "$seqbench" slurm "$suite" --shards 2 --group g3 --db-dir "$work/pending" 2>"$work/err"
rc=$?
set -e
[[ $rc -eq 2 ]] && grep -q "array.sh exists" "$work/err" || fail "a pending folder: $rc $(cat "$work/err")"
bash -n "$work/out/array.sh" && bash -n "$work/out/gather.sh" || fail "scripts do not parse"

# 6. A link planted where the tools' output went (DIR/.slurm-output) writes nothing through
#    it, and the tools' output files are gone afterwards.
mkdir "$work/linked" && echo precious >"$work/victim"
ln -s "$work/victim" "$work/linked/.slurm-output"
PATH="$work/bin:$PATH" "$seqbench" slurm "$suite" --shards 2 --group g4 --db-dir "$work/linked" \
  >"$work/submitted" || fail "a submission beside a planted link failed"
[[ $(cat "$work/victim") == precious ]] || fail "the planted link's target was overwritten"
[[ -z $(find "$work/linked" -name '.slurm-output-*') ]] || fail "the tools' output files were left"
echo "slurm command tests passed"
