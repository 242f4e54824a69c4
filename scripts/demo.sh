#!/usr/bin/env bash
# The nish-driver demo: a whole session driven by the official MCP Python client through
# nish-mcp and the nish-driver broker, printing each step.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
scripts/ensure-deps.sh
cargo build --workspace --bins
exec "$repo/.cache/venv/bin/python" tests/e2e/mock_session.py \
    --driver "$repo/target/debug/nish-driver" --shim "$repo/target/debug/nish-mcp" --versions 2025-11-25
