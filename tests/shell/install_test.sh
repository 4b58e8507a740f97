#!/usr/bin/env bash
# `cmake --install` to a scratch prefix, then the installed programs run from there: their
# --version finds the installed data, the installed gpurun launches the installed gpurun-rank (the
# dry run's mpirun command shows it), nothing points back into the build tree.
# usage: install_test.sh BUILD_DIR
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
build=$(cd "$1" && pwd)
prefix=$scratch/opt/gpukit-1

unset DESTDIR
cmake --install "$build" --prefix "$prefix" >"$scratch/install.log" || {
    cat "$scratch/install.log" >&2
    exit 1
}
for f in bin/gpurun bin/gpurun-rank bin/gpudoctor share/gpukit/slurm/gpudoctor-prolog.sh \
    share/gpukit/slurm/gpudoctor-healthcheck.sh; do
    [[ -x $prefix/$f ]] || expect_eq "$f installed and executable" yes no
done
for f in share/gpukit/policy.toml share/gpukit/gpus.toml share/gpukit/models.toml \
    share/gpukit/topologies/dgx-a100-like.xml share/gpukit/examples/nccl-two-nodes.log \
    share/gpukit/slurm/gpudoctor-slurm-lib.sh share/man/man1/gpurun.1 share/man/man1/gpudoctor.1 \
    share/bash-completion/completions/gpurun share/bash-completion/completions/gpudoctor; do
    [[ -f $prefix/$f ]] || expect_eq "$f installed" yes no
done

export GPUKIT_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 GPUKIT_NCCL_LIBRARY=/nonexistent/libnccl.so.2
unset GPUKIT_RANK_HELPER
version=$("$prefix/bin/gpurun" --version)
expect_contains "gpurun --version" "gpurun (gpukit) " "$version"
expect_contains "gpurun --version: the installed data" "data: $prefix/share/gpukit" "$version"
expect_contains "gpurun --version: hwloc" "hwloc: API " "$version"
expect_contains "gpurun --version: no NVML here" "NVIDIA driver: not found (/nonexistent/libnvidia-ml.so.1)" \
    "$version"
version=$("$prefix/bin/gpudoctor" --version)
expect_contains "gpudoctor --version" "gpudoctor (gpukit) " "$version"
expect_contains "gpudoctor --version: the installed data" "data: $prefix/share/gpukit" "$version"
expect_contains "gpudoctor list" "allreduce " "$("$prefix/bin/gpudoctor" list)"
expect_contains "gpudoctor nccl-log on the installed example" "1 communicator" \
    "$("$prefix/bin/gpudoctor" nccl-log --no-color "$prefix/share/gpukit/examples/nccl-two-nodes.log")"

dry=$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$prefix/bin/gpurun" --dry-run -np 2 \
    --topology "$prefix/share/gpukit/topologies/dgx-a100-like.xml" true)
expect_contains "the installed gpurun runs the installed helper" " $prefix/bin/gpurun-rank " "$dry"
expect_not_contains "the dry run does not point into the build tree" "$build" "$dry"

# No run path into the build tree (CMake's build RPATH must not survive the install).
if command -v readelf >/dev/null; then
    for f in gpurun gpurun-rank gpudoctor; do
        expect_not_contains "$f has no RUNPATH into the build tree" "$build" "$(readelf -d "$prefix/bin/$f")"
    done
fi

# What the programs load at start: none loads libfmt.so (fmt's compiled part is built in), and
# gpurun and gpurun-rank carry their C++ runtime (but in a sanitizer build, whose runtime needs the
# shared one).
if command -v readelf >/dev/null; then
    for f in gpurun gpurun-rank gpudoctor; do
        expect_not_contains "$f does not load libfmt" "libfmt" "$(readelf -d "$prefix/bin/$f")"
    done
    if ! grep -qE '^GPUKIT_(SANITIZE|FUZZ):BOOL=ON' "$build/CMakeCache.txt"; then
        for f in gpurun gpurun-rank; do
            expect_not_contains "$f carries its C++ runtime" "libstdc++" "$(readelf -d "$prefix/bin/$f")"
        done
    fi
fi

# The completions load from the installed files.
expect_eq "completions register" "complete -F _gpudoctor gpudoctor|complete -F _gpurun gpurun" \
    "$(bash -c ". '$prefix/share/bash-completion/completions/gpurun' && complete -p gpudoctor gpurun" | tr '\n' '|' |
        sed 's/|$//')"
finish
