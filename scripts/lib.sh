# Shared by scripts/demo and scripts/test: install what is missing, then configure and build.
set -euo pipefail

GPUKIT_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-"$GPUKIT_ROOT/build"}

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        echo "gpukit: need root (or sudo) to install: $*" >&2
        exit 1
    fi
}

# install_missing PACKAGE...: apt-get installs only the Debian packages not installed yet.
install_missing() {
    local missing=()
    local p
    for p in "$@"; do
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
            missing+=("$p")
        fi
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "gpukit: installing ${missing[*]}"
        as_root apt-get update -qq
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
    fi
    keep_openmpi_default
}

# With MPICH installed beside Open MPI, `mpirun` and `mpicc` stay Open MPI's (Debian ranks Open MPI
# first, 50 to 40; this holds it where an earlier choice or install order says otherwise).
keep_openmpi_default() {
    local name target
    for name in mpirun:/usr/bin/mpirun.openmpi mpi:/usr/bin/mpicc.openmpi; do
        target=${name#*:}
        name=${name%%:*}
        if [ -e "$target" ] && [ "$(readlink -f "/etc/alternatives/$name")" != "$(readlink -f "$target")" ]; then
            as_root update-alternatives --set "$name" "$target"
        fi
    done
}

BUILD_PACKAGES=(g++ cmake ninja-build pkg-config libhwloc-dev libcli11-dev nlohmann-json3-dev libfmt-dev libtomlplusplus-dev zlib1g-dev libsqlite3-dev openmpi-bin)
# mpich, slurm-wlm and python3-torch: the integration tests run gpurun under the real MPICH Hydra
# and a real Slurm (daemons the test starts) too, and a real PyTorch job under each launcher;
# slurm-wlm brings slurm-client, whose `scontrol show hostnames` the host-list test compares with.
TEST_PACKAGES=(libgtest-dev clang-format dpkg-dev mpich slurm-wlm python3-torch)

# RelWithDebInfo with line tables only (-g1): enough for a backtrace, and a third less build time
# than full debug information. Ninja for a new build folder: it compiles a library's files while
# the libraries below it still link, where make waits for each whole library.
build() {
    local generator=()
    if [ ! -e "$BUILD_DIR/CMakeCache.txt" ]; then
        generator=(-G Ninja)
    fi
    cmake -S "$GPUKIT_ROOT" -B "$BUILD_DIR" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" "$@" >/dev/null
    cmake --build "$BUILD_DIR" -j"$(nproc)"
}
