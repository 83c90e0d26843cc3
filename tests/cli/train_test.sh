#!/usr/bin/env bash
# End-to-end checks of `seqbench train`, `generate`, `check` and `readme` on training runs
# through the real command line, on small synthetic data: bad input exits 2 before the
# database exists; every step is logged; a checkpoint resumes with the same losses as an
# uninterrupted run; generate decodes from it; a training suite's expectations are checked.
# Usage: train_test.sh SEQBENCH_BINARY SOURCE_DIR
set -euo pipefail
seqbench=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
small=(--corpus synthetic --max-samples 400 --validation-samples 32 --max-length 32
       --width 16 --layers 1 --heads 2 --batch-size 8 --eval-every 4 --variant fused)

# 1. Bad input: exit 2, a message that names the problem, no database.
set +e
"$seqbench" train "${small[@]}" --batching token_budget --token-budget 8 --db "$work/bad.db" 2>"$work/err"
rc=$?
set -e
[[ $rc -eq 2 ]] || fail "bad token budget exited $rc, expected 2"
grep -q "token_budget (8) must be at least \[data\] max_length (32)" "$work/err" || fail "message: $(cat "$work/err")"
[[ ! -e "$work/bad.db" ]] || fail "bad input created the database"
set +e
"$seqbench" train --data fortunes --data-path "$work/missing" --db "$work/bad.db" 2>"$work/err"
rc=$?
set -e
[[ $rc -eq 2 ]] || fail "missing corpus exited $rc, expected 2"
grep -q "missing" "$work/err" || fail "message: $(cat "$work/err")"

for bad in "--learning-rate inf" "--learning-rate nan" "--learning-rate 0" "--checkpoint $work/no/such/folder/c.pt"; do
  set +e
  # shellcheck disable=SC2086  # the flag and its value, split on purpose
  "$seqbench" train "${small[@]}" $bad --db "$work/bad.db" 2>"$work/err"
  rc=$?
  set -e
  [[ $rc -eq 2 ]] || fail "$bad exited $rc, expected 2: $(cat "$work/err")"
  grep -qE "learning_rate|folder" "$work/err" || fail "$bad: message: $(cat "$work/err")"
  [[ ! -e "$work/bad.db" ]] || fail "$bad created the database"
done

# 1b. A diverging pipeline (a learning rate of 1e30) is a stored result, not a crash: its
#     case says diverged, its NaN loss is stored (NULL), the run completes, exit 1.
set +e
"$seqbench" train "${small[@]}" --steps 12 --learning-rate 1e30 --db "$work/nan.db" >"$work/out" 2>&1
rc=$?
set -e
[[ $rc -eq 1 ]] || fail "diverging training exited $rc: $(cat "$work/out")"
[[ $(sqlite3 "$work/nan.db" "SELECT status FROM runs") == complete ]] || fail "diverged run not complete"
[[ $(sqlite3 "$work/nan.db" "SELECT status FROM cases") == diverged ]] || fail "case not diverged: $(cat "$work/out")"
[[ $(sqlite3 "$work/nan.db" "SELECT count(*) FROM training_steps WHERE loss IS NULL") -ge 1 ]] || fail "no NaN loss stored"
grep -q diverged <("$seqbench" show --latest --db "$work/nan.db") || fail "show does not say diverged"

# 2. 12 straight steps; then a run stopped after 6 and resumed from its checkpoint: the
#    same losses for steps 7..12.
"$seqbench" train "${small[@]}" --steps 12 --db "$work/t.db" >"$work/out" 2>&1 || fail "$(cat "$work/out")"
[[ $(sqlite3 "$work/t.db" "SELECT count(*) FROM training_steps WHERE run_id = 1") -eq 12 ]] ||
  fail "12 steps, $(sqlite3 "$work/t.db" "SELECT count(*) FROM training_steps WHERE run_id = 1") logged"
[[ $(sqlite3 "$work/t.db" "SELECT count(*) FROM training_steps WHERE run_id = 1 AND validation_loss IS NOT NULL") -eq 3 ]] ||
  fail "expected validation losses at steps 4, 8, 12"
