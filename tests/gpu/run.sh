#!/usr/bin/env bash
# tests/gpu/run.sh: gpudoctor's deep tier on a real NVIDIA GPU, beside an independent reference.
#
# Usage:
#   tests/gpu/run.sh              On a machine with an NVIDIA GPU: build gpudoctor and the gpu
#                                 tests (or take them from GPUKIT_PREBUILT), run the `gpu`-labelled
#                                 tests, run `gpudoctor check --deep --json`, measure the same
#                                 copies with an independent reference (tests/gpu/copy_reference.cu
#                                 built with nvcc, else tests/gpu/copy_reference.py with PyTorch),
#                                 and print ours / reference per GPU and GPU pair
#                                 (tests/gpu/compare.py). Takes a few minutes, build included.
#   tests/gpu/run.sh --pack DIR   On a build machine (Debian 12; scripts/lib.sh installs what is
#                                 missing): build, then copy gpudoctor, the gpu test binary and
#                                 every non-glibc shared library they load into DIR/bin and
#                                 DIR/lib, plus DIR/env.sh, for a GPU machine that cannot build.
#   tests/gpu/run.sh --help
#
# Two ways to run it on a GPU machine:
#   tests/gpu/run.sh                                # builds here: needs the build dependencies
#   GPUKIT_PREBUILT=/path/DIR tests/gpu/run.sh      # DIR made by 'tests/gpu/run.sh --pack DIR'
#
# Environment:
#   GPUKIT_PREBUILT=DIR      use the binaries packed in DIR instead of building
#   OUT=DIR                  where the results go (default ./gpu-results)
#   GPUKIT_GPU_BUILD_DIR     the build folder (default build-gpu in the repository)
#   GPUKIT_GPU_RUN_BUDGET    seconds the whole run may take; each step's timeout is cut to what
#                            is left (default 540)
#   GPUKIT_CUDA_LIBRARY      the driver library (default libcuda.so.1)
#   GPUKIT_NCCL_LIBRARY      libnccl.so.2 for the all-reduce; when unset, PyTorch's bundled NCCL
#                            (the nvidia-nccl wheel) is used if there is one
#
# Results in the output folder: check-deep.json (gpudoctor check --deep --json), reference.json,
# compare.json and compare.md (the table, in Markdown for BENCHMARKS.md), run.log.
#
# Exit status: 0 every step ran (a ratio below the 0.95 target is printed, not an error), 1 a step
# failed, 2 usage error, 77 no NVIDIA GPU here (nothing to measure: skipped).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=${GPUKIT_GPU_BUILD_DIR:-"$ROOT/build-gpu"}
BUDGET=${GPUKIT_GPU_RUN_BUDGET:-540}
case "$BUDGET" in
'' | *[!0-9]*)
    echo "run.sh: GPUKIT_GPU_RUN_BUDGET=$BUDGET: expected whole seconds" >&2
    exit 2
    ;;
esac
# scripts/lib.sh: BUILD_PACKAGES, TEST_PACKAGES and install_missing (it also sets -euo pipefail).
# shellcheck source=SCRIPTDIR/../../scripts/lib.sh
source "$ROOT/scripts/lib.sh"

usage() {
    # The comment block above, without its leading "# ".
    sed -n '2,/^set -euo/{/^#/{s/^# \{0,1\}//;p}}' "${BASH_SOURCE[0]}"
}

header() {
    printf '\n== %s ==\n' "$*"
}

FAILED=()
step_failed() {
    FAILED+=("$1")
    echo "run.sh: FAILED: $1" >&2
}

# limit SECONDS: a step's timeout, cut to what is left of the run's budget (at least 5 s).
limit() {
    local left=$((BUDGET - SECONDS))
    if [ "$left" -lt 5 ]; then
        left=5
    fi
    if [ "$1" -lt "$left" ]; then
        echo "$1"
    else
        echo "$left"
    fi
}

