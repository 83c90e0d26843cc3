#!/usr/bin/env bash
# Every run in results/published/*.db names a commit (its `git_sha`) that this history
# holds, so that a reader can rebuild the code behind every published number; a baseline
# whose commit was reworded away (ci_counts.db once named 101b530) fails here. Runs that
# may name a missing commit are listed in `exceptions` below, each with its reason.
# The check is first tried on a copy with a planted unknown commit, which it must refuse.
# Skipped (77) outside a git checkout or in a shallow clone, whose history is cut.
# Usage: published_commits_test.sh SOURCE_DIR
set -euo pipefail
source_dir=$1
cd "$source_dir"
if ! git rev-parse --git-dir >/dev/null 2>&1 ||
  [[ $(git rev-parse --is-shallow-repository) == true ]]; then
  echo "SKIP: not a full git checkout"
  exit 77
fi
# "FILE RUN_ID": why that run may name a commit this history lacks.
declare -A exceptions=()
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Prints "FILE run N: SHA" for each run of FILE whose commit git does not know.
unknown_commits() {
  local file=$1 name=$2 run sha
  # A copy: a read-only sqlite3 leaves -wal and -shm files beside a WAL database.
  cp "$file" "$work/reading.db"
  sqlite3 -readonly -separator ' ' "$work/reading.db" \
    "SELECT run_id, value FROM environment WHERE key = 'git_sha' ORDER BY run_id" |
    while read -r run sha; do
      [[ -n "${exceptions["$name $run"]:-}" ]] && continue
      if [[ ! "$sha" =~ ^[0-9a-f]{7,40}$ ]] || ! git cat-file -e "$sha^{commit}" 2>/dev/null; then
        echo "$name run $run: $sha"
      fi
    done
}

# The check refuses a planted commit that does not exist.
planted=$work/planted.db
cp results/published/ci_counts.db "$planted"
sqlite3 "$planted" "UPDATE environment SET value = '101b5300000000000000000000000000000000ff'
                    WHERE key = 'git_sha'"
[[ -n "$(unknown_commits "$planted" planted.db)" ]] ||
  { echo "FAIL: a planted unknown commit was not found" >&2; exit 1; }

missing=""
checked=0
for file in results/published/*.db; do
  found=$(unknown_commits "$file" "$(basename "$file")")
  [[ -z "$found" ]] || missing+="$found"$'\n'
  checked=$((checked + $(sqlite3 -readonly "$work/reading.db" \
    "SELECT count(*) FROM environment WHERE key = 'git_sha'")))
done
[[ $checked -gt 0 ]] || { echo "FAIL: no run with a git_sha in results/published" >&2; exit 1; }
if [[ -n "$missing" ]]; then
  echo "FAIL: published runs name commits this history does not hold:" >&2
  echo "$missing" >&2
  exit 1
fi
echo "ok: $checked published runs, each naming a commit of this history"
