#!/usr/bin/env python3
"""Headless acts on a real (headless) X desktop through the official MCP Python client, the real
`nish-mcp` and `nish-driver serve --backend linux` with its reader, input and indicator agents.

On GTK 3 (gtk3-widget-factory), GTK 4 (gtk4-demo) and Chromium (tests/pages/form.html): every
act is verified or honestly not, diffs are real, refusals come before anything is sent, and the
pointer and the focused window are the same after the acts as before (read with X, not asked of
the driver). The audit (a file here) holds lengths only and says what decided each act's settle:
the GTK 3 check button's click, its events, with only the objects that sent them read again;
and an act right after a read has its target checked against the walk that read kept. The
person is played with xdotool for the consent only.

    desktop_acts.py --driver .../nish-driver --shim .../nish-mcp
"""

from __future__ import annotations

import argparse
import sys
import time

import anyio

import nishhost as h
from nishhost import check, fails, find, ok, say

GTK3 = "gtk3-widget-factory"
GTK4 = "gtk4-demo"
CHROMIUM = "chromium"


def pick(read: dict, role: str, label: str | None = None, without: tuple[str, ...] = ("disabled",)) -> dict:
    for e in read["elements"]:
        if e["role"] == role and (label is None or e["label"] == label) and not any(s in e["states"] for s in without):
            return e
    raise AssertionError(f"no {role} {label!r} without {without} in snapshot {read['snapshot_id']}")


def changed_rows(r: dict) -> set[int]:
    return {c["element_index"] for c in r["diff"]["changed"]}


async def act(c, tool: str, args: dict, what: str) -> dict:
    r = await ok(c, tool, args)
    say(f"  {what}: effect {r['effect']}, verified {r['verified']}, path {r['path']}"
        + (f", readback {r['readback']}" if "readback" in r else "")
        + f", diff +{len(r['diff']['added'])} -{len(r['diff']['removed'])} ~{len(r['diff']['changed'])},"
        f" settle {r['settle']['ms']} ms")
    check(r["took_cursor"] is False, "a headless act never takes the cursor")
    return r


