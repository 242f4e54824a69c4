#!/usr/bin/env python3
"""Visible takeover on a real (nested) X desktop through the official MCP Python client, the real
`nish-mcp` and `nish-driver serve --backend linux` with its reader, input and indicator agents,
and a host control pipe.

The desktop is nested (Xephyr in Xvfb): the person is played with xdotool on the outer display, so
their pointer and keys arrive from real input devices; other programs are played with xdotool on
the desktop itself (XTEST). Apps: gtk3-widget-factory and Chromium on tests/pages/form.html.

    desktop_takeover.py --driver .../nish-driver --shim .../nish-mcp [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import threading
import time

import anyio

import nishhost as h
from nishhost import check, fails, ok, say

GTK3 = "gtk3-widget-factory"
CHROMIUM = "chromium"


def held_keys(person: h.Person) -> list[int]:
    """Keycodes the X server has down now (QueryKeymap on the desktop)."""
    d = person._display()
    try:
        bits = d.query_keymap()
        return [i * 8 + b for i, byte in enumerate(bits) for b in range(8) if byte & (1 << b)]
    finally:
        d.close()


def keymap(person: h.Person) -> list[tuple[int, ...]]:
    """The desktop's whole keyboard mapping."""
    d = person._display()
    try:
        first = d.display.info.min_keycode
        count = d.display.info.max_keycode - first + 1
        return [tuple(row) for row in d.get_keyboard_mapping(first, count)]
    finally:
        d.close()


def pixel(person: h.Person, x: int, y: int) -> tuple[int, int, int]:
    from Xlib import X

    d = person._display()
    try:
        img = d.screen().root.get_image(x, y, 1, 1, X.ZPixmap, 0xFFFFFFFF)
        b, g, r = img.data[0], img.data[1], img.data[2]
        return r, g, b
    finally:
        d.close()


def is_red(p: tuple[int, int, int]) -> bool:
    r, g, b = p
    return r > 0x70 and r > 2 * g and r > 2 * b


def find_row(read: dict, pred) -> dict:
    for e in read["elements"]:
        if pred(e):
            return e
    raise AssertionError(f"no matching row in snapshot {read['snapshot_id']}")


async def paused_by(ctl: h.Control, session: str, reason: str) -> dict:
    ev = await ctl.wait(lambda e: e.get("event") == "takeover.paused", "takeover.paused")
    check(ev["session"] == session and ev["reason"] == reason, f"paused event {ev}")
    return ev


