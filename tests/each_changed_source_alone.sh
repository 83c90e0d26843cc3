#!/usr/bin/env bash
# The sources of the LibTorch layers (harness/, cli/, variants/) that changed since BASE_REV
# compile on their own, as a non-unity build compiles them; tests/each_source_alone_test.sh
# does every source of the layers below on every ctest run. Here each source parses
# LibTorch's headers without the precompiled header (about 20 s a file on CI's 2 cores),
# so only what a change touched is tried: each changed .cc, and the .cc beside each
# changed header. Each source is compiled with the flags of the unity batch the release
# build put it in (BUILD_DIR/compile_commands.json), less the batch and the precompiled
# header, which would lend it includes it does not make itself.
# Exits 0 when every one compiles (or none changed), 1 naming those that do not, 2 on bad
# input (no compile_commands.json, an unknown revision).
# Usage: tests/each_changed_source_alone.sh BUILD_DIR BASE_REV   (from the source root)
set -euo pipefail
usage="usage: each_changed_source_alone.sh BUILD_DIR BASE_REV"
build=${1:?$usage}
base=${2:?$usage}
commands=$build/compile_commands.json
[[ -f "$commands" ]] ||
  { echo "each_changed_source_alone: no $commands (configure with ci/build)" >&2; exit 2; }
git rev-parse --verify --quiet "$base^{commit}" >/dev/null ||
  { echo "each_changed_source_alone: '$base' is not a commit git knows" >&2; exit 2; }
mapfile -t changed < <(git diff --name-only --diff-filter=d "$base" -- harness cli variants
  git ls-files --others --exclude-standard -- harness cli variants)
sources=()
for path in "${changed[@]}"; do
  case $path in
    *.cc) candidate=$path ;;
    *.h) candidate=${path%.h}.cc ;;
    *) continue ;;
  esac
  # CUDA sources compile only with the CUDA toolkit (ci/gpu/run compiles them alone).
  [[ -f "$candidate" && "$candidate" != *_cuda.cc ]] && sources+=("$candidate")
done
if ((${#sources[@]} == 0)); then
  echo "each_changed_source_alone: no source of harness/, cli/ or variants/ changed since $base"
  exit 0
fi
mapfile -t sources < <(printf '%s\n' "${sources[@]}" | sort -u)

# A file a source in $lists: its batch's directory, the source, then the arguments, each
# ended by a NUL.
lists=$(mktemp -d)
trap 'rm -rf "$lists"' EXIT
python3 - "$commands" "$PWD" "$lists" "${sources[@]}" <<'PYTHON'
import json, os, shlex, sys
commands, root, lists, sources = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
entries = json.load(open(commands))

def args_of(entry):
    return entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])

def batch_of(source):
    absolute = os.path.realpath(os.path.join(root, source))
    for entry in entries:
        path = os.path.join(entry["directory"], entry["file"])
        if os.path.realpath(path) == absolute:
            return entry
        if "/Unity/" in path and os.path.exists(path) and f'"{absolute}"' in open(path).read():
            return entry
    return None

for number, source in enumerate(sources):
    entry = batch_of(source)
    if entry is None:
        print(f"each_changed_source_alone: {source} is in no build target; not tried",
              file=sys.stderr)
        continue
    given, args, i = args_of(entry), [], 0
    while i < len(given):
        arg = given[i]
        # The batch's object, file and dependency file; the precompiled header.
        if arg in ("-o", "-c", "-MF", "-MT") or (arg == "-include" and "cmake_pch" in given[i + 1]):
            i += 2
            continue
        if arg not in ("-MD", "-MMD", "-Winvalid-pch"):
            args.append(arg)
        i += 1
    args += ["-fsyntax-only", os.path.join(root, source)]
    with open(os.path.join(lists, f"{number:04d}"), "w") as out:
        out.write("".join(field + "\0" for field in [entry["directory"], source] + args))
PYTHON

# DIRECTORY SOURCE ARGS...: compiles one; its first errors when it fails.
try_alone() {
  local dir=$1 source=$2 log
  shift 2
  log=$(mktemp)
  if ! (cd "$dir" && "$@") >"$log" 2>&1; then
    echo "== $source does not compile on its own (an include it uses is missing?):"
    head -n 20 "$log"
    rm -f "$log"
    return 1
  fi
  rm -f "$log"
}
started=$SECONDS failed=0 count=0 pids=()
for list in "$lists"/*; do  # two at a time, as CI has two cores
  [[ -f "$list" ]] || continue
  mapfile -d '' -t fields <"$list"
  try_alone "${fields[@]}" &
  pids+=($!)
  count=$((count + 1))
  if ((${#pids[@]} >= 2)); then
    wait "${pids[0]}" || failed=1
    pids=("${pids[@]:1}")
  fi
done
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
if ((failed)); then
  echo "each_changed_source_alone: not every one of the $count changed sources compiles alone" >&2
  exit 1
fi
echo "each_changed_source_alone: $count changed source(s) of harness/, cli/ and variants/" \
  "compile on their own ($((SECONDS - started)) s)"
