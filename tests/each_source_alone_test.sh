#!/usr/bin/env bash
# Every source of the layers below the model (base/, stats/, results/, reports/) compiles
# on its own, as a non-unity build compiles it. The release build batches sources into
# unity files, where a source that leans on an include of the file batched before it
# compiles anyway; issue 63 found reports/run_facts.cc calling FormatSignificant without
# reports/format.h, which only `cmake --preset debug` (non-unity) showed. Each .cc
# includes its own header first, so its header's missing includes fail here too.
# variants/, harness/ and cli/ are left out: each of their sources parses LibTorch's
# headers, about 20 s a file on CI's cores; the GPU build (ci/gpu/run) compiles them
# without unity batches.
# Usage: each_source_alone_test.sh CXX_COMPILER SOURCE_ROOT
set -euo pipefail
compiler=$1
cd "$2"
mapfile -t sources < <(find base stats results reports -name '*.cc' | sort)
if ((${#sources[@]} < 30)); then
  echo "each_source_alone: found ${#sources[@]} sources under base/ stats/ results/ reports/;" \
    "expected at least 30 (run from the source root?)" >&2
  exit 1
fi
failed=$(printf '%s\n' "${sources[@]}" |
  xargs -P 2 -I{} sh -c '"$1" -std=c++17 -fsyntax-only -I. "$2" 2>"${TMPDIR:-/tmp}/each_source.$$" ||
    { echo "== $2"; head -n 20 "${TMPDIR:-/tmp}/each_source.$$"; }; rm -f "${TMPDIR:-/tmp}/each_source.$$"' \
    sh "$compiler" {})
if [[ -n $failed ]]; then
  echo "these sources do not compile on their own (an include they use is missing):" >&2
  echo "$failed" >&2
  exit 1
fi
echo "each_source_alone: ${#sources[@]} sources compile on their own"
