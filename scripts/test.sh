#!/usr/bin/env bash
# The nish-driver test suite, in two tiers; CI runs all of it (.ci/run calls this with no
# argument).
#
#   scripts/test.sh          everything: installs what is missing (Debian packages, the Python
#                            venv with the official MCP SDK), checks formatting and lints, builds
#                            every binary, runs the fast tier, then the desktop tier
#   scripts/test.sh --quick  the fast tier only, with formatting and lints first; installs
#                            nothing and starts no desktop (it needs the Python venv that
#                            `scripts/ensure-deps.sh --minimal` makes, or NISH_PYTHON)
#
# The fast tier is `cargo test` on the workspace's default members: unit and property tests,
# the mock contract and hand-back tests, the mock end-to-end session, the daemon, the sandbox
# and the shim; no X server, Wayland compositor or browser. The desktop tier is the test-only
# crates outside the default members: the agents on private headless desktops, and the
# end-to-end sessions driven by the official MCP Python client. Last, the whole workspace is
# built in release, and the release daemon is checked for test doubles.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

usage() {
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
}

quick=0
for arg in "$@"; do
    case "$arg" in
        --quick) quick=1 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "test.sh: unknown argument: $arg" >&2; usage >&2; exit 2 ;;
    esac
done

# The desktop tier: every workspace member outside the default members (a test of the fast
# tier, tests/tiers, keeps this list equal to Cargo.toml's).
desktop_tier=(nish-tests nish-reader-tests nish-input-tests nish-indicator-tests)

step() { printf '\n==> %s\n' "$*"; }

threads="${NISH_TEST_THREADS:-2}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
# Tests start private desktops; keep them from finding a desktop of the machine's own.
unset DISPLAY WAYLAND_DISPLAY DBUS_SESSION_BUS_ADDRESS AT_SPI_BUS_ADDRESS NOTIFY_SOCKET || true

if [ "$quick" -eq 1 ]; then
    # Nothing is installed: say at once what is missing instead of failing tests later.
    export NISH_PYTHON="${NISH_PYTHON:-$repo/.cache/venv/bin/python}"
    if [ ! -x "$NISH_PYTHON" ]; then
        echo "test.sh: no Python with the MCP SDK at $NISH_PYTHON (the shim's and the mock" \
            "session's tests need it): run scripts/ensure-deps.sh --minimal once, or set" \
            "NISH_PYTHON" >&2
        exit 1
    fi
    command -v cargo >/dev/null 2>&1 || { echo "test.sh: cargo not found" >&2; exit 1; }
else
    step "dependencies"
    scripts/ensure-deps.sh
    export NISH_PYTHON="$repo/.cache/venv/bin/python"
fi

step "format"
cargo fmt --all -- --check

step "lints"
cargo clippy --workspace --all-targets -- -D warnings

if [ "$quick" -eq 0 ]; then
    step "build"
    cargo build --workspace --bins --examples
fi

step "fast tier: cargo test on the default members"
cargo test -- --test-threads="$threads"

if [ "$quick" -eq 1 ]; then
    step "fast tier passed (the desktop tier was not run: scripts/test.sh runs both)"
    exit 0
fi

step "desktop tier: ${desktop_tier[*]}"
packages=()
for p in "${desktop_tier[@]}"; do
    packages+=(-p "$p")
done
cargo test "${packages[@]}" -- --test-threads="$threads"

# What a packager builds: the whole workspace in release, with every test-only crate beside the
# daemon (cargo unifies features over what one build selects). Its nish-driver must hold no
# test double either.
step "release build: cargo build --workspace --release --bins"
cargo build --workspace --release --bins
NISH_DAEMON_BIN="$repo/target/release/nish-driver" \
    cargo test -p nish-driver --test daemon -- --exact the_daemon_has_no_test_doubles

step "all tests passed"
