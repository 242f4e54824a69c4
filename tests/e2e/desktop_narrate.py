"""The consent dialog read out, on a nested test desktop with the real `nish-driver serve`, its
agents (the dialog is the indicator's) and the real `nish-mcp`:

- read_out_and_nothing_to_press: while the dialog is up, a screen reader's view (pyatspi, in
  the system python: atspi_narration.py read) finds the application "nish-driver consent":
  its dialog with the question, the program, the lease, the app line with its tick and the
  focus ring on Deny, all labels, and no object with an Action interface. An attacker on the
  raw accessibility bus (atspi_narration.py attack) calls every state-changing method it can
  on every object (DoAction, SetTextContents, GrabFocus, SetCurrentValue, Properties.Set, ...):
  each fails, and the text is what it was. The person's click on the app line is read out
  as "not ticked"; the person's Deny answers consent_denied (the attack changed no answer), and
  the application leaves the registry when the dialog closes.
- a_withdrawn_dialog_leaves_the_registry: the client gives up while the dialog is up: the
  dialog closes and its text leaves the registry.

    desktop_narrate.py --driver .../nish-driver --shim .../nish-mcp --app NAME
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import traceback

import anyio

import nishhost as h
from nishhost import check, say

HERE = os.path.dirname(os.path.abspath(__file__))
# pyatspi and GI are the system's.
SYSTEM_PYTHON = os.environ.get("NISH_SYSTEM_PYTHON", "/usr/bin/python3")


def atspi(env: dict[str, str], what: str) -> dict:
    p = subprocess.run([SYSTEM_PYTHON, os.path.join(HERE, "atspi_narration.py"), what],
                       env=env, capture_output=True, text=True, timeout=60)
    check(p.returncode == 0,
          f"atspi_narration.py {what}: exit {p.returncode}: {p.stdout[-2000:]} {p.stderr[-2000:]}")
    return json.loads(p.stdout)


def wait_read(env: dict[str, str], pred, what: str, timeout: float = 15.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        r = atspi(env, "read")
        if pred(r):
            return r
        check(time.monotonic() < deadline, f"{what}: {r}")
        time.sleep(0.2)


def names(r: dict) -> list[str]:
    return [line["name"] for line in r["lines"]]


def app_line(r: dict, app: str) -> dict:
    lines = [line for line in r["lines"] if f'"{app}"' in line["name"]]
    check(len(lines) == 1, f"one line for the app {app}: {names(r)}")
    return lines[0]


def read_out_and_nothing_to_press_person(broker: h.Broker, person: h.Person,
                                         ns: argparse.Namespace) -> None:
    env = broker.env
    person.wait_window("nish-driver consent: deny", timeout=30)
    r = wait_read(env, lambda r: r.get("found"), "the dialog's text on the registry")
    check(r["apps"] == 1 and r["role"] == "application", f"one application: {r}")
    check(r["dialog"]["role"] == "dialog"
          and r["dialog"]["name"] == "A program asks to use your apps", f"the dialog: {r}")
    lines = names(r)
    say("    read out: " + " | ".join(lines))
    check(lines[0] == "A program asks to use your apps", f"the question first: {lines}")
    check(any(line.startswith("Program: ") and "(pid " in line for line in lines),
          f"the program: {lines}")
    check("Lease: 5 minutes, then it must ask again." in lines, f"the lease: {lines}")
    line = app_line(r, ns.app)
    check(line["name"].endswith(": ticked") and line["checked"], f"the app ticked: {line}")
    check("ALSO allow VISIBLE TAKEOVER: not ticked" in lines or not any(
        "TAKEOVER" in x for x in lines), f"the takeover line: {lines}")
    check("Deny" in lines and "Allow" in lines, f"the buttons: {lines}")
    check(lines[-1] == "The focus ring is on: Deny", f"the focus ring: {lines}")
    deny = [x for x in r["lines"] if x["name"] == "Deny"][0]
    check(deny["focused"], f"Deny focused: {deny}")
    check(all(x["role"] == "label" for x in r["lines"]), f"labels only: {r['lines']}")
    check(r["offers_action"] == [], f"objects offering an action: {r['offers_action']}")
    check(all("Action" not in x["interfaces"] for x in r["lines"]), f"{r['lines']}")
    say(f"    pyatspi: {r['objects']} objects, labels only, none offers an action")

    a = atspi(env, "attack")
    check(a["found"], f"the attacker finds the application: {a}")
    check(a["succeeded"] == [], f"state-changing calls that did not fail: {a['succeeded']}")
    check(a["role_after"] == 75, f"the application still answers reads: {a}")
    say(f"    attacker: {a['calls']} state-changing calls on {a['objects']} objects, all failed")
    again = atspi(env, "read")
    check(names(again) == lines, f"the text changed under the attack: {names(again)}")

    # The person unticks the app: the text says so.
    time.sleep(0.7)  # the dialog ignores clicks in its first 500 ms
    wid = int(person.xdotool("search", "--name", "^nish-driver consent: app:").split()[0])
    person.click_window(wid)
    r = wait_read(env, lambda r: r.get("found") and app_line(r, ns.app)["name"].endswith(
        ": not ticked"), "the untick read out")
    check(not app_line(r, ns.app)["checked"], f"{app_line(r, ns.app)}")
    say("    the person's untick is read out")
    person.click_window(person.wait_window("nish-driver consent: deny"))
    say("    person (a real click): Deny")


async def read_out_and_nothing_to_press(broker: h.Broker, person: h.Person,
                                        ns: argparse.Namespace) -> None:
    say("read_out_and_nothing_to_press: the dialog read with pyatspi, attacked, answered")
    async with h.host(ns.shim, broker, "narrate-e2e") as c:
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, read_out_and_nothing_to_press_person,
                          broker, person, ns)
            await h.fails(c, "start_session", {"apps": [ns.app], "lease_s": 300},
                          "consent_denied")
        say("    start_session: consent_denied, the person's answer")
        wait_read(broker.env, lambda r: not r.get("found"),
                  "the dialog's text is still on the registry after the answer")
        say("    the dialog's text left the registry")


async def a_withdrawn_dialog_leaves_the_registry(broker: h.Broker, person: h.Person,
                                                 ns: argparse.Namespace) -> None:
    say("a_withdrawn_dialog_leaves_the_registry: the client gives up while the dialog is up")
    async with h.host(ns.shim, broker, "narrate-withdraw-e2e") as c:
        async def give_up_once_read(scope: anyio.CancelScope) -> None:
            await anyio.to_thread.run_sync(
                lambda: wait_read(broker.env, lambda r: r.get("found"), "the dialog's text"))
            scope.cancel()

        async with anyio.create_task_group() as tg:
            with anyio.CancelScope() as scope:
                tg.start_soon(give_up_once_read, scope)
                await c.call_tool("start_session", {"apps": [ns.app], "lease_s": 300})
            check(scope.cancelled_caught, "start_session answered before it was abandoned")
        await anyio.to_thread.run_sync(lambda: wait_read(
            broker.env, lambda r: not r.get("found"), "the withdrawn dialog's text stays"))
        say("    the withdrawn dialog's text left the registry")


async def run(ns: argparse.Namespace) -> None:
    broker = h.Broker(ns.driver, "linux")
    person = h.Person(broker.env)
    # The withdrawal first: after the person's Deny the same host program is refused for 30 s
    # without a dialog.
    cases = [("a_withdrawn_dialog_leaves_the_registry",
              lambda: a_withdrawn_dialog_leaves_the_registry(broker, person, ns)),
             ("read_out_and_nothing_to_press",
              lambda: read_out_and_nothing_to_press(broker, person, ns))]
    failed: list[str] = []
    try:
        for name, case in cases:
            try:
                await case()
                say(f"PASSED {name}")
            except Exception as e:  # each case runs apart; all are reported
                why = "".join(traceback.format_exception(e))
                failed.append(f"{name}: {why}")
                say(f"FAILED {name}: {why}")
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
    p.add_argument("--app", required=True)
    anyio.run(run, p.parse_args())
    return 0


if __name__ == "__main__":
    sys.exit(main())
