#!/usr/bin/env bash
# seqbench tried as a careless user and a hostile repository would try it: each try does
# one thing that must not lose or corrupt data, write where it should not, send markup or
# control sequences to a reader, or hang, and checks the promise docs/promises.md makes for
# it (exit code, message, files unchanged by sha256sum, PRAGMA integrity_check, run
# statuses). One line a try: "held", "BROKE" (with why) or "skipped" (with why: a tmpfs
# that cannot be mounted here). Exits 1 when any try broke.
# Usage: tests/adversarial/run.sh SEQBENCH_BINARY SOURCE_DIR
set -uo pipefail
seqbench=$(realpath "$1")
source_dir=$(realpath "$2")
work=$(mktemp -d)
mounts=()
cleanup() {
  for mount in "${mounts[@]}"; do umount "$mount" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work" || exit 2

held=0 broke=0 skipped=0
why="" skip=""
# attempt NAME FUNCTION: the function returns 0 when the promise held, 77 to skip (with
# $skip), anything else when it broke (with $why).
attempt() {
  local name=$1
  why="" skip=""
  cp pristine.db runs.db  # each try starts from the same store, whatever the last one did
  rm -f runs.db-wal runs.db-shm runs.db-journal
  "$2"
  case $? in
    0) held=$((held + 1)); echo "held     $name" ;;
    77) skipped=$((skipped + 1)); echo "skipped  $name: $skip" ;;
    *) broke=$((broke + 1)); echo "BROKE    $name: $why" ;;
  esac
}
# sb EXPECTED_EXIT ARGS...: runs seqbench (stdout in out, stderr in err) and checks its exit.
sb() {
  local expected=$1
  shift
  timeout -k 10 120 "$seqbench" "$@" >out 2>err </dev/null
  local rc=$?
  [[ $rc -eq $expected ]] && return 0
  why="seqbench $* exited $rc, expected $expected: $(head -c 300 err)"
  return 1
}
says() {  # says TEXT: stderr names it
  grep -qF -- "$1" err && return 0
  why="message does not say '$1': $(head -c 300 err)"
  return 1
}
same() {  # same FILE SUM: the file's bytes are what they were
  [[ $(sha256sum <"$1") == "$2" ]] && return 0
  why="$1 changed"
  return 1
}
sum() { sha256sum <"$1"; }
no_esc() {  # no_esc FILE: no ESC or C1 CSI byte reached it
  if LC_ALL=C grep -q $'\x1b' "$1" || LC_ALL=C grep -qP '\xc2\x9b' "$1"; then
    why="an escape sequence reached $1"
    return 1
  fi
}
consistent() {  # consistent TARGET SOURCE: whole, and every complete run has all its cases
  [[ $(sqlite3 "$1" "PRAGMA integrity_check") == ok ]] || { why="$1 fails integrity_check"; return 1; }
  local uuid cases
  while IFS='|' read -r uuid cases; do
    local want
    want=$(sqlite3 "$2" "SELECT count(*) FROM cases JOIN runs USING (run_id) WHERE uuid = '$uuid'")
    [[ $cases -eq $want ]] || { why="run $uuid is complete with $cases of $want cases"; return 1; }
  done < <(sqlite3 "$1" "SELECT uuid, (SELECT count(*) FROM cases c WHERE c.run_id = r.run_id)
                          FROM runs r WHERE status = 'complete'")
}
# tmpfs SIZE: a fresh tmpfs folder of SIZE (e.g. 256k) in $mounted, or 77 with $skip.
tmpfs() {
  mounted=$(mktemp -d "$work/tmpfs.XXXXXX")
  if ! mount -t tmpfs -o "size=$1" tmpfs "$mounted" 2>/dev/null; then
    skip="cannot mount a tmpfs here (needs root in a mount namespace)"
    return 77
  fi
  mounts+=("$mounted")
}

# Fixtures: a tiny suite, a database with two complete runs of it, a victim file.
cat >tiny.toml <<'EOF'
name = "tiny"
description = "two variants, one workload"
family = "simple_rnn"
baseline = "baseline"
seed = 3
[model]
vocab_size = 16
width = 8
layers = 1
heads = 2
[measure]
repetitions = 3
warmup = 1
[[variants]]
key = "baseline"
[[variants]]
key = "fused"
[grid]
threads = 1
mode = ["forward", "train"]
batch = 2
seq_len = 8
min_len = 4
dtype = "float32"
[[expect]]
what = "speedup"
variant = "fused"
over = "baseline"
at_least = 0.01
EOF
for run in 1 2; do
  "$seqbench" run tiny.toml --db runs.db --in-process >/dev/null 2>&1 || { echo "fixture run failed"; exit 2; }
done
cp runs.db pristine.db
runs_sum=$(sum runs.db)
echo "do not touch" >victim.txt
victim_sum=$(sum victim.txt)
sqlite3 foreign.db "CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('mine')"
foreign_sum=$(sum foreign.db)
# A damaged copy: its last page overwritten with junk.
cp runs.db damaged.db
sqlite3 damaged.db "PRAGMA journal_mode = DELETE" >/dev/null
size=$(stat -c %s damaged.db)
printf '%*s' 3900 '' | tr ' ' 'Z' | dd of=damaged.db bs=1 seek=$((size - 4000)) conv=notrunc status=none
damaged_sum=$(sum damaged.db)

# 1. Outputs: written whole or not at all, never through a planted link, never the database.
out_is_db() { sb 2 report 1 --db runs.db --out runs.db && same runs.db "$runs_sum"; }
out_is_wal() { sb 2 report 1 --db runs.db --out runs.db-wal && [[ ! -s runs.db-wal ]] && same runs.db "$runs_sum"; }
out_is_journal() { sb 2 report 1 --db runs.db --out runs.db-journal && [[ ! -e runs.db-journal ]]; }
plot_out_is_db() { sb 2 plot 1 --db runs.db --x batch --y runtime --out runs.db && same runs.db "$runs_sum"; }
small_train=(train --corpus synthetic --max-samples 64 --validation-samples 8 --max-length 16
  --width 8 --layers 1 --heads 2 --batch-size 4 --variant fused --steps 8)
checkpoint_is_db() {  # refused before any step: the checkpoint would replace the database
  sb 2 "${small_train[@]}" --db runs.db --checkpoint runs.db && says "results database" &&
    same runs.db "$runs_sum"
}
checkpoint_is_link() {  # refused before any step, the linked file untouched
  ln -sf "$work/victim.txt" model.pt
  sb 2 "${small_train[@]}" --db train.db --checkpoint model.pt && says "symbolic link" &&
    same victim.txt "$victim_sum"
}
out_through_link() {  # refused: seqbench replaces only regular files
  ln -sf "$work/victim.txt" link.md
  sb 2 report 1 --db runs.db --out link.md && says "symbolic link" && same victim.txt "$victim_sum"
}
readme_planted_temporary() {
  mkdir -p site/plots
  printf '# x\n<!-- seqbench:begin suite=tiny plot=runtime x=batch file=plots/p.svg -->\n<!-- seqbench:end -->\n' >site/README.md
  ln -sf "$work/victim.txt" site/plots/p.svg.seqbench-tmp
  sb 0 readme site/README.md --db runs.db && same victim.txt "$victim_sum"
}
readme_plot_is_link() {  # refused: the plot resolves outside the README's folder
  rm -f site/plots/p.svg && ln -s "$work/victim.txt" site/plots/p.svg
  sb 2 readme site/README.md --db runs.db && says "outside the README" && same victim.txt "$victim_sum"
}
readme_plot_outside() {
  printf '# x\n<!-- seqbench:begin suite=tiny plot=runtime x=batch file=../../victim.txt -->\n<!-- seqbench:end -->\n' >site/OUT.md
  sb 2 readme site/OUT.md --db runs.db && same victim.txt "$victim_sum"
}
readme_plot_folder_blocked() {  # a folder the plot needs is a file: exit 2, said, untouched
  printf '# x\n<!-- seqbench:begin suite=tiny plot=runtime x=batch file=blocked/p.svg -->\n<!-- seqbench:end -->\n' >site/BLOCKED.md
  echo "a file, not a folder" >site/blocked
  local before
  before=$(sum site/BLOCKED.md)
  sb 2 readme site/BLOCKED.md --db runs.db && says "site/blocked" && same site/BLOCKED.md "$before"
}
full_stdout() {  # full_stdout ARGS: standard output on a full device is exit 1, said so
  timeout 60 "$seqbench" "$@" >/dev/full 2>err </dev/null
  local rc=$?
  [[ $rc -eq 1 ]] || { why="$* > /dev/full exited $rc"; return 1; }
  says "cannot write standard output"
}
report_json_full() { full_stdout report 1 --db runs.db --format json; }
show_full() { full_stdout show 1 --db runs.db; }
check_full() { full_stdout check 1 --db runs.db; }
compare_full() { full_stdout compare 1 2 --db runs.db --allow-different-machines; }
readme_full_disk() {
  tmpfs 256k || return $?
  # A README of ~200 kB in a 256 kB tmpfs: the regenerated copy cannot be written whole.
  { printf '# x\n<!-- seqbench:begin suite=tiny -->\n<!-- seqbench:end -->\n'; head -c 200000 /dev/zero | tr '\0' 'a'; echo; } >"$mounted/README.md"
  local before
  before=$(sum "$mounted/README.md")
  sb 2 readme "$mounted/README.md" --db runs.db && says "cannot write" || return 1
  same "$mounted/README.md" "$before" || return 1
  [[ -z $(find "$mounted" -name '*seqbench*') ]] || { why="a temporary was left: $(ls -a "$mounted")"; return 1; }
}
report_out_full_disk() {
  tmpfs 64k || return $?
  echo "the old report" >"$mounted/r.md"
  local before
  before=$(sum "$mounted/r.md")
  head -c 60000 /dev/zero >"$mounted/filler" 2>/dev/null
  # A report of 1 MB of rows cannot fit: the old file stays, no temporary.
  sqlite3 runs.db "SELECT 1" >/dev/null
  cp runs.db big.db
  sqlite3 big.db "UPDATE cases SET message = printf('%.50000c', 'x')"
  sb 2 report 1 --db big.db --out "$mounted/r.md" && says "cannot write" || return 1
  same "$mounted/r.md" "$before" || return 1
  [[ -z $(find "$mounted" -name '*seqbench*') ]] || { why="a temporary was left: $(ls -a "$mounted")"; return 1; }
}

# 2. The database: another program's file and a damaged one are refused, unchanged; a
#    merge adds a run whole or not at all; writes the reader cannot see are said.
writer_refuses() {  # writer_refuses FILE SUM TEXT: run, train and merge --into refuse it
  local file=$1 checksum=$2 text=$3
  sb 2 run tiny.toml --db "$file" --in-process && says "$text" && same "$file" "$checksum" || return 1
  sb 2 train --corpus synthetic --max-samples 64 --validation-samples 8 --max-length 16 \
    --width 8 --layers 1 --heads 2 --batch-size 4 --steps 12 --db "$file" &&
    says "$text" && same "$file" "$checksum" || return 1
  sb 2 merge runs.db --into "$file" && says "$text" && same "$file" "$checksum"
}
foreign_refused_by_writers() { writer_refuses foreign.db "$foreign_sum" "other tables: notes"; }
foreign_refused_by_show() { sb 2 show --db foreign.db && says "notes" && same foreign.db "$foreign_sum"; }
foreign_refused_by_report() { sb 2 report --latest --db foreign.db && same foreign.db "$foreign_sum"; }
damaged_refused_by_writers() { writer_refuses damaged.db "$damaged_sum" "damaged"; }
truncated_refused() {
  head -c 8192 runs.db >truncated.db
  local before
  before=$(sum truncated.db)
  sb 2 run tiny.toml --db truncated.db --in-process && same truncated.db "$before"
}
text_file_refused() {
  echo 'name = "not a database"' >text.db
  local before
  before=$(sum text.db)
  sb 2 run tiny.toml --db text.db --in-process && same text.db "$before"
}
newer_schema_refused() {
  cp runs.db newer.db
  sqlite3 newer.db "PRAGMA journal_mode = DELETE; UPDATE schema_version SET version = 999" >/dev/null
  local before
  before=$(sum newer.db)
  sb 2 run tiny.toml --db newer.db --in-process && says "newer" && same newer.db "$before"
}
merge_from_damaged_source() {  # refused before anything is copied
  rm -f merged.db*
  sb 2 merge runs.db damaged.db --into merged.db && says "damaged" || return 1
  [[ ! -e merged.db ]] || [[ $(sqlite3 merged.db "SELECT count(*) FROM runs") -eq 0 ]] ||
    { why="runs were merged before the damaged source was refused"; return 1; }
}
merge_killed() {
  # cpu.db: 52 runs, 1,059 cases. Killed at four moments after the merge began writing the
  # target; the target must be consistent each time, and at least one kill must have
  # caught the merge still running (else the try proved nothing).
  local source="$source_dir/results/published/cpu.db" delay interrupted=0
  for delay in 0 0.05 0.15 0.3; do
    rm -f killed.db*
    "$seqbench" merge "$source" --into killed.db >/dev/null 2>&1 &
    local pid=$!
    local waited=0
    while [[ ! -s killed.db && $waited -lt 500 ]] && kill -0 "$pid" 2>/dev/null; do
      sleep 0.01
      waited=$((waited + 1))
    done
    sleep "$delay"
    kill -9 "$pid" 2>/dev/null && interrupted=$((interrupted + 1))
    wait "$pid" 2>/dev/null
    [[ -e killed.db ]] || continue
    consistent killed.db "$source" || { why="after kill -9 at +${delay}s: $why"; return 1; }
  done
  [[ $interrupted -gt 0 ]] || { why="every merge had finished before its kill"; return 1; }
}
merge_retried_shard() {
  # A shard's case timed out and was merged; the shard was retried (run --resume
  # --retry-failed) and merged again: the gathered run gets the retry's result, said.
  rm -f gathered.db*
  cp runs.db shard.db
  sqlite3 shard.db "UPDATE cases SET status = 'timeout', message = 'killed after 8 s'
                    WHERE case_id = (SELECT min(case_id) FROM cases)" || return 1
  sb 0 merge shard.db --into gathered.db || return 1
  sb 0 merge runs.db --into gathered.db || return 1  # runs.db: the shard after its retry
  grep -q "1 replaced" out || { why="the retried case was not replaced: $(cat out)"; return 1; }
  [[ $(sqlite3 gathered.db "SELECT count(*) FROM cases WHERE status = 'timeout'") -eq 0 ]] ||
    { why="the gathered run keeps the stale timeout"; return 1; }
}
merge_remeasured_refused() {
  # The same run's case measured differently in two files: refused (exit 2), naming it,
  # the target unchanged.
  rm -f gathered.db*
  sb 0 merge runs.db --into gathered.db || return 1
  local checksum
  checksum=$(sum gathered.db)
  cp runs.db remeasured.db
  sqlite3 remeasured.db "UPDATE samples SET seconds = seconds * 2" || return 1
  sb 2 merge remeasured.db --into gathered.db && says "nothing merged" && says "case " &&
    same gathered.db "$checksum"
}
wal_on_read_only_storage() {
  tmpfs 16m || return $?
  cp runs.db "$mounted/wal.db"
  # A third run whose pages stay in the -wal: another connection holds the file open, so
  # the writer cannot checkpoint when it closes.
  python3 -c "import sqlite3, time; c = sqlite3.connect('$mounted/wal.db'); c.execute('SELECT count(*) FROM runs').fetchall(); time.sleep(30)" &
  local holder=$!
  sleep 0.5
  "$seqbench" run tiny.toml --db "$mounted/wal.db" --in-process >/dev/null 2>&1
  kill "$holder" 2>/dev/null
  wait "$holder" 2>/dev/null
  rm -f "$mounted/wal.db-shm"
  [[ -s "$mounted/wal.db-wal" ]] || { skip="the run's pages were checkpointed; no -wal to read past"; return 77; }
  mount -o remount,ro "$mounted" || { skip="cannot remount read-only"; return 77; }
  sb 0 show --db "$mounted/wal.db" && says "cannot be read"
}

# 3. User text reaches every sink as text: a run whose suite name, label, messages and
#    environment hold markup, formulas, escape sequences and invalid UTF-8.
cp runs.db hostile.db
sqlite3 hostile.db "PRAGMA journal_mode = DELETE;
  UPDATE runs SET suite_name = '<b>x</b> [l](javascript:alert(1)) ![i](http://e.example/x.png) ' || char(27) || '[31m' || CAST(X'FF' AS TEXT),
                  label = '=HYPERLINK(\"http://e.example\",\"x\")';
  UPDATE cases SET message = '<img src=x onerror=alert(1)> | =1+1 ' || char(27) || ']0;title' || char(7),
                   description = '@SUM(A1) ' || CAST(X'C0AF' AS TEXT);
  UPDATE environment SET value = '# ' || char(27) || '[2J<script>x</script>' WHERE key = 'cpu_model'" >/dev/null
no_markup() {  # no_markup FILE: cmark-gfm (GitHub's extensions) finds no HTML, image or link
  # (seqbench's own section markers, HTML comments, aside)
  # A parser that is missing or fails must break the try, not leave an empty tree to pass.
  if ! grep -v '^<!-- seqbench:' "$1" | cmark-gfm -e table -e autolink -e strikethrough --to xml >ast.xml ||
    ! grep -q '<document' ast.xml; then
    why="cmark-gfm did not parse $1 (missing? ci/install-deps installs it)"
    return 1
  fi
  if grep -qE "<(html_inline|html_block|image)\b" ast.xml; then
    why="$1 renders raw HTML or an image: $(grep -oE '<(html_inline|html_block|image)[^>]*>' ast.xml | head -2)"
    return 1
  fi
  if grep -qE 'link destination="[^"]*(javascript|http)' ast.xml; then
    why="$1 renders a link: $(grep -oE 'link destination="[^"]*"' ast.xml | head -2)"
    return 1
  fi
}
report_markdown() { sb 0 report 1 --db hostile.db && no_markup out && no_esc out; }
report_csv() {
  sb 0 report 1 --db hostile.db --format csv || return 1
  python3 - out <<'EOF' || { why="a CSV cell starts a formula or the CSV does not parse"; return 1; }
import csv, sys
rows = list(csv.reader(open(sys.argv[1], newline="", encoding="utf-8")))
assert len({len(row) for row in rows}) == 1
assert not any(cell.startswith(("=", "+", "-", "@", "\t", "\r")) for row in rows for cell in row)
EOF
}
report_json() { sb 0 report 1 --db hostile.db --format json && python3 -m json.tool out >/dev/null 2>&1 || { why=${why:-"json.tool refuses it"}; return 1; }; }
report_gbench_json() { sb 0 report 1 --db hostile.db --format gbench-json && python3 -m json.tool out >/dev/null 2>&1 || { why=${why:-"json.tool refuses it"}; return 1; }; }
show_terminal() { sb 0 show 1 --db hostile.db && no_esc out; }
show_list_terminal() { sb 0 show --db hostile.db && no_esc out; }
# compare's exit is its verdict (0 or 1; time on this machine decides); 2 is a refusal.
verdict() { sb 0 "$@" || { why=""; sb 1 "$@"; }; }
compare_terminal() { verdict compare 1 2 --db hostile.db --allow-different-machines && no_esc out && no_esc err && no_markup out; }
compare_json() { verdict compare 1 2 --db hostile.db --allow-different-machines --format json && python3 -m json.tool out >/dev/null 2>&1 || { why=${why:-"json.tool refuses it"}; return 1; }; }
check_terminal() { sb 0 check 1 --db hostile.db && no_esc out && no_markup out; }
readme_hostile() {
  # The suite keeps its name (a README's marker names it); its cases and environment are
  # hostile.
  cp hostile.db hostile_readme.db
  sqlite3 hostile_readme.db "UPDATE runs SET suite_name = 'tiny'"
  printf '# x\n<!-- seqbench:begin suite=tiny -->\n<!-- seqbench:end -->\n' >HOSTILE.md
  sb 0 readme HOSTILE.md --db hostile_readme.db || return 1
  [[ $(wc -l <HOSTILE.md) -gt 5 ]] || { why="no section was written"; return 1; }
  no_markup HOSTILE.md && no_esc HOSTILE.md && no_esc err
}
list_hostile_suite() {
  mkdir -p hostile_suites
  sed "s/^description = .*/description = \"\\\\u001b[31mred <b>x<\\/b>\"/" tiny.toml >hostile_suites/h.toml
  sb 0 list --suites hostile_suites && no_esc out
}
no_controls() {  # no_controls FILE: no ESC, C1 control (U+0085, U+009B) or bidi override (U+202E)
  no_esc "$1" || return 1
  if LC_ALL=C grep -qP '\xc2[\x80-\x9f]|\xe2\x80[\xaa-\xae]|\xe2\x81[\xa6-\xa9]' "$1"; then
    why="a C1 control or a bidirectional override reached $1"
    return 1
  fi
}
run_progress_terminal() {  # the run's own lines: its header, progress, warnings, summary
  # (ESC itself is refused by the suite's parser, with a file:line message)
  sed 's/^name = .*/name = "t\\u202e\\u0085\\u009b"/' tiny.toml >hostile_name.toml
  sb 0 run hostile_name.toml --db progress.db --in-process --repetitions 2 || return 1
  rm -f progress.db*  # later tries check that no new.db-like store is left
  grep -q "ETA" out && no_controls out && no_controls err
}
# Paths a user names (a suite's file, an output folder) shown back: the class of the raw
# prints issue 63 listed (slurm's dry run, site's summary), tried with a name holding a
# bidirectional override and a C1 CSI.
hostile_path=$(printf 'h\xe2\x80\xae\xc2\x9bx')
dry_run_terminal() {
  cp tiny.toml "$hostile_path.toml"
  sb 0 slurm "$hostile_path.toml" --shards 2 --db-dir slurm_out --dry-run &&
    grep -q "sbatch" out && no_controls out && no_controls err && [[ ! -e slurm_out/shard-1.db ]]
}
site_summary_terminal() {
  sb 0 site "$hostile_path-site" --db runs.db && grep -q "pages" out && no_controls out &&
    [[ -f "$hostile_path-site/index.html" ]]
}
error_message_terminal() {
  sb 2 run $'\e[31mmissing.toml' --db new.db && no_esc err && [[ ! -e new.db ]]
}

# 4. Bounds: every number a user types is checked before anything runs; no pattern hangs.
regex_cannot_hang() { sb 2 run tiny.toml --db new.db --filter '(.*)*x' && says "matches" && [[ ! -e new.db ]]; }
regex_refused_clearly() { sb 2 run tiny.toml --db new.db --filter '(?=x)' && says "not a valid regular expression" && [[ ! -e new.db ]]; }
repetitions_bound() { sb 2 run tiny.toml --db new.db --repetitions 1000000000 && says "between 1 and 100000" && [[ ! -e new.db ]]; }
min_time_bound() { sb 2 run tiny.toml --db new.db --min-time 100000000s && says "--min-time" && [[ ! -e new.db ]]; }
count_steps_bound() { sb 2 run tiny.toml --db new.db --count-steps 1000 && says "between 1 and 100" && [[ ! -e new.db ]]; }
threads_bound() { sb 2 run tiny.toml --db new.db --threads 100000 && says "--threads" && [[ ! -e new.db ]]; }
generate_tokens_bound() { sb 2 generate --checkpoint none.pt --prompt hi -n 1000000000000 && says "--generate-tokens"; }
ab_threads_bound() {
  sb 2 ab tiny.toml --base-binary "$seqbench" --db new.db --threads 0 && says "between 1" &&
    [[ ! -e new.db ]]
}
ab_filter_refused() {
  sb 2 ab tiny.toml --base-binary "$seqbench" --db new.db --filter '(?=x)' &&
    says "not a valid regular expression" && [[ ! -e new.db ]]
}
dist_timeout_bound() {
  sb 2 train --corpus synthetic --db new.db --nproc 2 --dist-timeout 9000000000000000000 &&
    says "between 1 and 86400" && [[ ! -e new.db ]]
}
save_every_bound() {
  sb 2 train --corpus synthetic --db new.db --checkpoint c.pt --save-every 99999999999 &&
    says "--save-every must be between" && [[ ! -e new.db && ! -e c.pt ]]
}
bucket_mb_bound() {  # beyond an int64_t of bytes once multiplied out
  sb 2 train --corpus synthetic --db new.db --bucket-mb 1e30 && says "at most" && [[ ! -e new.db ]]
}
# A suite sized for a machine a million times larger: each case fails with the sizes named,
# before allocating, and the run completes; no allocator's internals reach the user.
lengths_beyond_memory() {
  sed -e 's/^batch = 2/batch = 100000/' -e 's/^seq_len = 8/seq_len = 1000000/' \
    -e 's/^min_len = 4/min_len = 1000000/' tiny.toml >huge.toml
  sb 1 run huge.toml --db new.db --check none || return 1
  grep -q "more memory than the machine has" out err ||
    { why="no memory message: $(head -c 300 out)"; return 1; }
  ! grep -q "enforce fail\|alloc_cpu" out err || { why="the allocator's internals reached the user"; return 1; }
  [[ $(sqlite3 new.db "SELECT status FROM runs") == complete ]] || { why="the run did not complete"; return 1; }
}
verify_beyond_memory() {
  sb 2 verify --filter fused --batch 100000 --seq-len 1000000 &&
    says "more memory than the machine has" && ! grep -q "enforce fail" err
}
no_stack_trace() {
  sb 2 train --corpus synthetic --width 7 --heads 2 --db new.db || return 1
  ! grep -qE "Exception raised from|c10::|terminate called" err || { why="a stack trace: $(head -c 200 err)"; return 1; }
}

# 5. Signals: a run stopped by SIGTERM or SIGINT is marked interrupted and resumes.
signal_stops_run() {  # signal_stops_run SIGNAL
  rm -f signal.db*
  "$seqbench" run tiny.toml --db signal.db --in-process --repetitions 2000 >/dev/null 2>&1 &
  local pid=$!
  sleep 3
  kill "-$1" "$pid"
  wait "$pid"
  local rc=$?
  [[ $rc -ne 0 ]] || { why="stopped by SIG$1, exited 0"; return 1; }
  [[ $(sqlite3 signal.db "SELECT status FROM runs") == interrupted ]] ||
    { why="after SIG$1 the run is $(sqlite3 signal.db "SELECT status FROM runs")"; return 1; }
  [[ $(sqlite3 signal.db "PRAGMA integrity_check") == ok ]] || { why="integrity_check after SIG$1"; return 1; }
}
sigterm_stops_run() { signal_stops_run TERM; }
sigint_stops_run() { signal_stops_run INT; }

for try in out_is_db out_is_wal out_is_journal plot_out_is_db out_through_link \
  checkpoint_is_db checkpoint_is_link \
  readme_planted_temporary readme_plot_is_link readme_plot_outside readme_plot_folder_blocked report_json_full show_full \
  check_full compare_full readme_full_disk report_out_full_disk \
  foreign_refused_by_writers foreign_refused_by_show foreign_refused_by_report \
  damaged_refused_by_writers truncated_refused text_file_refused newer_schema_refused \
  merge_from_damaged_source merge_killed merge_retried_shard merge_remeasured_refused \
  wal_on_read_only_storage \
  report_markdown report_csv report_json report_gbench_json show_terminal show_list_terminal \
  run_progress_terminal dry_run_terminal site_summary_terminal \
  compare_terminal compare_json check_terminal readme_hostile list_hostile_suite \
  error_message_terminal \
  regex_cannot_hang regex_refused_clearly repetitions_bound min_time_bound count_steps_bound \
  threads_bound generate_tokens_bound no_stack_trace ab_threads_bound ab_filter_refused \
  dist_timeout_bound save_every_bound bucket_mb_bound lengths_beyond_memory verify_beyond_memory \
  sigterm_stops_run sigint_stops_run; do
  attempt "$try" "$try"
done
echo "adversarial: $held held, $broke broke, $skipped skipped of $((held + broke + skipped)) tries"
[[ $broke -eq 0 ]]
