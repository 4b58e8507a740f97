# shellcheck shell=bash
# Shared by gpudoctor-prolog.sh and gpudoctor-healthcheck.sh (sourced, not run): run
# `gpudoctor check --quick --fail-summary` and drain this node in Slurm when it fails.
#
# Settings, from the environment or from a config file (a bash fragment, read when it exists:
# $GPUDOCTOR_SLURM_CONF, default /etc/gpukit/gpudoctor-slurm.conf). The scripts run as root and
# source it, so it is read only when it belongs to root (or to the user running the scripts) and
# neither it nor its directory is writable by group or others; otherwise it is skipped, with a
# log line saying why.
#   GPUDOCTOR_ARGS      more options for `gpudoctor check`, e.g. "--expect-gpus 8 --policy
#                       /etc/gpukit/policy.toml" (split at spaces; in the config file it may also
#                       be a bash array: GPUDOCTOR_ARGS=(--expect-gpus 8)).
#   GPUDOCTOR           the gpudoctor program; default: the one installed with these scripts
#                       (<prefix>/bin/gpudoctor for <prefix>/share/gpukit/slurm), else PATH.
#   GPUDOCTOR_TIMEOUT   seconds the whole check may take (default 45, under the 60 s after
#                       which slurmd kills a health check); then it counts as "could not run".
#   GPUDOCTOR_ON_ERROR  what to do when gpudoctor could not judge the node (exit 2: bad options or
#                       policy, 3: gpudoctor broke, a timeout, gpudoctor missing): "ignore"
#                       (default: log it and leave the node alone; a typo in GPUDOCTOR_ARGS must
#                       not drain the whole cluster) or "drain" (with the reason "gpudoctor: could
#                       not run (exit N): ...", never a made-up finding).
#   GPUDOCTOR_REASON_MAX  longest drain reason, in characters (default 200).
#   SCONTROL            the scontrol program (default: scontrol on PATH).

gpudoctor_slurm_here=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)

# gpudoctor_slurm_unsafe PATH: prints why a file sourced by root must not be trusted, or nothing.
gpudoctor_slurm_unsafe() {
    local owner mode
    if ! read -r owner mode < <(stat -L -c '%u %a' -- "$1" 2>/dev/null); then
        echo "cannot stat $1"
    elif [[ $owner != 0 && $owner != "$EUID" ]]; then
        echo "$1 belongs to uid $owner"
    elif (((8#$mode & 8#022) != 0)); then
        echo "$1 is writable by group or others (mode $mode)"
    fi
}

gpudoctor_slurm_config() {
    local conf=${GPUDOCTOR_SLURM_CONF:-/etc/gpukit/gpudoctor-slurm.conf} why
    if [[ -e $conf ]]; then
        why=$(gpudoctor_slurm_unsafe "$conf")
        [[ -n $why ]] || why=$(gpudoctor_slurm_unsafe "$(dirname -- "$conf")")
        if [[ -n $why ]]; then
            gpudoctor_slurm_log "not reading $conf: $why, and these scripts run it as $(id -un)"
        elif [[ -r $conf ]]; then
            # shellcheck source=/dev/null
            . "$conf"
        fi
    fi
    if [[ -z ${GPUDOCTOR:-} ]]; then
        GPUDOCTOR=$gpudoctor_slurm_here/../../../bin/gpudoctor
        [[ -x $GPUDOCTOR ]] || GPUDOCTOR=$(command -v gpudoctor || echo gpudoctor)
    fi
    GPUDOCTOR_TIMEOUT=${GPUDOCTOR_TIMEOUT:-45}
    GPUDOCTOR_ON_ERROR=${GPUDOCTOR_ON_ERROR:-ignore}
    GPUDOCTOR_REASON_MAX=${GPUDOCTOR_REASON_MAX:-200}
    SCONTROL=${SCONTROL:-scontrol}
}

# The node name as Slurm knows it.
gpudoctor_slurm_node() {
    if [[ -n ${SLURMD_NODENAME:-} ]]; then
        echo "$SLURMD_NODENAME"
    else
        hostname -s
    fi
}

# gpudoctor_slurm_log MESSAGE: to standard error and, where there is one, syslog (slurmd does not
# keep what a prolog or health check prints).
gpudoctor_slurm_log() {
    echo "gpudoctor-slurm: $*" >&2
    if command -v logger >/dev/null 2>&1; then
        logger -t gpudoctor-slurm -- "$*" 2>/dev/null || true
    fi
}

# gpudoctor_slurm_drain REASON: drain this node with REASON, trimmed to GPUDOCTOR_REASON_MAX.
gpudoctor_slurm_drain() {
    local node reason=$1
    node=$(gpudoctor_slurm_node)
    reason=${reason//$'\n'/ }
    if ((${#reason} > GPUDOCTOR_REASON_MAX)); then
        reason="${reason:0:GPUDOCTOR_REASON_MAX-3}..."
    fi
    gpudoctor_slurm_log "draining $node: $reason"
    if ! "$SCONTROL" update "nodename=$node" state=drain "reason=$reason"; then
        gpudoctor_slurm_log "scontrol could not drain $node"
    fi
}

# gpudoctor_slurm_check: runs the check; drains the node when it fails. Returns 0 when the node is
# fit, 1 when it was found unfit (and drained), 2 when gpudoctor could not judge it.
gpudoctor_slurm_check() {
    gpudoctor_slurm_config
    local args=()
    if declare -p GPUDOCTOR_ARGS 2>/dev/null | grep -q '^declare -a'; then
        args=("${GPUDOCTOR_ARGS[@]}")
    elif [[ -n ${GPUDOCTOR_ARGS:-} ]]; then
        read -ra args <<<"$GPUDOCTOR_ARGS"
    fi
    local out err status=0 errfile
    errfile=$(mktemp) || return 2
    local run=("$GPUDOCTOR" check --quick --no-color --fail-summary "${args[@]}")
    if command -v timeout >/dev/null 2>&1; then
        run=(timeout --kill-after=5 "$GPUDOCTOR_TIMEOUT" "${run[@]}")
    fi
    out=$("${run[@]}" 2>"$errfile") || status=$?
    err=$(head -n 1 "$errfile")
    rm -f "$errfile"
    case $status in
    0)
        gpudoctor_slurm_log "$(gpudoctor_slurm_node): ${out:-fit to train}"
        return 0
        ;;
    1)
        gpudoctor_slurm_drain "gpudoctor: ${out:-a check failed}"
        return 1
        ;;
    esac
    local why
    case $status in
    124 | 137) why="no answer in ${GPUDOCTOR_TIMEOUT} s" ;;
    126 | 127) why="cannot run $GPUDOCTOR" ;;
    *) why=${err:-no message} ;;
    esac
    gpudoctor_slurm_log "could not judge $(gpudoctor_slurm_node) (gpudoctor exit $status): $why"
    if [[ $GPUDOCTOR_ON_ERROR == drain ]]; then
        gpudoctor_slurm_drain "gpudoctor: could not run (exit $status): $why"
    fi
    return 2
}
