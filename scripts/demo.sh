#!/usr/bin/env bash
# The nish-driver demo: a real session on a private headless desktop (Xvfb with Xephyr nested
# in it, a private D-Bus, the AT-SPI bus, openbox, GTK 3, GTK 4 and Chromium), driven by the
# official MCP Python client through nish-mcp and the nish-driver broker with its sandboxed
# agents. The person is played with xdotool on the outer X server (a real device for the
# desktop). Prints each step and saves screenshots (the consent dialog, a capture; then the
# dialog in German and at scale 2) to demo-out/ (or the folder given). `scripts/demo.sh --wayland` runs the headless session on a private
# GNOME Wayland desktop instead.
#
# It builds only what the demo runs: the daemon, the shim, the three agents and the demo
# driver (`nish-demo`, in the test crate), and for --wayland the test daemon.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
scripts/ensure-deps.sh
export NISH_PYTHON="$repo/.cache/venv/bin/python"
unset DISPLAY WAYLAND_DISPLAY DBUS_SESSION_BUS_ADDRESS AT_SPI_BUS_ADDRESS || true
packages=(-p nish-driver -p nish-mcp -p nish-reader -p nish-input -p nish-indicator -p nish-tests)
if [ "${1:-}" = "--wayland" ]; then
    packages+=(-p nish-testd)
fi
cargo build --bins "${packages[@]}"
target_dir="$(cargo metadata --format-version 1 --no-deps | "$NISH_PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
if [ "${1:-}" = "--wayland" ]; then
    exec "$target_dir/debug/nish-demo" --wayland
fi
out="${1:-demo-out}"
"$target_dir/debug/nish-demo" "$out"
# The consent dialog in German and at scale 2 (Xft.dpi 192), as the indicator's own tests show
# it on a private desktop; they save the screen to the folder.
echo "the consent dialog in German and at scale 2:"
NISH_SCREENSHOT_DIR="$(cd "$out" && pwd)" cargo test -q -p nish-indicator-tests --test consent -- \
    --exact lang_de_gives_the_german_dialog scale_two_doubles_the_layout_and_clicks_still_answer
echo "screenshots: $out/consent-dialog-de.png, $out/consent-dialog-scale-2.png"
