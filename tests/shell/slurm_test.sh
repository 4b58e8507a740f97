#!/usr/bin/env bash
# The Slurm prolog and health check of share/gpukit/slurm against a fake scontrol that records its
# arguments, with the real gpudoctor reading the fake NVML (a GPU with uncorrected ECC errors, or
# a healthy node), and fake gpudoctors that break or hang.
# usage: slurm_test.sh SOURCE_DIR GPUDOCTOR FAKE_NVML
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
slurm=$1/share/gpukit/slurm
gpudoctor=$2

mkdir -p "$scratch/bin" "$scratch/root/proc" "$scratch/etc"
cat >"$scratch/bin/scontrol" <<'SH'
#!/bin/sh
# Records each call as one line, arguments separated by "|"; "show node" prints $SCONTROL_SHOW.
for a in "$@"; do printf '%s|' "$a"; done >>"$SCONTROL_LOG"
echo >>"$SCONTROL_LOG"
if [ "$1" = show ] && [ -n "${SCONTROL_SHOW:-}" ]; then echo "$SCONTROL_SHOW"; fi
SH
cat >"$scratch/bin/gpudoctor-broken" <<'SH'
#!/bin/sh
echo "gpudoctor: internal error: boom" >&2
exit 3
SH
cat >"$scratch/bin/gpudoctor-hangs" <<'SH'
#!/bin/sh
exec sleep 30
SH
chmod +x "$scratch/bin/"*

gpu() { # gpu BUS UNCORRECTED: one GPU of the fake NVML fixture
    printf '{"bus_id": "00000000:%s:00.0", "name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-%s", "memory_total": 85899345920, "compute_mode": 0, "persistence": 1, "processes": 0, "ecc": {"enabled": 1, "corrected": 0, "uncorrected": %s, "uncorrected_volatile": %s}, "clock_event_reasons": 1, "pcie": {"gen": 4, "max_gen": 4, "width": 16, "max_width": 16}, "utilization": 0}' "$1" "$1" "$2" "$2"
}
echo "{\"driver\": \"550.54.15\", \"cuda_driver_version\": 12040, \"gpus\": [$(gpu 07 0), $(gpu 0f 0)]}" >"$scratch/healthy.json"
echo "{\"driver\": \"550.54.15\", \"cuda_driver_version\": 12040, \"gpus\": [$(gpu 07 0), $(gpu 0f 4)]}" >"$scratch/ecc.json"

export PATH="$scratch/bin:$PATH" SCONTROL_LOG="$scratch/scontrol.log" GPUKIT_NVML_LIBRARY=$3
export SLURMD_NODENAME=gpu-a01 GPUDOCTOR_SLURM_CONF=$scratch/etc/none.conf
unset GPUDOCTOR_ARGS GPUDOCTOR_ON_ERROR GPUDOCTOR_TIMEOUT GPUDOCTOR_REASON_MAX GPUDOCTOR_RESUME SCONTROL_SHOW
node_args="--only driver,gpus --expect-gpus 2 --sysroot $scratch/root"
ecc_reason="gpudoctor: gpus.ecc_uncorrected: gpu 1 (0000:0f:00.0): 4 uncorrected ECC errors since the last reset (4 since manufacture)"

# run SCRIPT FIXTURE [-u VAR...] [VAR=VALUE...]: runs the script; sets status, err and calls (scontrol's log).
run() {
    local script=$1 fixture=$2
    shift 2
    : >"$SCONTROL_LOG"
    status=0
    err=$(
        export FAKE_NVML_FIXTURE="$scratch/$fixture" GPUDOCTOR="$gpudoctor" GPUDOCTOR_ARGS="$node_args"
        env "$@" "$script" 2>&1 >/dev/null
    ) || status=$?
    calls=$(cat "$SCONTROL_LOG")
}

# Prolog: an unfit node is drained with the first failing finding, and the job does not start.
run "$slurm/gpudoctor-prolog.sh" ecc.json
expect_eq "prolog, ECC errors: exit" 1 "$status"
expect_eq "prolog, ECC errors: drained" "update|nodename=gpu-a01|state=drain|reason=$ecc_reason|" "$calls"
expect_contains "prolog, ECC errors: logged" "gpudoctor-slurm: draining gpu-a01: $ecc_reason" "$err"

