# Sourced by ci/build and ci/gate: compile through ccache when it is installed, so that a
# build of another revision in a worktree under build/ (ci/gate's base, ci/ab's, bisect's)
# reuses the objects of every source the two revisions share.
# - CCACHE_BASEDIR is the repository's root, a parent of every worktree, so that ccache
#   hashes paths relative to the build folder; with the project's -ffile-prefix-map (see
#   CMakeLists.txt) the objects themselves do not name the checkout's path.
# - CCACHE_SLOPPINESS as ccache's manual asks for precompiled headers (CMake's PCH).
# - CCACHE_DIR defaults to build/ccache inside the checkout, so that a fresh clone starts
#   cold, as a CI runner does; set it to share a cache between clones.
# Defines compiler_cache_args (a bash array of cmake -D arguments, empty without ccache).
compiler_cache_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
compiler_cache_args=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="$compiler_cache_root"
  export CCACHE_DIR="${CCACHE_DIR:-$compiler_cache_root/build/ccache}"
  export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"
  compiler_cache_args=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
else  # a build folder configured while ccache was installed must not keep asking for it
  compiler_cache_args=(-DCMAKE_CXX_COMPILER_LAUNCHER= -DCMAKE_C_COMPILER_LAUNCHER=)
fi
