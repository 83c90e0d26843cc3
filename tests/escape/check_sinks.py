#!/usr/bin/env python3
"""Judges seqbench's CSV, JSON and HTML sinks with Python's own readers.

Reads what the hidden Catch case "[.escape_corpus]" wrote into DIRECTORY: cells.csv (row
i: i, CsvField(string i)), strings.json (DumpJson of the raw strings), cells.html
(<p>HtmlText(string i)</p> a line) and expected.jsonl (each string's VisibleText and its
raw bytes in hex). Exits 1, naming the first rows that fail, unless:
- csv reads every row as exactly two cells, the second the visible text, with "'" before it
  where it starts with a formula character, and no cell starts with one;
- json.tool accepts strings.json, and each value is what Python decodes from the raw
  bytes, invalid ones replaced;
- html.parser finds only the <p> elements, each holding the visible text.
Usage: check_sinks.py DIRECTORY
"""
import csv
import html.parser
import json
import subprocess
import sys

FORMULA = ("=", "+", "-", "@", "\t", "\r")


def expected_rows(directory):
    with open(f"{directory}/expected.jsonl", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


def check_csv(directory, expected, failures):
    with open(f"{directory}/cells.csv", newline="", encoding="utf-8") as file:
        rows = list(csv.reader(file))
    if len(rows) != len(expected):
        failures.append(f"csv: {len(rows)} rows for {len(expected)} strings")
        return
    for i, (row, want) in enumerate(zip(rows, expected)):
        visible = want["visible"]
        guarded = "'" + visible if visible.startswith(FORMULA) else visible
        if row != [str(i), guarded]:
            failures.append(f"csv row {i}: read {row!r}, expected {[str(i), guarded]!r}")
        elif any(cell.startswith(FORMULA) for cell in row):
            failures.append(f"csv row {i}: a cell starts a formula: {row!r}")


def check_json(directory, expected, failures):
    tool = subprocess.run([sys.executable, "-m", "json.tool", f"{directory}/strings.json"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if tool.returncode != 0:
        failures.append(f"json.tool refuses strings.json: {tool.stderr.strip()}")
        return
    with open(f"{directory}/strings.json", encoding="utf-8", errors="strict") as file:
        values = json.load(file)
    for i, (value, want) in enumerate(zip(values, expected)):
        # Python's own decoding of the raw bytes, invalid ones replaced.
        decoded = bytes.fromhex(want["raw"]).decode("utf-8", errors="replace")
        if value != decoded:
            failures.append(f"json value {i}: {value!r}, expected {decoded!r}")
    if len(values) != len(expected):
        failures.append(f"json: {len(values)} values for {len(expected)} strings")


class Paragraphs(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.texts, self.other_tags = [], []

    def handle_starttag(self, tag, attrs):
        if tag == "p":
            self.texts.append("")
        else:
            self.other_tags.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.other_tags.append(tag)

    def handle_data(self, data):
        self.texts[-1] += data

    def handle_comment(self, data):
        self.other_tags.append("<!--")


def check_html(directory, expected, failures):
    parser = Paragraphs()
    with open(f"{directory}/cells.html", encoding="utf-8", errors="strict") as file:
        for line in file:
            parser.feed(line.rstrip("\n"))
    parser.close()
    if parser.other_tags:
        failures.append(f"html: markup other than <p>: {parser.other_tags[:5]}")
    if len(parser.texts) != len(expected):
        failures.append(f"html: {len(parser.texts)} paragraphs for {len(expected)} strings")
    for i, (text, want) in enumerate(zip(parser.texts, expected)):
        if text != want["visible"]:
            failures.append(f"html paragraph {i}: {text!r}, expected {want['visible']!r}")


def main():
    directory = sys.argv[1]
    expected = expected_rows(directory)
    failures = []
    for check in (check_csv, check_json, check_html):
        check(directory, expected, failures)
    for failure in failures[:10]:
        print("FAIL:", failure, file=sys.stderr)
    if failures:
        return 1
    print(f"check_sinks: {len(expected)} strings read back by csv, json.tool and html.parser")
    return 0


if __name__ == "__main__":
    sys.exit(main())
