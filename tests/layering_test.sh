#!/usr/bin/env bash
# The folders are the architecture (README, "What is here"): each layer includes only the
# layers it stands on. Bottom to top: stats; results; variants; harness (runs models, reads
# suites); reports (reads the store: never runs a model nor parses suite text, so never
# harness/ or variants/); cli, which may include everything. Fails naming every include
# outside a layer's list.
# Usage: layering_test.sh SOURCE_DIR
set -euo pipefail
cd "$1"
declare -A allowed=(
  [stats]="stats"
  [results]="stats results"
  [variants]="stats variants"
  [harness]="stats results variants harness"
  [reports]="stats results reports"
)
all="stats results variants harness reports cli"
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
# build against pip's LibTorch (ci/gpu/README.md): RemoveTree (results/output_file.h) only.
while IFS= read -r hit; do
  echo "FAIL: std::filesystem::remove_all, which crashes on the GPU machine; use RemoveTree: $hit" >&2
  bad=1
done < <(grep -rnE 'remove_all[[:space:]]*\(' $all tests --include='*.h' --include='*.cc' || true)
[[ $bad -eq 0 ]] || exit 1
echo "layering: every include within its layer's list; no remove_all"
