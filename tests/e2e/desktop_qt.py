#!/usr/bin/env python3
"""Typing and text values in a Qt 5 app through a whole session on a real (headless) X desktop:
the official MCP Python client, the real `nish-mcp`, `nish-driver serve --backend linux` and
its agents, and tests/apps/form_qt5.py.

Qt's AT-SPI adaptor reads `InsertText`'s length in UTF-16 units and pads or cuts the text to
that many; GTK and Chromium read it in UTF-8 bytes. Text beyond ASCII, and beyond the Basic
Multilingual Plane, typed into the Qt line edit must arrive exactly: the app's own status label
counts what the line edit holds (NUL padding included, which AT-SPI's text read leaves out). A
number set into a spin box must arrive too, and one outside its range is refused. Qt 5 loses
its accessibility connection when sent `Properties.GetAll`: every read after an act answering
shows the driver never sent it.

    desktop_qt.py --driver .../nish-driver --shim .../nish-mcp --pid N
"""

from __future__ import annotations

import argparse
import sys
import time

import anyio

import nishhost as h
from nishhost import check, ok, say

APP = "nish-qt-form"


def status(read: dict) -> str:
    labels = [e["label"] for e in read["elements"] if e["role"] == "label" and e["label"].startswith("holds ")]
    check(len(labels) == 1, f"one status label: {labels}")
    return labels[0]


async def run(ns: argparse.Namespace) -> None:
    broker = h.Broker(ns.driver, "linux")
    person = h.Person(broker.env)
    try:
        async with h.host(ns.shim, broker, "qt-e2e") as c:
            await h.start_with_consent(c, person, {"apps": [APP]})
            # Qt may show its windows a moment before its trees settle: the first read is tried
            # for up to 10 s.
            deadline = time.monotonic() + 10
            while True:
                wins = await ok(c, "list_windows")
                form = [w for w in wins["windows"] if w["pid"] == ns.pid and w["title"] == "nish Qt form"]
                if not form:
                    check(time.monotonic() < deadline, f"no Qt form window: {wins['windows']}")
                    await anyio.sleep(0.3)
                    continue
                target = {"window_id": form[0]["window_id"]}
                res = await c.call_tool("get_window_state", target)
                if not res.is_error and any(e["label"].startswith("holds ") for e in res.structured_content["elements"]):
                    r = res.structured_content
                    break
                check(time.monotonic() < deadline, f"the Qt form was not read within 10 s: {h.text_of(res)}")
                await anyio.sleep(0.3)
            check(status(r) == "holds 0 characters: ", status(r))
            name = h.find(r, "text", "Name")
            # 9 characters, 10 UTF-16 units, 15 UTF-8 bytes.
            typed = "héllo ✓ 😀"
            a = await ok(c, "type_text", {"element_token": name["element_token"], "text": typed})
            say(f"  type_text: effect {a['effect']}, verified {a['verified']}, readback {a.get('readback')}")
            check(a["effect"] == "confirmed" and a.get("readback") == "match", str(a))
            r = await ok(c, "get_window_state", target)
            check(status(r) == f"holds 9 characters: {typed}", f"the app holds {status(r)!r}")
            name = h.find(r, "text", "Name")
            check(name.get("value") == typed, str(name))
            # A text value replaces it all (no length argument).
            value = "Zoë 😀"
            a = await ok(c, "set_value", {"element_token": name["element_token"], "value": value})
            check(a["effect"] == "confirmed", str(a))
            r = await ok(c, "get_window_state", target)
            check(status(r) == f"holds 5 characters: {value}", f"the app holds {status(r)!r}")
            # Typed again, at the caret (the end): the two together, nothing more.
            name = h.find(r, "text", "Name")
            a = await ok(c, "type_text", {"element_token": name["element_token"], "text": " ✓"})
            check(a["effect"] == "confirmed", str(a))
            r = await ok(c, "get_window_state", target)
            check(status(r) == f"holds 7 characters: {value} ✓", f"the app holds {status(r)!r}")
            say(f"  the Qt app holds exactly what was typed and set: {status(r)!r}")
            # A top-level window that is a bare widget (its accessible a filler): found by its
            # title and typed into.
            notes = [w for w in wins["windows"] if w["pid"] == ns.pid and w["title"] == "nish Qt notes"]
            check(len(notes) == 1, f"the notes window: {wins['windows']}")
            n = await ok(c, "get_window_state", {"window_id": notes[0]["window_id"]})
            check(n["window"]["title"] == "nish Qt notes", str(n["window"]))
            note = h.find(n, "text", "Note")
            a = await ok(c, "type_text", {"element_token": note["element_token"], "text": "ok ✓"})
            check(a["effect"] == "confirmed", str(a))
            n = await ok(c, "get_window_state", {"window_id": notes[0]["window_id"]})
            check(any(e["label"] == "note holds 4 characters: ok ✓" for e in n["elements"]),
                  f"the notes window holds {[e['label'] for e in n['elements'] if e['role'] == 'label']}")
            # A number: the spin box's range read one property at a time (the app keeps its
            # accessibility connection, so the next read still answers).
            count = h.find(r, "spin_button", "Count")
            a = await ok(c, "set_value", {"element_token": count["element_token"], "value": "42"})
            check(a["effect"] == "confirmed", str(a))
            r = await ok(c, "get_window_state", target)
            check(any(e["label"] == "count is 42" for e in r["elements"]), "the app's own count label")
            check(h.find(r, "spin_button", "Count").get("value") == "42", "the spin box's value")
            await h.fails(c, "set_value", {"element_token": h.find(r, "spin_button", "Count")["element_token"],
                                           "value": "1000"}, "invalid_arguments")
    except BaseException:
        say("broker log:\n" + broker.log_text())
        raise
    finally:
        broker.stop()
    say("ALL CHECKS PASSED")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--driver", required=True)
    p.add_argument("--shim", required=True)
    p.add_argument("--pid", type=int, required=True)
    ns = p.parse_args()
    anyio.run(run, ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
