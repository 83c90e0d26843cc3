# shellcheck shell=bash
# tests/scale/slurm_cluster.sh -- a real one-node Slurm cluster, run as the test's own processes.
#
# Source it from a bash test; it is safe under `set -euo pipefail` and writes only to stderr.
#
#   source tests/scale/slurm_cluster.sh
#   dir=$(mktemp -d); trap 'slurm_down "$dir"' EXIT
#   slurm_up "$dir"                        # exports SLURM_CONF; node idle on return
#   job=$(sbatch --parsable --wrap 'true'); slurm_wait_job "$job" 60
#
# slurm_up DIR              install if missing, write DIR/slurm.conf, start munged, slurmctld,
#                           slurmd (PIDs in DIR/pids), wait <= 30 s for the node to be idle.
# slurm_down DIR            scancel everything, wait <= 20 s for squeue to empty, then TERM
#                           (KILL after 5 s) each process it started -- by PID, never by name.
#                           A no-op when nothing runs: fine twice, or from an EXIT trap.
# slurm_release JOBID       a requeued job sits PENDING ~120 s (BeginTime); start it now.
# slurm_wait_job JOBID T    poll squeue every 0.2 s until the job (all array tasks) has left
#                           the active states; 1 after T seconds. (`sbatch --wait` polls coarsely.)
#
# Why it looks like this (measured on Debian 12, root, gVisor, no systemd):
# - Without systemd there is no /run/munge. This munged is private: socket, key, pid, log and
#   seed live in DIR/munge, and slurm.conf's AuthInfo=socket=... points Slurm at it. It runs as
#   root with --force, because munged refuses a path under any group-writable directory (a
#   build tree) and this throwaway key protects nothing. Check: munge -S SOCK -n | unmunge -S SOCK.
# - Every daemon and client finds the config through SLURM_CONF.
# - Config: proctrack/linuxproc and task/none (no cgroups), cons_tres with CR_Core, no accounting,
#   MailProg=/bin/true, batch_sched_delay=0,sched_min_interval=0 (else ~3 s per scheduling wave),
#   CPUs = nproc and RealMemory below the real figure (over-declaring drains the node).
# - Ports come from $$ in 20000-59999, skipping busy ones, so concurrent test runs don't collide.
# - Stopping the daemons does not stop jobs: slurm_down cancels and drains them first, then kills
#   any leftover: slurmstepd (the tag in its environment), a job process (SLURM_JOB_ID and this
#   SLURM_CONF in its environment; linuxproc loses orphans), and their descendants.
# - More tasks than CPUs waits forever: use `srun -O` (overcommit).

_slurm_say() { printf 'slurm_cluster: %s\n' "$*" >&2; }

# A process we started: alive (not a zombie) and carrying this cluster's tag in its environment.
_slurm_ours() { # PID TAG
  local st
  st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
  [[ $st != Z* ]] || return 1
  grep -qzx -- "SLURM_CLUSTER_TAG=$2" "/proc/$1/environ" 2>/dev/null
}

slurm_install() {
  local c missing=0
  for c in sbatch slurmctld slurmd munged; do command -v "$c" >/dev/null || missing=1; done
  [[ $missing == 1 ]] || return 0
  _slurm_say "installing slurmctld slurmd slurm-client munge"
  DEBIAN_FRONTEND=noninteractive apt-get update >&2 &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      slurmctld slurmd slurm-client munge >&2
}

