#!/usr/bin/env bash
# `seqbench site` end to end: every page of a site over a published database and a tiny
# one (two runs, an A/B pair, a run group) parses as HTML, every link resolves to a page of
# the site, a suite page has one chart per case and machine (history's series), the pair and
# the group have a page each, a suite name holding markup shows as text, and
# nothing is written outside OUT_DIR (a symlinked or file OUT_DIR is refused, exit 2); a
# later site into the folder keeps a suite's page name and removes only its stale pages.
# With Debian's chromium, every page also loads headless without a console error.
# Usage: site_test.sh SEQBENCH_BINARY SOURCE_DIR
set -euo pipefail
seqbench=$1
source_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cat >"$work/tiny.toml" <<'TOML'
name = "x<script>alert(1)</script>"
description = "a suite whose name is markup"
family = "simple_rnn"
baseline = "baseline"
[model]
vocab_size = 32
width = 16
layers = 1
heads = 2
[measure]
repetitions = 3
warmup = 1
[[variants]]
key = "baseline"
[[variants]]
key = "batched"
[grid]
mode = "train"
batch = 2
seq_len = 8
[[expect]]
what = "all_correct"
TOML
for i in 1 2; do
  "$seqbench" run "$work/tiny.toml" --db "$work/tiny.db" --label "<b>$i</b>" >/dev/null 2>&1 ||
    fail "tiny run $i"
done
# An A/B pair (seqbench ab, an A/A of one binary and its copy) and a run group of two
# shards: each gets a page of its own.
cp "$seqbench" "$work/base-seqbench"
"$seqbench" ab "$work/tiny.toml" --db "$work/tiny.db" --base-binary "$work/base-seqbench" \
  --rounds 3 --label "<i>pair</i>" >/dev/null 2>&1 || fail "tiny A/B pair"
for i in 1 2; do
  "$seqbench" run "$work/tiny.toml" --db "$work/tiny.db" --shard "$i/2" --group g1 >/dev/null 2>&1 ||
    fail "tiny shard $i"
done
gate="$source_dir/results/published/gate.db"
"$seqbench" site "$work/site" --db "$gate" --db "$work/tiny.db" >"$work/out" ||
  fail "site: $(cat "$work/out")"

SITE="$work/site" EXPECTED=$("$seqbench" history --suite ci --db "$gate" --format csv |
  python3 -c 'import csv,sys; print(len({(r["case_key"], r["machine"]) for r in csv.DictReader(sys.stdin)}))') \
  CHANGES=$("$seqbench" history --suite ci --db "$gate" --format json |
  python3 -c 'import json,sys; print(sum(len(s["changes"]) for s in json.load(sys.stdin)["series"]))') \
  python3 - <<'PY' || fail "the site's pages"
import html.parser, os, re
site = os.environ["SITE"]
class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.links, self.svgs, self.scripts, self.title = [], 0, 0, ""
        self.in_title = self.titled = False
    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "a" and "href" in attrs: self.links.append(attrs["href"])
        if tag == "svg": self.svgs += 1
        if tag == "script": self.scripts += 1
        self.in_title = tag == "title"
    def handle_data(self, data):  # the page's own title: the first <title>, not the charts'
        if self.in_title and not self.titled: self.title += data
    def handle_endtag(self, tag):
        self.titled = self.titled or (tag == "title" and self.in_title)
        self.in_title = False
pages = {}
for name in os.listdir(site):
    assert re.fullmatch(r"(index|regressions|suite-[A-Za-z0-9_-]+|(run|ab)-\d+-[0-9a-f]{10}|group-[A-Za-z0-9_-]+-[0-9a-f]{10})\.html", name), name
    page = Page()
    page.feed(open(os.path.join(site, name), encoding="utf-8").read())
    pages[name] = page
    assert page.scripts == 0, f"{name}: a <script> element"
    for link in page.links:
        assert os.path.isfile(os.path.join(site, link)), f"{name}: {link} is not a page"
runs = [n for n in pages if n.startswith("run-")]
assert len(runs) == 20 + 2 + 2 + 2, runs  # gate.db's 20; tiny's 2, its A/B pair, its shards
pairs = [n for n in pages if n.startswith("ab-")]
assert len(pairs) == 1 and re.fullmatch(r"ab-3-[0-9a-f]{10}\.html", pairs[0]), pairs
pair = open(os.path.join(site, pairs[0]), encoding="utf-8").read()
assert pair.count("<tr>") == 1 + 2 and "verdict" in pair, "the pair's table: a row a case"
groups = [n for n in pages if n.startswith("group-")]
assert len(groups) == 1 and groups[0].startswith("group-g1-"), groups
shards = sorted(l for l in pages[groups[0]].links if l.startswith("run-"))
assert [l[:6] for l in shards] == ["run-5-", "run-6-"], pages[groups[0]].links
assert "shards" not in pages[groups[0]].title and "<table>" in open(os.path.join(site, groups[0])).read()
ci = [p for n, p in pages.items() if p.title == "suite ci"]
assert len(ci) == 1 and ci[0].svgs == int(os.environ["EXPECTED"]), (len(ci), ci and ci[0].svgs)
marked = [p for p in pages.values() if p.title == "suite x<script>alert(1)</script>"]
assert len(marked) == 1 and marked[0].svgs == 2, "the markup-named suite's page"
# Every change point of history's series is a row of regressions.html (the tiny suite's two
# runs have none), and each row links its chart and its two runs.
regressions = open(os.path.join(site, "regressions.html"), encoding="utf-8").read()
rows = regressions.count("<tr>") - 1 if "<table>" in regressions else 0
assert rows == int(os.environ["CHANGES"]), (rows, os.environ["CHANGES"])
assert len([l for l in pages["regressions.html"].links if "#chart-" in l]) == rows
# Each run page links its suite's neighbours: every prev/next target is a run page.
assert any("rel=\"next\"" in open(os.path.join(site, n)).read() for n in runs)
print("pages ok:", len(pages), "change points:", rows)
PY
# Progress on a terminal (script(1) gives the command one), none into a file or pipe.
if command -v script >/dev/null; then
  SB="$seqbench" OUT="$work/site_tty" GATE="$gate" script -qec \
    '"$SB" site "$OUT" --db "$GATE"' /dev/null >"$work/tty_out" || fail "site on a terminal"
  grep -aqE "site: runs and suites: [0-9]+ of [0-9]+  ETA" "$work/tty_out" ||
    fail "no progress on a terminal: $(head -c 300 "$work/tty_out")"
