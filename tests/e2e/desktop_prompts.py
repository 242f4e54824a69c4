#!/usr/bin/env python3
"""The desktop's own prompts are told by their process's executable, through the whole real
driver: the real `nish-driver serve --backend linux`, its agents (the consent dialog is the
indicator's) and the real `nish-mcp`, driven by the official MCP Python client, on a real
(nested) desktop with two copies of one GTK 3 app (tests/apps/prompt_gtk3.py):

- the impostor: run by a copy of the Python interpreter named like GnuPG's pinentry
  (`pinentry-gnome3`, one of `nish_proto::prompts::PROGRAMS`), calling itself "Notes" in a window
  titled "Notes";
- the control: run by the ordinary interpreter, calling itself `pinentry-gnome3` (the impostor's
  executable name, a listed prompt program, and not one of the accessibility names of
  `nish_proto::prompts::APPS`, the second signal that hides by name) in a window titled
  "Authentication Required".

The host asks for both by name, in a takeover, and the person allows with a real click:

- consent_dialog: the dialog's app lines offer the control and not the impostor (it counts
  "Notes" among the requested apps that are not open), and the grant binds the control's
  process alone;
- impostor: list_windows never shows its window or pid; its window id, pid and "Notes" are not
  found by get_window_state, wait_for or bring_to_front (`window_target_not_found`, the answer
  of a window that is not there, where an app the person merely left unticked answers
  `app_not_in_scope`); with the keyboard focus in it a key is refused and a point over it is
  refused (`app_not_in_scope`); its Allow was never pressed;
- control: listed with its name and title, read (its Allow button among the rows), a key goes
  to it when it has the keyboard focus, the pointer moves over it, and its Allow is pressed.

    desktop_prompts.py --driver .../nish-driver --shim .../nish-mcp
        --impostor-pid N --impostor-window N --impostor-pressed FILE
        --control-pid N --control-window N --control-pressed FILE
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
import traceback
from typing import Any

import anyio

import nishhost as h
from nishhost import check, fails, ok, say

IMPOSTOR = "Notes"
CONTROL = "pinentry-gnome3"
CONTROL_TITLE = "Authentication Required"
LINE = "nish-driver consent: app:"


def dialog_app_lines(person: h.Person) -> list[str]:
    """The app names on the consent dialog's lines (each line is a window named after its app)."""
    p = subprocess.run(["xdotool", "search", "--name", f"^{LINE}"], env=person.env,
                       capture_output=True, text=True, timeout=20)
    names = []
    for wid in p.stdout.split():
        name = person.xdotool("getwindowname", wid).rstrip("\n")
        check(name.startswith(LINE), f"a line window named {name!r}")
        names.append(name[len(LINE):])
    return sorted(names)


def person_reads_and_allows(person: h.Person, seen: dict[str, Any]) -> None:
    """The person reads the dialog's app lines, ticks the takeover line and allows, each with a
    real click."""
    try:
        allow = person.wait_window("nish-driver consent: allow")
        # The dialog ignores clicks in its first 500 ms.
        time.sleep(1.6)
        seen["lines"] = dialog_app_lines(person)
        person.click_window(person.wait_window("nish-driver consent: takeover"))
        person.click_window(allow)
        seen["answer"] = "allow"
        say("    person (xdotool, real clicks): takeover, Allow")
    except Exception as e:  # the start_session fails too, and says this
        seen["answer"] = f"no answer: {e}"


async def consent_dialog(st: dict[str, Any], seen: dict[str, Any],
                         events: list[dict[str, Any]], ns: argparse.Namespace) -> None:
    lines = seen.get("lines", [])
    say(f"consent_dialog: the dialog's app lines: {lines}")
    check(CONTROL in lines, f"the control ({CONTROL}, the ordinary interpreter) is offered: {lines}")
    check(IMPOSTOR not in lines,
          f"the impostor ({IMPOSTOR}, run by an executable named {CONTROL}) is offered: {lines}")
    asked = [e for e in events if e.get("event") == "consent.request"]
    check(len(asked) == 1, f"one consent.request: {events}")
    check(asked[0]["missing_requested"] == 1,
          f"the dialog counts {IMPOSTOR} among the requested apps that are not open: {asked[0]}")
    check(asked[0]["apps_ticked"] == 1, f"only the control is pre-ticked: {asked[0]}")
    say(f"    {IMPOSTOR} is not offered (counted as a requested app that is not open); "
        f"{CONTROL} is offered and pre-ticked")
    check(st["apps"] == [{"app": CONTROL, "pids": [ns.control_pid]}],
          f"the grant binds the control's process alone: {st['apps']}")
    check(st["takeover"]["on"] is True, f"takeover: {st['takeover']}")
    say(f"    granted: {st['apps']}, takeover on")


