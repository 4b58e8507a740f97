#!/usr/bin/env bash
# A Slurm health check: `gpudoctor check --quick` every HealthCheckInterval; an unfit node is
# drained with the first failing finding as the reason ("gpudoctor: CODE: SUBJECT: MESSAGE").
# When the node passes again, a drain this script set (its reason starts with "gpudoctor:") is
# lifted (state=resume), as LBNL NHC does with its own; drains set by people or other tools are
# left alone. GPUDOCTOR_RESUME=0 turns that off.
#
#   slurm.conf:  HealthCheckProgram=/usr/share/gpukit/slurm/gpudoctor-healthcheck.sh
#                HealthCheckInterval=300
#                HealthCheckNodeState=ANY  (or IDLE: GPUs in use by a job are reported as busy,
#                                           a warning, which drains only with --strict)
#   options:     GPUDOCTOR_ARGS and the others in gpudoctor-slurm-lib.sh, from slurmd's
#                environment or /etc/gpukit/gpudoctor-slurm.conf
#
# What it relies on in Slurm: slurmd runs HealthCheckProgram as root on each node, at start and
# then every HealthCheckInterval seconds, and ignores its exit status and output: the program
# itself must drain the node with scontrol, which is what this does. It is killed if it runs for
# more than 60 seconds, hence GPUDOCTOR_TIMEOUT (default 45: with timeout's 5 s to kill, the
# script still ends in time to log and drain).
#
# Exit status: 0 fit, 1 unfit (drained), 2 gpudoctor could not judge the node (logged; drained
# only with GPUDOCTOR_ON_ERROR=drain). Slurm does not look at it; it is for people and tests.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=gpudoctor-slurm-lib.sh
. "$(dirname "$(readlink -f "$0")")/gpudoctor-slurm-lib.sh"

status=0
gpudoctor_slurm_check || status=$?
if [[ $status -eq 0 && ${GPUDOCTOR_RESUME:-1} == 1 ]]; then
    node=$(gpudoctor_slurm_node)
    info=$("$SCONTROL" show node "$node" -o 2>/dev/null || true)
    if [[ $info =~ State=[A-Z+_]*DRAIN && $info == *"Reason=gpudoctor:"* ]]; then
        gpudoctor_slurm_log "resuming $node: gpudoctor passes again"
        "$SCONTROL" update "nodename=$node" state=resume || gpudoctor_slurm_log "scontrol could not resume $node"
    fi
fi
exit "$status"
