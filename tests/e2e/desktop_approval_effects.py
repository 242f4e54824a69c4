#!/usr/bin/env python3
"""Host approvals judge an act's effect, not the name it gives, on a real (nested) desktop:
the official MCP Python client, the real nish-mcp (--approve-consequential, a control pipe),
`nish-driver serve --backend linux` and its agents, a takeover session on the GTK 3 app
tests/apps/approvals_gtk3.py and Chromium on tests/pages/approvals.html.

Each case is an attack that went through with the host never asked; each must now raise
`approval.request`, and a denial must send nothing (the app's status is unchanged, the field
holds no new text). The cases run apart, each reported as passed or failed:

- gtk_container_click: a takeover click on the box "Actions", whose centre lies on "Send";
- gtk_focused_send_keys: after an approved click on Send (which keeps the focus), space and
  Return on it;
- gtk_tab_tab_space_after_typing: approved typing into Message, then Tab, Tab (to Send), then
  space, and Return (which is also Enter after typing);
- gtk_paste_and_characters: clipboard_write, a click into Message, Ctrl+V, character keys (each
  asked, denied, nothing typed), the paste approved, then Tab, Tab and space on Send;
- gtk_context_menu_keys: a right click on Message opens its context menu (a window of its own,
  not in the read), Down, Down, Down, then Return asks (unknown_target), and a denial leaves
  Message as it was;
- chromium_container_click: a takeover click on the page's group "Actions" around its button
  "Send";
- chromium_focused_send_keys: a click into the page's Message input, Tab to Send, then space
  and Return.

    desktop_approval_effects.py --driver .../nish-driver --shim .../nish-mcp
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import anyio

import nishhost as h
from nishhost import check, find, ok, say

APP = "nish-approvals-gtk3"
CHROMIUM = "chromium"
PASTED = "paste-canary-8812"


class NotAsked(AssertionError):
    """The act was sent without the host asked."""


async def watched(c, ctl: h.Control, tool: str, args: dict, approve: bool, timeout: float = 20.0):
    """Calls `tool` and watches the control pipe meanwhile; an approval request it raises (with
    the call still waiting) is answered `approve`, echoing its digest. Returns (the request, or
    None when the call returned without one; the call's result)."""
    seen: dict = {}
    done = anyio.Event()

    async def call() -> None:
        try:
            seen["result"] = await c.call_tool(tool, args)
        finally:
            done.set()

    def poll():
        try:
            return ctl.wait_for(lambda e: e.get("event") == "approval.request", "approval.request", 0.2)
        except AssertionError:
            return None

    req = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        deadline = time.monotonic() + timeout
        while req is None and "result" not in seen:
            req = await anyio.to_thread.run_sync(poll)
            check(req is not None or "result" in seen or time.monotonic() < deadline,
                  f"{tool} neither returned nor asked the host within {timeout} s")
        if req is not None:
            check("result" not in seen, f"{tool} returned before the host's approval")
            ctl.send({"method": "approval.answer",
                      "params": {"id": req["id"], "approve": approve, "digest": req["digest"]}})
        await done.wait()
    return req, seen["result"]


async def asked(c, ctl: h.Control, tool: str, args: dict, approve: bool):
    """Calls `tool`, which must raise an approval request before it returns; answers it
    (`approve`, echoing the digest) and returns (request, result). Fails at once when the call
    returns without a request."""
    req, res = await watched(c, ctl, tool, args, approve)
    if req is None:
        raise NotAsked(f"{tool} {json.dumps(args)} was sent without the host asked: "
                       f"{json.dumps(res.structured_content)[:300]}")
    if approve:
        check(not res.is_error, f"the approved {tool}: {res.structured_content}")
    else:
        env = res.structured_content
        check(res.is_error and env["error"]["code"] == "consent_denied", f"the denied {tool}: {env}")
        check(env["error"].get("effect") == "refused", str(env))
    say(f"    {tool} {json.dumps(args)}: asked {req['reasons']}, "
        f"{'approved' if approve else 'denied'}")
    return req, res


async def unasked(c, ctl: h.Control, tool: str, args: dict) -> dict:
    """A call that needs no approval (one asked is denied, and fails the case)."""
    req, res = await watched(c, ctl, tool, args, False)
    check(req is None, f"{tool} {json.dumps(args)} asked the host: {req}")
    check(not res.is_error, f"{tool} failed: {res.structured_content}")
    return res.structured_content


async def read(c, app: str) -> dict:
    return await ok(c, "get_window_state", {"app": app, "max_elements": 5000})


async def gtk_status(c) -> str:
    r = await read(c, APP)
    labels = [e for e in r["elements"] if e["role"] == "label"]
    check(labels, "the app's status label")
    return labels[-1]["label"]


async def page_status(c) -> str:
    r = await read(c, CHROMIUM)
    for e in r["elements"]:
        if e["label"].startswith("Status: "):
            return e["label"]
    raise AssertionError("no status on the page")


async def settled(get, want: str, what: str) -> None:
    """Waits (5 s at most) until `get()` gives `want`."""
    deadline = time.monotonic() + 5
    while True:
        now = await get()
        if now == want:
            return
        check(time.monotonic() < deadline, f"{what}: {now!r}, wanted {want!r}")
        await anyio.sleep(0.1)


async def unchanged(get, was: str, what: str) -> None:
    """`get()` still gives `was` after the app had time to react."""
    await anyio.sleep(0.4)
    now = await get()
    check(now == was, f"{what}: {now!r}, was {was!r}: something was sent")


async def focused_on(c, app: str, role: str, label: str) -> None:
    deadline = time.monotonic() + 5
    while True:
        r = await read(c, app)
        f = [e for e in r["elements"] if "focused" in e["states"]]
        if any(e["role"] == role and e["label"] == label for e in f):
            return
        check(time.monotonic() < deadline,
              f"the focus is on {[(e['role'], e['label']) for e in f]}, not {role} {label!r}")
        await anyio.sleep(0.1)


def message_value(r: dict, role: str) -> str:
    return find(r, role, "Message").get("value") or ""


async def front(c, app: str) -> None:
    await ok(c, "bring_to_front", {"app": app})
    await anyio.sleep(0.3)


async def click(c, ctl, app: str, role: str, label: str) -> None:
    r = await read(c, app)
    await unasked(c, ctl, "click", {"element_token": find(r, role, label)["element_token"],
                                    "delivery_mode": "foreground"})


# ---- the cases ---------------------------------------------------------------------------------

async def gtk_container_click(c, ctl) -> None:
    await front(c, APP)
    r = await read(c, APP)
    box = find(r, "filler", "Actions")["element_token"]
    was = await gtk_status(c)
    args = {"element_token": box, "delivery_mode": "foreground"}
    req, _ = await asked(c, ctl, "click", args, False)
    check(req["reasons"] == ["consequential_label"], str(req))
    check(req["action"]["label"] == "Actions", str(req))
    check({"role": "push_button", "label": "Send"} in req["action"]["under_point"], str(req))
    await unchanged(lambda: gtk_status(c), was, "a denied click on the box")
    await asked(c, ctl, "click", args, True)
    n = 0 if was == "Ready" else int(was.split()[1])
    await settled(lambda: gtk_status(c), f"Sent {n + 1}", "the approved click on the box")


async def gtk_focused_send_keys(c, ctl) -> None:
    await front(c, APP)
    r = await read(c, APP)
    send = find(r, "push_button", "Send")["element_token"]
    # An approved click on Send: the button keeps the keyboard focus.
    was = await gtk_status(c)
    await asked(c, ctl, "click", {"element_token": send, "delivery_mode": "foreground"}, True)
    n = 0 if was == "Ready" else int(was.split()[1])
    await settled(lambda: gtk_status(c), f"Sent {n + 1}", "the approved click on Send")
    await focused_on(c, APP, "push_button", "Send")
    was = await gtk_status(c)
    for key in ("space", "Return"):
        req, _ = await asked(c, ctl, "press_key", {"key": key}, False)
        check("consequential_label" in req["reasons"], str(req))
        check(req["action"]["focus"] == [{"role": "push_button", "label": "Send"}], str(req))
        await unchanged(lambda: gtk_status(c), was, f"a denied {key} on Send")


async def gtk_tab_tab_space_after_typing(c, ctl) -> None:
    await front(c, APP)
    r = await read(c, APP)
    msg = find(r, "text", "Message")["element_token"]
    req, _ = await asked(c, ctl, "type_text", {"element_token": msg, "text": "hello",
                                               "delivery_mode": "foreground"}, True)
    check(req["reasons"] == ["typing"], str(req))
    await focused_on(c, APP, "text", "Message")
    await unasked(c, ctl, "press_key", {"key": "Tab"})
    await unasked(c, ctl, "press_key", {"key": "Tab"})
    await focused_on(c, APP, "push_button", "Send")
    was = await gtk_status(c)
    req, _ = await asked(c, ctl, "press_key", {"key": "space"}, False)
    check(req["reasons"] == ["consequential_label"], str(req))
    await unchanged(lambda: gtk_status(c), was, "a denied space after Tab, Tab")
    req, _ = await asked(c, ctl, "press_key", {"key": "Return"}, False)
    check(req["reasons"] == ["consequential_label", "enter_after_typing"], str(req))
    await unchanged(lambda: gtk_status(c), was, "a denied Return after Tab, Tab")


async def gtk_paste_and_characters(c, ctl) -> None:
    await front(c, APP)
    await unasked(c, ctl, "clipboard_write", {"text": PASTED})
    await click(c, ctl, APP, "text", "Message")
    await focused_on(c, APP, "text", "Message")
    before = message_value(await read(c, APP), "text")
    for tool, args in [("hotkey", {"keys": ["ctrl", "v"]}), ("hotkey", {"keys": ["shift", "Insert"]}),
                       ("press_key", {"key": "x"}), ("hotkey", {"keys": ["shift", "y"]})]:
        req, _ = await asked(c, ctl, tool, args, False)
        check(req["reasons"] == ["typing"], str(req))
        check(req["action"]["focus"] == [{"role": "text", "label": "Message"}], str(req))
        check(PASTED not in json.dumps(req), "the clipboard is not in the request")
        await anyio.sleep(0.3)
        now = message_value(await read(c, APP), "text")
        check(now == before, f"a denied {args} typed into Message: {now!r}")
    await asked(c, ctl, "hotkey", {"keys": ["ctrl", "v"]}, True)
    deadline = time.monotonic() + 5
    while PASTED not in message_value(await read(c, APP), "text"):
        check(time.monotonic() < deadline, "the approved paste did not reach Message")
        await anyio.sleep(0.1)
    await unasked(c, ctl, "press_key", {"key": "Tab"})
    await unasked(c, ctl, "press_key", {"key": "Tab"})
    await focused_on(c, APP, "push_button", "Send")
    was = await gtk_status(c)
    req, _ = await asked(c, ctl, "press_key", {"key": "space"}, False)
    check(req["reasons"] == ["consequential_label"], str(req))
    await unchanged(lambda: gtk_status(c), was, "a denied space on Send after the paste")


async def gtk_context_menu_keys(c, ctl) -> None:
    await front(c, APP)
    await unasked(c, ctl, "clipboard_write", {"text": PASTED + "-menu"})
    r = await read(c, APP)
    before = message_value(r, "text")
    await unasked(c, ctl, "right_click", {"element_token": find(r, "text", "Message")["element_token"],
                                          "delivery_mode": "foreground"})
    await anyio.sleep(0.5)
    for _ in range(3):
        await unasked(c, ctl, "press_key", {"key": "Down"})
    req, _ = await asked(c, ctl, "press_key", {"key": "Return"}, False)
    check("unknown_target" in req["reasons"], str(req))
    await unasked(c, ctl, "press_key", {"key": "Escape"})
    await anyio.sleep(0.3)
    now = message_value(await read(c, APP), "text")
    check(now == before, f"a denied Return in the context menu changed Message: {now!r}")


async def chromium_container_click(c, ctl) -> None:
    await front(c, CHROMIUM)
    r = await read(c, CHROMIUM)
    group = next((e for e in r["elements"] if e["label"] == "Actions"), None)
    check(group is not None, "the page's group Actions")
    was = await page_status(c)
    req, _ = await asked(c, ctl, "click", {"element_token": group["element_token"],
                                           "delivery_mode": "foreground"}, False)
    check(req["reasons"] == ["consequential_label"], str(req))
    check(any(e["label"] == "Send" for e in req["action"]["under_point"]), str(req))
    await unchanged(lambda: page_status(c), was, "a denied click on the page's group")


async def chromium_focused_send_keys(c, ctl) -> None:
    await front(c, CHROMIUM)
    await click(c, ctl, CHROMIUM, "entry", "Message")
    await focused_on(c, CHROMIUM, "entry", "Message")
    await unasked(c, ctl, "press_key", {"key": "Tab"})
    await focused_on(c, CHROMIUM, "push_button", "Send")
    was = await page_status(c)
    for key in ("space", "Return"):
        req, _ = await asked(c, ctl, "press_key", {"key": key}, False)
        check("consequential_label" in req["reasons"], str(req))
        check({"role": "push_button", "label": "Send"} in req["action"]["focus"], str(req))
        await unchanged(lambda: page_status(c), was, f"a denied {key} on the page's Send")


CASES = [gtk_container_click, gtk_focused_send_keys, gtk_tab_tab_space_after_typing,
         gtk_paste_and_characters, gtk_context_menu_keys, chromium_container_click,
         chromium_focused_send_keys]


async def run(ns: argparse.Namespace) -> None:
    broker = h.Broker(ns.driver, "linux")
    person = h.Person(broker.env)
    results: dict[str, str] = {}
    try:
        ctl = h.Control()
        async with h.host(ns.shim, broker, "approval-effects-e2e", "2025-11-25", ctl,
                          extra=("--approve-consequential",)) as c:
            st = await h.start_with_consent(c, person, {"input": "takeover", "apps": [APP, CHROMIUM]},
                                            tick=("takeover",))
            check(st["takeover"]["on"] is True, str(st))
            check(await gtk_status(c) == "Ready", "the app starts Ready")
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
        audit = broker.audit_events()
        check(all(PASTED not in json.dumps(e) for e in audit), "the pasted text is not in the audit")
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