async def impostor(c: Any, person: h.Person, ns: argparse.Namespace) -> None:
    say(f"impostor: {IMPOSTOR} (pid {ns.impostor_pid}, window {ns.impostor_window}), "
        f"run by an executable named {CONTROL}")
    wins = (await ok(c, "list_windows"))["windows"]
    check(not [w for w in wins if w["window_id"] == ns.impostor_window or w["pid"] == ns.impostor_pid
               or w["app"] == IMPOSTOR],
          f"list_windows shows the impostor: {wins}")
    check([w["window_id"] for w in wins] == [ns.control_window], f"list_windows: {wins}")
    say("    list_windows: not there")
    targets = [{"window_id": ns.impostor_window}, {"pid": ns.impostor_pid},
               {"window_id": ns.impostor_window, "pid": ns.impostor_pid}, {"app": IMPOSTOR}]
    for t in targets:
        err = await fails(c, "get_window_state", {**t, "max_elements": 50}, "window_target_not_found")
        check(IMPOSTOR not in err["message"] and CONTROL not in err["message"], str(err))
        err = await fails(c, "wait_for", {**t, "role": "push_button", "name": "Allow",
                                          "until": "appears", "timeout_ms": 100},
                          "window_target_not_found")
        check(IMPOSTOR not in err["message"], str(err))
    await fails(c, "bring_to_front", {"window_id": ns.impostor_window}, "window_target_not_found")
    say("    its window id, pid and app name: not found by get_window_state, wait_for, "
        "bring_to_front")
    # The person (another program would do the same) gives it the keyboard focus and raises it.
    person.xdotool("windowactivate", "--sync", str(ns.impostor_window))
    x, y, w, hh = person.geometry(ns.impostor_window)
    err = await fails(c, "press_key", {"key": "Return"}, "app_not_in_scope")
    check(IMPOSTOR not in err["message"], str(err))
    await fails(c, "hotkey", {"keys": ["alt", "a"]}, "app_not_in_scope")
    err = await fails(c, "move_cursor", {"x": x + w // 2, "y": y + hh // 2, "scope": "desktop"},
                      "app_not_in_scope")
    check(IMPOSTOR not in err["message"], str(err))
    say("    with the keyboard focus in it, keys: app_not_in_scope; a point over it: app_not_in_scope")
    time.sleep(0.3)
    check(not os.path.exists(ns.impostor_pressed), "the impostor's Allow was pressed")
    say("    its Allow was never pressed")


async def control(c: Any, person: h.Person, ns: argparse.Namespace) -> None:
    say(f"control: {CONTROL} (pid {ns.control_pid}, window {ns.control_window}), "
        "run by the ordinary interpreter")
    wins = (await ok(c, "list_windows"))["windows"]
    mine = [w for w in wins if w["window_id"] == ns.control_window]
    check(len(mine) == 1, f"list_windows shows the control's window: {wins}")
    check(mine[0]["pid"] == ns.control_pid and mine[0]["app"] == CONTROL
          and mine[0]["title"] == CONTROL_TITLE, f"the control's window: {mine[0]}")
    say(f"    list_windows: {mine[0]['app']!r}, {mine[0]['title']!r}")
    for t in ({"window_id": ns.control_window}, {"pid": ns.control_pid}, {"app": CONTROL}):
        r = await ok(c, "get_window_state", {**t, "max_elements": 200})
        check(r["window"]["window_id"] == ns.control_window, f"read {t}: {r['window']}")
    allow = h.find(r, "push_button", "Allow")
    say(f"    read by window id, pid and app name: {len(r['elements'])} rows, Allow among them")
    await ok(c, "bring_to_front", {"window_id": ns.control_window})
    person.xdotool("windowactivate", "--sync", str(ns.control_window))
    await ok(c, "press_key", {"key": "Tab"})
    x, y, w, hh = person.geometry(ns.control_window)
    await ok(c, "move_cursor", {"x": x + w // 2, "y": y + hh // 2, "scope": "desktop"})
    say("    with the keyboard focus in it, a key is sent; the pointer moves over it")
    await ok(c, "click", {"element_token": allow["element_token"]})
    deadline = time.monotonic() + 10
    while not os.path.exists(ns.control_pressed):
        check(time.monotonic() < deadline, "the control's Allow was not pressed")
        await anyio.sleep(0.05)
    say("    click on its Allow: pressed")


async def run(ns: argparse.Namespace) -> None:
    broker = h.Broker(ns.driver, "linux")
    person = h.Person(broker.env)
    failed: list[str] = []
    try:
        async with h.host(ns.shim, broker, "prompts-e2e", "2025-11-25") as c:
            say(f"start_session {{apps: [{IMPOSTOR}, {CONTROL}], input: takeover}}")
            seen: dict[str, Any] = {}
            t = threading.Thread(target=person_reads_and_allows, args=(person, seen))
            t.start()
            try:
                st = await ok(c, "start_session", {"apps": [IMPOSTOR, CONTROL], "input": "takeover",
                                                    "lease_s": 600})
            finally:
                t.join()
            check(seen.get("answer") == "allow", f"the person's answer: {seen}")
            events = broker.audit_events()
            cases = [("consent_dialog", lambda: consent_dialog(st, seen, events, ns)),
                     ("impostor", lambda: impostor(c, person, ns)),
                     ("control", lambda: control(c, person, ns))]
            for name, case in cases:
                try:
                    await case()
                    say(f"PASSED {name}")
                except Exception as e:  # each case runs apart; all are reported
                    why = "".join(traceback.format_exception(e))
                    failed.append(f"{name}: {why}")
                    say(f"FAILED {name}: {why}")
            await ok(c, "end_session")
    except BaseException:
        say("broker log:\n" + broker.log_text())
        raise
    finally:
        if failed:
            say("broker log:\n" + broker.log_text())
        broker.stop()
    if failed:
        raise AssertionError("; ".join(failed))
    say("ALL CHECKS PASSED")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--driver", required=True)
    p.add_argument("--shim", required=True)
    p.add_argument("--impostor-pid", type=int, required=True)
    p.add_argument("--impostor-window", type=int, required=True)
    p.add_argument("--impostor-pressed", required=True)
    p.add_argument("--control-pid", type=int, required=True)
    p.add_argument("--control-window", type=int, required=True)
    p.add_argument("--control-pressed", required=True)
    anyio.run(run, p.parse_args())
    return 0


if __name__ == "__main__":
    sys.exit(main())