async def gtk3(c, target: dict) -> None:
    say(f"{GTK3}:")
    r = await ok(c, "get_window_state", {**target, "max_elements": 5000})
    cb = next(e for e in r["elements"] if e["role"] == "check_box" and e["label"] == "checkbutton" and not set(e["states"]) & {"disabled", "checked", "indeterminate"})
    a = await act(c, "click", {"element_token": cb["element_token"]}, f"click check button {cb['element_token']}")
    check(a["effect"] == "confirmed" and a["verified"] is True, str(a))
    check(cb["element_index"] in changed_rows(a), "the check button's own row changed")

    tb = next(e for e in r["elements"] if e["role"] == "toggle_button" and e["label"] == "togglebutton" and not set(e["states"]) & {"disabled", "checked"})
    a = await act(c, "click", {"element_token": tb["element_token"]}, f"click toggle button {tb['element_token']}")
    check(a["verified"] is True, str(a))

    entry = next(e for e in r["elements"] if e["role"] == "text" and e.get("value") == "entry" and "disabled" not in e["states"])
    a = await act(c, "type_text", {"element_token": entry["element_token"], "text": " typed ✓"}, "type_text into the entry")
    check(a["readback"] == "match" and a["effect"] == "confirmed", str(a))
    a = await act(c, "set_value", {"element_token": entry["element_token"], "value": "set by nish-driver"}, "set_value on the entry")
    check(a["readback"] == "match", str(a))
    now = await ok(c, "get_window_state", {**target, "max_elements": 5000})
    check(now["elements"][entry["element_index"]].get("value") == "set by nish-driver", "the entry reads back")

    spin = pick(r, "spin_button")
    a = await act(c, "set_value", {"element_token": spin["element_token"], "value": 73}, "set_value 73 on the spin button")
    check(a["readback"] == "match" and a["path"] == "value", str(a))

    tab = next(e for e in r["elements"] if e["role"] == "page_tab" and e["label"] == "page 2")
    a = await act(c, "click", {"element_token": tab["element_token"]}, "click notebook tab 'page 2'")
    check(a["verified"] is True and a["path"] == "atspi_selection", str(a))

    page2 = find(r, "radio_button", "Page 2")
    a = await act(c, "click", {"element_token": page2["element_token"]}, "click the 'Page 2' switch (changes the window)")
    check(a["verified"] is True, str(a))
    check(a["snapshot_id"] != r["snapshot_id"] and len(a["diff"]["added"]) > 0, "a new page is a new structure")
    await fails(c, "click", {"element_token": cb["element_token"]}, "stale_element_token")
    p2 = await ok(c, "get_window_state", {**target, "max_elements": 5000})
    # Page 2's list rows are not selectable (its list box selects nothing): a click has no
    # accessible way to do it, and is refused before anything is sent.
    row = next(e for e in p2["elements"] if e["role"] == "list_item" and "offscreen" not in e["states"])
    err = await fails(c, "click", {"element_token": row["element_token"]}, "requires_takeover")
    check(err["escalation"]["reason"] == "no_accessible_action", str(err))
    slider = next(e for e in p2["elements"] if e["role"] == "slider" and "offscreen" not in e["states"] and "disabled" not in e["states"])
    a = await act(c, "set_value", {"element_token": slider["element_token"], "value": 70}, "set_value 70 on a slider")
    check(a["readback"] == "match", str(a))
    page3 = find(p2, "radio_button", "Page 3")
    await act(c, "click", {"element_token": page3["element_token"]}, "click the 'Page 3' switch")
    p3 = await ok(c, "get_window_state", {**target, "max_elements": 5000})
    row = next(e for e in p3["elements"] if e["role"] == "list_item" and "offscreen" not in e["states"] and "selected" not in e["states"])
    a = await act(c, "click", {"element_token": row["element_token"]}, f"click list row {row['element_token']} (selection)")
    check(a["verified"] is True and a["path"] == "atspi_selection", str(a))
    back = find(await ok(c, "get_window_state", {**target, "max_elements": 5000}), "radio_button", "Page 1")

    await act(c, "click", {"element_token": back["element_token"]}, "back to 'Page 1'")



async def kept_recheck(c, target: dict, broker: h.Broker) -> None:
    """An act right after a read checks its target against the walk that read kept (no new walk)
    when nothing was seen to change since: the audit's `recheck` says which check each act had,
    and the act is verified as any other. Three tries: an event from the app between the read
    and the act (GTK 3 sends some on its own) rightly makes the act walk instead."""
    say(f"{GTK3} re-check from the kept walk:")
    # The reader keeps walks only once it asked for events a second ago (it has by now).
    await anyio.sleep(1.2)
    seen: list[str] = []
    for _ in range(3):
        r = await ok(c, "get_window_state", {**target, "max_elements": 5000})
        tb = next(e for e in r["elements"] if e["role"] == "toggle_button" and e["label"] == "togglebutton" and "disabled" not in e["states"])
        before = len([e for e in broker.audit_events() if e["event"] == "act"])
        a = await act(c, "click", {"element_token": tb["element_token"]}, f"click toggle button {tb['element_token']} right after a read")
        check(a["verified"] is True, str(a))
        deadline = time.monotonic() + 5
        while len(acts := [e for e in broker.audit_events() if e["event"] == "act"]) <= before:
            check(time.monotonic() < deadline, "the act was not audited")
            await anyio.sleep(0.05)
        last = acts[-1]
        check(last["tool"] == "click" and last["role"] == "toggle_button", str(last))
        seen.append(f"{last['recheck']} ({last['recheck_ms']} ms)")
        if last["recheck"] == "kept":
            break
    say(f"  re-checks: {', '.join(seen)}")
    check(seen[-1].startswith("kept"), f"no act's re-check used the kept walk in 3 tries: {seen}")


