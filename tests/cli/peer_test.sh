#!/usr/bin/env bash
# The PyTorch-eager peers end to end (harness/peer.h): on a tiny ragged train workload each
# peer's float64 step matches the baseline's reference and its samples are stored as a
# case of its own; a chunk form with an off-by-one causal mask is caught as a mismatch; a
# missing script, a non-train mode and an unknown peer are a skip, a skip and exit 2; a
# peer that dies is its case's error; an instruction count leaves peers uncounted.
# Skipped (exit 77) where no python3 imports torch (Debian's python3-torch).
# Usage: peer_test.sh SEQBENCH_BINARY SOURCE_DIR
set -euo pipefail
seqbench=$1
source_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The peers' scratch directories go here: none may be left behind.
mkdir "$work/tmp"
export TMPDIR=$work/tmp
fail() { echo "FAIL: $*" >&2; exit 1; }
query() { sqlite3 "$work/$1" "$2"; }

if ! /usr/bin/python3 -c 'import torch, numpy' 2>/dev/null &&
  ! python3 -c 'import torch, numpy' 2>/dev/null; then
  echo "no python3 imports torch: skipped"
  exit 77
fi

cat >"$work/peers.toml" <<'TOML'
name = "tiny_peers"
description = "the peers on a tiny ragged workload"
family = "simple_rnn"
baseline = "baseline"
seed = 3
[model]
vocab_size = 32
width = 16
layers = 2
heads = 2
[measure]
repetitions = 3
warmup = 1
[[variants]]
key = "baseline"
[[peers]]
key = "pytorch_index"
[[peers]]
key = "pytorch_unbind"
[[peers]]
key = "pytorch_chunk"
[grid]
variants = ["pytorch_index", "pytorch_unbind", "pytorch_chunk"]
mode = ["train", "forward"]
batch = 5
seq_len = 40   # not a multiple of the chunk form's 32: its padding is exercised
min_len = 20
[[expect]]
what = "all_correct"
[[expect]]
what = "speedup"
variant = "pytorch_unbind"
over = "peer:pytorch_index"
at_least = 0.001
where = { mode = "train" }
TOML

