# shellcheck shell=bash
# Shared by gpudoctor-prolog.sh and gpudoctor-healthcheck.sh (sourced, not run): run
# `gpudoctor check --quick --fail-summary` and drain this node in Slurm when it fails.
#
# Settings, from the environment or from a config file (a bash fragment, read when it exists:
# $GPUDOCTOR_SLURM_CONF, default /etc/gpukit/gpudoctor-slurm.conf). The scripts run as root and
# source it, so it is read only when it and every directory above it (links resolved) belong to
# root (or to the user running the scripts) and are not writable by group or others (a directory
# with the sticky bit, as /tmp, excepted); it is read from the descriptor that was checked.
# Otherwise it is skipped, with a log line saying why.
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

# gpudoctor_slurm_unsafe PATH [STICKY_OK]: prints why a file or directory must not be trusted by
# root, or nothing: it must belong to root (or to the user running the scripts) and not be
# writable by group or others; with STICKY_OK a directory every user can write to is accepted when
# it has the sticky bit (as /tmp), since no one else can rename or remove what is in it.
gpudoctor_slurm_unsafe() {
    local owner mode
    if ! read -r owner mode < <(stat -L -c '%u %a' -- "$1" 2>/dev/null); then
        echo "cannot stat $1"
    elif [[ $owner != 0 && $owner != "$EUID" ]]; then
        echo "$1 belongs to uid $owner"
    elif (((8#$mode & 8#022) != 0)) && ! [[ -n ${2:-} && -d $1 && -k $1 ]]; then
        echo "$1 is writable by group or others (mode $mode)"
    fi
}

# gpudoctor_slurm_path_unsafe PATH: as gpudoctor_slurm_unsafe for PATH (links resolved) and for
# every directory from / down to it.
gpudoctor_slurm_path_unsafe() {
    local path why
    path=$(readlink -f -- "$1") || path=$1
    why=$(gpudoctor_slurm_unsafe "$path")
    while [[ -z $why && $path != / ]]; do
        path=$(dirname -- "$path")
        why=$(gpudoctor_slurm_unsafe "$path" sticky-ok)
    done
    echo "$why"
}

# gpudoctor_slurm_config: sources the config file when it is safe, from the descriptor that was
# checked. The path is resolved and checked up to /; only a regular file is opened (no other user
# could have swapped it for a FIFO that blocks the open, since no directory above it is theirs);
# the opened file must be the one the path names (same device and inode) and safe itself.
gpudoctor_slurm_config() {
    local conf=${GPUDOCTOR_SLURM_CONF:-/etc/gpukit/gpudoctor-slurm.conf} why real fd= opened named
    if [[ -e $conf ]]; then
        real=$(readlink -f -- "$conf")
        why=$(gpudoctor_slurm_path_unsafe "$real")
        [[ -z $why && ! -f $real ]] && why="it is not a regular file"
        if [[ -z $why ]] && ! exec {fd}<"$real"; then
            why="it cannot be opened"
            fd=
        fi
        if [[ -z $why ]]; then
            opened=$(stat -L -c '%d %i' -- "/dev/fd/$fd" 2>/dev/null)
            named=$(stat -c '%d %i' -- "$real" 2>/dev/null)
            why=$(gpudoctor_slurm_unsafe "/dev/fd/$fd")
            [[ -z $why && ( -z $opened || $opened != "$named" ) ]] && why="it changed while it was checked"
            why=${why//\/dev\/fd\/$fd/$real}
        fi
        if [[ -n $why ]]; then
            gpudoctor_slurm_log "not reading $conf: $why, and these scripts run it as $(id -un)"
        else
            # shellcheck source=/dev/null
            . "/dev/fd/$fd"
        fi
        if [[ -n $fd ]]; then
            exec {fd}<&-
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