async def run(ns: argparse.Namespace) -> None:
    broker = h.Broker(ns.driver, "linux")
    person = h.Person(broker.env)
    out = ns.out
    os.makedirs(out, exist_ok=True)
    try:
        import json

        report = json.loads(broker.cli("doctor", "--json").stdout)
        caps = {cap["name"]: cap for cap in report["capabilities"]}
        for name in ("input_takeover", "takeover_indicator", "takeover_handback"):
            check(caps[name]["status"] == "available", f"doctor: {name} {caps[name]}")
        entries = {b["id"]: b for b in report["backends"]}
        for name in ("xtest", "xinput2", "xres"):
            check(entries[name]["status"] == "available", f"doctor: {name} {entries[name]}")
        say("doctor: input_takeover, takeover_indicator and takeover_handback available "
            "(XTEST, XInput 2, X-Resource; the indicator holds the stop hotkey)")

        ctl = h.Control()
        async with h.host(ns.shim, broker, "takeover-e2e", "2025-11-25", ctl) as c:
            say("start_session {input: takeover}: the dialog shows the takeover line, unticked")

            def consent() -> None:
                allow = person.wait_window("nish-driver consent: allow")
                takeover = person.wait_window("nish-driver consent: takeover")
                time.sleep(0.7)
                person.attacker_click_window(takeover)
                person.attacker_click_window(allow)
                time.sleep(0.5)
                check(person.windows("nish-driver consent: allow") != [], "an XTEST click answered the dialog")
                say("    another program: XTEST clicks on the takeover line and on Allow are ignored")
                time.sleep(0.6)
                person.click_window(takeover)
                person.click_window(allow)
                say("    person (their own mouse): ticks ALSO allow VISIBLE TAKEOVER, then Allow")

            t = threading.Thread(target=consent)
            t.start()
            st = await ok(c, "start_session", {"input": "takeover", "apps": [GTK3, CHROMIUM]})
            t.join()
            sid = st["session"]
            check(st["input"] == "takeover" and st["takeover"]["on"] is True and st["takeover"]["indicator"] is True, str(st))
            frame = person.wait_window("nish-driver indicator: frame")
            time.sleep(0.3)
            edge = pixel(person, 640, 2)
            check(is_red(edge), f"the frame is on screen: pixel at 640,2 is {edge}")
            person.screenshot(os.path.join(out, "takeover-frame.png"))
            say(f"  granted: takeover on, frame {frame} on screen (pixel at the top edge {edge}); "
                f"screenshot {out}/takeover-frame.png")

            # ---- GTK 3: a foreground click and typing, verified by readback ----------------
            say(f"{GTK3}: bring it to the front, click a check button, type into the entry")
            r = await ok(c, "get_window_state", {"app": GTK3, "max_elements": 5000})
            b = await ok(c, "bring_to_front", {"app": GTK3})
            say(f"  bring_to_front: effect {b['effect']}, path {b['path']}")
            r = await ok(c, "get_window_state", {"app": GTK3, "max_elements": 5000})
            cb = find_row(r, lambda e: e["role"] == "check_box" and e["label"] == "checkbutton"
                          and not set(e["states"]) & {"disabled", "checked", "indeterminate", "offscreen"})
            a = await ok(c, "click", {"element_token": cb["element_token"], "delivery_mode": "foreground"})
            check(a["path"] == "xtest:click" and a["took_cursor"] is True, str(a))
            check(a["effect"] == "confirmed" and a["verified"] is True, f"the check button's own state shows the click: {a}")
            say(f"  foreground click {cb['element_token']}: effect {a['effect']}, verified {a['verified']}, path {a['path']}")
            r = await ok(c, "get_window_state", {"app": GTK3, "max_elements": 5000})
            entry = find_row(r, lambda e: e["role"] == "text" and e.get("value") == "entry" and "disabled" not in e["states"])
            before = keymap(person)
            # Ü, €, ñ, ø, ß and å are not on the keymap: each gets a spare key of its own while
            # spares last (a key remapped while the app still reads its last press would type
            # the new character twice); the repeats reuse theirs.
            typed = "-typed Ü€ñøßåÜ€"
            a = await ok(c, "type_text", {"element_token": entry["element_token"], "text": typed, "delivery_mode": "foreground"})
            check(a["path"] == "xtest:type", str(a))
            r = await ok(c, "get_window_state", {"app": GTK3, "max_elements": 5000})
            value = r["elements"][entry["element_index"]].get("value")
            check(typed in value, f"the entry reads back the typed text: {value!r}")
            check(keymap(person) == before, "the keymap is as it was (the borrowed keys are given back)")
            say(f"  foreground type_text (characters the keymap lacks through borrowed spare keys, "
                f"given back): effect {a['effect']}, the entry now reads {value!r}")
            check(held_keys(person) == [], f"keys held after typing: {held_keys(person)}")

            # The field now holds the focus: typing into it again sends no click, and each text
            # goes at its caret. A click there each time was taken by GTK for a double click when
            # its timer for that ran late, and it selected a word or moved the caret while the
            # keys arrived: these five rounds went wrong in 15 of 30 rounds that way.
            again = "-again again again again"
            def sent(op: str) -> int:
                """The synthetic acts of kind `op` the input agent has logged as ended."""
                return len(re.findall(rf"synthetic act ended id=\d+ op={op} ", broker.log_text(None)))

            clicks, types = sent("click"), sent("type")
            for k in range(5):
                await ok(c, "set_value", {"element_token": entry["element_token"], "value": "entry"})
                for piece in (typed, again):
                    a = await ok(c, "type_text", {"element_token": entry["element_token"], "text": piece,
                                                  "delivery_mode": "foreground"})
                    check(a["path"] == "xtest:type", str(a))
                r = await ok(c, "get_window_state", {"app": GTK3, "max_elements": 5000})
                value = r["elements"][entry["element_index"]].get("value")
                # The caret a new text leaves: at its start or at its end, as the app puts it.
                if value == typed + again + "entry":
                    head, tail = typed + again, "entry"
                else:
                    check(value == "entry" + typed + again, f"round {k}: two texts typed in a row read "
                                                            f"back whole and in order: {value!r}")
                    head, tail = value, ""
            deadline = time.monotonic() + 3
            while sent("type") < types + 10 and time.monotonic() < deadline:
                time.sleep(0.1)
            check(sent("type") == types + 10 and sent("click") == clicks,
                  f"ten texts, no click: {sent('type') - types} typed, {sent('click') - clicks} "
                  f"clicks (the input agent's log)")
            say(f"  five rounds of two texts into the focused field, no click: the entry reads {value!r}")

            # A long text runs past the engine's 10 s bound for a call that hangs: it is given
            # its pace, typed whole, and answered done (not a timeout with the agent typing on).
            long_text = "-" + "long " * 400
            t0 = time.monotonic()
            a = await ok(c, "type_text", {"element_token": entry["element_token"], "text": long_text,
                                          "delivery_mode": "foreground"})
            took = time.monotonic() - t0
            check(a["path"] == "xtest:type", str(a))
            check(took > 10.0, f"{len(long_text)} characters at the X11 pace take more than 10 s: {took:.1f} s")
            check(held_keys(person) == [], f"keys held after the long text: {held_keys(person)}")
            r = await ok(c, "get_window_state", {"app": GTK3, "max_elements": 5000})
            value = r["elements"][entry["element_index"]].get("value") or ""
            # A field's value reads back its first 200 characters or so.
            want = (head + long_text + tail)[:len(value)]
            if value != want or len(value) < 150:
                at = next((i for i, (x, y) in enumerate(zip(value, want)) if x != y), min(len(value), len(want)))
                check(False, f"the entry reads back {len(value)} characters, {len(want)} expected; they differ "
                             f"from character {at}: {value[max(0, at - 10):at + 30]!r}")
            say(f"  a text of {len(long_text)} characters: typed whole in {took:.1f} s (past the 10 s "
                f"bound for a hang), answered {a['effect']}")
            # The entry as it was (the steps below count what they type into it).
            a = await ok(c, "set_value", {"element_token": entry["element_token"], "value": head + tail})
            check(a["readback"] == "match", str(a))

            # ---- a second host's consent while the frame is on screen -----------------------
            say("a second host asks while the takeover frame is on screen")
            async with h.host(ns.shim, broker, "second-host", "2025-11-25") as c2:
                st2 = await h.start_with_consent(c2, person, {"apps": [GTK3]})
                check(st2["state"] == "granted", str(st2))
            say("  the frame does not disarm the dialog: the person's click consents")
            ev = await ctl.wait(lambda e: e.get("event") == "takeover.paused", "takeover.paused")
            check(ev["session"] == sid, str(ev))
            say(f"  the person's own mouse on the dialog paused the first host's takeover ({ev['reason']}); "
                "the host resumes it")
            ctl.send({"method": "takeover.resume", "params": {"session": sid}})
            await ctl.wait(lambda e: e.get("event") == "takeover.resumed", "takeover.resumed")

            # ---- Chromium: the <input> headless mode cannot type into ----------------------
            say(f"{CHROMIUM}: type into the page's <input> (headless typing is refused there)")
            await ok(c, "bring_to_front", {"app": CHROMIUM})
            await anyio.sleep(0.5)
            r = await ok(c, "get_window_state", {"app": CHROMIUM, "max_elements": 5000})
            name = find_row(r, lambda e: e["role"] == "entry" and e["label"] == "Your name")
            err = await fails(c, "type_text", {"element_token": name["element_token"], "text": "Ada"}, "requires_takeover")
            a = await ok(c, "type_text", {"element_token": name["element_token"], "text": "Ada Lovelace", "delivery_mode": "foreground"})
            deadline = time.monotonic() + 5
            while True:
                r = await ok(c, "get_window_state", {"app": CHROMIUM, "max_elements": 5000})
                now = find_row(r, lambda e: e["role"] == "entry" and e["label"] == "Your name")
                if now.get("value") == "Ada Lovelace":
                    break
                check(time.monotonic() < deadline, f"the <input> reads {now.get('value')!r}")
                await anyio.sleep(0.1)
            say(f"  foreground type_text into <input>: effect {a['effect']}; the page reads back {now.get('value')!r}")

            # ---- keys while the focus is in the password field -----------------------------
            say(f"{CHROMIUM}: keys while the keyboard focus is in the page's password field")
            pw = find_row(r, lambda e: e["role"] == "password_text")
            await ok(c, "click", {"element_token": pw["element_token"], "delivery_mode": "foreground"})
            deadline = time.monotonic() + 5
            while "focused" not in find_row(r, lambda e: e["role"] == "password_text")["states"]:
                check(time.monotonic() < deadline, "the password field never took the focus")
                await anyio.sleep(0.1)
                r = await ok(c, "get_window_state", {"app": CHROMIUM, "max_elements": 5000})
            for tool, args in [("press_key", {"key": "a"}), ("press_key", {"key": "BackSpace"}),
                               ("hotkey", {"keys": ["ctrl", "c"]}), ("hotkey", {"keys": ["ctrl", "a"]})]:
                e = await fails(c, tool, args, "secure_field")
                check(e.get("effect") in (None, "refused"), str(e))
            await ok(c, "press_key", {"key": "Tab"})
            deadline = time.monotonic() + 5
            while True:
                r = await ok(c, "get_window_state", {"app": CHROMIUM, "max_elements": 5000})
                if "focused" not in find_row(r, lambda e: e["role"] == "password_text")["states"]:
                    break
                check(time.monotonic() < deadline, "Tab did not move the focus on")
                await anyio.sleep(0.1)
            say("  a character, BackSpace, Ctrl+C and Ctrl+A: secure_field; Tab sent, "
                "and the focus moved on")

            # ---- the person moves the mouse mid-glide -------------------------------------
            say("the person moves the mouse while the driver glides the pointer")
            r = await ok(c, "get_window_state", {"app": CHROMIUM, "max_elements": 5000})
            target = find_row(r, lambda e: e["role"] == "push_button" and e["label"] == "Add item")

            async def glide():
                return await c.call_tool("move_cursor", {"element_token": target["element_token"], "duration_ms": 3000})

            def person_moves() -> None:
                time.sleep(0.8)
                person.xdotool("mousemove", "300", "300")
                person.xdotool("mousemove", "310", "320")

            mover = threading.Thread(target=person_moves)
            mover.start()
            res = await glide()
            mover.join()
            check(res.is_error, f"the glide should stop: {res.structured_content}")
            e = res.structured_content["error"]
            check(e["code"] == "user_took_over" and e["effect"] == "stopped" and e["paused_reason"] == "pointer_moved", str(e))
            say(f"  move_cursor: {e['code']} (effect {e['effect']}, paused_reason {e['paused_reason']})")
            await paused_by(ctl, sid, "pointer_moved")
            st = await ok(c, "get_session_state")
            check(st["takeover"]["paused"] is True and st["takeover"]["paused_reason"] == "pointer_moved", str(st))
            err = await fails(c, "click", {"element_token": target["element_token"], "delivery_mode": "foreground"}, "user_took_over")
            check(err["effect"] == "refused", str(err))
            await ok(c, "get_window_state", {"app": CHROMIUM})
            say("  while paused: acts refused (user_took_over, effect refused), reads work")

            cont = person.wait_window("nish-driver indicator: continue")
            time.sleep(0.7)
            person.screenshot(os.path.join(out, "takeover-paused.png"))
            say(f"  the frame dims and shows Continue; screenshot {out}/takeover-paused.png")
            person.attacker_click_window(cont)
            time.sleep(0.8)
            st = await ok(c, "get_session_state")
            check(st["takeover"]["paused"] is True, "an XTEST click on Continue must not resume")
            say("  another program: an XTEST click on Continue is ignored")
            time.sleep(0.6)
            person.click_window(cont)
            ev = await ctl.wait(lambda e: e.get("event") == "takeover.resumed", "takeover.resumed")
            check(ev["by"] == "indicator" and ev["session"] == sid, str(ev))
            await fails(c, "click", {"element_token": target["element_token"], "delivery_mode": "foreground"}, "stale_element_token")
            say(f"  the person clicks Continue: {ev}; older tokens are stale")

            # ---- the person presses a key mid-typing ----------------------------------------
            say("the person presses a key while the driver types")
            await ok(c, "bring_to_front", {"app": GTK3})
            r = await ok(c, "get_window_state", {"app": GTK3, "max_elements": 5000})
            entry = find_row(r, lambda e: e["role"] == "text" and "disabled" not in e["states"]
                             and e.get("value") is not None and "-typed" in e.get("value"))
            text = "abcdefghij" * 30
            typed_before = r["elements"][entry["element_index"]].get("value")

            def person_types() -> None:
                time.sleep(0.6)
                person.xdotool("key", "shift")

            typer = threading.Thread(target=person_types)
            typer.start()
            res = await c.call_tool("type_text", {"element_token": entry["element_token"], "text": text, "delivery_mode": "foreground"})
            typer.join()
            check(res.is_error, "typing should stop")
            e = res.structured_content["error"]
            check(e["code"] == "user_took_over" and e["paused_reason"] == "key_pressed", str(e))
            typed = e["typed_characters"]
            check(0 < typed < len(text), f"typed_characters {typed}")
            await paused_by(ctl, sid, "key_pressed")
            time.sleep(0.2)
            check(held_keys(person) == [], f"keys held after the stop: {held_keys(person)}")
            r = await ok(c, "get_window_state", {"app": GTK3, "max_elements": 5000})
            value = r["elements"][entry["element_index"]].get("value")
            check(len(value) - len(typed_before) == typed,
                  f"the entry holds exactly the {typed} characters reported typed ({len(value) - len(typed_before)})")
            say(f"  type_text: {e['code']}, paused_reason {e['paused_reason']}, typed_characters {typed} of "
                f"{len(text)}; no key held (QueryKeymap empty)")

            ctl.send({"method": "takeover.resume", "params": {"session": sid}})
            ack = await ctl.wait(lambda e: e.get("event") == "ack", "the resume ack")
            check(ack.get("resumed") == [sid], str(ack))
            ev = await ctl.wait(lambda e: e.get("event") == "takeover.resumed", "takeover.resumed")
            check(ev["by"] == "host", str(ev))
            say("  the host resumes after its own Resume click (control pipe): takeover.resumed by host")

            # ---- another program's XTEST key press mid-typing ---------------------------------
            say("another program injects a key (XTEST) while the driver types")
            r = await ok(c, "get_window_state", {"app": GTK3, "max_elements": 5000})
            entry = find_row(r, lambda e: e["role"] == "text" and "disabled" not in e["states"]
                             and e.get("value") is not None and "-typed" in e.get("value"))

            def other_program() -> None:
                time.sleep(0.6)
                person.attacker_xdotool("key", "shift")

            injector = threading.Thread(target=other_program)
            injector.start()
            res = await c.call_tool("type_text", {"element_token": entry["element_token"], "text": text, "delivery_mode": "foreground"})
            injector.join()
            check(res.is_error, "typing should stop")
            e = res.structured_content["error"]
            check(e["code"] == "user_took_over" and e["paused_reason"] == "key_pressed", str(e))
            await paused_by(ctl, sid, "key_pressed")
            check(held_keys(person) == [], f"keys held: {held_keys(person)}")
            say(f"  type_text: {e['code']} after {e['typed_characters']} characters; no key held")
            ctl.send({"method": "takeover.resume", "params": {"session": sid}})
            await ctl.wait(lambda e: e.get("event") == "takeover.resumed", "takeover.resumed")

            # ---- another client unmaps the indicator ----------------------------------------
            say("another X client unmaps the takeover frame")
            person.attacker_xdotool("windowunmap", str(frame))
            deadline = time.monotonic() + 5
            while True:
                st = await ok(c, "get_session_state")
                if st["takeover"]["on"] is False:
                    break
                check(time.monotonic() < deadline, "the takeover did not end")
                await anyio.sleep(0.05)
            check(st["takeover"].get("reason") == "indicator_unmapped", str(st))
            await fails(c, "press_key", {"key": "Return"}, "requires_takeover")
            check(person.windows("nish-driver indicator: frame") == [], "the frame is gone")
            say(f"  the takeover ended: takeover {st['takeover']}; synthetic acts need a new takeover")

            # ---- the stop hotkey ---------------------------------------------------------------
            say("a new takeover, then the person presses the stop hotkey (Ctrl+Alt+Shift+Escape)")
            st = await h.start_with_consent(c, person, {"input": "takeover", "apps": [GTK3]}, ("takeover",))
            check(st["takeover"]["on"] is True, str(st))
            person.wait_window("nish-driver indicator: frame")
            person.xdotool("key", "ctrl+alt+shift+Escape")
            deadline = time.monotonic() + 5
            while person.windows("nish-driver indicator: frame"):
                check(time.monotonic() < deadline, "the frame did not go")
                time.sleep(0.02)
            await fails(c, "get_window_state", {"app": GTK3}, "stopped_by_person")
            check(held_keys(person) == [], f"keys held: {held_keys(person)}")
            say("  everything stopped (stopped_by_person), the frame is gone, no key held")

        events = [e["event"] for e in broker.audit_events()]
        for want in ("takeover.granted", "takeover.paused", "takeover.resumed", "takeover.ended", "stop"):
            check(want in events, f"audit lacks {want}")
        with open(broker.audit, encoding="utf-8") as f:
            raw = f.read()
        check("Lovelace" not in raw and "abcdefghij" not in raw, "typed text reached the audit")
        say(f"audit: {len(events)} events, no typed text")
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
    p.add_argument("--out", default="takeover-out")
    ns = p.parse_args()
    anyio.run(run, ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
