#!/usr/bin/env bash
# seqbench bisect: what it refuses before anything is built (exit 2: no repository, no
# ci/bisect, one commit, an unknown one, GOOD not an ancestor of BAD, GOOD = BAD, a suite
# BAD lacks, a bad threshold or filter), and what it hands the checkout's ci/bisect: the
# two full SHAs and the options, run in the repository's root, its exit status passed on;
# Ctrl-C stops the script and what it started. The search itself is ci/bisect's
# (tests/gate/end_to_end.sh), so a stand-in script takes its place here.
# Usage: bisect_test.sh SEQBENCH_BINARY
set -euo pipefail
seqbench=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Exit 2 with $1 in the message, and ci/bisect never started.
refused() {
  local expected=$1
  shift
  rm -f "$work/args"
  set +e
  "$seqbench" bisect "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  set -e
  [[ $rc -eq 2 ]] || fail "bisect $* exited $rc, expected 2: $(cat "$work/err")"
  grep -qF -- "$expected" "$work/err" || fail "bisect $*: no '$expected' in: $(cat "$work/err")"
  [[ ! -e "$work/args" ]] || fail "bisect $* started ci/bisect"
}

"$seqbench" bisect --help >"$work/out" || fail "bisect --help exited $?"
grep -q -- "--count-threshold" "$work/out" || fail "bisect --help: $(cat "$work/out")"

cd "$work"
refused "not inside a git repository" HEAD~1 HEAD

git init -q repo
cd repo
git config user.email bisect@test.invalid
git config user.name "bisect test"
mkdir -p suites ci sub
echo 'name = "ci"' >suites/ci.toml
git add -A && git commit -q -m c0
c0=$(git rev-parse HEAD)
refused "has no ci/bisect" "$c0" HEAD
# The stand-in: records its working folder and arguments, then exits as told (or sleeps
# with a child of its own, to be stopped).
cat >ci/bisect <<EOF
#!/usr/bin/env bash
{ pwd; printf '%s\n' "\$@"; } >"$work/args"
if [[ -n "\${BISECT_SLEEP:-}" ]]; then sleep 300 & echo \$! >"$work/child"; wait; fi
exit 3
EOF
chmod +x ci/bisect
git add -A && git commit -q -m c1
c1=$(git rev-parse HEAD)
echo 'name = "other"' >suites/other.toml
git add -A && git commit -q -m c2
c2=$(git rev-parse HEAD)

refused "give two commits" "$c0"
refused "give two commits" "$c0" "$c1" "$c2"
refused "'nosuch' is not a commit" nosuch "$c1"
refused "is not an ancestor of BAD" "$c2" "$c0"
refused "GOOD and BAD are one commit" "$c1" HEAD~1
refused "has no 'suites/other.toml'" "$c0" "$c1" --suite suites/other.toml
refused "would be 500%" "$c0" "$c1" --count-threshold 5
refused "--count-threshold must be a percentage" "$c0" "$c1" --count-threshold lots
refused "bisect" "$c0" "$c1" --filter '('

# From a subfolder, with names git resolves: ci/bisect runs in the root and gets the SHAs.
cd sub
set +e
"$seqbench" bisect HEAD~2 HEAD --suite suites/other.toml --filter '^scan' \
  --count-threshold 2% >"$work/out" 2>"$work/err"
rc=$?
set -e
[[ $rc -eq 3 ]] || fail "ci/bisect's exit 3 came back as $rc: $(cat "$work/err")"
expected=$(printf '%s\n' "$work/repo" "$c0" "$c2" --suite suites/other.toml --count-threshold 2% \
  --filter '^scan')
[[ "$(cat "$work/args")" == "$expected" ]] || fail "ci/bisect got: $(cat "$work/args")"

# Ctrl-C: the script and its own child are gone when the command returns.
rm -f "$work/child"
BISECT_SLEEP=1 "$seqbench" bisect HEAD~2 HEAD >"$work/out" 2>"$work/err" &
pid=$!
for _ in $(seq 100); do [[ -s "$work/child" ]] && break; sleep 0.1; done
[[ -s "$work/child" ]] || fail "the stand-in never started its child"
kill -INT "$pid"
set +e
wait "$pid"
rc=$?
set -e
[[ $rc -eq 130 ]] || fail "interrupted bisect exited $rc: $(cat "$work/err")"
# Killed with its group; reaped by init a moment later (kill -0 still finds a zombie).
child=$(cat "$work/child")
for _ in $(seq 50); do kill -0 "$child" 2>/dev/null || break; sleep 0.1; done
! kill -0 "$child" 2>/dev/null || fail "ci/bisect's child outlived the command"
echo "bisect: all checks passed"