run "$slurm/gpudoctor-prolog.sh" healthy.json
expect_eq "prolog, healthy: exit" 0 "$status"
expect_eq "prolog, healthy: scontrol not called" "" "$calls"
expect_contains "prolog, healthy: logged" "gpu-a01: 4 pass, 0 warn, 0 fail, 0 error, 0 skip: fit to train" "$err"

# Through a link (slurm.conf names /etc/slurm/prolog.sh): the library is found beside the target.
ln -s "$slurm/gpudoctor-prolog.sh" "$scratch/etc/prolog.sh"
run "$scratch/etc/prolog.sh" ecc.json
expect_eq "prolog through a link: exit" 1 "$status"

# Options from the config file (a bash array there), the node name from hostname -s.
printf 'GPUDOCTOR_ARGS=(--only gpus --expect-gpus 2 --sysroot %q)\n' "$scratch/root" >"$scratch/etc/slurm.conf"
run "$slurm/gpudoctor-prolog.sh" ecc.json -u GPUDOCTOR_ARGS -u SLURMD_NODENAME \
    GPUDOCTOR_SLURM_CONF="$scratch/etc/slurm.conf"
expect_eq "config file, no SLURMD_NODENAME: drained" \
    "update|nodename=$(hostname -s)|state=drain|reason=$ecc_reason|" "$calls"

# Root sources the config file: one that others could change is not read.
# config_read WHAT CONF [WHY]: the prolog with config CONF logs "not reading CONF: WHY", or with no
# WHY reads it without a complaint.
config_read() {
    local what=$1 conf=$2 why=${3:-}
    run "$slurm/gpudoctor-prolog.sh" ecc.json GPUDOCTOR_SLURM_CONF="$conf"
    if [[ -n $why ]]; then
        expect_contains "$what: not read" "gpudoctor-slurm: not reading $conf: $why" "$err"
    else
        expect_eq "$what: read" "" "$(grep 'not reading' <<<"$err")"
    fi
}
chmod 0664 "$scratch/etc/slurm.conf"
config_read "config writable by group" "$scratch/etc/slurm.conf" \
    "$scratch/etc/slurm.conf is writable by group or others (mode 664)"
chmod 0644 "$scratch/etc/slurm.conf"
chmod 0777 "$scratch/etc"
config_read "config in a directory others can write to" "$scratch/etc/slurm.conf" \
    "$scratch/etc is writable by group or others (mode 777)"
chmod 0755 "$scratch/etc"
config_read "config file safe again" "$scratch/etc/slurm.conf"

# Every directory above the file counts, and links are resolved first: a directory others can
# write to two levels up (where a flipping link could be swapped in between the check and the
# read), or a safe link to a file in such a directory, is not read.
mkdir -p "$scratch/open/deep/etc"
cp "$scratch/etc/slurm.conf" "$scratch/open/deep/etc/slurm.conf"
chmod 0777 "$scratch/open"
config_read "config below a directory others can write to" "$scratch/open/deep/etc/slurm.conf" \
    "$scratch/open is writable by group or others (mode 777)"
ln -s "$scratch/open/deep/etc/slurm.conf" "$scratch/etc/linked.conf"
config_read "a link into such a directory" "$scratch/etc/linked.conf" \
    "$scratch/open is writable by group or others (mode 777)"
chmod 1777 "$scratch/open"
config_read "a directory with the sticky bit above it (as /tmp)" "$scratch/etc/linked.conf"
chmod 0755 "$scratch/open"

# A FIFO in its place is not opened (the open would wait for a writer for ever).
mkfifo "$scratch/etc/fifo.conf"
chmod 0644 "$scratch/etc/fifo.conf"
config_read "a FIFO" "$scratch/etc/fifo.conf" "it is not a regular file"

# A long reason is trimmed.
run "$slurm/gpudoctor-prolog.sh" ecc.json GPUDOCTOR_REASON_MAX=40
expect_eq "trimmed reason" "update|nodename=gpu-a01|state=drain|reason=${ecc_reason:0:37}...|" "$calls"