# 1. Every peer checked in float64 against the reference, timed, stored; forward skipped.
"$seqbench" run "$work/peers.toml" --db "$work/ok.db" >"$work/out" 2>&1 || {
  cat "$work/out"
  fail "run with the peers"
}
for peer in pytorch_index pytorch_unbind pytorch_chunk; do
  row=$(query ok.db "SELECT status, reference, category FROM cases
                     WHERE variant_name = '$peer' AND mode = 'train'")
  [[ $row == "ok|baseline float64|PyTorch eager (peer)" ]] || fail "$peer train: $row"
  samples=$(query ok.db "SELECT COUNT(*) FROM samples JOIN cases USING (case_id)
                         WHERE variant_name = '$peer' AND mode = 'train'")
  [[ $samples -eq 3 ]] || fail "$peer: $samples samples, not the suite's 3 repetitions"
  query ok.db "SELECT description FROM cases WHERE variant_name = '$peer' AND mode = 'train'" |
    grep -Eq "\(PyTorch [0-9]+\.[0-9]+.*, Python 3\." || fail "$peer: no library versions"
  row=$(query ok.db "SELECT status, message FROM cases
                     WHERE variant_name = '$peer' AND mode = 'forward'")
  [[ $row == "skipped|the peer times train steps only" ]] || fail "$peer forward: $row"
done
"$seqbench" check --latest --db "$work/ok.db" >"$work/check" || fail "check of the peers' run"
grep -q "pytorch_unbind speedup over pytorch_index" "$work/check" ||
  fail "the peer: expectation was not checked: $(cat "$work/check")"
"$seqbench" report --latest --db "$work/ok.db" >"$work/report"  # a file: grep -q cuts a pipe
grep -q "| pytorch_chunk: PyTorch eager, chunkwise" "$work/report" ||
  fail "report lacks the peer's row"

# 2. A chunk form whose causal mask leaves out the diagonal (s < t, not s <= t) is caught.
cp -r "$source_dir/peers" "$work/broken"
sed -i 's/\.tril()/.tril(-1)/' "$work/broken/pytorch/simple_rnn.py"
grep -q 'tril(-1)' "$work/broken/pytorch/simple_rnn.py" || fail "the planted bug did not take"
set +e
SEQBENCH_PEERS_DIR="$work/broken" "$seqbench" run "$work/peers.toml" --db "$work/bad.db" \
  --filter 'mode=train' >"$work/out" 2>&1
rc=$?
set -e
[[ $rc -eq 1 ]] || fail "a mismatching peer: exit $rc, not 1"
[[ $(query bad.db "SELECT status FROM cases WHERE variant_name = 'pytorch_chunk'") == mismatch ]] ||
  fail "the broken chunk form was not a mismatch"
[[ $(query bad.db "SELECT status FROM cases WHERE variant_name = 'pytorch_unbind'") == ok ]] ||
  fail "the loop forms broke with the chunk form"

# 2b. The LSTM (torch.nn.LSTM) and attention (naive) peers beside their families'
# references, on a ragged batch and swiglu feed-forward; each caught when planted wrong:
# the LSTM loading its gates in another order (rolled one gate), attention without RoPE on k.
cat >"$work/families.toml" <<'TOML'
name = "tiny_family_peers"
description = "the lstm and attention peers on a tiny ragged workload"
family = "lstm"
baseline = "lstm_loop"
seed = 5
[references]
attention = "naive"
[model]
vocab_size = 32
width = 16
layers = 2
heads = 2
ffn = "swiglu"
[measure]
repetitions = 2
warmup = 1
[[variants]]
key = "lstm_loop"
[[variants]]
key = "naive"
[[peers]]
key = "pytorch_lstm"
[[peers]]
key = "pytorch_attention"
[grid]
variants = ["pytorch_lstm", "pytorch_attention"]
mode = "train"
batch = 5
seq_len = 24
min_len = 9
TOML
"$seqbench" run "$work/families.toml" --db "$work/families.db" >"$work/out" 2>&1 || {
  cat "$work/out"
  fail "run with the lstm and attention peers"
}
checked=$(query families.db "SELECT group_concat(variant_name || ':' || status || ':' || reference, ' ')
                              FROM cases")
[[ $checked == "pytorch_lstm:ok:lstm_loop float64 pytorch_attention:ok:naive float64" ]] ||
  fail "family peers: $(query families.db "SELECT variant_name, status, reference FROM cases")"
cp -r "$source_dir/peers" "$work/swapped"
sed -i 's/parameter.copy_(weights\[f"layers.{layer}.{name}"\])/parameter.copy_(weights[f"layers.{layer}.{name}"].roll(width, 0))/' \
  "$work/swapped/pytorch/lstm.py"
sed -i 's/k, v = rope(split(u @ p("w_k"))), split/k, v = split(u @ p("w_k")), split/' \
  "$work/swapped/pytorch/attention.py"
grep -q '{name}"\].roll(width, 0))' "$work/swapped/pytorch/lstm.py" &&
  grep -q 'k, v = split(u @ p("w_k"))' "$work/swapped/pytorch/attention.py" ||
  fail "the planted family bugs did not take"
set +e
SEQBENCH_PEERS_DIR="$work/swapped" "$seqbench" run "$work/families.toml" \
  --db "$work/swapped.db" >"$work/out" 2>&1
rc=$?
set -e
[[ $rc -eq 1 ]] || fail "mismatching family peers: exit $rc, not 1"
[[ $(query swapped.db "SELECT group_concat(status, ' ') FROM cases") == "mismatch mismatch" ]] ||
  fail "planted family peers: $(query swapped.db "SELECT variant_name, status FROM cases")"

# 3. Without its script the peer is skipped with the reason, and the run goes on.
SEQBENCH_PEERS_DIR="$work/none" "$seqbench" run "$work/peers.toml" --db "$work/none.db" \
  --filter 'pytorch_unbind.*mode=train' >/dev/null
query none.db "SELECT status, message FROM cases" | grep -q "^skipped|the peer's script .*/none/pytorch/simple_rnn.py is missing$" ||
  fail "a missing script is not a skip with its reason"

# 4. A peer that dies mid-conversation is that case's error, with its last words; no hang.
cp -r "$source_dir/peers" "$work/dying"
sed -i 's/    def check(self, request):/    def check(self, request):\n        print("planted: dying at check", file=sys.stderr, flush=True)\n        os._exit(3)/' \
  "$work/dying/pytorch/peer_protocol.py"
grep -q '_exit(3)' "$work/dying/pytorch/peer_protocol.py" || fail "the planted exit did not take"
set +e
SEQBENCH_PEERS_DIR="$work/dying" timeout 300 "$seqbench" run "$work/peers.toml" \
  --db "$work/dying.db" --filter 'pytorch_unbind.*mode=train' >/dev/null 2>&1
rc=$?
set -e
[[ $rc -eq 1 ]] || fail "a dying peer: exit $rc, not 1"
query dying.db "SELECT status, message FROM cases" |
  grep -q "^error|the peer ended (exited with status 3): planted: dying at check$" ||
  fail "a dying peer: $(query dying.db "SELECT status, message FROM cases")"
[[ -z $(ls -A "$TMPDIR") ]] || fail "scratch left behind: $(ls -A "$TMPDIR")"
pgrep -f "$work/.*simple_rnn.py" >/dev/null && fail "a peer process outlived its run"

# 5. An instruction count leaves a peer uncounted, with the reason, without starting it
# under valgrind (its steps run in another process).
if command -v valgrind >/dev/null; then
  "$seqbench" run "$work/peers.toml" --db "$work/count.db" --filter 'pytorch_unbind.*mode=train' \
    --count instructions >/dev/null 2>&1 || fail "a counted run with a peer"
  query count.db "SELECT status, message FROM cases" |
    grep -q "^ok|not counted: a peer steps in its own Python process$" ||
    fail "a counted peer: $(query count.db "SELECT status, message FROM cases")"
fi

# 6. An unknown peer is bad input: file and line, exit 2, nothing stored.
sed 's/key = "pytorch_index"/key = "pytorch_jit"/' "$work/peers.toml" >"$work/unknown.toml"
set +e
"$seqbench" run "$work/unknown.toml" --db "$work/unknown.db" 2>"$work/err"
rc=$?
set -e
[[ $rc -eq 2 ]] || fail "unknown peer: exit $rc, not 2"
grep -q "unknown.toml:.*unknown peer 'pytorch_jit'; known peers: pytorch_index" "$work/err" ||
  fail "unknown peer message: $(cat "$work/err")"
[[ ! -e $work/unknown.db ]] || fail "bad input created the database"
# A bound over "peer:NAME" where NAME is a variant, not a peer: file and line, exit 2.
sed 's/over = "peer:pytorch_index"/over = "peer:baseline"/' "$work/peers.toml" >"$work/notpeer.toml"
set +e
"$seqbench" run "$work/notpeer.toml" --db "$work/notpeer.db" 2>"$work/err"
rc=$?
set -e
[[ $rc -eq 2 ]] || fail "peer:baseline: exit $rc, not 2"
grep -q "notpeer.toml:[0-9][0-9]*:.*over 'peer:baseline': 'baseline' is not one of the suite's \[\[peers\]\]" "$work/err" ||
  fail "peer:baseline message: $(cat "$work/err")"
[[ ! -e $work/notpeer.db ]] || fail "bad input created the database"
echo "peer tests passed"
