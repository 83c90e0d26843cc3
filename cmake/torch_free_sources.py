#!/usr/bin/env python3
"""Prints, ';'-separated, the sources among ARGS that include no LibTorch header, directly
or through the project's own headers (resolved against ROOT and the including file's
folder). Those compile without the LibTorch precompiled header: loading its 570 MB costs
4.4 s per translation unit even when nothing of it is used (issue 48; key_pattern.cc took
8.6 s with it, 0.8 s without). A source that does reach LibTorch keeps the header.

Usage: torch_free_sources.py ROOT SOURCE...   (called by CMakeLists.txt at configure time)
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.MULTILINE)
TORCH = ("torch/", "ATen/", "c10/", "caffe2/")


def reaches_torch(path, root, memo, visiting):
    if path in memo:
        return memo[path]
    if path in visiting:  # an include cycle: decided by the other files on it
        return False
    visiting.add(path)
    try:
        with open(path, encoding="utf-8", errors="replace") as source:
            text = source.read()
    except OSError:
        text = ""
    found = False
    for name in INCLUDE.findall(text):
        if name.startswith(TORCH):
            found = True
            break
        for folder in (root, os.path.dirname(path)):
            candidate = os.path.normpath(os.path.join(folder, name))
            if os.path.isfile(candidate):
                if reaches_torch(candidate, root, memo, visiting):
                    found = True
                break
        if found:
            break
    visiting.discard(path)
    memo[path] = found
    return found


def main():
    root, sources = sys.argv[1], sys.argv[2:]
    memo = {}
    free = [s for s in sources if not reaches_torch(os.path.abspath(s), root, memo, set())]
    sys.stdout.write(";".join(free))


if __name__ == "__main__":
    main()
