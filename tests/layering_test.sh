#!/usr/bin/env bash
# The folders are the architecture (README, "What is here"): each layer includes only the
# layers it stands on. Bottom to top: base (processes; no LibTorch); stats; results;
# variants; harness (runs models, reads suites); reports (reads the store: never runs a
# model nor parses suite text, so never harness/ or variants/); cli, which may include
# everything. Fails naming every include outside a layer's list, and every fork, exec,
# posix_spawn, popen or system( outside base/ (one way to start a program).
# Usage: layering_test.sh SOURCE_DIR
set -euo pipefail
cd "$1"
declare -A allowed=(
  [base]="base"
  [stats]="base stats"
  [results]="base stats results"
  [variants]="base stats variants"
  [harness]="base stats results variants harness"
  [reports]="base stats results reports"
)
all="base stats results variants harness reports cli"
bad=0
for layer in "${!allowed[@]}"; do
  for other in $all; do
    [[ " ${allowed[$layer]} " == *" $other "* ]] && continue
    while IFS= read -r hit; do
      echo "FAIL: $layer/ may include only ${allowed[$layer]}, not $other/: $hit" >&2
      bad=1
    done < <(grep -rnE "^[[:space:]]*#[[:space:]]*include[[:space:]]+\"$other/" "$layer" \
               --include='*.h' --include='*.cc' --include='*.cu' --include='*.in' || true)
  done
done
# A layer's internal headers (*_internal.h) stay inside its folder.
while IFS= read -r hit; do
  layer=${hit%%/*}
  header=$(sed -E 's/.*#[[:space:]]*include[[:space:]]+"([^"]+)".*/\1/' <<<"${hit#*:*:}")
  if [[ ${header%%/*} != "$layer" ]]; then
    echo "FAIL: $header is internal to ${header%%/*}/, included by $hit" >&2
    bad=1
  fi
done < <(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"[^"]*_internal\.h"' $all tests \
           --include='*.h' --include='*.cc' --include='*.cu' || true)
# std::filesystem::remove_all crashed (SIGSEGV) in every call on the GPU machine's GCC 13
# build against pip's LibTorch (ci/gpu/README.md): RemoveTree (base/files.h) only.
while IFS= read -r hit; do
  echo "FAIL: std::filesystem::remove_all, which crashes on the GPU machine; use RemoveTree: $hit" >&2
  bad=1
done < <(grep -rnE 'remove_all[[:space:]]*\(' $all tests --include='*.h' --include='*.cc' || true)
# forbid_outside_base MESSAGE REGEX: fails naming each line of the layers above base/ that
# matches REGEX (comments aside).
forbid_outside_base() {
  while IFS= read -r hit; do
    echo "FAIL: $1: $hit" >&2
    bad=1
  done < <(grep -rnE "$2" stats results variants harness reports cli --include='*.h' \
             --include='*.cc' | grep -vE ':[0-9]+:[[:space:]]*//' || true)
}
# base/process.h starts every program: its process group killed whole, death with the
# supervisor, a time limit. A call of the C library's starters elsewhere bypasses all three.
forbid_outside_base "a program started outside base/process.h (RunChild)" \
  '(^|[^A-Za-z_.>])(fork|vfork|execl|execle|execlp|execv|execve|execvp|execvpe|posix_spawn|posix_spawnp|popen|system)[[:space:]]*\('
# base/files.h writes every file (whole or not at all, never through a link): a file opened
# for writing elsewhere bypasses it. Reading (ifstream) is anyone's.
forbid_outside_base "a file written outside base/files.h (WriteFileAtomically)" \
  '(std::ofstream|std::fstream|O_CREAT|fopen[[:space:]]*\([^)]*"[wa])'
[[ $bad -eq 0 ]] || exit 1
echo "layering: every include within its layer's list; no remove_all; programs started and files written in base/ only"
