#!/usr/bin/env bash
# Every refused input, through the real command line: exit 2, a message that names the flag
# or file at fault, no C++ exception text or c10 stack trace, and no database created or
# modified. One line per input, across every command, so that a new flag is easy to add
# and a regression names itself.
# Usage: bad_input_test.sh SEQBENCH_BINARY SOURCE_DIR
set -uo pipefail
seqbench=$1
source_dir=$2
suite=$source_dir/suites/ci.toml
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A store with runs to read (ids 1-20 of suites/ci.toml), whose bytes must not change.
cp "$source_dir/results/published/gate.db" "$work/runs.db"
runs_sum=$(md5sum <"$work/runs.db")
missing=$work/missing.db  # must never be created
printf 'hello\n' >"$work/not_a_checkpoint.pt"
printf '# no markers\n' >"$work/plain.md"

checked=0 failures=0
# refused NAMED ARGS...: the command must exit 2 with NAMED in its message.
refused() {
  local named=$1
  shift
  checked=$((checked + 1))
  local rc
  timeout 60 "$seqbench" "$@" >"$work/out" 2>"$work/err" </dev/null
  rc=$?
  local problems=()
  [[ $rc -eq 2 ]] || problems+=("exit $rc, expected 2")
  grep -qF -- "$named" "$work/err" || problems+=("message does not name '$named'")
  if grep -qE "terminate called|Exception raised from|c10::|std::|stoll|stoi|what\(\)" "$work/err"; then
    problems+=("message shows C++ internals")
  fi
  if [[ -e $missing ]]; then
    problems+=("created $missing")
    rm -f "$missing" "$missing"-*
  fi
  if [[ $(md5sum <"$work/runs.db") != "$runs_sum" ]]; then
    problems+=("modified the store")
    cp "$source_dir/results/published/gate.db" "$work/runs.db"
  fi
  if [[ ${#problems[@]} -gt 0 ]]; then
    failures=$((failures + 1))
    echo "FAIL: seqbench $*: ${problems[*]}" >&2
    sed 's/^/    /' "$work/err" | head -5 >&2
  fi
}

# The command line itself.
refused "frobnicate" frobnicate
refused "none.so" --plugin "$work/none.so" list
refused "--nonsense" list --nonsense

# run
refused "suite" run --db "$missing"
refused "nonexistent.toml" run "$work/nonexistent.toml" --db "$missing"
refused "--repetitions" run "$suite" --db "$missing" --repetitions 0
refused "--repetitions" run "$suite" --db "$missing" --repetitions -3
refused "--repetitions" run "$suite" --db "$missing" --repetitions three
refused "--warmup" run "$suite" --db "$missing" --warmup -1
refused "--min-time" run "$suite" --db "$missing" --min-time 10
refused "--min-time" run "$suite" --db "$missing" --min-time 10parsecs
refused "--max-noise" run "$suite" --db "$missing" --max-noise 2
refused "--max-noise" run "$suite" --db "$missing" --max-noise 150%
refused "--max-time" run "$suite" --db "$missing" --max-time 5s
refused "--max-time" run "$suite" --db "$missing" --max-noise 2% --max-time 0s
refused "--label" run "$suite" --db "$missing" --label "$(printf 'a\nb')"
refused "--interleave" run "$suite" --db "$missing" --interleave --isolate
refused "--interleave" run "$suite" --db "$missing" --interleave --max-noise 2%
refused "--count takes" run "$suite" --db "$missing" --count cycles
refused "cannot be combined" run "$suite" --db "$missing" --count instructions,hw-instructions
refused "--count takes" run "$suite" --db "$missing" --count ,
refused "--test-slowdown" run "$suite" --db "$missing" --test-slowdown 0.5
refused "--test-slowdown-filter" run "$suite" --db "$missing" --test-slowdown 1.3 --test-slowdown-filter "("
refused "--repetitions" run "$suite" --db "$missing" --repetitions 99999999999999999999
refused "--threads" run "$suite" --db "$missing" --threads 0
refused "--threads" run "$suite" --db "$missing" --threads many
refused "--shard" run "$suite" --db "$missing" --shard 3/2
refused "--shard" run "$suite" --db "$missing" --shard 0/1
refused "--shard" run "$suite" --db "$missing" --shard 1/0
refused "--shard" run "$suite" --db "$missing" --shard 99999999999999999999/1
refused "--shard" run "$suite" --db "$missing" --shard half
refused "--resume" run "$suite" --db "$missing" --resume 999
refused "--resume" run "$suite" --db "$missing" --resume 0
refused "--resume" run "$suite" --db "$missing" --resume one
refused "--resume" run "$suite" --db "$work/runs.db" --resume 999
refused "--check" run "$suite" --db "$missing" --check sometimes
refused "--case-timeout" run "$suite" --db "$missing" --case-timeout 0
refused "--case-timeout" run "$suite" --db "$missing" --case-timeout -5
refused "--case-timeout" run "$suite" --db "$missing" --case-timeout nan
refused "--case-timeout" run "$suite" --db "$missing" --case-timeout inf
refused "--device" run "$suite" --db "$missing" --device tpu
refused "--filter" run "$suite" --db "$missing" --filter "(unclosed"
refused "--filter" run "$suite" --db "$missing" --filter "no case matches this"
refused "--retry-failed" run "$suite" --db "$missing" --retry-failed
refused "--isolate" run "$suite" --db "$missing" --isolate --in-process

# train
refused "--steps" train --db "$missing" --steps 0
refused "--steps" train --db "$missing" --steps -1
refused "--steps" train --db "$missing" --steps many
refused "--learning-rate" train --db "$missing" --learning-rate nan
refused "--learning-rate" train --db "$missing" --learning-rate 0
refused "--learning-rate" train --db "$missing" --learning-rate inf
refused "--batching" train --db "$missing" --batching sometimes
refused "--amp" train --db "$missing" --amp fp8
refused "--optimizer" train --db "$missing" --optimizer sgd
refused "--width" train --db "$missing" --width 0
refused "heads (3)" train --db "$missing" --width 64 --heads 3
refused "--variant" train --db "$missing" --variant nosuch
refused "--corpus" train --db "$missing" --corpus nosuch
refused "--data" train --db "$missing" --data nosuch  # the old spelling, a hidden alias
refused "--data is the old spelling" train --db "$missing" --data fortunes --corpus edict
refused "--corpus" train --db "$missing" --corpus "$(printf 'x\nseed = 3')"
refused "--variant" train --db "$missing" --variant "a b"
refused "--batch-size" train --db "$missing" --batch-size 0
refused "--workers" train --db "$missing" --workers -1
refused "--accumulation" train --db "$missing" --accumulation 0
refused "--clip-norm" train --db "$missing" --clip-norm -1
refused "--eval-every" train --db "$missing" --eval-every 0
refused "--checkpoint" train --db "$missing" --checkpoint "$work/no/such/folder/model.pt"
# A bad --resume is named before the corpus is read: no corpus here (as on a machine
# without the fortunes package) must not hide it.
refused "--resume" train --db "$missing" --data-path "$work/no-corpus" --resume "$work/none.pt"
refused "not_a_checkpoint.pt" train --db "$missing" --data-path "$work/no-corpus" \
  --resume "$work/not_a_checkpoint.pt"
refused "--pipeline" train "$source_dir/suites/training_synthetic.toml" --db "$missing" --pipeline nosuch

# Readers: a missing store is not created, a missing run is named.
refused "missing.db" show --db "$missing"
refused "999" show 999 --db "$work/runs.db"
refused "'one'" show one --db "$work/runs.db"
refused "nosuch" show --latest --suite nosuch --db "$work/runs.db"
refused "missing.db" report --latest --db "$missing"
refused "--format" report 1 --format xml --db "$work/runs.db"
refused "999" report 999 --db "$work/runs.db"
refused "999" check 999 --db "$work/runs.db"
refused "missing.db" check --latest --db "$missing"
refused "BASE_RUN" compare 1 --db "$work/runs.db"
refused "999" compare 1 999 --db "$work/runs.db"
refused "--threshold" compare 1 2 --threshold 5 --db "$work/runs.db"
refused "--threshold" compare 1 2 --threshold -5% --db "$work/runs.db"
refused "--threshold" compare 1 2 --threshold some --db "$work/runs.db"
refused "--confidence" compare 1 2 --confidence 1.5 --db "$work/runs.db"
refused "--confidence" compare 1 2 --confidence 0 --db "$work/runs.db"
refused "--confidence" compare 1 2 --confidence nan --db "$work/runs.db"
refused "missing.db" compare 1 2 --base-db "$missing" --db "$work/runs.db"
refused "--x" plot 1 --x width --db "$work/runs.db" --out "$work/p.svg"
refused "--y" plot 1 --y joy --db "$work/runs.db" --out "$work/p.svg"
refused "--over" plot 1 --y speedup --db "$work/runs.db" --out "$work/p.svg"
refused "999" plot 999 --db "$work/runs.db" --out "$work/p.svg"
refused "nonexistent.md" readme "$work/nonexistent.md" --db "$work/runs.db"
refused "missing.db" readme "$work/plain.md" --db "$missing"
refused "--into" merge "$work/runs.db"
refused "nonexistent.db" merge --into "$missing" "$work/nonexistent.db"

# profile: a suite, a --filter that selects something, bounded steps and rows.
refused "give the suite file" profile --filter x
refused "give --filter CASES" profile "$suite"
refused "--filter" profile "$suite" --filter "(unclosed"
refused "no case of" profile "$suite" --filter "no_such_case_anywhere"
refused "--steps must be 1 to 100," profile "$suite" --filter x --steps 0
refused "--top must be 1 to 1000" profile "$suite" --filter x --top 1001
refused "nonexistent.toml" profile "$work/nonexistent.toml" --filter x

# verify validates its flags as a suite validates its fields.
refused "--batch" verify --batch 0
refused "--seq-len" verify --seq-len 0
refused "--min-len" verify --seq-len 8 --min-len 9
refused "--dtype" verify --dtype float16
refused "model family 'nosuch'" verify --family nosuch
refused "baseline 'nosuch'" verify --baseline nosuch
refused "--filter" verify --filter "(unclosed"
refused "heads (3)" verify --width 64 --heads 3
refused "--vocab-size" verify --vocab-size 0
refused "--vocab-size" verify --vocab 0  # the old spelling
refused "--generate-tokens" verify --generate-tokens -1
refused "--generate-tokens" generate --checkpoint x.pt --prompt a -n 0

# generate
refused "--checkpoint" generate --prompt hi
refused "none.pt" generate --checkpoint "$work/none.pt" --prompt hi
refused "not_a_checkpoint.pt" generate --checkpoint "$work/not_a_checkpoint.pt" --prompt hi

# list
refused "nonexistent" list --suites "$work/nonexistent"

# Outputs that would destroy the database or write through a planted link (issue 47).
refused "results database" report 1 --db "$work/runs.db" --out "$work/runs.db"
refused "results database" report 1 --db "$work/runs.db" --out "$work/sub/../runs.db-wal"
refused "results database" plot 1 --db "$work/runs.db" --out "$work/runs.db"
printf 'precious\n' >"$work/victim.txt"
ln -s "$work/victim.txt" "$work/link.md"
ln -s "$work/victim.txt" "$work/link.svg"
refused "symbolic link" report 1 --db "$work/runs.db" --out "$work/link.md"
refused "symbolic link" plot 1 --db "$work/runs.db" --out "$work/link.svg"
# ... and before gnuplot starts: a gnuplot that fails (or is missing, as on the GPU
# machine) must not hide the link.
mkdir -p "$work/failing-gnuplot"
printf '#!/bin/sh\nexit 1\n' >"$work/failing-gnuplot/gnuplot"
chmod +x "$work/failing-gnuplot/gnuplot"
PATH="$work/failing-gnuplot:$PATH" refused "symbolic link" plot 1 --db "$work/runs.db" \
  --out "$work/link.svg"
if [[ $(cat "$work/victim.txt") != precious ]]; then
  echo "FAIL: a write went through a planted symlink" >&2
  failures=$((failures + 1))
fi
# Standard output that cannot be written is a failure, said once.
checked=$((checked + 1))
"$seqbench" report 1 --db "$work/runs.db" --format json >/dev/full 2>"$work/err"
rc=$?
if [[ $rc -ne 1 ]] || ! grep -q "cannot write standard output" "$work/err"; then
  echo "FAIL: report >/dev/full: exit $rc, $(cat "$work/err")" >&2
  failures=$((failures + 1))
fi

echo "bad input: $checked refused inputs checked, $failures misbehaved"
[[ $failures -eq 0 ]]
