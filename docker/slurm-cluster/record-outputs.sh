#!/usr/bin/env bash
# Record what a Slurm build prints for the commands hpclaunch parses, for the parsers' unit
# tests (tests/unit/data/cluster-<version>/): real output, never hand-written.
#
#   record-outputs.sh VERSION OUTDIR
#
# Brings up a throw-away one-node cluster of /opt/slurm-VERSION (build-slurm.sh) on its own
# ports (16817/16818) and config directory, beside a running test cluster if there is one:
# slurmctld and one slurmd (node r1, 8 CPUs, 4 fake GPUs), Slurm's own auth/slurm with a
# key next to slurm.conf (one munged shared by several daemons refused forwarded messages on
# 25.11, shared/slurm-notes.md). No slurmdbd: sacct and sacctmgr are not recorded here.
# Runs a job and a pending one, records, and takes everything down again.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
version=${1:?usage: $0 VERSION OUTDIR}
out=${2:?usage: $0 VERSION OUTDIR}
prefix=/opt/slurm-$version
[[ -x $prefix/sbin/slurmctld ]] || { echo "no $prefix: run build-slurm.sh $version first" >&2; exit 2; }
if ss -ltn | grep -qE ':1681[78] '; then
  echo "ports 16817/16818 are taken (a recording left running? ss -ltnp)" >&2
  exit 1
fi

dir=$(mktemp -d /tmp/hpclaunch-record.XXXX)
export SLURM_CONF=$dir/slurm.conf PATH=$prefix/bin:$prefix/sbin:$PATH
cleanup() {
  [[ -f $dir/ctld.pid ]] && kill "$(<"$dir/ctld.pid")" 2>/dev/null || true
  [[ -f $dir/slurmd.pid ]] && kill "$(<"$dir/slurmd.pid")" 2>/dev/null || true
  sleep 1
  if [[ -n ${HPCLAUNCH_RECORD_KEEP:-} ]]; then echo "kept $dir" >&2; else rm -rf "$dir"; fi
}
trap cleanup EXIT

mkdir -p "$dir/state" "$dir/spool" "$dir/dev"
for i in 0 1 2 3; do mknod -m 666 "$dir/dev/gpu$i" c 1 3; done
dd if=/dev/urandom of="$dir/slurm.key" bs=1024 count=1 2>/dev/null
chmod 600 "$dir/slurm.key"
cat >"$dir/slurm.conf" <<EOF
ClusterName=record
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/slurm
CredType=cred/slurm
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/ctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/ctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
GresTypes=gpu
SlurmdParameters=config_overrides
SchedulerParameters=bf_interval=1,sched_min_interval=0,batch_sched_delay=0,sched_interval=2
SlurmctldParameters=preempt_send_user_signal
MpiDefault=none
ReturnToService=2
MaxArraySize=1001
# No AccountingStorageTRES=gres/gpu (the test cluster's): 25.11's slurmctld refuses to start
# with it and no slurmdbd ("fatal: slurmdbd is required to run with TRES gres/gpu"), so
# squeue's tres-alloc here lacks gres/gpu=N.
NodeName=r1 NodeAddr=127.0.0.1 CPUs=8 RealMemory=4000 Gres=gpu:4
PartitionName=gpu Nodes=r1 Default=YES MaxTime=60 State=UP
PartitionName=debug Nodes=r1 MaxTime=10 State=UP
EOF
cat >"$dir/gres.conf" <<EOF
AutoDetect=off
NodeName=r1 Name=gpu File=$dir/dev/gpu[0-3]
EOF

slurmctld -i
slurmd -N r1
for _ in $(seq 60); do
  if [[ -s $dir/ctld.pid ]] && ! kill -0 "$(<"$dir/ctld.pid")" 2>/dev/null; then
    tail -5 "$dir/ctld.log" >&2 # slurmctld stopped: its last words
    exit 1
  fi
  timeout 5 sinfo -h -o %T 2>/dev/null | grep -q idle && break
  sleep 0.5
done
timeout 5 sinfo -h -o %T | grep -q idle || { tail -n 20 "$dir"/*.log >&2; exit 1; }

mkdir -p "$out"
record() { # record NAME ARGV...: the output of ARGV in OUTDIR/NAME
  local name=$1
  shift
  "$@" >"$out/$name"
  printf -- '- %s: `%s`\n' "$name" "$*" >>"$out/README.md.new"
}
failed=$(sbatch --parsable -J rec-fail -t 5 -o /dev/null --wrap 'exit 3')
done_=$(sbatch --parsable -J rec-done -t 5 -o /dev/null --wrap 'true')
for _ in $(seq 40); do # both ended: squeue keeps them MinJobAge (300 s)
  [[ $(squeue -h -j "$failed,$done_" -t all -o %T | grep -c -E 'FAILED|COMPLETED') == 2 ]] && break
  sleep 0.5
done
running=$(sbatch --parsable -J rec-run --gres=gpu:2 -t 5 -o /dev/null --wrap 'sleep 60')
pending=$(sbatch --parsable -J rec-wait --gres=gpu:4 -t 5 -o /dev/null --wrap 'sleep 1')
sleep 3
printf 'Real outputs of Slurm %s (%s), one node, recorded %s by\ndocker/slurm-cluster/record-outputs.sh:\n\n' \
  "$version" "$(slurmctld -V)" "$(date -u +%F)" >"$out/README.md.new"
echo "$running" >"$out/sbatch_parsable.txt"
printf -- '- sbatch_parsable.txt: `sbatch --parsable ...` (job %s failed with exit 3, %s completed, %s runs, %s waits)\n' \
  "$failed" "$done_" "$running" "$pending" >>"$out/README.md.new"
record scontrol_show_config.txt scontrol show config
record scontrol_show_partition.txt scontrol show partition --oneliner
record sinfo_nodes.txt sinfo -h -N -o '%N|%R|%G|%c|%T'
format=$("$REPO/.venv/bin/python" -c 'from hpclaunch.backends.slurm_text import SQUEUE_FORMAT; print(SQUEUE_FORMAT)')
record squeue_status.txt squeue --noheader --array "--jobs=$failed,$done_,$running,$pending" --states=all "--Format=$format"
queue=$("$REPO/.venv/bin/python" -c 'from hpclaunch.queue import QUEUE_FORMAT; print(QUEUE_FORMAT)')
record squeue_queue.txt squeue --noheader --states=PENDING,RUNNING "--format=$queue"
mv "$out/README.md.new" "$out/README.md"
echo "recorded Slurm $version into $out" >&2