async def wait_steps(c, target: dict) -> None:
    """wait_for (an extension beyond contract 0.8) on the real backend: an answer at once when the
    row is there, a wake when the app changes the row during the wait, a timeout in the envelope."""
    say(f"{GTK3} wait_for:")
    w = await ok(c, "wait_for", {**target, "role": "toggle_button", "name": "togglebutton", "until": "appears"})
    check(w["element"]["role"] == "toggle_button" and w["reads"] >= 1, str(w))
    say(f"  appears: matched {w['element']['element_token']} after {w['waited_ms']} ms, {w['reads']} reads")
    if "disabled" in w["element"]["states"]:
        say("  the first toggle button is disabled; the change step is skipped")
    else:
        got: dict = {}

        async def waiter() -> None:
            got["w"] = await ok(c, "wait_for", {**target, "role": "toggle_button", "name": "togglebutton",
                                                "until": "changes", "timeout_ms": 5000})

        async def clicker() -> None:
            await anyio.sleep(0.5)
            await act(c, "click", {"element_token": w["element"]["element_token"]}, "click it during a wait")

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            tg.start_soon(clicker)
        ch = got["w"]
        check(ch["element"]["states"] != w["element"]["states"], f"the row changed: {ch}")
        check(400 <= ch["waited_ms"] < 3000, f"woke on the change: {ch['waited_ms']} ms")
        say(f"  changes: woke after {ch['waited_ms']} ms, {ch['reads']} reads, states {ch['element']['states']}")
    start = time.monotonic()
    err = await fails(c, "wait_for", {**target, "role": "toggle_button", "name": "togglebutton",
                                      "until": "disappears", "timeout_ms": 500}, "timeout")
    took = time.monotonic() - start
    check(0.5 <= took < 2.0, f"the timeout took {took:.2f} s")
    check("togglebutton" not in err["message"], err["message"])
    say(f"  disappears: timeout after {took * 1000:.0f} ms: {err['message']}")


async def gtk4(c) -> None:
    say(f"{GTK4}:")
    r = await ok(c, "get_window_state", {"app": GTK4, "max_elements": 5000})
    tabs = [e for e in r["elements"] if e["role"] == "page_tab"]
    target = next(t for t in tabs if "selected" not in t["states"])
    a = await act(c, "click", {"element_token": target["element_token"]}, f"click tab {target['element_token']}")
    check(a["verified"] is True and a["path"] == "atspi_selection", str(a))
    search = find(r, "push_button", "Search")
    a = await act(c, "click", {"element_token": search["element_token"]}, "click 'Search' (opens the search bar)")
    check(a["effect"] == "dispatched" and a["verified"] is False, "a push button is dispatched, not verified")
    # The window is covered by others here, and GTK 4 lays out (and so updates the extents of)
    # a covered window only when it is drawn: the diff may honestly be empty.
    check(a["diff"] is not None and a["settle"]["settled"] in (True, False), str(a))




async def chromium(c) -> None:
    say(f"{CHROMIUM}:")
    r = await ok(c, "get_window_state", {"app": CHROMIUM, "max_elements": 5000})
    hello = find(r, "push_button", "Say hello")
    a = await act(c, "click", {"element_token": hello["element_token"]}, "press 'Say hello'")
    check(a["effect"] == "dispatched" and a["path"] == "atspi_action:press", str(a))
    check(any("hello 1" in x["label"] or "Clicked 1" in x["label"] for x in a["diff"]["changed"] + a["diff"]["added"]),
          f"the page's reaction shows in the diff: {a['diff']}")
    agree = find(r, "check_box", "I agree to the test terms")
    a = await act(c, "click", {"element_token": agree["element_token"]}, "check 'I agree'")
    check(a["verified"] is True and a["path"] == "atspi_action:check", str(a))
    blue = next(e for e in r["elements"] if e["role"] == "menu_item" and e["label"] == "Blue")
    a = await act(c, "click", {"element_token": blue["element_token"]}, "pick 'Blue' in the collapsed select")
    check(a["verified"] is True, str(a))
    after = await ok(c, "get_window_state", {"app": CHROMIUM, "max_elements": 5000})
    combo = find(after, "combo_box", "Favourite colour")
    check(find(after, "menu_item", "Blue")["states"].count("selected") == 1, "Blue is selected")
    say(f"    the select now shows {combo.get('value')!r}")
    name = find(after, "entry", "Your name")
    err = await fails(c, "type_text", {"element_token": name["element_token"], "text": "Ada"}, "requires_takeover")
    check(err["escalation"] == {"recommend": "takeover", "reason": "no_editable_text"}, str(err))
    check(err["effect"] == "refused", str(err))
    pw = find(after, "password_text", "Password")
    await fails(c, "set_value", {"element_token": pw["element_token"], "value": "x"}, "secure_field")


