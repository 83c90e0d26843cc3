#!/usr/bin/env bash
# A plugin built out of tree, as its author builds one: `cmake --install` of this build
# into an empty prefix, examples/plugin copied out of the source tree and configured with
# that prefix alone (find_package(seqbench); the source tree is not on any include path),
# built, and loaded by the installed command: `verify` holds its variant to the family's
# reference and to the O(T) check. The prefix holds exactly the plugin API's headers: they
# compile from the prefix through find_package(seqbench) (nothing internal is missing from
# it), and no other seqbench header is installed.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR TORCH_DIR CXX_COMPILER
set -euo pipefail
build_dir=$1
source_dir=$2
torch_dir=$3
compiler=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

prefix=$work/prefix
cmake --install "$build_dir" --prefix "$prefix" >"$work/install.log" 2>&1 ||
  fail "cmake --install: $(tail -5 "$work/install.log")"
[[ -x "$prefix/bin/seqbench" ]] || fail "no bin/seqbench in the prefix"
[[ -f "$prefix/lib/cmake/seqbench/seqbenchConfig.cmake" ]] ||
  [[ -n "$(find "$prefix" -name seqbenchConfig.cmake)" ]] || fail "no seqbenchConfig.cmake"

headers=$(cd "$prefix/include/seqbench" && find . -name '*.h' | sed 's|^\./||' | sort)
[[ -n "$headers" ]] || fail "no headers installed"
# Nothing beyond the API: every installed header is one a plugin can reach from plugin.h,
# registry.h and the families' model.h (the list in cmake/install.cmake).
for header in $headers; do
  case "$header" in
    variants/core/* | variants/*/model.h) ;;
    *) fail "an internal header is installed: $header" ;;
  esac
done

# The template, outside the source tree, against the prefix (and the LibTorch and compiler
# this build used). Beside the plugin, one translation unit that includes every installed
# header through seqbench::plugin: a header that reached into the source tree fails it.
cp -r "$source_dir/examples/plugin" "$work/plugin"
for header in $headers; do printf '#include "%s"\n' "$header"; done >"$work/plugin/all_headers.cc"
printf 'add_library(all_headers OBJECT all_headers.cc)\n%s\n' \
  'target_link_libraries(all_headers PRIVATE seqbench::plugin)' >>"$work/plugin/CMakeLists.txt"
cmake -S "$work/plugin" -B "$work/plugin/build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DTorch_DIR="$torch_dir" -DCMAKE_CXX_COMPILER="$compiler" \
  -DCMAKE_BUILD_TYPE=Release >"$work/configure.log" 2>&1 ||
  fail "configuring the template: $(tail -5 "$work/configure.log")"
if grep -rqF -- "$source_dir" "$work/plugin/build/CMakeFiles" 2>/dev/null; then
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

# The same template with the pattern its comment warns of planted: a per-step select() of
# q, k and v in the autograd loop (backward scatters into a full-size zero tensor at every
# step, O(T^2) bytes). verify must refuse it, exit 1, naming the scaling check.
cp -r "$source_dir/examples/plugin" "$work/quadratic"
sed -i -e 's/qs\[t\]/in.q.select(1, static_cast<int64_t>(t))/' \
  -e 's/ks\[t\]/in.k.select(1, static_cast<int64_t>(t))/' \
  -e 's/vs\[t\]/in.v.select(1, static_cast<int64_t>(t))/' "$work/quadratic/einsum_recurrence.cc"
grep -q 'in.k.select(1' "$work/quadratic/einsum_recurrence.cc" || fail "the O(T^2) plant did not apply"
cmake -S "$work/quadratic" -B "$work/quadratic/build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DTorch_DIR="$torch_dir" -DCMAKE_CXX_COMPILER="$compiler" \
  -DCMAKE_BUILD_TYPE=Release >"$work/configure2.log" 2>&1 &&
  cmake --build "$work/quadratic/build" >"$work/build2.log" 2>&1 ||
  fail "building the planted copy: $(tail -5 "$work/build2.log" "$work/configure2.log")"
rc=0
"$prefix/bin/seqbench" --plugin "$work/quadratic/build/libeinsum_plugin.so" verify \
  --filter '^example_einsum$' >"$work/verify2.out" 2>&1 || rc=$?
[[ $rc -eq 1 ]] || fail "verify of a per-step select() exited $rc: $(cat "$work/verify2.out")"
grep -q '^example_einsum *scaling .* NOT O(T)$' "$work/verify2.out" ||
  fail "the planted O(T^2) step was not named by the scaling check: $(cat "$work/verify2.out")"
grep -q '^example_einsum *train .* ok$' "$work/verify2.out" ||
  fail "the planted copy should still compute the right function: $(cat "$work/verify2.out")"
echo "ok: installed, built out of tree, verified; a planted O(T^2) copy refused"
