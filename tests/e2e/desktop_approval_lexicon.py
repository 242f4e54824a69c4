#!/usr/bin/env python3
"""Host approvals read labels with the lexicon, on a real (nested) desktop: the official MCP
Python client, the real nish-mcp (--approve-consequential, a control pipe), `nish-driver serve
--backend linux` and its agents, a takeover session on the GTK 3 app tests/apps/approvals_gtk3.py
and Chromium on tests/pages/approvals.html.

Each case is a label a list of words let through with the host never asked; each must now
raise `approval.request`, and a denial must send nothing (the app's "Pressed" status is
unchanged, the field holds no new text). The cases run apart, each reported as passed or
failed:

- gtk_labels / chromium_labels: clicks on "Sell", "Move to Trash", "Check out" and "Ѕend" (a
  Cyrillic "Ѕ", U+0405) ask `consequential_label`;
- gtk_icon_only_send / chromium_icon_only_send: a click on "➤", an icon-only button whose
  description (GTK's tooltip, the page's `title`) says "Send", asks `consequential_label`, and
  the request shows the description (the model's read does not);
- gtk_recipient_address / chromium_recipient_address: typing into "Recipient email address"
  asks `typing` ("address" in a label no longer makes a field an address field);
- chromium_search_field: typing into the page's `<input type=search>` "Find" asks nothing (its
  attributes, read through the agents' filter, say it takes a search).

    desktop_approval_lexicon.py --driver .../nish-driver --shim .../nish-mcp
"""

from __future__ import annotations

import argparse
import sys

import anyio

import nishhost as h
from desktop_approval_effects import APP, CHROMIUM, asked, read, unasked, unchanged
from nishhost import check, find, ok, say

LABELS = ("Sell", "Move to Trash", "Check out", "\u0405end")
ICON = "\u27a4"


async def pressed(c, app: str) -> str:
    """The app's "Pressed ..." status line."""
    r = await read(c, app)
    for e in r["elements"]:
        if e["label"].startswith("Pressed"):
            return e["label"]
    raise AssertionError(f"no Pressed status in {app}")


async def labels(c, ctl, app: str) -> None:
    was = await pressed(c, app)
    for label in LABELS:
        r = await read(c, app)
        token = find(r, "push_button", label)["element_token"]
        req, _ = await asked(c, ctl, "click", {"element_token": token}, False)
        check(req["reasons"] == ["consequential_label"], str(req))
        check(req["action"]["label"] == label, str(req))
        await unchanged(lambda: pressed(c, app), was, f"a denied click on {label!r}")


async def icon_only_send(c, ctl, app: str) -> None:
    was = await pressed(c, app)
    r = await read(c, app)
    icon = find(r, "push_button", ICON)
    check("description" not in icon, f"the model's read shows no description: {icon}")
    req, _ = await asked(c, ctl, "click", {"element_token": icon["element_token"]}, False)
    check(req["reasons"] == ["consequential_label"], str(req))
    check(req["action"]["label"] == ICON and req["action"].get("description") == "Send", str(req))
    await unchanged(lambda: pressed(c, app), was, "a denied click on the icon-only Send")


async def recipient_address(c, ctl, app: str, role: str, mode: str) -> None:
    r = await read(c, app)
    field = find(r, role, "Recipient email address")
    before = field.get("value") or ""
    args = {"element_token": field["element_token"], "text": "boss@example.com",
            "delivery_mode": mode}
    req, _ = await asked(c, ctl, "type_text", args, False)
    check(req["reasons"] == ["typing"], str(req))
    await anyio.sleep(0.4)
    now = find(await read(c, app), role, "Recipient email address").get("value") or ""
    check(now == before, f"a denied type_text wrote into the recipient field: {now!r}")


async def gtk_labels(c, ctl) -> None:
    await labels(c, ctl, APP)


async def gtk_icon_only_send(c, ctl) -> None:
    await icon_only_send(c, ctl, APP)


async def gtk_recipient_address(c, ctl) -> None:
    await recipient_address(c, ctl, APP, "text", "background")


async def chromium_labels(c, ctl) -> None:
    await labels(c, ctl, CHROMIUM)


async def chromium_icon_only_send(c, ctl) -> None:
    await icon_only_send(c, ctl, CHROMIUM)


async def chromium_recipient_address(c, ctl) -> None:
    await ok(c, "bring_to_front", {"app": CHROMIUM})
    await anyio.sleep(0.3)
    await recipient_address(c, ctl, CHROMIUM, "entry", "foreground")


async def chromium_search_field(c, ctl) -> None:
    await ok(c, "bring_to_front", {"app": CHROMIUM})
    await anyio.sleep(0.3)
    r = await read(c, CHROMIUM)
    find_field = find(r, "entry", "Find")
    await unasked(c, ctl, "type_text", {"element_token": find_field["element_token"],
                                        "text": "invoices", "delivery_mode": "foreground"})
    deadline = anyio.current_time() + 5
    while (find(await read(c, CHROMIUM), "entry", "Find").get("value") or "") != "invoices":
        check(anyio.current_time() < deadline, "the search text did not reach Find")
        await anyio.sleep(0.1)


CASES = [gtk_labels, gtk_icon_only_send, gtk_recipient_address, chromium_labels,
         chromium_icon_only_send, chromium_recipient_address, chromium_search_field]


async def run(ns: argparse.Namespace) -> None:
    broker = h.Broker(ns.driver, "linux")
    person = h.Person(broker.env)
    results: dict[str, str] = {}
    try:
        ctl = h.Control()
        async with h.host(ns.shim, broker, "approval-lexicon-e2e", "2025-11-25", ctl,
                          extra=("--approve-consequential",)) as c:
            st = await h.start_with_consent(c, person, {"input": "takeover", "apps": [APP, CHROMIUM]},
                                            tick=("takeover",))
            check(st["takeover"]["on"] is True, str(st))
            check(await pressed(c, APP) == "Pressed: none", "the app starts with nothing pressed")
            check(await pressed(c, CHROMIUM) == "Pressed: none", "the page starts with nothing pressed")
            for case in CASES:
                say(f"CASE {case.__name__}")
                try:
                    await case(c, ctl)
                    results[case.__name__] = "passed"
                except AssertionError as e:
                    results[case.__name__] = f"FAILED: {e}"
                    # A request left open by a failed case is denied, so the next starts clean.
                    for ev in list(ctl.pending):
                        if ev.get("event") == "approval.request":
                            ctl.send({"method": "approval.answer",
                                      "params": {"id": ev["id"], "approve": False}})
                    ctl.pending.clear()
                say(f"CASE {case.__name__}: {results[case.__name__]}")
            await ok(c, "end_session")
    except BaseException:
        say("broker log:\n" + broker.log_text())
        raise
    finally:
        broker.stop()
    failed = [f"{k}: {v}" for k, v in results.items() if v != "passed"]
    check(not failed, "cases failed:\n" + "\n".join(failed))
    say("ALL CHECKS PASSED")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--driver", required=True)
    p.add_argument("--shim", required=True)
    ns = p.parse_args()
    anyio.run(run, ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
