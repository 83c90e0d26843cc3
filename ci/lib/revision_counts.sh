# Sourced by ci/gate and ci/bisect: a revision's counted run of a suite, built and counted
# once and kept. One worktree (build/gate/base) is checked out again for each revision and
# rebuilt incrementally, through ccache where installed (ci/lib/compiler_cache.sh), so
# that only the sources two revisions do not share compile again; each revision's counts
# land in build/gate/counts/<sha>-<suite>[-<filter hash>].db, written beside and renamed
# when whole, and are reused by the next call.
#
# revision_counts SHA SUITE [FILTER]: prints the database's path; returns 3 when the
# revision does not build, 4 when its counting run fails (the log's tail on stderr), 5
# when the revision has no SUITE, 6 when it cannot be checked out (git's message on
# stderr). The kept counts are named for the toolchain that counted them (valgrind's and
# the compiler's versions, the shared libraries), so that an upgrade counts again instead
# of comparing nothing. Expects the repository's root as the working folder.
# Callers hold build/gate/lock (revision_counts_lock).

revision_counts_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
revision_counts_tree=$revision_counts_root/build/gate/base

revision_counts_say() { echo "${revision_counts_caller:-ci}: $*" >&2; }

# Takes build/gate/lock for this shell's life; false when another holds it.
revision_counts_lock() {
  mkdir -p "$revision_counts_root/build/gate/counts"
  exec 9>"$revision_counts_root/build/gate/lock"
  flock -n 9
}

revision_counts_checkout() {
  local sha=$1 tree=$revision_counts_tree
  if [[ ! -e "$tree/.git" ]]; then
    git worktree prune
    git worktree add --detach "$tree" "$sha" >/dev/null || return 6
  else
    git -C "$tree" checkout --detach --force --quiet "$sha" || return 6
    git -C "$tree" clean -fdq
  fi
}

# ccache's hit and miss totals, to say how much of a build the cache gave.
revision_counts_ccache() {
  command -v ccache >/dev/null || { echo "0 0"; return; }
  ccache --print-stats 2>/dev/null | awk '
    $1 == "direct_cache_hit" || $1 == "preprocessed_cache_hit" { hits += $2 }
    $1 == "cache_miss" { misses += $2 }
    END { print hits + 0, misses + 0 }'
}

revision_counts_build() {
  local sha=$1 tree=$revision_counts_tree flags=() before after start h0 m0 h1 m1
  local log=$revision_counts_root/build/gate/build-${sha:0:12}.log
  source "$revision_counts_root/ci/lib/compiler_cache.sh"
  # A revision older than the project's -ffile-prefix-map gets it here, so that its
  # objects do not name the worktree (a newer one has it in CMakeLists.txt: none twice).
  if grep -q "ffile-prefix-map" "$tree/CMakeLists.txt"; then
    flags=(-DCMAKE_CXX_FLAGS=)
  else
    flags=("-DCMAKE_CXX_FLAGS=-ffile-prefix-map=$tree/=")
  fi
  before=$(revision_counts_ccache) start=$SECONDS
  revision_counts_say "building ${sha:0:12} in build/gate/base (log: $log)"
  if ! (cd "$tree" && cmake --preset release "${compiler_cache_args[@]}" "${flags[@]}" &&
    cmake --build --preset release --parallel "$(nproc)" --target seqbench) >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    revision_counts_say "${sha:0:12} does not build (whole log: $log)"
    return 3
  fi
  after=$(revision_counts_ccache)
  read -r h0 m0 <<<"$before"
  read -r h1 m1 <<<"$after"
  revision_counts_say "${sha:0:12} built in $((SECONDS - start)) s" \
    "(ccache: $((h1 - h0)) hits, $((m1 - m0)) misses)"
}

# Counts SUITE with BINARY into DB (written beside, renamed when whole), run from DIR, the
# cases matching FILTER only when one is given.
count_suite() {
  local dir=$1 binary=$2 suite=$3 db=$4 label=$5 filter=${6:-} start=$SECONDS
  local partial="$db.partial" log="${4%.db}.log" selection=()
  [[ -z "$filter" ]] || selection=(--filter "$filter")
  rm -f "$partial" "$partial"-*
  if ! (cd "$dir" && "$binary" run "$suite" --db "$partial" --count instructions \
    --label "$label" "${selection[@]}") >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    rm -f "$partial" "$partial"-*
    revision_counts_say "counting $suite with the $label binary failed (whole log: $log)"
    return 4
  fi
  mv -f "$partial" "$db"
  revision_counts_say "$label counted in $((SECONDS - start)) s"
}

# Where revision_counts keeps SHA's counts of SUITE [FILTER].
revision_counts_path() {
  local sha=$1 suite=$2 filter=${3:-} name key libraries
  # The counts depend on the shared libraries the binary loads too: which BLAS build the
  # system's alternatives resolve to (ci/install-deps switches it), LibTorch, libgomp.
  libraries=$(ldconfig -p | awk '/lib(open)?blas|libtorch_cpu|libgomp/ {print $NF}' |
    xargs -r readlink -f | sort -u)
  key=$(printf '%s\n' "$suite" "$filter" "$(valgrind --version 2>&1)" "$(c++ --version 2>&1 | head -n 1)" \
    "$libraries" | sha256sum | cut -c1-12)
  name=$sha-$(basename "$suite" .toml)-$key
  echo "$revision_counts_root/build/gate/counts/$name.db"
}

revision_counts() {
  local sha=$1 suite=$2 filter=${3:-} db
  db=$(revision_counts_path "$sha" "$suite" "$filter")
  if [[ -f "$db" ]]; then
    revision_counts_say "${sha:0:12}'s counts from an earlier call ($db)"
  else
    git cat-file -e "$sha:$suite" 2>/dev/null || return 5
    revision_counts_checkout "$sha" || return 6
    revision_counts_build "$sha" || return 3
    count_suite "$revision_counts_tree" "$revision_counts_tree/build/release/seqbench" "$suite" \
      "$db" "gate base" "$filter" || return 4
  fi
  echo "$db"
}
