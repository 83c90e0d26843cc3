#!/usr/bin/env bash
# seqbench on a real Slurm, started by this test (tests/scale/slurm_cluster.sh: munged,
# slurmctld and slurmd as its own processes, one node, stopped by PID on exit):
#  (a) suites/ci.toml as 4 shards through `seqbench slurm`: the gathered group has exactly
#      the case keys of the suite run whole, every case correct, and report/check read it;
#  (b) one shard's task killed mid-run (SIGKILL to its process, scontrol requeue): it
#      resumes its run, and the group completes with nothing lost or duplicated;
#  (c) a 2-task `srun` Gloo training logs the same losses as one process.
# Installs slurmctld, slurmd, slurm-client and munge when missing (apt-get).
# Usage: tests/scale/slurm.sh SEQBENCH_BINARY SOURCE_DIR
set -euo pipefail
seqbench=$(readlink -f "$1")
source_dir=$(readlink -f "$2")
suite=$source_dir/suites/ci.toml
# shellcheck source=tests/scale/slurm_cluster.sh
source "$source_dir/tests/scale/slurm_cluster.sh"
work=$(mktemp -d)
trap 'slurm_down "$work/cluster"; rm -rf "$work"' EXIT
trap 'exit 143' INT TERM  # a CI timeout still stops the daemons (the EXIT trap)
fail() {
  echo "FAIL: $*" >&2
  for log in "$work"/*/slurm-*.out; do [[ -e $log ]] && { echo "== $log" >&2; tail -5 "$log" >&2; }; done
  exit 1
}
cd "$work"  # sbatch's own files, should any be written, stay here
mkdir cluster
slurm_up "$work/cluster"
flags=(--repetitions 2 --warmup 0 --in-process)
keys() { "$seqbench" report "$@" --format csv | python3 -c '
import csv, sys
rows = list(csv.DictReader(sys.stdin))
bad = [r["case_key"] for r in rows if r["status"] != "ok"]
assert not bad, "not ok: %s" % bad
for r in rows: print(r["case_key"])'; }  # in suite order
job_ids() { # FILE: "ARRAY GATHER" from seqbench slurm's output
  sed -n 's/.*array job \([0-9]*\).*gather job \([0-9]*\).*/\1 \2/p' "$1"
}

# (a) Four shards, gathered.
started=$SECONDS
"$seqbench" slurm "$suite" --shards 4 --group a --db-dir "$work/a" -- "${flags[@]}" >"$work/a.out"
read -r array gather < <(job_ids "$work/a.out") || true
[[ -n ${gather:-} ]] || fail "no job ids: $(cat "$work/a.out")"
slurm_wait_job "$gather" 300 || fail "group a did not finish in 300 s"
echo "(a) 4 shards and the gather job: $((SECONDS - started)) s" >&2
[[ -s "$work/a/group-a.md" ]] || fail "the gather job wrote no report"
grep -q "check of group 'a'" "$work"/a/slurm-*-gather.out || fail "the gather job did not check"
"$seqbench" run "$suite" "${flags[@]}" --db "$work/whole.db" >/dev/null
keys --db "$work/whole.db" --latest >"$work/whole.keys" || fail "the whole run"
keys --db "$work/a/group-a.db" --group a >"$work/a.keys" || fail "report --group a"
diff "$work/whole.keys" "$work/a.keys" >&2 || fail "group a's cases differ from the whole run's"
[[ $(sqlite3 "$work/a/group-a.db" "select count(*) from runs where run_group = 'a'") -eq 4 ]] ||
  fail "group a has other than 4 shard runs"

# (b) Shard 2 killed after its first case, requeued: it resumes; nothing lost or twice.
#     (A case takes 2 s or more here, so that the kill lands mid-shard: at --min-time 200ms
#     an AVX-512 VM finished the shard while the test was still finding its process.)
"$seqbench" slurm "$suite" --shards 4 --group b --db-dir "$work/b" -- "${flags[@]}" \
  --min-time 1s >"$work/b.out"