_slurm_port_busy() { # PORT: listed in /proc/net/tcp*, or something answers on it
  local hex
  hex=$(printf ':%04X' "$1")
  if awk -v h="$hex" 'substr($2, length($2) - 4) == h { f = 1 } END { exit !f }' \
    /proc/net/tcp /proc/net/tcp6 2>/dev/null; then return 0; fi
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

_slurm_pick_ports() { # prints "CTLD_PORT SLURMD_PORT"
  local i p
  for ((i = 0; i < 200; i++)); do
    p=$((20000 + ($$ * 2 + i * 2) % 40000))
    if ! _slurm_port_busy "$p" && ! _slurm_port_busy "$((p + 1))"; then
      echo "$p $((p + 1))"
      return 0
    fi
  done
  _slurm_say "no free port pair found"
  return 1
}

_slurm_write_conf() { # DIR CTLD_PORT SLURMD_PORT
  local dir=$1 node cpus mem_mb
  node=$(hostname -s)
  cpus=$(nproc)
  mem_mb=$(awk '/^MemTotal:/ { m = int($2 / 1024 * 0.9); print (m > 1 ? m : 1) }' /proc/meminfo)
  cat >"$dir/slurm.conf" <<EOF
ClusterName=seqbench
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$2
SlurmdPort=$3
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/slurmd
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
MailProg=/bin/true
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
ReturnToService=2
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
}

# Start a foreground daemon in the background, tagged, output to DIR/log/NAME.out; record its PID.
_slurm_start() { # DIR NAME CMD...
  local dir=$1 name=$2
  shift 2
  SLURM_CLUSTER_TAG=$dir "$@" </dev/null >>"$dir/log/$name.out" 2>&1 &
  echo "$name $!" >>"$dir/pids"
}

_slurm_logs() { # DIR: the tail of every log, for a failure message
  local f
  for f in "$1"/log/*; do
    [[ -f $f ]] || continue
    _slurm_say "---- $f"
    tail -n 20 "$f" >&2 || true
  done
}

_slurm_start_munge() { # DIR
  local dir=$1 sock=$1/munge/munge.socket i
  mkdir -p "$dir/munge" && chmod 755 "$dir/munge" || return 1
  if command -v mungekey >/dev/null; then
    mungekey -c -f -k "$dir/munge/munge.key" || return 1
  else
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1 count=1024 status=none || return 1
  fi
  chmod 400 "$dir/munge/munge.key" || return 1
  _slurm_start "$dir" munged munged -F --force --socket="$sock" \
    --key-file="$dir/munge/munge.key" --pid-file="$dir/munge/munged.pid" \
    --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed"
  for ((i = 0; i < 50; i++)); do
    if munge -S "$sock" -n 2>/dev/null | unmunge -S "$sock" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  _slurm_say "munged did not answer on $sock"
  return 1
}

_slurm_wait_idle() { # DIR TIMEOUT_S
  local dir=$1 deadline=$((SECONDS + $2)) name pid state=""
  while ((SECONDS < deadline)); do
    state=$(timeout 5 sinfo -h -o %T 2>/dev/null) || state=""
    [[ $state == idle ]] && return 0
    while read -r name pid; do
      _slurm_ours "$pid" "$dir" || { _slurm_say "$name (pid $pid) has exited"; return 1; }
    done <"$dir/pids"
    sleep 0.2
  done
  _slurm_say "node not idle after $2 s (sinfo: '${state}')"
  return 1
}

slurm_up() { # DIR
  local dir ports t0=${EPOCHREALTIME/[.,]/}
  mkdir -p "${1:?slurm_up DIR}" && dir=$(cd "$1" && pwd) || return 1
  slurm_install || { _slurm_say "install failed"; return 1; }
  mkdir -p "$dir/log" "$dir/state" "$dir/slurmd" || return 1
  ports=$(_slurm_pick_ports) || return 1
  # shellcheck disable=SC2086
  _slurm_write_conf "$dir" $ports || return 1
  export SLURM_CONF=$dir/slurm.conf
  : >>"$dir/pids"
  if _slurm_start_munge "$dir" &&
    _slurm_start "$dir" slurmctld slurmctld -D -c &&
    _slurm_start "$dir" slurmd slurmd -D -N "$(hostname -s)" &&
    _slurm_wait_idle "$dir" 30; then
    t0=$((${EPOCHREALTIME/[.,]/} - t0))
    _slurm_say "up in $((t0 / 1000000)).$((t0 / 100000 % 10)) s: SLURM_CONF=$SLURM_CONF, ports $ports"
    return 0
  fi
  _slurm_logs "$dir"
  slurm_down "$dir"
  return 1
}

# Is PID part of DIR's cluster? A daemon or slurmstepd (the tag in its environment), or a job
# process (SLURM_JOB_ID plus this SLURM_CONF: sbatch/srun pass the submitter's environment on).
_slurm_marked() { # PID DIR
  local env
  env=$(tr '\0' '\n' 2>/dev/null <"/proc/$1/environ") || return 1
  env=$'\n'$env$'\n'
  [[ $env == *$'\n'"SLURM_CLUSTER_TAG=$2"$'\n'* ]] && return 0
  [[ $env == *$'\n'"SLURM_CONF=$2/slurm.conf"$'\n'* && $env == *$'\n'SLURM_JOB_ID=* ]]
}

# PIDs of DIR's processes and all their descendants, never this shell or its ancestors.
_slurm_tree() { # DIR
  local p skip=" " marked=()
  p=$BASHPID
  while [[ $p =~ ^[0-9]+$ && $p != 0 ]]; do
    skip+="$p "
    p=$(ps -o ppid= -p "$p" 2>/dev/null | tr -d ' ')
  done
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    [[ $skip != *" $p "* ]] && _slurm_marked "$p" "$1" && marked+=("$p")
  done
  ((${#marked[@]})) || return 0
  ps -eo pid=,ppid= | awk -v roots="${marked[*]}" -v skip="$skip" '
    BEGIN { n = split(roots, r, " "); for (i = 1; i <= n; i++) keep[r[i]] = 1 }
    { parent[$1] = $2 }
    END { do { changed = 0
            for (p in parent)
              if (!(p in keep) && (parent[p] in keep) && index(skip, " " p " ") == 0) {
                keep[p] = 1; changed = 1 }
          } while (changed)
          for (p in keep) print p }'
}

_slurm_kill() { # SIGNAL PID...: signal, wait 5 s, KILL the rest, reap our children
  local sig=$1 p i alive
  shift
  (($#)) || return 0
  kill "-$sig" "$@" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do
    alive=0
    for p in "$@"; do
      [[ $(ps -o stat= -p "$p" 2>/dev/null) == [!Z]* ]] && alive=1
    done
    [[ $alive == 1 ]] || break
    sleep 0.1
  done
  [[ $alive == 0 ]] || { _slurm_say "KILL $*"; kill -KILL "$@" 2>/dev/null || true; }
  for p in "$@"; do wait "$p" 2>/dev/null || true; done
}

slurm_down() { # DIR
  local dir name pid i ctld_ok=0 ids daemons=() rest=()
  dir=$(cd "${1:?slurm_down DIR}" 2>/dev/null && pwd) || return 0
  [[ -s $dir/pids ]] || return 0
  while read -r name pid; do
    _slurm_ours "$pid" "$dir" || continue
    daemons=("$pid" "${daemons[@]}") # reverse start order: slurmd, slurmctld, munged
    [[ $name == slurmctld ]] && ctld_ok=1
  done <"$dir/pids"
  if [[ $ctld_ok == 1 ]]; then
    export SLURM_CONF=$dir/slurm.conf
    ids=$(timeout 10 squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ') || ids=""
    # shellcheck disable=SC2086
    [[ -z ${ids// /} ]] || timeout 10 scancel $ids 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
      ids=$(timeout 5 squeue -h -o %A 2>/dev/null) || break
      [[ -z $ids ]] && break
      sleep 0.2
    done
    [[ -z $ids ]] || _slurm_say "jobs still listed after 20 s: ${ids//$'\n'/ }"
  fi
  # Leftovers (slurmstepd, job processes), collected while their parents still run.
  mapfile -t rest < <(_slurm_tree "$dir")
  _slurm_kill TERM "${daemons[@]}"
  for i in "${!rest[@]}"; do # drop those that went with the daemons
    [[ $(ps -o stat= -p "${rest[i]}" 2>/dev/null) == [!Z]* ]] || unset 'rest[i]'
  done
  ((${#rest[@]} == 0)) || _slurm_say "stopping leftovers: ${rest[*]}"
  _slurm_kill TERM "${rest[@]}"
  mv -f "$dir/pids" "$dir/pids.down"
  _slurm_say "down ($dir)"
}

slurm_release() { # JOBID (e.g. 12_3): once the requeued job is PENDING, start it now
  local job=${1:?slurm_release JOBID} i state=""
  for ((i = 0; i < 150; i++)); do
    state=$(timeout 5 squeue -h -j "$job" -o %T 2>/dev/null) || state=""
    [[ $state == PENDING ]] && break
    sleep 0.2
  done
  [[ $state == PENDING ]] || { _slurm_say "$job is '$state', not PENDING"; return 1; }
  timeout 10 scontrol update JobId="$job" StartTime=now >&2
}

slurm_wait_job() { # JOBID TIMEOUT_S: 0 once no task of JOBID is pending/running/completing
  local job=${1:?slurm_wait_job JOBID TIMEOUT_S} deadline=$((SECONDS + ${2:?timeout})) out
  local active='^(PENDING|RUNNING|CONFIGURING|COMPLETING|SUSPENDED|REQUEUED|REQUEUE_HOLD|REQUEUE_FED|RESIZING|SIGNALING|STAGE_OUT|STOPPED|RESV_DEL_HOLD)$'
  while ((SECONDS < deadline)); do
    if out=$(timeout 5 squeue -h -j "$job" -t all -o %T 2>&1); then
      grep -qE "$active" <<<"$out" || return 0
    elif [[ $out == *"Invalid job id"* ]]; then
      return 0 # finished long enough ago (MinJobAge) to be purged
    fi
    sleep 0.2
  done
  _slurm_say "job $job not finished after $2 s: ${out//$'\n'/ }"
  return 1
}
