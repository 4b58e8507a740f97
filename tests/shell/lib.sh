# shellcheck shell=bash
# Shared by the shell tests: a scratch directory removed at exit, and checks that count failures.
set -uo pipefail

scratch=$(mktemp -d "${TMPDIR:-/tmp}/gpukit-shell-test-XXXXXX")
trap 'rm -rf "$scratch"' EXIT
failures=0

# expect_eq WHAT EXPECTED ACTUAL
expect_eq() {
    if [[ $2 != "$3" ]]; then
        printf 'FAIL: %s\n  expected: %q\n  actual:   %q\n' "$1" "$2" "$3" >&2
        failures=$((failures + 1))
    fi
}

# expect_contains WHAT NEEDLE HAYSTACK
expect_contains() {
    if [[ $3 != *"$2"* ]]; then
        printf 'FAIL: %s\n  expected to contain: %q\n  in: %s\n' "$1" "$2" "$3" >&2
        failures=$((failures + 1))
    fi
}

# expect_not_contains WHAT NEEDLE HAYSTACK
expect_not_contains() {
    if [[ $3 == *"$2"* ]]; then
        printf 'FAIL: %s\n  expected not to contain: %q\n  in: %s\n' "$1" "$2" "$3" >&2
        failures=$((failures + 1))
    fi
}

# finish: the exit status of the test.
finish() {
    if ((failures > 0)); then
        echo "$failures check(s) failed" >&2
        exit 1
    fi
    echo "all checks passed"
    exit 0
}