# within SECONDS CMD...: runs CMD with a timeout; a timeout reads as exit status 124.
within() {
    local seconds
    seconds=$(limit "$1")
    shift
    timeout --kill-after=10 "$seconds" "$@"
}

# configure_and_build LOG SECONDS: the Release build of gpudoctor and the gpu tests in $BUILD,
# the build given SECONDS; output goes to LOG. Returns 1 when cmake could not configure (missing
# dependencies, most likely), 2 when the build failed.
configure_and_build() {
    local log=$1 build_seconds=$2
    echo "configuring $BUILD (Release); log: $log"
    if ! within 180 cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DGPUKIT_BUILD_TESTS=ON >"$log" 2>&1; then
        echo "run.sh: cmake could not configure (last lines of $log):" >&2
        tail -n 15 "$log" >&2
        return 1
    fi
    echo "building gpudoctor and gpukit_gpu_tests with $(nproc) jobs"
    if ! within "$build_seconds" cmake --build "$BUILD" -j"$(nproc)" --target gpudoctor gpukit_gpu_tests >>"$log" 2>&1; then
        echo "run.sh: the build failed (last lines of $log):" >&2
        tail -n 30 "$log" >&2
        return 2
    fi
}

# packed_env DIR: the `env` command line that runs a program with what DIR/env.sh sets (the
# packed libraries, hwloc plugins, and gpudoctor for the gpu tests), one word a line.
packed_env() {
    # shellcheck disable=SC2016 # $1 is the inner shell's argument
    bash -c '. "$1/env.sh" && printf "%s\n" env "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" \
        "HWLOC_PLUGINS_PATH=$HWLOC_PLUGINS_PATH" "GPUKIT_TEST_GPUDOCTOR=$GPUKIT_TEST_GPUDOCTOR"' env.sh "$1"
}

# newest_glibc FILE...: the newest GLIBC_x.y symbol version the files need.
newest_glibc() {
    objdump -T "$@" 2>/dev/null | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1
}