# The stored parameter count is the model's, from simple_rnn's weights (README): V·D embedding
# and D·V head, per layer a norm gain, w_q w_k w_v w_g w_o [D,D] and b_g [D], a final norm:
# 2·260·16 + (16 + 5·256 + 16) + 16 = 9648 with V = 260 (bytes, specials), D = 16, L = 1.
parameters=$(sqlite3 "$work/t.db" "SELECT m.value FROM metrics m JOIN cases c USING (case_id)
  WHERE c.run_id = 1 AND m.name = 'parameters'")
[[ $parameters == 9648 || $parameters == 9648.0 ]] || fail "parameters: stored $parameters, expected 9648"
# Stopped after 4 of 12 steps, as by Ctrl-C: exit 1, the checkpoint saved; a copy of it
# kept; continued to step 6 and stopped again; then resumed from the step-4 copy, as after a
# crash that lost the later checkpoint: steps 5 and 6 are taken again. One run throughout,
# whose 12 logged losses equal the straight run's.
for stop in 4 2; do
  set +e
  "$seqbench" train "${small[@]}" --steps 12 --checkpoint "$work/ck.pt" --stop-after-steps $stop \
    $([[ $stop -eq 2 ]] && echo --resume "$work/ck.pt") --db "$work/t.db" >"$work/out" 2>&1
  rc=$?
  set -e
  [[ $rc -eq 1 && -e "$work/ck.pt" ]] || fail "interrupted training: rc $rc, $(cat "$work/out")"
  if [[ $stop -eq 4 ]]; then cp "$work/ck.pt" "$work/ck4.pt"; fi
done
[[ $(sqlite3 "$work/t.db" "SELECT status FROM runs WHERE run_id = 2") == interrupted ]] || fail "run 2 not marked interrupted"
[[ $(sqlite3 "$work/t.db" "SELECT count(*) FROM runs") -eq 2 ]] || fail "a resume started a new run: $(cat "$work/out")"
[[ $(sqlite3 "$work/t.db" "SELECT max(step) FROM training_steps WHERE run_id = 2") -eq 6 ]] || fail "run 2 should have 6 steps"
# A resume under other options is refused before it touches the run it names.
set +e
"$seqbench" train "${small[@]}" --learning-rate 0.5 --steps 12 --resume "$work/ck4.pt" --db "$work/t.db" >"$work/out" 2>&1
rc=$?
set -e
[[ $rc -eq 2 ]] && grep -q "different training configuration" "$work/out" || fail "resume under other options: rc $rc, $(cat "$work/out")"
[[ $(sqlite3 "$work/t.db" "SELECT status FROM runs WHERE run_id = 2") == interrupted ]] || fail "a refused resume changed run 2"
[[ $(sqlite3 "$work/t.db" "SELECT count(*) FROM cases WHERE run_id = 2") -eq 0 ]] || fail "a refused resume stored a case"
"$seqbench" train "${small[@]}" --steps 12 --checkpoint "$work/ck.pt" --resume "$work/ck4.pt" --db "$work/t.db" >"$work/out" 2>&1 || fail "resume: $(cat "$work/out")"
grep -q "2 logged after it are taken again" "$work/out" || fail "resume message: $(cat "$work/out")"
[[ $(sqlite3 "$work/t.db" "SELECT count(*) FROM runs") -eq 2 ]] || fail "the resume started a new run"
[[ $(sqlite3 "$work/t.db" "SELECT status FROM runs WHERE run_id = 2") == complete ]] || fail "run 2 not complete"
straight=$(sqlite3 "$work/t.db" "SELECT group_concat(loss, ' ') FROM (SELECT loss FROM training_steps WHERE run_id = 1 ORDER BY step)")
resumed=$(sqlite3 "$work/t.db" "SELECT group_concat(loss, ' ') FROM (SELECT loss FROM training_steps WHERE run_id = 2 ORDER BY step)")
[[ -n "$straight" && "$straight" == "$resumed" ]] || fail "resumed losses differ: '$straight' vs '$resumed'"
# The final metrics cover all 12 steps, as the straight run's do.
final() { sqlite3 "$work/t.db" "SELECT c.iterations || ' ' || m.value FROM cases c JOIN metrics m USING (case_id) WHERE c.run_id = $1 AND m.name = '$2'"; }
[[ $(final 2 final_validation_loss) == "$(final 1 final_validation_loss)" && $(final 2 final_train_loss) == "$(final 1 final_train_loss)" ]] ||
  fail "final metrics of the resumed run: $(final 2 final_train_loss) vs $(final 1 final_train_loss)"
[[ $(final 2 final_train_loss) == 12\ * ]] || fail "the resumed run's case counts $(final 2 final_train_loss | cut -d' ' -f1) steps"
# Each step logs the training time up to its end, and the throughput comes from those
# times: both runs, the resumed one too, have growing times and a tokens_per_s.
for run in 1 2; do
  [[ $(sqlite3 "$work/t.db" "SELECT count(*) FROM training_steps a JOIN training_steps b ON b.run_id = a.run_id AND b.case_key = a.case_key AND b.step = a.step + 1 WHERE a.run_id = $run AND a.elapsed_s > 0 AND b.elapsed_s > a.elapsed_s") -eq 11 ]] ||
    fail "run $run's logged times do not grow: $(sqlite3 "$work/t.db" "SELECT group_concat(elapsed_s, ' ') FROM training_steps WHERE run_id = $run")"
  [[ $(final $run tokens_per_s | awk '{print ($2 > 0)}') == 1 ]] || fail "run $run has no tokens_per_s"
done
set +e
"$seqbench" train "${small[@]}" --learning-rate 0.5 --steps 12 --resume "$work/ck.pt" --db "$work/t.db" >"$work/out" 2>&1
rc=$?
set -e
[[ $rc -eq 2 ]] && grep -q "different training configuration" "$work/out" || fail "resume under other options: rc $rc, $(cat "$work/out")"
# Run 2, complete at 12 steps, extended to 16 from its last checkpoint: the same run, its
# first 12 steps kept, the schedule's new length said, one record over all 16 steps.
cp "$work/ck.pt" "$work/ck12.pt"
"$seqbench" train "${small[@]}" --steps 16 --resume "$work/ck12.pt" --db "$work/t.db" >"$work/out" 2>&1 || fail "extend: $(cat "$work/out")"
grep -q "extending run 2 from 12 to 16 steps" "$work/out" && grep -q "cosine schedule now decays over" "$work/out" ||
  fail "extend message: $(cat "$work/out")"
[[ $(sqlite3 "$work/t.db" "SELECT count(*) FROM runs") -eq 2 ]] || fail "the extension started a new run"
[[ $(sqlite3 "$work/t.db" "SELECT status FROM runs WHERE run_id = 2") == complete ]] || fail "extended run 2 not complete"
[[ $(sqlite3 "$work/t.db" "SELECT count(*) || ' ' || max(step) FROM training_steps WHERE run_id = 2") == "16 16" ]] ||
  fail "extended run 2 logs $(sqlite3 "$work/t.db" "SELECT count(*) || ' steps up to ' || max(step) FROM training_steps WHERE run_id = 2")"
kept=$(sqlite3 "$work/t.db" "SELECT group_concat(loss, ' ') FROM (SELECT loss FROM training_steps WHERE run_id = 2 AND step <= 12 ORDER BY step)")
[[ "$kept" == "$straight" ]] || fail "the extension changed the first 12 losses"
[[ $(sqlite3 "$work/t.db" "SELECT count(*) FROM cases WHERE run_id = 2") -eq 1 ]] || fail "the extended run has $(sqlite3 "$work/t.db" "SELECT count(*) FROM cases WHERE run_id = 2") records"
[[ $(final 2 final_train_loss) == 16\ * ]] || fail "the extended run's record counts $(final 2 final_train_loss | cut -d' ' -f1) steps"
# Asking a finished run for no more steps than it has is not an extension: a new run.
"$seqbench" train "${small[@]}" --steps 12 --resume "$work/ck12.pt" --db "$work/t.db" >"$work/out" 2>&1 || fail "$(cat "$work/out")"
grep -q "a new run, since run 2 already finished this pipeline (16 steps" "$work/out" || fail "not-an-extension message: $(cat "$work/out")"

# 3. Generate from the checkpoint: the prompt, then decoded text and latencies.
"$seqbench" generate --checkpoint "$work/ck.pt" --prompt "<en> hi <ja>" -n 5 >"$work/gen" || fail "$(cat "$work/gen")"
grep -q "^<en> hi <ja>" "$work/gen" && grep -q "per new token: median" "$work/gen" || fail "$(cat "$work/gen")"
set +e
"$seqbench" generate --checkpoint "$work/nothing.pt" --prompt x 2>"$work/err"
rc=$?
set -e
[[ $rc -eq 2 ]] && grep -q "no such checkpoint" "$work/err" || fail "missing checkpoint: rc $rc, $(cat "$work/err")"

# 4. A training suite: two pipelines on the same batches, checked, rendered.
cat >"$work/suite.toml" <<'TOML'
name = "tiny"
description = "test"
[data]
corpus = "synthetic"
max_samples = 300
validation_samples = 32
max_length = 32
[model]
width = 16
layers = 1
heads = 2
[train]
steps = 8
eval_every = 4
batch_size = 8
timing_warmup = 2
[[pipelines]]
name = "plain"
variant = "fused"
[[pipelines]]
name = "scan"
variant = "scan"
[[pipelines]]
name = "scan_accumulated"
variant = "scan"
batch_size = 4
accumulation = 2
reference = "scan"
[[expect]]
what = "loss_match"
variant = "scan"
over = "plain"
at_most = 1e-4
[[expect]]
what = "throughput"
variant = "scan"
over = "plain"
at_least = 1e6
TOML
"$seqbench" train "$work/suite.toml" --db "$work/s.db" >"$work/out" 2>&1 || fail "$(cat "$work/out")"
set +e
"$seqbench" check --latest --db "$work/s.db" >"$work/check"
rc=$?
set -e
# The loss curves match; a million-fold speedup does not happen: exit 1, one of each.
[[ $rc -eq 1 ]] || fail "check exited $rc: $(cat "$work/check")"
grep -qF '✓ | largest \|training loss of scan − plain\| per step' "$work/check" || fail "$(cat "$work/check")"
grep -q "✗ | tokens/s of scan / plain" "$work/check" || fail "$(cat "$work/check")"
printf '# x\n<!-- seqbench:begin suite=tiny -->\n<!-- seqbench:end -->\n' >"$work/README.md"
# gnuplot is part of ci/install-deps; the GPU machine does not carry it (ci/gpu/README.md).
if command -v gnuplot >/dev/null; then
  printf '<!-- seqbench:begin suite=tiny plot=loss x=time file=loss.svg -->\n<!-- seqbench:end -->\n' >>"$work/README.md"
else
  echo "train_test: no gnuplot on PATH: the README's loss plot not tried"
fi
"$seqbench" readme "$work/README.md" --db "$work/s.db" || fail "readme failed"
grep -q "^| scan | variant=scan batching=fixed B=8" "$work/README.md" || fail "$(cat "$work/README.md")"
if command -v gnuplot >/dev/null; then
  grep -q "<svg" "$work/loss.svg" || fail "no loss plot written"
fi
# A pipeline's own reference is stored with its case and named under the table.
[[ $(sqlite3 "$work/s.db" "SELECT group_concat(reference) FROM (SELECT reference FROM cases ORDER BY position)") == plain,plain,scan ]] ||
  fail "references: $(sqlite3 "$work/s.db" "SELECT variant_name, reference FROM cases")"
grep -qF '`plain` for plain, scan; `scan` for scan_accumulated' "$work/README.md" || fail "$(cat "$work/README.md")"
# 6. The recall task end to end: the accuracies reach the store, the tables and a README.
cat >"$work/recall.toml" <<'TOML'
name = "recall_tiny"
description = "recall, end to end"
[data]
corpus = "recall"
recall_distances = [4, 12]
recall_pairs = 2
max_length = 17
synthetic_samples = 200
validation_samples = 40
[model]
width = 16
layers = 1
heads = 2
[train]
steps = 6
eval_every = 3
batch_size = 8
timing_warmup = 1
[[pipelines]]
name = "rnn"
variant = "scan"
[[pipelines]]
name = "attention"
variant = "naive"
model = { layers = 2 }
TOML
"$seqbench" train "$work/recall.toml" --db "$work/r.db" >"$work/out" 2>&1 || fail "$(cat "$work/out")"
grep -q "^| pipeline | options | parameters | d = 4 | d = 12 | val. loss | status |" "$work/out" || fail "$(cat "$work/out")"
grep -q "^| attention | variant=naive D=16 L=2 H=2 " "$work/out" || fail "$(cat "$work/out")"
# Every validation sample is scored at its distance, once.
[[ $(sqlite3 "$work/r.db" "SELECT count(*) || ':' || group_concat(n) FROM (SELECT CAST(sum(value) AS INTEGER) AS n FROM metrics WHERE name LIKE 'recall_samples_d%' GROUP BY case_id)") == 2:40,40 ]] ||
  fail "scored samples: $(sqlite3 "$work/r.db" "SELECT case_id, name, value FROM metrics WHERE name LIKE 'recall%'")"
"$seqbench" report --latest --db "$work/r.db" | grep -q "^## Recall accuracy against distance" || fail "report has no recall table"
printf '# x\n<!-- seqbench:begin suite=recall_tiny recall=accuracy -->\n<!-- seqbench:end -->\n' >"$work/RECALL.md"
"$seqbench" readme "$work/RECALL.md" --db "$work/r.db" || fail "readme failed"
grep -q "^| rnn | variant=scan " "$work/RECALL.md" || fail "$(cat "$work/RECALL.md")"
printf '# x\n<!-- seqbench:begin suite=tiny recall=accuracy -->\n<!-- seqbench:end -->\n' >"$work/NORECALL.md"
if "$seqbench" readme "$work/NORECALL.md" --db "$work/s.db" 2>"$work/err"; then fail "recall=accuracy on a run without recall scores"; fi
grep -q 'corpus = "recall"' "$work/err" || fail "message: $(cat "$work/err")"
# 7. evaluate_with end to end: the trained weights through other variants reach the store,
# the tables and a README; a variant of another family is a file:line error.
sed -e 's/^name = "recall_tiny"/name = "evaluated_tiny"/' -e '/^\[\[pipelines\]\]$/,$d' "$work/recall.toml" >"$work/evaluated.toml"
printf '[[pipelines]]\nname = "rnn"\nvariant = "scan"\nevaluate_with = ["stepwise", "int8_dynamic"]\n' >>"$work/evaluated.toml"
"$seqbench" train "$work/evaluated.toml" --db "$work/e.db" >"$work/out" 2>&1 || fail "$(cat "$work/out")"
grep -q "^| rnn | stepwise | " "$work/out" || fail "$(cat "$work/out")"
# The control computes the trained function: every prediction the same.
[[ $(sqlite3 "$work/e.db" "SELECT value FROM metrics WHERE name = 'inference_argmax_agreement_stepwise'") == 1.0 ]] ||
  fail "stepwise agreement: $(sqlite3 "$work/e.db" "SELECT name, value FROM metrics WHERE name LIKE 'inference%'")"
"$seqbench" report --latest --db "$work/e.db" | grep -q "^## Trained weights through inference variants" ||
  fail "report has no inference table"
printf '# x\n<!-- seqbench:begin suite=evaluated_tiny inference=comparison -->\n<!-- seqbench:end -->\n' >"$work/INFER.md"
"$seqbench" readme "$work/INFER.md" --db "$work/e.db" || fail "readme failed"
grep -q "^| rnn | stepwise | " "$work/INFER.md" || fail "$(cat "$work/INFER.md")"
sed -i 's/"stepwise", "int8_dynamic"/"stepwise", "naive"/' "$work/evaluated.toml"
if "$seqbench" train "$work/evaluated.toml" --db "$work/e.db" 2>"$work/err"; then fail "evaluate_with of another family"; fi
grep -q "evaluated.toml:22:30: .*family 'attention'" "$work/err" || fail "message: $(cat "$work/err")"
# 8. What cannot be measured here is skipped with its reason and does not fail the run:
# optimizer offload off CUDA (and, on a machine without it, any CUDA pipeline).
sed -e 's/^name = "tiny"/name = "offload_tiny"/' -e '/^\[\[pipelines\]\]$/,$d' "$work/suite.toml" >"$work/offload.toml"
printf '[[pipelines]]\nname = "adamw"\nvariant = "fused"\n[[pipelines]]\nname = "offloaded"\nvariant = "fused"\noffload = "cpu"\n' >>"$work/offload.toml"
"$seqbench" train "$work/offload.toml" --db "$work/o.db" >"$work/out" 2>&1 || fail "a skipped pipeline failed the run: $(cat "$work/out")"
[[ $(sqlite3 "$work/o.db" "SELECT group_concat(status) FROM (SELECT status FROM cases ORDER BY position)") == ok,skipped ]] ||
  fail "statuses: $(sqlite3 "$work/o.db" "SELECT variant_name, status, message FROM cases")"
sqlite3 "$work/o.db" "SELECT message FROM cases WHERE variant_name = 'offloaded'" | grep -q "off a CUDA device; this pipeline trains on cpu" ||
  fail "reason: $(sqlite3 "$work/o.db" "SELECT message FROM cases")"
grep -q "^\[offloaded\] skipped: offload" "$work/out" || fail "$(cat "$work/out")"
"$seqbench" report --latest --db "$work/o.db" | grep -q "^| offloaded | .* | skipped: offload" || fail "report: $("$seqbench" report --latest --db "$work/o.db")"
# 9. Distillation: a student of half the width learns from the teacher trained before it
# in the same run; alone (--pipeline), it has no teacher: exit 2 before any database.
sed -e 's/^name = "tiny"/name = "distil_tiny"/' -e '/^\[\[pipelines\]\]$/,$d' "$work/suite.toml" >"$work/distil.toml"
printf '[[pipelines]]\nname = "teacher"\nvariant = "batched"\n[[pipelines]]\nname = "student"\nvariant = "batched"\nmodel = { width = 8 }\ndistill_from = "teacher"\ndistill_temperature = 2\n' >>"$work/distil.toml"
"$seqbench" train "$work/distil.toml" --db "$work/d.db" >"$work/out" 2>&1 || fail "distillation: $(cat "$work/out")"
[[ $(sqlite3 "$work/d.db" "SELECT group_concat(status) FROM (SELECT status FROM cases ORDER BY position)") == ok,ok ]] ||
  fail "statuses: $(sqlite3 "$work/d.db" "SELECT variant_name, status, message FROM cases")"
grep -q "distill=teacher T=2 alpha=0.5" "$work/out" || fail "the student does not say it distils: $(cat "$work/out")"
set +e
"$seqbench" train "$work/distil.toml" --pipeline student --db "$work/d2.db" >/dev/null 2>"$work/err"
rc=$?
set -e
[[ $rc -eq 2 ]] || fail "a student without its teacher exited $rc, expected 2: $(cat "$work/err")"
grep -q "distils from 'teacher', which this command does not train" "$work/err" || fail "message: $(cat "$work/err")"
[[ ! -e "$work/d2.db" ]] || fail "a student without its teacher created the database"
echo "train_test: all checks passed"
