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

step "build"
cargo build --workspace --bins --examples

step "tests"
cargo test --workspace -- --test-threads="${NISH_TEST_THREADS:-2}"

step "all tests passed"