# gpudoctor could not judge the node: never a made-up finding; by default no drain at all.
run "$slurm/gpudoctor-prolog.sh" healthy.json GPUDOCTOR="$scratch/bin/gpudoctor-broken"
expect_eq "gpudoctor broke (exit 3): prolog exit" 0 "$status"
expect_eq "gpudoctor broke (exit 3): not drained" "" "$calls"
expect_contains "gpudoctor broke (exit 3): logged" \
    "could not judge gpu-a01 (gpudoctor exit 3): gpudoctor: internal error: boom" "$err"
run "$slurm/gpudoctor-prolog.sh" healthy.json GPUDOCTOR="$scratch/bin/gpudoctor-broken" GPUDOCTOR_ON_ERROR=drain
expect_eq "ON_ERROR=drain: prolog exit" 1 "$status"
expect_eq "ON_ERROR=drain: drained as could not run" \
    "update|nodename=gpu-a01|state=drain|reason=gpudoctor: could not run (exit 3): gpudoctor: internal error: boom|" \
    "$calls"
run "$slurm/gpudoctor-prolog.sh" healthy.json GPUDOCTOR_ARGS="--only gpus --bogus"
expect_eq "bad options (exit 2): not drained" "" "$calls"
expect_eq "bad options (exit 2): prolog exit" 0 "$status"
expect_contains "bad options (exit 2): logged" "(gpudoctor exit 2): gpudoctor: check: unknown option --bogus" "$err"
run "$slurm/gpudoctor-prolog.sh" healthy.json GPUDOCTOR="$scratch/bin/gpudoctor-hangs" GPUDOCTOR_TIMEOUT=1
expect_eq "gpudoctor hangs: not drained" "" "$calls"
expect_contains "gpudoctor hangs: logged" "(gpudoctor exit 124): no answer in 1 s" "$err"
run "$slurm/gpudoctor-prolog.sh" healthy.json GPUDOCTOR="$scratch/bin/missing"
expect_contains "gpudoctor missing: logged" "(gpudoctor exit 127): cannot run $scratch/bin/missing" "$err"
expect_eq "gpudoctor missing: prolog exit" 0 "$status"

# Health check: drains like the prolog; lifts its own drain when the node passes again, and only
# its own.
run "$slurm/gpudoctor-healthcheck.sh" ecc.json
expect_eq "healthcheck, ECC errors: exit" 1 "$status"
expect_eq "healthcheck, ECC errors: drained" "update|nodename=gpu-a01|state=drain|reason=$ecc_reason|" "$calls"
run "$slurm/gpudoctor-healthcheck.sh" healthy.json \
    SCONTROL_SHOW="NodeName=gpu-a01 Arch=x86_64 State=IDLE+DRAIN ThreadsPerCore=2 Reason=$ecc_reason [root@2024-11-30T07:00:00]"
expect_eq "healthcheck, passes again: resumed" \
    "show|node|gpu-a01|-o|
update|nodename=gpu-a01|state=resume|" "$calls"
expect_eq "healthcheck, passes again: exit" 0 "$status"
run "$slurm/gpudoctor-healthcheck.sh" healthy.json \
    SCONTROL_SHOW="NodeName=gpu-a01 State=IDLE+DRAIN Reason=new DIMMs [admin@2024-11-30T07:00:00]"
expect_eq "healthcheck: another drain is left alone" "show|node|gpu-a01|-o|" "$calls"
run "$slurm/gpudoctor-healthcheck.sh" healthy.json GPUDOCTOR_RESUME=0 \
    SCONTROL_SHOW="NodeName=gpu-a01 State=IDLE+DRAIN Reason=$ecc_reason"
expect_eq "healthcheck, GPUDOCTOR_RESUME=0" "" "$calls"
run "$slurm/gpudoctor-healthcheck.sh" healthy.json GPUDOCTOR="$scratch/bin/gpudoctor-broken"
expect_eq "healthcheck, gpudoctor broke: exit" 2 "$status"
expect_eq "healthcheck, gpudoctor broke: nothing done" "" "$calls"

finish
