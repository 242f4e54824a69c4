#!/usr/bin/env bash
# The nish-driver demo: a real session on a private headless desktop (Xvfb with Xephyr nested
# in it, a private D-Bus, the AT-SPI bus, openbox, GTK 3, GTK 4 and Chromium), driven by the
# official MCP Python client through nish-mcp and the nish-driver broker with its sandboxed
# agents. The person is played with xdotool on the outer X server (a real device for the
# desktop). Prints each step and saves screenshots (the consent dialog, a capture) to demo-out/
# (or the folder given). `scripts/demo.sh --wayland` runs the headless session on a private
# GNOME Wayland desktop instead.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
scripts/ensure-deps.sh
export NISH_PYTHON="$repo/.cache/venv/bin/python"
unset DISPLAY WAYLAND_DISPLAY DBUS_SESSION_BUS_ADDRESS AT_SPI_BUS_ADDRESS || true
cargo build --workspace --bins
if [ "${1:-}" = "--wayland" ]; then
    # The headless session on a private GNOME Wayland desktop (mutter headless, no X server);
    # consent through the test build's files (see README).
    exec cargo run -q -p nish-tests --example demo_wayland
fi
exec cargo run -q -p nish-tests --example demo -- "${1:-demo-out}"