async def run(ns: argparse.Namespace) -> None:
    broker = h.Broker(ns.driver, "linux")
    person = h.Person(broker.env)
    try:
        async with h.host(ns.shim, broker, "acts-e2e") as c:
            st = await h.start_with_consent(c, person, {"apps": [GTK3, GTK4, CHROMIUM]})
            check(st["input"] == "headless", str(st))
            wins = await ok(c, "list_windows")
            pid = next(w["pid"] for w in wins["windows"] if w["app"].lower() == GTK3)
            # The person parks the pointer and focuses gtk3-demo (not approved); headless acts
            # must leave both where they are.
            person.move(1100, 700)
            person.xdotool("windowactivate", "--sync", str(ns.focus_window))
            before = (person.pointer(), person.xdotool("getactivewindow").strip())
            say(f"before: pointer {before[0]}, active window {before[1]}")

            await gtk3(c, {"pid": pid})
            await kept_recheck(c, {"pid": pid}, broker)
            await wait_steps(c, {"pid": pid})
            await gtk4(c)
            await chromium(c)

            say("refusals before anything is sent:")
            await fails(c, "press_key", {"key": "Return"}, "requires_takeover")
            r = await ok(c, "get_window_state", {"app": CHROMIUM})
            token = find(r, "push_button", "Say hello")["element_token"]
            narrowed = await ok(c, "start_session", {"apps": [GTK3, GTK4]})
            check(sorted(a["app"].lower() for a in narrowed["apps"]) == sorted([GTK3, GTK4]), str(narrowed))
            await fails(c, "click", {"element_token": token}, "app_not_in_scope")

            after = (person.pointer(), person.xdotool("getactivewindow").strip())
            say(f"after: pointer {after[0]}, active window {after[1]}")
            check(after == before, f"headless acts moved the pointer or the focus: {before} -> {after}")
            await ok(c, "end_session")
        acts = [e for e in broker.audit_events() if e["event"] == "act"]
        check(all(e["mode"] == "headless" for e in acts), "every act was headless")
        check(all(e["settle_by"] in ("events_objects", "events", "reads") for e in acts),
              "every act says what decided its settle")
        # The GTK 3 check button's click: GTK 3 sends the button's own state change, so its
        # events decide the settle, not reads until the window stops changing, and only the
        # objects that sent events are read again.
        cb_click = next(e for e in acts if e["tool"] == "click" and e["role"] == "check_box" and e["pid"] == pid)
        check(cb_click["verified"] is True and cb_click["settle_by"] == "events_objects",
              f"the check button's verified click was settled by its events: {cb_click}")
        by = {k: sum(1 for e in acts if e["settle_by"] == k) for k in ("events_objects", "events", "reads")}
        say(f"audit: settles by {by}")
        say(f"audit: the check button's click settled by {cb_click['settle_by']} in {cb_click['settle_ms']} ms")
        raw = open(broker.audit, encoding="utf-8").read()
        check("typed ✓" not in raw and "set by nish-driver" not in raw, "typed text reached the audit")
        say(f"audit: {len(acts)} acts, lengths only")
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
    p.add_argument("--focus-window", type=int, required=True, help="a window the person focuses first")
    ns = p.parse_args()
    anyio.run(run, ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
