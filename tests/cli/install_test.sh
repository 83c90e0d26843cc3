#!/usr/bin/env bash
# A plugin built out of tree, as its author builds one: `cmake --install` of this build
# into an empty prefix, examples/plugin copied out of the source tree and configured with
# that prefix alone (find_package(seqbench); the source tree is not on any include path),
# built, and loaded by the installed command: `verify` holds its variant to the family's
# reference and to the O(T) check. The prefix holds exactly the plugin API's headers: they
# compile from the prefix (nothing internal is missing from it), and no other seqbench
# header is installed.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build_dir=$1
source_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

prefix=$work/prefix
cmake --install "$build_dir" --prefix "$prefix" >"$work/install.log" 2>&1 ||
  fail "cmake --install: $(tail -5 "$work/install.log")"
[[ -x "$prefix/bin/seqbench" ]] || fail "no bin/seqbench in the prefix"
[[ -f "$prefix/lib/cmake/seqbench/seqbenchConfig.cmake" ]] ||
  [[ -n "$(find "$prefix" -name seqbenchConfig.cmake)" ]] || fail "no seqbenchConfig.cmake"

# Every installed header compiles from the prefix and LibTorch's headers alone (one
# translation unit: a header that reached into the source tree fails it).
torch_include=/usr/include/torch/csrc/api/include
headers=$(cd "$prefix/include/seqbench" && find . -name '*.h' | sed 's|^\./||' | sort)
[[ -n "$headers" ]] || fail "no headers installed"
for header in $headers; do printf '#include "%s"\n' "$header"; done >"$work/all.cc"
c++ -std=c++17 -fsyntax-only -I "$prefix/include/seqbench" -isystem "$torch_include" \
  "$work/all.cc" 2>"$work/all.log" || fail "the headers do not compile from the prefix: $(head -3 "$work/all.log")"
# Nothing beyond the API: every installed header is one a plugin can reach from plugin.h,
# registry.h and the families' model.h (the list in cmake/install.cmake).
for header in $headers; do
  case "$header" in
    variants/core/* | variants/*/model.h) ;;
    *) fail "an internal header is installed: $header" ;;
  esac
done

# The template, outside the source tree, against the prefix.
cp -r "$source_dir/examples/plugin" "$work/plugin"
cmake -S "$work/plugin" -B "$work/plugin/build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >"$work/configure.log" 2>&1 ||
  fail "configuring the template: $(tail -5 "$work/configure.log")"
if grep -rq -- "$source_dir" "$work/plugin/build/CMakeFiles" 2>/dev/null; then
  fail "the template's build names the source tree"
fi
cmake --build "$work/plugin/build" >"$work/build.log" 2>&1 ||
  fail "building the template: $(tail -5 "$work/build.log")"
library=$work/plugin/build/libeinsum_plugin.so
[[ -f "$library" ]] || fail "no libeinsum_plugin.so"

rc=0
"$prefix/bin/seqbench" --plugin "$library" verify --filter '^example_einsum$' >"$work/verify.out" 2>&1 || rc=$?
[[ $rc -eq 0 ]] || fail "verify exited $rc: $(cat "$work/verify.out")"
grep -q '^example_einsum *train .* ok$' "$work/verify.out" || fail "no train check: $(cat "$work/verify.out")"
grep -q '^example_einsum *scaling .* ok$' "$work/verify.out" || fail "no scaling check: $(cat "$work/verify.out")"
echo "ok: installed, built out of tree, verified"
