#!/usr/bin/env bash
# A Slurm prolog: `gpudoctor check --quick` before every job; an unfit node is drained with the
# first failing finding as the reason ("gpudoctor: gpus.ecc_uncorrected: gpu 1 (...): ...") and
# the job does not start on it.
#
#   slurm.conf:  Prolog=/usr/share/gpukit/slurm/gpudoctor-prolog.sh
#                (or call it from your own prolog; link it, do not copy it alone: it sources
#                gpudoctor-slurm-lib.sh from the directory it really lives in)
#   options:     GPUDOCTOR_ARGS and the others in gpudoctor-slurm-lib.sh, from slurmd's
#                environment or /etc/gpukit/gpudoctor-slurm.conf
#
# What it relies on in Slurm: slurmd runs the prolog as root (SlurmdUser) on every node of the
# job, before the job's first step (at allocation with PrologFlags=Alloc), with SLURMD_NODENAME
# and SLURM_JOB_ID set, and within PrologEpilogTimeout (gpudoctor's quick tier takes about a
# second; GPUDOCTOR_TIMEOUT caps it). A non-zero exit makes Slurm drain the node and requeue a
# batch job (held, unless SchedulerParameters=nohold_on_prolog_fail) or cancel an interactive one.
# Slurm's own drain may replace the reason set here with "Prolog error" on some versions, so the
# reason also goes to syslog (tag gpudoctor-slurm) and to standard error.
#
# Exit status: 0 the node is fit, or gpudoctor could not judge it (logged; GPUDOCTOR_ON_ERROR=
# drain drains it with "gpudoctor: could not run (exit N): ..." but the job still starts
# elsewhere only if this exits non-zero, so then this exits 1 too); 1 unfit, node drained.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=gpudoctor-slurm-lib.sh
. "$(dirname "$(readlink -f "$0")")/gpudoctor-slurm-lib.sh"

status=0
gpudoctor_slurm_check || status=$?
if [[ $status -eq 1 ]]; then
    exit 1
fi
if [[ $status -eq 2 && $GPUDOCTOR_ON_ERROR == drain ]]; then
    exit 1
fi
exit 0
