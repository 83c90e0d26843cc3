#!/usr/bin/env bash
# ci/gate and ci/bisect end to end, on a throwaway repository made from this tree with four
# synthetic commits on top of its HEAD:
#   c0 adds a tiny suite (two counted cases), c1 edits a comment (nothing moves),
#   c2 plants a real instruction regression in a shared function (RmsNorm calls a
#      never-inlined loop, SeqbenchPlantedWork), c3 edits a comment again.
# It checks that: ci/gate exits 0 on the unchanged pair (c1 against c0); exits 1 on c2
# against c1, its pull-request comment naming a case and the planted function; exits 2
# on a head run of another toolchain (a compiler entry changed) and on an unknown
# revision; ci/bisect c0 c3 names c2 after at most ceil(log2 3) + 2 builds (GOOD, BAD and
# the search). Builds share this checkout's ccache (build/ccache), so that only the
# planted source compiles again: about 10 minutes on 2 cores with a warm cache.
# Usage: tests/gate/end_to_end.sh SOURCE_DIR
set -euo pipefail
source_dir=$(cd "$1" && pwd)
work=$(mktemp -d)
cleanup() {
  git -C "$work/repo" worktree remove --force "$work/repo/build/gate/base" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export CCACHE_DIR=${CCACHE_DIR:-$source_dir/build/ccache}

git clone -q "$source_dir" "$work/repo"
cd "$work/repo"
git config user.email gate@test.invalid
git config user.name "gate test"
commit() { git add -A && git commit -q -m "$1" && git rev-parse HEAD; }

mkdir -p tests/gate
cat >tests/gate/tiny.toml <<'EOF'
name = "tiny"
description = "two counted cases for the gate's end-to-end test"
family = "simple_rnn"
baseline = "baseline"
seed = 1
[model]
vocab_size = 64
width = 32
layers = 2
heads = 4
[measure]
repetitions = 3
warmup = 1
[[variants]]
key = "baseline"
[[variants]]
key = "fused"
[grid]
threads = 1
mode = "forward"
batch = 2
seq_len = 16
min_len = 8
dtype = "float32"
EOF
c0=$(commit "c0: a tiny suite")
echo "// c1: a comment, no code" >>variants/core/language_model.h
c1=$(commit "c1: a comment")
python3 - <<'EOF'
import re
path = "variants/core/language_model.cc"
text = open(path).read()
plant = '''
// Planted by tests/gate/end_to_end.sh: work the gate must see.
__attribute__((noinline)) void SeqbenchPlantedWork() {
  for (volatile int i = 0; i < 200000; i = i + 1) {
  }
}
'''
head = "torch::Tensor RmsNorm(const torch::Tensor& x, const torch::Tensor& gain) {"
assert head in text, "RmsNorm moved: update the planted regression"
text = text.replace(head, plant + head + "\n  SeqbenchPlantedWork();", 1)
open(path, "w").write(text)
EOF
c2=$(commit "c2: planted regression")
echo "// c3: a comment, no code" >>variants/core/language_model.h
c3=$(commit "c3: a comment")

gate() {  # expected exit, then ci/gate's arguments
  local expected=$1 rc=0
  shift
  ci/gate "$@" --suite tests/gate/tiny.toml >"$work/out" 2>"$work/err" || rc=$?
  [[ $rc -eq $expected ]] ||
    fail "ci/gate $* exited $rc, expected $expected: $(tail -n 30 "$work/err")"
}

git checkout -q "$c1"
gate 0 "$c0"
git checkout -q "$c2"
gate 1 "$c1" --report "$work/comment.md"
grep -q "regressed" "$work/comment.md" || fail "the comment names no regression"
grep -q "SeqbenchPlantedWork" "$work/comment.md" || fail "the comment does not name the planted function"
grep -Eq "^\| (baseline|fused) " "$work/comment.md" || fail "the comment names no moved case"
head -n 1 "$work/comment.md" | grep -q '^\*\*❌ seqbench: [0-9]* cases\{0,1\} regressed' ||
  fail "the verdict is not the first line: $(head -n 1 "$work/comment.md")"

# Another toolchain: the head run's compiler differs; the gate compares nothing: exit 2.
other=$work/other.db
cp build/gate/head.db "$other"
sqlite3 "$other" "UPDATE environment SET value = 'clang 99' WHERE key = 'compiler'"
gate 2 "$c1" --head-db "$other"
grep -q "not comparable" "$work/err" || fail "exit 2 without saying why: $(cat "$work/err")"
gate 2 no-such-revision

git checkout -q "$c3"
rc=0
ci/bisect "$c0" "$c3" --suite tests/gate/tiny.toml >"$work/out" 2>"$work/err" || rc=$?
[[ $rc -eq 0 ]] || fail "ci/bisect exited $rc: $(tail -n 30 "$work/err")"
[[ $(head -n 1 "$work/out" | cut -d' ' -f1) == "$c2" ]] ||
  fail "ci/bisect named $(head -n 1 "$work/out"), not the planted $c2"
grep -q "SeqbenchPlantedWork" "$work/out" || fail "ci/bisect does not name the planted function"
builds=$(grep -o "after [0-9]* builds" "$work/err" | grep -o "[0-9]*")
[[ -n "$builds" && $builds -le 4 ]] || fail "ci/bisect built ${builds:-?} commits, more than 4"
echo "ok: gate 0/1/2 as expected, the comment names SeqbenchPlantedWork, bisect found c2 in $builds builds"