gather=""
read -r array gather < <(job_ids "$work/b.out") || true
[[ -n $gather ]] || fail "no job ids: $(cat "$work/b.out")"
stored=0
for _ in $(seq 1 600); do
  # Read-only: sqlite3 would otherwise create the file it looks at.
  [[ -e "$work/b/shard-2.db" ]] &&
    stored=$(sqlite3 "file:$work/b/shard-2.db?mode=ro" "select count(*) from cases" 2>/dev/null || echo 0)
  [[ $stored -ge 1 ]] && break
  sleep 0.1
done
[[ $stored -ge 1 ]] || fail "shard 2 stored no case within a minute"
# SIGKILL, as a node dying: `scancel --signal=KILL` sends SIGTERM first (measured, Slurm
# 22.05), which seqbench answers by storing the run as interrupted.
task_pid=""
for environ in /proc/[0-9]*/environ; do
  pid=${environ#/proc/}
  pid=${pid%/environ}
  [[ $(cat "/proc/$pid/comm" 2>/dev/null) == seqbench ]] || continue
  grep -qxz "SLURM_ARRAY_JOB_ID=$array" "$environ" 2>/dev/null || continue
  grep -qxz "SLURM_ARRAY_TASK_ID=2" "$environ" 2>/dev/null && task_pid=$pid
done
[[ -n $task_pid ]] || fail "no seqbench process of task ${array}_2"
kill -9 "$task_pid" 2>/dev/null ||
  fail "task ${array}_2 ended before the kill: its shard ran faster than the test looked"
for _ in $(seq 1 100); do
  state=$(squeue -h -j "${array}_2" -o %T 2>/dev/null || true)
  [[ -z $state || $state == FAILED ]] && break
  sleep 0.1
done
[[ $(sqlite3 "file:$work/b/shard-2.db?mode=ro" "select status from runs") == running ]] ||
  fail "the killed shard's run is not left running (it finished before the kill?)"
scontrol requeue "${array}_2"
slurm_release "${array}_2"
slurm_wait_job "$gather" 300 || fail "group b did not finish in 300 s"
grep -q "resuming shard 2/4 of group b" "$work"/b/slurm-*_2.out || fail "the requeued shard did not resume"
keys --db "$work/b/group-b.db" --group b >"$work/b.keys" || fail "report --group b"
diff "$work/whole.keys" "$work/b.keys" >&2 || fail "group b lost or duplicated cases"
[[ $(sqlite3 "$work/b/shard-2.db" "select count(*) from runs") -eq 1 ]] ||
  fail "the requeued shard started another run"
"$seqbench" check --group b --db "$work/b/group-b.db" >"$work/b.check" || [[ $? -eq 1 ]] ||
  fail "check --group b: $(cat "$work/b.check")"

# (c) srun -n2: Slurm's environment makes the c10d world; the same losses as one process.
small=(--corpus synthetic --max-samples 400 --validation-samples 32 --max-length 32 --width 16
       --layers 1 --heads 2 --batch-size 8 --eval-every 4 --variant fused --seed 5 --steps 8)
"$seqbench" train "${small[@]}" --db "$work/dp.db" >/dev/null 2>&1
srun -N1 -n2 -O "$seqbench" train "${small[@]}" --db "$work/dp.db" >"$work/srun.out" 2>&1 ||
  fail "srun train: $(cat "$work/srun.out")"
[[ $(sqlite3 "$work/dp.db" "select value from environment where run_id = 2 and key = 'world_size'") == 2 ]] ||
  fail "the srun run does not record world_size 2: $(cat "$work/srun.out")"
worst=$(sqlite3 "$work/dp.db" "select max(abs(a.loss - b.loss)) from training_steps a
         join training_steps b on a.step = b.step where a.run_id = 1 and b.run_id = 2")
[[ $(sqlite3 "$work/dp.db" "select count(*) from training_steps where run_id = 2") -eq 8 ]] ||
  fail "the srun run logged other than 8 steps"
awk -v w="$worst" 'BEGIN { exit !(w <= 1e-5) }' || fail "srun losses differ by $worst"
echo "slurm scale tests passed in $SECONDS s"
