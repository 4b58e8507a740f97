#!/usr/bin/env bash
# gpurun --launcher srun against a real Slurm on this machine: munged, slurmctld and slurmd
# started here, as root, with a configuration written into the scratch directory (own ports, own
# munge socket, no cgroups). Checks the ranks' variables, that the first failing rank stops the
# step and is named, and that SIGINT without a terminal stops every rank and leaves the node free
# for the next step; and gpudoctor fleet through srun, with -H and inside an allocation (salloc).
# Skipped (77) where Slurm is not installed or cannot start here.
# usage: slurm_launch_test.sh GPURUN RANK_PROBE GPUDOCTOR
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
gpurun=$1
probe=$2
gpudoctor=$3

skip() {
    echo "SKIPPED: $*"
    exit 77
}
[ "$(id -u)" -eq 0 ] || skip "starting slurmd needs root"
for program in munged slurmctld slurmd srun sinfo; do
    command -v "$program" >/dev/null || PATH=$PATH:/usr/sbin command -v "$program" >/dev/null ||
        skip "$program is missing (Debian package slurm-wlm)"
done
export PATH=$PATH:/usr/sbin
[ -r /etc/munge/munge.key ] || skip "no /etc/munge/munge.key (Debian package munge makes it)"

daemons=()
# shellcheck disable=SC2317 # called by the EXIT trap
stop_daemons() {
    local pid
    for pid in "${daemons[@]}"; do
        kill "$pid" 2>/dev/null
    done
    for pid in "${daemons[@]}"; do
        wait "$pid" 2>/dev/null
    done
}
trap 'stop_daemons; rm -rf "$scratch"' EXIT

