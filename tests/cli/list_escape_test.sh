#!/usr/bin/env bash
# A plugin's strings (faulty_plugin.cc's description: ESC colour codes, U+202E, U+009B)
# reach `seqbench list`'s output as text: the variant is listed, and no ESC byte, bidi
# override or C1 CSI is printed.
# Usage: list_escape_test.sh SEQBENCH_BINARY FAULTY_PLUGIN
set -euo pipefail
out=$("$1" --plugin "$2" list)
grep -q 'faulty_nan' <<<"$out" || { echo "FAIL: faulty_nan not listed" >&2; exit 1; }
if LC_ALL=C grep -q $'\x1b\|\xe2\x80\xae\|\xc2\x9b' <<<"$out"; then
  echo "FAIL: a terminal control reached list's output:" >&2
  LC_ALL=C grep $'\x1b\|\xe2\x80\xae\|\xc2\x9b' <<<"$out" | od -c | head >&2
  exit 1
fi
echo "ok: plugin text listed as text"