fi
"$seqbench" site "$work/site_quiet" --db "$gate" >"$work/quiet" 2>&1 || fail "site into a file"
grep -q " of " "$work/quiet" && fail "progress written into a file: $(cat "$work/quiet")"
grep -q "<script" "$work/site"/*.html && fail "a page holds a <script> tag"
grep -q "x&lt;script&gt;alert(1)&lt;/script&gt;" "$work/site/index.html" ||
  fail "the suite's name is not escaped text in the index"
pair_page=$(ls "$work/site"/ab-*.html)
grep -q "label &lt;i&gt;pair&lt;/i&gt;" "$pair_page" && ! grep -q "<i>pair" "$pair_page" ||
  fail "the pair's label is not escaped text on its page"

# A second site into the same folder over fewer runs: the tiny suite's page keeps its name
# (named for the suite, not its position), the pages it no longer has go, and a file of the
# user's and a symbolic link shaped like a page stay.
cp -r "$work/site" "$work/site2"
tiny_page=$(grep -lF "<title>suite x&lt;script&gt;" "$work/site2"/suite-*.html | xargs -n1 basename)
echo notes >"$work/site2/notes.txt"
ln -s "$work/site2/notes.txt" "$work/site2/run-9-9.html"
"$seqbench" site "$work/site2" --db "$work/tiny.db" >"$work/again" || fail "second site: $(cat "$work/again")"
[[ -f $work/site2/$tiny_page ]] || fail "the tiny suite's page $tiny_page moved"
# tiny.db was the second database of the first site and is the only one now: its runs'
# pages keep their names (named for the run, not for the database's position).
mapfile -t linked < <(grep -oE 'href="run-[^"]+"' "$work/site/$tiny_page" | sed 's/href="//; s/"$//' | sort -u)
((${#linked[@]} > 0)) || fail "the tiny suite's page links no run"
for page in "${linked[@]}"; do
  [[ -f $work/site2/$page ]] || fail "tiny's run page $page has another name in the second site"
done
[[ -f $work/site/suite-ci.html && ! -e $work/site2/suite-ci.html ]] ||
  fail "the gate store's suite page was left behind"
[[ -f $work/site2/notes.txt && -L $work/site2/run-9-9.html ]] || fail "a file of the user's was removed"
grep -qE "; [0-9]+ stale page\(s\) of an earlier site removed" "$work/again" ||
  fail "the removal is not reported: $(cat "$work/again")"
pages_now=$(ls "$work/site2" | grep -c '\.html$')
written=$(sed -nE 's/^site: ([0-9]+) pages.*/\1/p' "$work/again")
[[ $pages_now -eq $((written + 1)) ]] || fail "$pages_now .html files, $written written (+ the link)"

# OUT_DIR as a symlink, or as a file: refused, nothing written through it.
mkdir "$work/elsewhere"
ln -s "$work/elsewhere" "$work/link"
set +e
"$seqbench" site "$work/link" --db "$work/tiny.db" 2>"$work/err"
rc=$?
set -e
[[ $rc -eq 2 ]] || fail "a symlinked OUT_DIR: exit $rc"
[[ -z $(ls -A "$work/elsewhere") ]] || fail "pages written through a symlink"
touch "$work/file"
set +e
"$seqbench" site "$work/file" --db "$work/tiny.db" 2>"$work/err"
rc=$?
set -e
[[ $rc -eq 2 ]] || fail "a file as OUT_DIR: exit $rc"

# Headless Chromium, where installed: every page loads with no console error.
chromium=$(command -v chromium || command -v chromium-browser || true)
if [[ -n $chromium ]]; then
  for page in "$work/site"/*.html; do
    timeout 60 "$chromium" --headless --no-sandbox --disable-gpu --enable-logging=stderr --v=0 \
      --dump-dom "file://$page" >"$work/dom" 2>"$work/console" || fail "chromium on $page"
    grep -q "</html>" "$work/dom" || fail "chromium did not load $page"
    if grep -i "console" "$work/console" >"$work/console_lines" &&
      grep -qiv "devtools" "$work/console_lines"; then
      fail "console output on $page: $(grep -i console "$work/console" | head -3)"
    fi
  done
  echo "chromium: every page loaded"
else
  echo "chromium absent: the browser checks were skipped"
fi
echo "site tests passed"
