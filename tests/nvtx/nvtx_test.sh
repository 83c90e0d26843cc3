#!/usr/bin/env bash
# `seqbench run --nvtx` emits balanced NVTX ranges named after the suite's cases and each
# step's phases; without --nvtx it emits none. Counted by the injection library.
# Usage: nvtx_test.sh SEQBENCH_BINARY INJECTION_LIBRARY SOURCE_DIR
set -euo pipefail
seqbench=$1
injection=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# Train, forward and generate cases, including stepwise's prefill/decode.
sed -e 's/repetitions = 5/repetitions = 2/' "$3/suites/ci.toml" >"$work/suite.toml"
export NVTX_INJECTION64_PATH=$injection
# In one process (CI makes --isolate the default): the counting library keeps one log per
# process, and this test reads the ranges of the whole run from it.
SEQBENCH_NVTX_LOG=$work/on.log "$seqbench" run "$work/suite.toml" --db "$work/r.db" --nvtx --in-process \
  --filter '^(baseline|stepwise) ' >/dev/null
pushes=$(awk '$1 == "pushes" {print $2}' "$work/on.log")
pops=$(awk '$1 == "pops" {print $2}' "$work/on.log")
[[ -n "$pushes" && $pushes -gt 0 ]] || fail "no ranges pushed"
[[ $pushes -eq $pops ]] || fail "unbalanced ranges: $pushes pushes, $pops pops"
for name in "case stepwise mode=train" "check" "warmup" "timed" "memory" "forward" "backward" \
            "optimizer" "prefill" "decode" "decode (whole prefix)"; do
  grep -qx "push $name.*" "$work/on.log" || fail "no range named '$name'"
done
SEQBENCH_NVTX_LOG=$work/off.log "$seqbench" run "$work/suite.toml" --db "$work/r.db" --in-process \
  --filter '^stepwise ' >/dev/null
[[ ! -s "$work/off.log" ]] || grep -qx "pushes 0" "$work/off.log" || fail "ranges without --nvtx"
echo "nvtx: $pushes balanced ranges"