# Ports of our own, so that a Slurm already on this machine is not disturbed.
base=$((20000 + $$ % 20000))
host=$(hostname -s)
mkdir -p "$scratch/munge" "$scratch/state" "$scratch/spool" "$scratch/probe"
chmod 0700 "$scratch/munge"
install -m 0400 /etc/munge/munge.key "$scratch/munge/munge.key"
export SLURM_CONF=$scratch/slurm.conf
cat >"$SLURM_CONF" <<EOF
ClusterName=gpukit-test
SlurmctldHost=$host
SlurmctldPort=$base
SlurmdPort=$((base + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$scratch/munge/socket
CredType=cred/munge
StateSaveLocation=$scratch/state
SlurmdSpoolDir=$scratch/spool
SlurmctldPidFile=$scratch/slurmctld.pid
SlurmdPidFile=$scratch/slurmd.pid
SlurmctldLogFile=$scratch/slurmctld.log
SlurmdLogFile=$scratch/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
KillWait=2
$(slurmd -C | head -1) State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF

munged --force --socket="$scratch/munge/socket" --key-file="$scratch/munge/munge.key" \
    --pid-file="$scratch/munge/pid" --log-file="$scratch/munge/log" --seed-file="$scratch/munge/seed" ||
    skip "munged did not start: $(cat "$scratch/munge/log" 2>/dev/null)"
daemons+=("$(cat "$scratch/munge/pid")")
slurmctld -D -i >/dev/null 2>&1 &
daemons+=($!)
slurmd -D >/dev/null 2>&1 &
daemons+=($!)
for _ in $(seq 60); do
    state=$(sinfo -h -N -o %t 2>/dev/null)
    [ "$state" = idle ] && break
    sleep 0.5
done
[ "$state" = idle ] || skip "the Slurm node did not come up (state '$state'): $(tail -3 "$scratch/slurmd.log" \
    "$scratch/slurmctld.log" 2>/dev/null)"

export PROBE_DIR=$scratch/probe
run() { # run ARGS...: gpurun with srun, 2 CPU-only ranks; standard error in $err, status in $status
    "$gpurun" --launcher srun --cpu-only -np 2 --grace 2 "$@" >"$scratch/out" 2>"$scratch/err"
    status=$?
    err=$(cat "$scratch/err")
}

# Each rank knows its place, from srun's own variables.
run "$probe"
expect_eq "a job under srun succeeds" 0 "$status"
for rank in 0 1; do
    values=$(cat "$PROBE_DIR/rank-$rank.txt" 2>/dev/null)
    expect_contains "rank $rank: RANK" "RANK=$rank" "$values"
    expect_contains "rank $rank: LOCAL_RANK" "LOCAL_RANK=$rank" "$values"
    expect_contains "rank $rank: WORLD_SIZE" "WORLD_SIZE=2" "$values"
    expect_contains "rank $rank: srun's own" "SLURM_PROCID=$rank" "$values"
done

# srun found through /bin before /usr/bin (a merged /usr): run by its name, as a shell runs it.
if [ -L /bin ] && [ -x /bin/srun ]; then
    PATH=/usr/local/bin:/bin run "$probe"
    expect_eq "a job with /bin first in PATH succeeds" 0 "$status"
    [ "$status" = 0 ] || echo "$err" >&2
fi

# The first failing rank stops the step (srun --kill-on-bad-exit=1) and is named.
cat >"$scratch/fail.sh" <<'EOF'
#!/bin/sh
if [ "$RANK" = 1 ]; then echo 'bad input' >&2; exit 3; fi
echo $$ >"$PROBE_DIR/sleeper"
exec sleep 120
EOF
chmod +x "$scratch/fail.sh"
started=$SECONDS
run --json-summary "$scratch/summary.json" "$scratch/fail.sh"
expect_eq "a failed rank's status" 3 "$status"
expect_contains "the first failure is named" ", local rank 1) failed first: exit status 3 after " "$err"
expect_contains "with its stderr" "  | bad input" "$err"
expect_eq "the step stopped early" 1 "$((SECONDS - started < 30))"
expect_contains "the summary" '"rank": 1' "$(cat "$scratch/summary.json" 2>/dev/null)"
sleeper=$(cat "$PROBE_DIR/sleeper" 2>/dev/null)
sleep 1
[ -n "$sleeper" ] && kill -0 "$sleeper" 2>/dev/null && expect_eq "rank 0 was stopped" gone running

# SIGINT without a terminal: every rank goes, and the next step starts at once.
rm -f "$PROBE_DIR"/pid-*
PROBE_SLEEP=120 setsid "$gpurun" --launcher srun --cpu-only -np 2 --grace 2 "$probe" </dev/null \
    >"$scratch/int.out" 2>"$scratch/int.err" &
job=$!
for _ in $(seq 100); do
    [ -s "$PROBE_DIR/pid-0" ] && [ -s "$PROBE_DIR/pid-1" ] && break
    sleep 0.2
done
ranks="$(cat "$PROBE_DIR/pid-0" 2>/dev/null) $(cat "$PROBE_DIR/pid-1" 2>/dev/null)"
expect_eq "both ranks started" 2 "$(echo "$ranks" | wc -w)"
kill -INT "$job"
started=$SECONDS
wait "$job"
expect_eq "gpurun's status after SIGINT" 130 "$?"
expect_eq "gpurun ended within --grace and a little" 1 "$((SECONDS - started < 10))"
sleep 2
for pid in $ranks; do
    kill -0 "$pid" 2>/dev/null && expect_eq "rank pid $pid after SIGINT" gone running
done
started=$SECONDS
run "$probe"
expect_eq "the next step runs" 0 "$status"
expect_eq "the next step did not wait for the last to complete" 1 "$((SECONDS - started < 20))"

# gpudoctor fleet: the node's check runs as a task of srun (--label marks its lines), its answer
# comes back through srun's output; named by the host srun reached.
fleet_json() { # fleet_json ARGS...: the report's JSON in $report, status in $status
    report=$(PATH=$(dirname "$gpurun"):$PATH "$@" 2>"$scratch/fleet.err")
    status=$?
    [ "$status" -le 1 ] || cat "$scratch/fleet.err" >&2
    [ "$(node_field 'n["answer"]')" = snapshot ] || echo "fleet: $(node_field 'n["why"]')" >&2
}
node_field() { # node_field FIELD: the first node's FIELD in $report
    python3 -c 'import json, sys; n = json.loads(sys.stdin.read())["nodes"][0]; print(eval(sys.argv[1]))' "$1" \
        <<<"$report" 2>/dev/null
}
fleet_json "$gpudoctor" fleet -H "$host" --launcher srun --only limits,nccl-env --json
expect_eq "fleet through srun: a verdict" 1 "$((status <= 1))"
expect_eq "the node answered with its snapshot" snapshot "$(node_field 'n["answer"]')"
expect_eq "named as srun reached it" "$host" "$(node_field 'n["host"]')"
expect_eq "its facts came from the node" "$(hostname)" "$(node_field 'n["facts"]["host"]["hostname"]')"
# Inside an allocation the nodes are the allocation's, and srun starts the checks.
fleet_json salloc -N 1 --quiet "$gpudoctor" fleet --only limits --json
expect_eq "fleet inside salloc: a verdict" 1 "$((status <= 1))"
expect_eq "the allocation's node" "$host" "$(node_field 'n["host"]')"
expect_eq "it answered" snapshot "$(node_field 'n["answer"]')"
finish
