#!/usr/bin/env python3
"""Paging a big window to the end, on the mock desktop, with the official MCP Python client
through the real `nish-mcp` shim and the test daemon `nish-testd serve --backend mock`:

- a default read of the dense window (Atlas, 2,216 rows) is cut and carries `continue_from`
  (in the structured content and in the text content); calling again with it, page after
  page, gives every row once, in the order of one unbounded read, for each `result_form`;
- the text form's structured content is slim (no rows), the structured form's text content
  has no rows, and every page stays under the byte budget as the client gets it;
- a bad continuation, a bad form and a continuation with conflicting arguments come back in
  the contract's envelope and text form.

    mock_paging.py --driver target/debug/nish-testd --shim target/debug/nish-mcp
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from typing import Any

import anyio

import nishhost as h
from nishhost import check, fails, ok, say

READ_MAX_BYTES = 80_000


def rows_of_text(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.lstrip().startswith("[")]


async def page_through(c: Any, args: dict[str, Any]) -> list[Any]:
    """Every page of a read, as CallToolResults."""
    out = []
    cont = None
    while True:
        a = dict(args)
        if cont is not None:
            a["continue_from"] = cont
        r = await c.call_tool("get_window_state", a)
        check(r.is_error is False, f"page {len(out) + 1} failed: {h.text_of(r)}")
        sc = r.structured_content
        check(sc["ok"] is True, str(sc)[:200])
        size = len(h.text_of(r).encode()) + len(json.dumps(sc, separators=(",", ":"), ensure_ascii=False).encode())
        check(size <= READ_MAX_BYTES + 2_000, f"a page of {size} bytes")
        out.append(r)
        cont = sc.get("continue_from")
        if cont is None:
            check(sc["truncated"] is False, f"the last page says truncated: {sc['truncated_reason']}")
            return out
        check(sc["truncated"] is True, "a page with more rows says truncated")
        check(f'more rows: continue_from "{cont}"' in h.text_of(r), "the text content says where to go on")
        check(len(out) < 100, "paging does not end")


async def session(ns: argparse.Namespace, broker: h.Broker) -> None:
    async with h.host(ns.shim, broker, "e2e-paging") as c:
        say("== connected to nish-mcp")
        approve = threading.Thread(target=lambda: say("  person: " + broker.person("approve")))
        approve.start()
        await ok(c, "start_session", {"apps": ["Atlas", "Notes"]})
        approve.join()

        whole = await ok(c, "get_window_state", {"app": "Atlas", "max_elements": 5000})
        check(whole["truncated"] is False and "continue_from" not in whole, "one unbounded read")
        all_rows = whole["elements"]
        all_lines = whole["tree_text"].splitlines()
        sid = whole["snapshot_id"]
        say(f"  one unbounded read of Atlas: {len(all_rows)} rows, snapshot {sid}")

        for form in ("both", "text", "structured"):
            pages = await page_through(c, {"app": "Atlas", "result_form": form})
            rows: list[Any] = []
            lines: list[str] = []
            for r in pages:
                sc = r.structured_content
                check(sc["snapshot_id"] == sid, "every page is of one snapshot")
                text = h.text_of(r)
                if form == "both":
                    rows += sc["elements"]
                    lines += sc["tree_text"].splitlines()
                    check(rows_of_text(text) == sc["tree_text"].splitlines(), "the text has tree_text")
                elif form == "text":
                    check(sc["result_form"] == "text", str(sc)[:200])
                    check("elements" not in sc and "tree_text" not in sc, "the slim structured content")
                    lines += rows_of_text(text)
                else:
                    check(sc["result_form"] == "structured", str(sc)[:200])
                    check("tree_text" not in sc and rows_of_text(text) == [], "rows as elements only")
                    rows += sc["elements"]
            if form != "text":
                check(rows == all_rows, f"{form}: the pages' elements are the unbounded read's")
            if form != "structured":
                check(lines == all_lines, f"{form}: the pages' lines are the unbounded read's")
            sizes = [len(h.text_of(r)) + len(json.dumps(r.structured_content)) for r in pages]
            say(f"  result_form {form}: {len(pages)} pages, every row once, in order; "
                f"largest page {max(sizes)} bytes")

        say("  failures:")
        first = await ok(c, "get_window_state", {"app": "Atlas"})
        cont = first["continue_from"]
        await fails(c, "get_window_state", {"continue_from": "not a continuation"}, "invalid_arguments")
        await fails(c, "get_window_state", {"continue_from": "s999999/full/1/25"}, "stale_element_token")
        await fails(c, "get_window_state", {"app": "Atlas", "result_form": "html"}, "invalid_arguments")
        await fails(c, "get_window_state", {"continue_from": cont, "skeleton": True}, "invalid_arguments")
        await fails(c, "get_window_state", {"continue_from": cont, "app": "Notes"}, "invalid_arguments")
        await ok(c, "end_session")
        await fails(c, "get_window_state", {"continue_from": cont}, "no_session")


async def main_async(ns: argparse.Namespace) -> None:
    broker = h.Broker(ns.driver, "mock")
    try:
        await session(ns, broker)
    finally:
        broker.stop()
    say("ALL CHECKS PASSED")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--driver", required=True)
    p.add_argument("--shim", required=True)
    p.add_argument("--quiet", action="store_true")
    ns = p.parse_args()
    h.VERBOSE = not ns.quiet
    anyio.run(main_async, ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
