#!/usr/bin/env bash
# `cpack -G DEB` in the build directory: the package's fields (version from the CMake project,
# Depends from dpkg-shlibdeps with the hwloc runtime library, Open MPI recommended), its contents
# (programs, data, man pages, completions, Slurm scripts), and the programs unpacked with dpkg -x
# running from there. Skipped (77) without dpkg-deb and dpkg-shlibdeps (Debian's dpkg-dev).
# usage: package_test.sh BUILD_DIR
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
build=$(cd "$1" && pwd)
for tool in cpack dpkg-deb dpkg-shlibdeps; do
    if ! command -v "$tool" >/dev/null; then
        echo "SKIP: no $tool (apt-get install dpkg-dev)"
        exit 77
    fi
done

cpack -G DEB -B "$scratch/out" --config "$build/CPackConfig.cmake" >"$scratch/cpack.log" 2>&1 || {
    cat "$scratch/cpack.log" >&2
    exit 1
}
debs=("$scratch"/out/*.deb)
expect_eq "one package" 1 "${#debs[@]}"
deb=${debs[0]}

export GPUKIT_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 GPUKIT_NCCL_LIBRARY=/nonexistent/libnccl.so.2
version=$("$build/doctor/gpudoctor" --version | head -n 1)
version=${version##* }
field() { dpkg-deb -f "$deb" "$1"; }
expect_eq "Package" gpukit "$(field Package)"
expect_eq "Version from the CMake project" "$version" "$(field Version)"
expect_eq "Architecture" "$(dpkg --print-architecture)" "$(field Architecture)"
depends=$(field Depends)
for lib in libhwloc15 libc6 libstdc++6; do
    expect_contains "Depends has $lib (dpkg-shlibdeps)" "$lib" "$depends"
done
expect_contains "Recommends Open MPI" openmpi-bin "$(field Recommends)"
expect_contains "Maintainer" "@" "$(field Maintainer)"
# Homepage only when the build names one (GPUKIT_PACKAGE_HOMEPAGE); never a made-up address.
homepage=$(sed -n 's/^GPUKIT_PACKAGE_HOMEPAGE:STRING=//p' "$build/CMakeCache.txt")
expect_eq "Homepage is GPUKIT_PACKAGE_HOMEPAGE or absent" "$homepage" "$(field Homepage 2>/dev/null)"
expect_contains "Description" "gpurun" "$(field Description)"

contents=$(dpkg-deb -c "$deb")
for f in usr/bin/gpurun usr/bin/gpurun-rank usr/bin/gpudoctor usr/share/man/man1/gpurun.1 \
    usr/share/man/man1/gpudoctor.1 usr/share/bash-completion/completions/gpurun \
    usr/share/bash-completion/completions/gpudoctor usr/share/gpukit/policy.toml \
    usr/share/gpukit/topologies/dgx-a100-like.xml usr/share/gpukit/slurm/gpudoctor-prolog.sh; do
    expect_contains "package holds $f" " ./$f" "$contents"
done
expect_contains "the prolog is executable" "-rwxr-xr-x" "$(grep 'gpudoctor-prolog.sh$' <<<"$contents")"

# Unpacked into a scratch root (dpkg -x, no install): the programs run from there.
dpkg -x "$deb" "$scratch/root"
expect_contains "unpacked gpudoctor finds its data" "data: $scratch/root/usr/share/gpukit" \
    "$("$scratch/root/usr/bin/gpudoctor" --version)"
dry=$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$scratch/root/usr/bin/gpurun" --dry-run -np 2 \
    --topology "$scratch/root/usr/share/gpukit/topologies/dgx-a100-like.xml" true)
expect_contains "unpacked gpurun runs its own helper" " $scratch/root/usr/bin/gpurun-rank " "$dry"
finish
