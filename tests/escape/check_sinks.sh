#!/usr/bin/env bash
# The export sinks judged by Python's readers: the test binary writes 10,000 hostile strings
# (and the attack corpus) through CSV, JSON and HTML escaping, check_sinks.py reads them back.
# Usage: check_sinks.sh SEQBENCH_TESTS_BINARY
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
SEQBENCH_ESCAPE_CORPUS=$work "$1" "[.escape_corpus]" >"$work/catch.out" ||
  { cat "$work/catch.out" >&2; exit 1; }
python3 "$(dirname "$0")/check_sinks.py" "$work"
