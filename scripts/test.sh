#!/usr/bin/env bash
# The whole nish-driver test suite, as CI runs it (.ci/run calls this).
#
# Installs what is missing (Debian packages, the Python venv with the official MCP SDK), checks
# formatting and lints, builds every binary, and runs every test: unit, property, contract,
# hand-back, the daemon, the sandbox, the agents on a private headless desktop, and the
# end-to-end sessions driven by the official MCP Python client.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

step() { printf '\n==> %s\n' "$*"; }

step "dependencies"
scripts/ensure-deps.sh

export NISH_PYTHON="$repo/.cache/venv/bin/python"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
# Tests start private desktops; keep them from finding a desktop of the machine's own.
unset DISPLAY WAYLAND_DISPLAY DBUS_SESSION_BUS_ADDRESS AT_SPI_BUS_ADDRESS NOTIFY_SOCKET || true

step "format"
cargo fmt --all -- --check

step "lints"
cargo clippy --workspace --all-targets -- -D warnings

step "the daemon as README installs it has no mock backend and no test switches"
# Built alone, nish-broker has no `mock` feature (only the tests crate turns it on), so its
# daemon refuses --backend mock. The workspace build below puts the test build back.
cargo build -p nish-broker --bin nish-driver
if out="$(target/debug/nish-driver serve --backend mock --socket /nonexistent/broker.sock 2>&1)" \
    || ! grep -q "invalid value 'mock'" <<<"$out"; then
    echo "nish-driver built without the mock feature still accepts --backend mock: $out" >&2
    exit 1
fi
# Nor the Wayland e2e test's consent path (feature test-consent, also only the tests crate's):
# its directory variable appears in no binary built without it.
if grep -q -a NISH_TEST_CONSENT_DIR target/debug/nish-driver; then
    echo "nish-driver built without the test-consent feature contains its consent path" >&2
    exit 1
fi
# Nor the act benchmark's switches that turn the agents' filters or the event-driven settle off
# (feature bench-unfiltered).
if grep -q -a -e NISH_BENCH_READER_FILTER -e NISH_BENCH_SETTLE target/debug/nish-driver; then
    echo "nish-driver built without the bench-unfiltered feature has a benchmark switch" >&2
    exit 1
fi

step "build"
cargo build --workspace --bins --examples

step "tests"
cargo test --workspace -- --test-threads="${NISH_TEST_THREADS:-2}"

step "all tests passed"