# ---------------------------------------------------------------------------------------------
# --pack DIR
pack() {
    local dir=$1
    local log
    BUDGET=${GPUKIT_GPU_RUN_BUDGET:-3600} # not on the GPU machine: a small build machine may take a while
    header "1/3 Build ($BUILD, Release)"
    install_missing "${BUILD_PACKAGES[@]}" "${TEST_PACKAGES[@]}"
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    log="$dir/build.log"
    configure_and_build "$log" 1800 || exit 1 # the dependencies were installed above

    header "2/3 Copy the binaries and the shared libraries they load into $dir"
    rm -rf "${dir:?}/bin" "${dir:?}/lib" "${dir:?}/env.sh" "${dir:?}/MANIFEST"
    mkdir -p "$dir/bin" "$dir/lib/hwloc" "$dir/lib/cxx"
    local binaries=("$BUILD/doctor/gpudoctor" "$BUILD/tests/gpukit_gpu_tests")
    local objects=("${binaries[@]}")
    local plugin=/usr/lib/x86_64-linux-gnu/hwloc/hwloc_pci.so
    if [ -f "$plugin" ]; then
        # libhwloc finds PCI devices (GPUs, NICs) through this plugin, loaded with dlopen.
        cp -L "$plugin" "$dir/lib/hwloc/"
        objects+=("$plugin")
    else
        echo "run.sh: note: no $plugin: hwloc on the GPU machine will see no PCI devices" >&2
    fi
    cp "${binaries[@]}" "$dir/bin/"
    strip "$dir/bin/"*
    local name path to absent=0
    # "libfmt.so.9 => /lib/x86_64-linux-gnu/libfmt.so.9 (0x...)": every library, glibc's own left out.
    # The C++ runtime goes to lib/cxx, used only where the GPU machine's own is older (env.sh).
    while read -r name path; do
        case "$name" in
        linux-vdso.so.* | linux-gate.so.* | ld-linux*.so.* | libc.so.* | libm.so.* | libmvec.so.* | \
            libpthread.so.* | libdl.so.* | librt.so.* | libutil.so.* | libresolv.so.* | libanl.so.*)
            continue
            ;;
        libstdc++.so.* | libgcc_s.so.*) to="lib/cxx/$name" ;;
        *) to="lib/$name" ;;
        esac
        if [ "$path" = "not" ] || [ ! -f "$path" ]; then
            echo "run.sh: ldd cannot find $name" >&2
            absent=1
            continue
        fi
        cp -L "$path" "$dir/$to"
        chmod u+w "$dir/$to"
        strip --strip-unneeded "$dir/$to"
        echo "  $to  (from $path)"
    done < <(ldd "${objects[@]}" | awk '$2 == "=>" { print $1, $3 }' | sort -u)
    if [ "$absent" -ne 0 ]; then
        echo "run.sh: the build's own binaries lack libraries here" >&2
        exit 1
    fi

    local glibcxx
    glibcxx=$(objdump -T "$dir"/bin/* "$dir"/lib/*.so* | grep -o 'GLIBCXX_[0-9][0-9.]*' | sort -uV | tail -n 1)
    sed "s/@GLIBCXX@/$glibcxx/" >"$dir/env.sh" <<'EOF'
# Source this (bash) to run the packed gpukit binaries:  . DIR/env.sh
# The packed C++ runtime (lib/cxx) is used only where this machine's libstdc++ lacks @GLIBCXX@,
# the newest version the binaries need: a newer system one also serves the libraries (libcuda,
# libnccl) loaded beside them, and the packed one needs the build machine's glibc.
GPUKIT_PACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
GPUKIT_PACK_LIBS="$GPUKIT_PACK_DIR/lib"
gpukit_system_cxx=$({ ldconfig -p || /sbin/ldconfig -p; } 2>/dev/null |
    awk '$1 == "libstdc++.so.6" && /x86-64/ { print $NF; exit }')
if [ -z "$gpukit_system_cxx" ] || ! grep -qaF "@GLIBCXX@" "$gpukit_system_cxx"; then
    GPUKIT_PACK_LIBS="$GPUKIT_PACK_LIBS:$GPUKIT_PACK_DIR/lib/cxx"
fi
unset gpukit_system_cxx
export LD_LIBRARY_PATH="$GPUKIT_PACK_LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export HWLOC_PLUGINS_PATH="$GPUKIT_PACK_DIR/lib/hwloc"
export GPUKIT_TEST_GPUDOCTOR="$GPUKIT_PACK_DIR/bin/gpudoctor"
export PATH="$GPUKIT_PACK_DIR/bin:$PATH"
EOF
    {
        echo "gpukit pack made by tests/gpu/run.sh --pack on $(hostname) at $(date -u +%Y-%m-%dT%H:%M:%SZ)"
        echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff \
            --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
        echo "os: $(. /etc/os-release && echo "$PRETTY_NAME")"
        echo "glibc needed: $(newest_glibc "$dir"/bin/* "$dir"/lib/*.so* "$dir"/lib/hwloc/*.so)"
        echo "glibc needed by lib/cxx: $(newest_glibc "$dir"/lib/cxx/*)"
        echo "C++ runtime needed: $glibcxx (lib/cxx has it, for a machine whose libstdc++ lacks it)"
    } >"$dir/MANIFEST"

    header "3/3 Check the pack"
    local bad
    # Both ways the pack may run: with this machine's C++ runtime (as env.sh picks it here) and with
    # the packed one.
    # shellcheck disable=SC2016 # $1 and $@ are the inner shell's arguments
    bad=$(bash -c '. "$1/env.sh"; shift; ldd "$@"' env.sh "$dir" "$dir"/bin/* "$dir"/lib/*.so* \
        "$dir"/lib/hwloc/*.so 2>&1 | grep 'not found' || true)
    bad+=$(LD_LIBRARY_PATH="$dir/lib:$dir/lib/cxx" ldd "$dir"/bin/* "$dir"/lib/*.so* "$dir"/lib/hwloc/*.so 2>&1 |
        grep 'not found' || true)
    if [ -n "$bad" ]; then
        echo "run.sh: libraries missing from the pack:" >&2
        echo "$bad" >&2
        exit 1
    fi
    local bytes
    bytes=$(du -sb "$dir/bin" "$dir/lib" "$dir/env.sh" "$dir/MANIFEST" | awk '{ n += $1 } END { print n }')
    cat "$dir/MANIFEST"
    echo "pack: $dir, $(awk -v n="$bytes" 'BEGIN { printf "%.1f", n / 1048576 }') MiB; ldd finds every library" \
        "under env.sh's LD_LIBRARY_PATH, and under $dir/lib:$dir/lib/cxx"
    if [ "$bytes" -gt $((64 << 20)) ]; then
        echo "run.sh: the pack is over 64 MiB" >&2
        exit 1
    fi
    echo "On the GPU machine, from the repository: GPUKIT_PREBUILT=$dir tests/gpu/run.sh"
}

# ---------------------------------------------------------------------------------------------
# The GPU run.

# nccl_from_pytorch: the libnccl.so.2 of PyTorch's nvidia-nccl wheel, or nothing.
nccl_from_pytorch() {
    within 60 python3 - <<'EOF' 2>/dev/null || true
import os, site, sys
candidates = []
try:
    import nvidia.nccl
    candidates += [os.path.join(p, "lib", "libnccl.so.2") for p in nvidia.nccl.__path__]
except Exception:
    pass
folders = []
try:
    folders += site.getsitepackages() + [site.getusersitepackages()]
except Exception:
    pass
folders += [p for p in sys.path if p.endswith("-packages")]
for folder in folders:
    candidates += [os.path.join(folder, "nvidia", "nccl", "lib", "libnccl.so.2"),
                   os.path.join(folder, "torch", "lib", "libnccl.so.2")]
for c in candidates:
    if os.path.isfile(c):
        print(c)
        break
EOF
}

# has_bandwidth_facts FILE: whether gpudoctor's JSON holds the bandwidth report ("measurements" or
# "facts" → "bandwidth"; compare.py knows where to look).
has_bandwidth_facts() {
    [ -s "$1" ] && python3 "$HERE/compare.py" --settings-of "$1" >/dev/null 2>&1
}

# copy_settings FILE: "--bytes N --copies N --samples N" from the bandwidth report, so that the
# reference copies what gpudoctor copied; the defaults when there is no report.
copy_settings() {
    python3 "$HERE/compare.py" --settings-of "$1" 2>/dev/null || echo "--bytes 268435456 --copies 8 --samples 5"
}

gpu_run() {
    header "1/6 Find an NVIDIA GPU"
    local gpus="" count=0
    if command -v nvidia-smi >/dev/null 2>&1 && gpus=$(timeout 30 nvidia-smi -L 2>/dev/null) &&
        grep -q '^GPU ' <<<"$gpus"; then
        echo "$gpus"
        count=$(grep -c '^GPU ' <<<"$gpus")
    elif compgen -G '/proc/driver/nvidia/gpus/*' >/dev/null; then
        count=$(find /proc/driver/nvidia/gpus -mindepth 1 -maxdepth 1 | wc -l)
        echo "$count GPU(s) in /proc/driver/nvidia/gpus (nvidia-smi did not list them):"
        ls /proc/driver/nvidia/gpus
    else
        echo "no NVIDIA GPU here: nothing to measure"
        exit 77
    fi
    if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
        count=$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c .)
        echo "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES: $count visible"
    fi

    OUT_DIR=${OUT:-"$PWD/gpu-results"}
    mkdir -p "$OUT_DIR"
    OUT_DIR=$(cd "$OUT_DIR" && pwd)
    exec > >(tee -a "$OUT_DIR/run.log") 2>&1
    echo "results: $OUT_DIR"

    header "2/6 Binaries"
    local gpudoctor="" gpu_tests="" have_binaries=1 pack_dir=""
    # A packed binary runs through `env` with the pack's libraries; a built one as it is.
    local run_bin=()
    if [ -n "${GPUKIT_PREBUILT:-}" ]; then
        pack_dir=$(cd "$GPUKIT_PREBUILT" && pwd)
        mapfile -t run_bin < <(packed_env "$pack_dir")
        gpudoctor="$pack_dir/bin/gpudoctor"
        gpu_tests="$pack_dir/bin/gpukit_gpu_tests"
        echo "prebuilt: $pack_dir"
        if [ -f "$pack_dir/MANIFEST" ]; then
            cat "$pack_dir/MANIFEST"
        fi
        if [ ! -x "$gpudoctor" ] || [ ! -x "$gpu_tests" ]; then
            echo "run.sh: $pack_dir lacks bin/gpudoctor or bin/gpukit_gpu_tests: make it with tests/gpu/run.sh --pack" >&2
            have_binaries=0
        else
            local missing
            missing=$("${run_bin[@]}" ldd "$gpudoctor" "$gpu_tests" 2>&1 | grep 'not found' || true)
            if [ -n "$missing" ]; then
                echo "run.sh: libraries missing for the packed binaries:" >&2
                echo "$missing" >&2
                have_binaries=0
            fi
            local needed have
            needed=$(sed -n 's/^glibc needed: //p' "$pack_dir/MANIFEST" 2>/dev/null || true)
            have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{ print $2 }' || true)
            if [ -n "$needed" ] && [ -n "$have" ] &&
                [ "$(printf '%s\n%s\n' "$needed" "$have" | sort -V | head -n 1)" != "$needed" ]; then
                echo "run.sh: warning: the pack needs glibc $needed, this machine has $have" >&2
            fi
        fi
    else
        local log="$OUT_DIR/build.log" rc=0
        configure_and_build "$log" 420 || rc=$?
        if [ "$rc" -eq 1 ]; then
            echo "run.sh: trying to install the build dependencies (scripts/lib.sh)"
            rc=0
            # shellcheck disable=SC2016 # $1 and $@ are the inner shell's arguments
            within 150 bash -c 'source "$1/scripts/lib.sh"; shift; install_missing "$@"' install "$ROOT" \
                "${BUILD_PACKAGES[@]}" "${TEST_PACKAGES[@]}" || rc=1
            if [ "$rc" -eq 0 ]; then
                configure_and_build "$log" 420 || rc=$?
            fi
            if [ "$rc" -eq 1 ]; then
                echo "run.sh: cannot build here: the build dependencies are missing and could not be installed" >&2
                echo "  (no network?). Make a pack on a Debian 12 machine that builds:  tests/gpu/run.sh --pack DIR" >&2
                echo "  then here:  GPUKIT_PREBUILT=DIR tests/gpu/run.sh" >&2
            fi
        fi
        if [ "$rc" -ne 0 ]; then
            have_binaries=0
        fi
        gpudoctor="$BUILD/doctor/gpudoctor"
        gpu_tests="$BUILD/tests/gpukit_gpu_tests"
    fi
    if [ "$have_binaries" -eq 1 ]; then
        echo "gpudoctor: $gpudoctor"
        echo "gpu tests: $gpu_tests"
    else
        step_failed "binaries (build or GPUKIT_PREBUILT)"
    fi

    header "3/6 The gpu-labelled tests"
    local skipped=0
    if [ -z "${GPUKIT_NCCL_LIBRARY:-}" ]; then
        local nccl
        nccl=$(nccl_from_pytorch)
        if [ -n "$nccl" ]; then
            export GPUKIT_NCCL_LIBRARY="$nccl"
            echo "NCCL: PyTorch's $nccl"
        elif ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2 '; then
            echo "NCCL: libnccl.so.2 from the loader's path"
        else
            echo "NCCL: none found (no libnccl.so.2, no nvidia-nccl wheel): the all-reduce test will skip"
        fi
    else
        echo "NCCL: GPUKIT_NCCL_LIBRARY=$GPUKIT_NCCL_LIBRARY"
    fi
    if [ "$have_binaries" -eq 0 ]; then
        echo "skipped: no binaries"
    elif [ -n "$pack_dir" ]; then
        local rc=0
        within 300 "${run_bin[@]}" "$gpu_tests" --gtest_color=no 2>&1 | tee "$OUT_DIR/gpu-tests.log" || rc=$?
        [ "$rc" -eq 0 ] || step_failed "gpu tests (exit $rc)"
        skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9][0-9]*\) tests\{0,1\}, listed below:$/\1/p' "$OUT_DIR/gpu-tests.log")
    else
        local rc=0
        within 300 ctest --test-dir "$BUILD" -L gpu --output-on-failure 2>&1 | tee "$OUT_DIR/gpu-tests.log" || rc=$?
        [ "$rc" -eq 0 ] || step_failed "gpu tests (ctest exit $rc)"
        skipped=$(grep -c '(Skipped)$' "$OUT_DIR/gpu-tests.log" || true)
        if [ "${skipped:-0}" -gt 0 ]; then # ctest shows no output of a skipped test: its log has it
            grep -h -A1 ': Skipped$' "$BUILD/Testing/Temporary/LastTest.log" 2>/dev/null || true
        fi
    fi
    if [ "${skipped:-0}" -gt 0 ]; then
        echo "note: $skipped gpu test(s) skipped on this GPU machine; the reasons are above"
    fi

    header "4/6 gpudoctor check --deep --json"
    local ours="$OUT_DIR/check-deep.json"
    if [ "$have_binaries" -eq 1 ]; then
        local rc=0
        within 300 "${run_bin[@]}" "$gpudoctor" check --deep --json >"$ours" 2>"$OUT_DIR/check-deep.stderr" || rc=$?
        echo "gpudoctor check --deep --json exited $rc (0 fit, 1 a check failed, 2 usage, 3 could not run): $ours"
        if [ "$rc" -gt 1 ]; then
            tail -n 20 "$OUT_DIR/check-deep.stderr" >&2
            step_failed "gpudoctor check --deep (exit $rc)"
        fi
        if ! has_bandwidth_facts "$ours"; then
            # The report does not embed the measurements: take them from a snapshot of the probe.
            ours="$OUT_DIR/snapshot-bandwidth.json"
            echo "no bandwidth measurements in the report; taking them from gpudoctor snapshot --deep --only bandwidth"
            rc=0
            within 300 "${run_bin[@]}" "$gpudoctor" snapshot --deep --only bandwidth >"$ours" 2>"$OUT_DIR/snapshot.stderr" ||
                rc=$?
            if [ "$rc" -eq 2 ]; then # a snapshot without --deep: --only names the deep probe itself
                rc=0
                within 300 "${run_bin[@]}" "$gpudoctor" snapshot --only bandwidth >"$ours" 2>"$OUT_DIR/snapshot.stderr" ||
                    rc=$?
            fi
            if [ "$rc" -ne 0 ] || ! has_bandwidth_facts "$ours"; then
                tail -n 20 "$OUT_DIR/snapshot.stderr" >&2
                step_failed "gpudoctor snapshot --only bandwidth (exit $rc, or no bandwidth facts)"
            fi
        fi
    else
        echo "skipped: no binaries"
    fi

    header "5/6 Independent reference"
    local reference="$OUT_DIR/reference.json" made=0 nvcc="" settings
    read -r -a settings <<<"$(copy_settings "$ours")"
    echo "copy settings: ${settings[*]}"
    nvcc=$(command -v nvcc || true)
    if [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ]; then
        nvcc=/usr/local/cuda/bin/nvcc
    fi
    if [ -n "$nvcc" ]; then
        echo "nvcc: $nvcc ($("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'))"
        if within 120 "$nvcc" -O2 -std=c++17 -o "$OUT_DIR/copy_reference" "$HERE/copy_reference.cu"; then
            if within 180 "$OUT_DIR/copy_reference" "${settings[@]}" >"$reference"; then
                made=1
            else
                echo "run.sh: copy_reference (nvcc) failed; trying PyTorch" >&2
            fi
        else
            echo "run.sh: nvcc could not compile copy_reference.cu; trying PyTorch" >&2
        fi
    else
        echo "nvcc: not in PATH nor /usr/local/cuda/bin"
    fi
    if [ "$made" -eq 0 ]; then
        if within 120 python3 -c 'import torch' 2>/dev/null; then
            if within 240 python3 "$HERE/copy_reference.py" "${settings[@]}" >"$reference"; then
                made=1
            else
                step_failed "reference (copy_reference.py)"
            fi
        else
            echo "run.sh: no reference: nvcc is missing (or failed) and PyTorch is not importable" >&2
            step_failed "reference (nvcc missing or failed, PyTorch not importable)"
        fi
    fi
    if [ "$made" -eq 1 ]; then
        echo "reference: $reference"
    fi

    header "6/6 Ours beside the reference"
    local nccl_args=()
    if command -v all_reduce_perf >/dev/null 2>&1 && [ "$count" -ge 2 ]; then
        echo "nccl-tests: all_reduce_perf -b 1G -e 1G -g $count"
        local nccl_dir=""
        if [ -n "${GPUKIT_NCCL_LIBRARY:-}" ]; then
            nccl_dir=$(dirname "$GPUKIT_NCCL_LIBRARY")
        fi
        if within 180 env LD_LIBRARY_PATH="$nccl_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" all_reduce_perf \
            -b 1G -e 1G -g "$count" >"$OUT_DIR/all_reduce_perf.txt" 2>&1; then
            nccl_args=(--nccl-tests "$OUT_DIR/all_reduce_perf.txt")
        else
            tail -n 10 "$OUT_DIR/all_reduce_perf.txt" >&2
            step_failed "nccl-tests all_reduce_perf"
        fi
    elif [ "$count" -lt 2 ]; then
        echo "nccl-tests: not run (one GPU: an all-reduce moves nothing over a bus)"
    else
        echo "nccl-tests: all_reduce_perf is not on PATH: the all-reduce has no reference"
    fi
    if [ "$made" -eq 1 ] && has_bandwidth_facts "$ours"; then
        local driver cuda
        driver=$(timeout 30 nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1 || true)
        cuda=$(timeout 30 nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -n 1 || true)
        if [ -n "$cuda" ]; then
            cuda="$cuda (driver)"
        fi
        if [ -n "$nvcc" ] && grep -q nvcc "$reference"; then
            cuda="${cuda:+$cuda, }nvcc $("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
        fi
        local rc=0
        within 60 python3 "$HERE/compare.py" --ours "$ours" --reference "$reference" "${nccl_args[@]}" \
            --out-dir "$OUT_DIR" --driver "$driver" --cuda "$cuda" || rc=$?
        if [ "$rc" -eq 0 ]; then
            echo "table: $OUT_DIR/compare.md (Markdown) and $OUT_DIR/compare.json"
        else
            step_failed "compare.py (exit $rc)"
        fi
    else
        echo "skipped: needs both gpudoctor's bandwidth facts and the reference"
        step_failed "comparison (inputs missing)"
    fi

    echo
    if [ "${#FAILED[@]}" -eq 0 ]; then
        echo "run.sh: every step ran, in ${SECONDS} s; results in $OUT_DIR"
        exit 0
    fi
    echo "run.sh: ${#FAILED[@]} step(s) failed, in ${SECONDS} s: ${FAILED[*]}; results in $OUT_DIR" >&2
    exit 1
}

case "${1:-}" in
-h | --help)
    usage
    exit 0
    ;;
--pack)
    if [ $# -ne 2 ] || [ -z "$2" ]; then
        echo "run.sh: --pack needs one folder: tests/gpu/run.sh --pack DIR" >&2
        exit 2
    fi
    pack "$2"
    ;;
"")
    gpu_run
    ;;
*)
    echo "run.sh: unknown argument '$1'; see tests/gpu/run.sh --help" >&2
    exit 2
    ;;
esac
