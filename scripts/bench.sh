#!/usr/bin/env bash
# The benchmarks (release build): reads by nish-reader beside a Python pyatspi walker on
# gtk3-widget-factory, gtk4-demo and dense Chromium pages, with the text sizes of full and
# skeleton reads; reads through the MCP client on gtk3-widget-factory, gtk4-demo and a dense
# Chromium page (cold and warm, the first read after consent beside a plain walker's first walk,
# the bytes per row of each result form and the default read's size); reads of big windows (a
# 50,000-row GTK 3 list, a Chromium page of 20,000 buttons) with the app's CPU; acts; and the
# takeover (hand-back, indicator removal, a foreground click); and load (20 hosts reading and acting for 60 s: latency percentiles per
# tool, memory; see docs/performance.md). Figures print as markdown tables.
#
#   scripts/bench.sh            # NISH_BENCH_REPEATS=7 by default
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
scripts/ensure-deps.sh
unset DISPLAY WAYLAND_DISPLAY DBUS_SESSION_BUS_ADDRESS AT_SPI_BUS_ADDRESS || true
cargo build --release --workspace --bins
cargo build --release -p nish-reader --example walk
cargo bench -p nish-tests --bench reads
cargo bench -p nish-tests --bench mcp_reads
cargo bench -p nish-tests --bench big_reads
cargo bench -p nish-tests --bench acts
cargo bench -p nish-tests --bench takeover
cargo bench -p nish-tests --bench load
