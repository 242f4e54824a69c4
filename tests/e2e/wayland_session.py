#!/usr/bin/env python3
"""A nish-driver session on the headless GNOME Wayland test desktop (mutter --headless
--wayland --no-x11, no X server), driven by the official MCP Python client through the real
`nish-mcp` and the broker with its reader and input agents, served by the test daemon
(`nish-testd serve --backend linux`: the same decider and agent host as `nish-driver serve`).

Headless only: windows and reads come from AT-SPI, acts are AT-SPI actions and values.

Consent: the main session, whose list_windows, reads and acts follow, is granted by the person's
click on Allow on the real consent dialog (a native Wayland client in nish-indicator), with
mutter's RemoteDesktop API playing their pointer (tests/indicator/tests/wayland/person.py), the
way a person's device arrives; the kill switch from a terminal (`stop`) ends it, and the host's
next call answers `stopped_by_person`; a later request, from a new connection, is answered by a
click on Deny. One separate,
earlier request is answered through files in a private directory ($NISH_TEST_CONSENT_DIR, which
only the test daemon reads; nish-driver has no such path) only so that the test can check what a
request shows (its app lines with their window counts and ticks, the asking program), which the
dialog tells no one but the person, and the session it opens is ended at once, unused; the
directory is removed before the main session, and from then on the broker asks through the
dialog.

Run inside the Wayland desktop's environment; the caller has started gtk3-widget-factory
(twice, for an ambiguous target), gtk4-demo, gtk3-demo (not requested: out of scope) and
Chromium on tests/pages/form.html, all native Wayland clients.

    wayland_session.py --driver .../nish-testd --shim .../nish-mcp --unapproved-window ID
        [--demo]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import anyio

import nishhost as h
from nishhost import check, fails, ok, say

GTK3 = "gtk3-widget-factory"
GTK4 = "gtk4-demo"
CHROMIUM = "chromium"


class FilePerson:
    """The person, answering consent requests the test build writes as files."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="nish-consent-")
        os.chmod(self.dir, 0o700)
        self.requests: list[dict] = []

    def answer(self, allow: bool, apps: list[str], timeout: float = 30.0) -> dict:
        """Waits for the next request and answers it: Allow with `apps` ticked, or Deny."""
        deadline = time.monotonic() + timeout
        while True:
            names = sorted(n for n in os.listdir(self.dir) if n.startswith("request-"))
            fresh = [n for n in names if n not in {r["file"] for r in self.requests}]
            if fresh:
                break
            check(time.monotonic() < deadline, "no consent request came")
            time.sleep(0.05)
        name = fresh[0]
        with open(os.path.join(self.dir, name), encoding="utf-8") as f:
            req = json.load(f)
        req["file"] = name
        self.requests.append(req)
        n = req["id"]
        # The person ticks the lines they see whose names are the apps they mean.
        want = {a.lower() for a in apps}
        ticked = [a["name"] for a in req["apps"] if a["name"].lower() in want]
        say(f"    person: the request shows {req['apps']}; ticks {ticked}, {'Allow' if allow else 'Deny'}")
        tmp = os.path.join(self.dir, f".answer-{n}.json")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"allow": allow, "apps": ticked}, f)
        os.rename(tmp, os.path.join(self.dir, f"answer-{n}.json"))
        return req


    def close(self) -> None:
        """Removes the directory: the broker asks through the dialog from now on."""
        shutil.rmtree(self.dir)


PERSON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "indicator", "tests",
                      "wayland", "person.py")
CONTROL = re.compile(r"consent control (\w+) at (\d+),(\d+) (\d+)x(\d+)")


class DialogPerson:
    """The person at the real consent dialog: mutter's RemoteDesktop API plays their pointer
    (`person`: another player of person.py's commands, e.g. wlr_person.py on sway); where Allow
    and Deny are comes from the indicator's log lines in the broker's log (the dialog is full
    screen, so its coordinates are the screen's)."""

    def __init__(self, broker: h.Broker, person: str = PERSON, keyboard: bool = True) -> None:
        self.log = os.path.join(broker.dir, "broker.log")
        self.proc = subprocess.Popen(["/usr/bin/python3", person], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        check(self.proc.stdout.readline().strip() == "ready", "the person's pointer starts")
        self.say("corner")
        self.at = (0.0, 0.0)
        if keyboard:
            # A keyboard on mutter's seat: without one no window is ever focused (activated).
            self.say("key 0xffe1 1")
            self.say("key 0xffe1 0")
        self.seen = os.path.getsize(self.log)

    def say(self, cmd: str) -> None:
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline().strip()
        check(line == "ok", f"person: {cmd}: {line}")

    def answer(self, allow: bool, timeout: float = 30.0, shown=None) -> dict:
        """Waits for the next dialog and clicks Allow or Deny once it is focused and armed
        (`shown`: called with the controls' centres once the dialog says it is focused, before
        the click)."""
        deadline = time.monotonic() + timeout
        start = self.seen

        def controls() -> tuple[dict, str]:
            # The latest layout's places: a compositor may lay the dialog out twice (sway
            # first tiles it, then makes it full screen, a few ms apart: measured).
            with open(self.log, "rb") as f:
                f.seek(start)
                text = f.read().decode(errors="replace")
            return {m[1]: (int(m[2]) + int(m[4]) / 2, int(m[3]) + int(m[5]) / 2)
                    for m in CONTROL.finditer(text)}, text

        while True:
            at, text = controls()
            if "Allow" in at and "Deny" in at and "consent dialog focus changed activated=true" in text:
                break
            check(time.monotonic() < deadline, "no consent dialog came")
            time.sleep(0.05)
        # Settled: no new layout for a moment.
        while True:
            time.sleep(0.3)
            again, text = controls()
            if again == at:
                break
            at = again
            check(time.monotonic() < deadline, "the consent dialog never settled")
        if shown is not None:
            shown(at)
        time.sleep(1.0)  # past the arming delay
        at, text = controls()
        self.seen = start + len(text.encode())
        self.click(at["Allow" if allow else "Deny"])
        say(f"    person: clicked {'Allow' if allow else 'Deny'} at {self.at} on the dialog")
        return {"clicked": "Allow" if allow else "Deny"}

    def click(self, at: tuple[float, float]) -> None:
        """Moves the pointer to `at` and clicks the left button there."""
        x, y = at
        self.say(f"move {x - self.at[0]} {y - self.at[1]}")
        self.at = (x, y)
        self.say("button 1")
        self.say("button 0")

    def log_since(self, start: int) -> str:
        """The broker's log from byte `start` on."""
        with open(self.log, "rb") as f:
            f.seek(start)
            return f.read().decode(errors="replace")

    def stop(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def answer_in_thread(person: FilePerson, allow: bool, apps: list[str]) -> tuple[threading.Thread, list]:
    return in_thread(lambda: person.answer(allow, apps))


def in_thread(answer) -> tuple[threading.Thread, list]:
    got: list = []

    def run() -> None:
        try:
            got.append(answer())
        except BaseException as e:  # reported by the caller
            got.append(e)

    t = threading.Thread(target=run)
    t.start()
    return t, got


def same_row(a: dict, b: dict) -> bool:
    """The same element in two views of one snapshot: same role, and the same label, or one
    label extends the other (Chromium appends a memory-usage note to its tab's name now and
    then, between two reads)."""
    la, lb = a["label"], b["label"]
    return a["role"] == b["role"] and (la == lb or la.startswith(lb) or lb.startswith(la))


async def views_share_tokens(c, app: str, target: dict) -> dict:
    full = await ok(c, "get_window_state", {**target, "max_elements": 5000})
    sk = await ok(c, "get_window_state", {**target, "skeleton": True})
    check(sk["snapshot_id"] == full["snapshot_id"], f"{app}: skeleton and full share a snapshot")
    rows = {e["element_index"]: e for e in full["elements"]}
    for r in sk["elements"]:
        f = rows[r["element_index"]]
        check(same_row(f, r), f"{app}: row {r['element_index']} differs between views: {f} vs {r}")
    region = next((r for r in sk["elements"] if r["element_index"] != 0 and r["descendant_count"] > 0), sk["elements"][0])
    root = await ok(c, "get_window_state", {"root": region["element_token"]})
    check(root["snapshot_id"] == full["snapshot_id"], f"{app}: a drill-down shares the snapshot")
    check(root["elements"][0]["element_token"] == region["element_token"], f"{app}: the root row comes first")
    for r in root["elements"]:
        f = rows[r["element_index"]]
        check(same_row(f, r), f"{app}: drill-down row differs: {f} vs {r}")
    win = full["window"]
    check(win["origin"] == "window" and (win["frame"]["x"], win["frame"]["y"]) == (0, 0),
          f"{app}: the window's frame is in its own coordinates: {win}")
    wf = win["frame"]
    framed = [e for e in full["elements"] if e.get("frame") and "offscreen" not in e["states"] and e["frame"]["w"] > 0]
    check(len(framed) > 3, f"{app}: showing elements have frames")
    inside = [e for e in framed
              if -2 <= e["frame"]["x"] and e["frame"]["x"] + e["frame"]["w"] <= wf["w"] + 2
              and -2 <= e["frame"]["y"] and e["frame"]["y"] + e["frame"]["h"] <= wf["h"] + 2]
    check(len(inside) >= len(framed) * 9 // 10,
          f"{app}: element frames lie in the window's own 0,0-based frame ({len(inside)} of {len(framed)})")
    say(f"  {app}: full {len(full['elements'])} rows (of {full['element_count']}), skeleton {len(sk['elements'])}, "
        f"root {region['element_token']} {len(root['elements'])} rows, one snapshot {full['snapshot_id']}; "
        f"window frame {wf} origin {win['origin']}; {len(inside)}/{len(framed)} on-screen frames inside it")
    return full


async def act(c, tool: str, args: dict, what: str) -> dict:
    r = await ok(c, tool, args)
    say(f"  {what}: effect {r['effect']}, verified {r['verified']}, path {r['path']}"
        + (f", readback {r['readback']}" if "readback" in r else "")
        + f", diff +{len(r['diff']['added'])} -{len(r['diff']['removed'])} ~{len(r['diff']['changed'])}")
    check(r["took_cursor"] is False, "a headless act never takes the cursor")
    return r


def agents_and_audit(broker: h.Broker) -> None:
    """The closing checks of a whole Wayland session: the agents and the indicator ran, none
    was given an X display (the Wayland desktops run none), and the audit holds the session's
    consent, reads, acts and end."""
    kids = broker.children()
    say(f"agents: {kids}")
    check("nish-reader" in kids or "nish-input" in kids, f"the agents ran: {kids}")
    check("nish-indicator" in kids, f"the indicator (the dialog) runs: {kids}")
    for name, pid in kids.items():
        env = h.environ_of(pid)
        check("DISPLAY" not in env and "XAUTHORITY" not in env, f"{name} was given an X display")
    say("the agents have no DISPLAY or XAUTHORITY")
    events = [e["event"] for e in broker.audit_events()]
    for want in ("consent.request", "consent.answer", "session.start", "read", "act", "session.end"):
        check(want in events, f"audit lacks {want}: {sorted(set(events))}")
    say(f"audit: {len(events)} events")


async def run(ns: argparse.Namespace) -> None:
    check("DISPLAY" not in os.environ, "the Wayland desktop has no DISPLAY")
    check(os.environ.get("XDG_SESSION_TYPE") == "wayland" and os.environ.get("WAYLAND_DISPLAY"),
          "run in the Wayland desktop's environment")
    person = FilePerson()
    broker = h.Broker(ns.driver, "linux", env={"NISH_TEST_CONSENT_DIR": person.dir})
    try:
        report = json.loads(broker.cli("doctor", "--json").stdout)
        check(report["ready"] is True and report["session_type"] == "wayland", f"doctor: {report}")
        caps = {c["name"]: c for c in report["capabilities"]}
        for n in ("read_tree", "act_semantic"):
            check(caps[n]["status"] == "available", f"doctor: {caps[n]}")
        # Capture is mutter's screen cast read through PipeWire, which this desktop does not run:
        # unavailable, and the step to take is to start it (no reason code of the contract's fits).
        check(caps["capture_window"]["status"] == "unavailable" and caps["capture_window"]["reason_code"] is None
              and "PipeWire" in (caps["capture_window"]["action"] or ""), f"doctor: {caps['capture_window']}")
        # Takeover goes through the desktop portal where it answers (wayland_takeover.py).
        portal = next(b for b in report["backends"] if b["id"] == "wayland-portal")
        for n in ("input_takeover", "takeover_indicator"):
            check((caps[n]["status"] == "available") == (portal["status"] == "available"), f"doctor: {caps[n]} {portal}")
        # The kill switch: `nish-driver stop`; the stop hotkey needs the GlobalShortcuts portal,
        # and the probe says what this desktop's portal answered (the test desktop runs none).
        kill = [p for p in report["probes"] if p["label"] == "kill switch"]
        check(len(kill) == 1 and kill[0]["message"].startswith("nish-driver stop works; no stop hotkey on Wayland: ")
              and any(w in kill[0]["message"] for w in (
                  "offers GlobalShortcuts (version", "has no GlobalShortcuts interface",
                  "no desktop portal answered")), f"doctor's kill switch probe: {kill}")
        say(f"doctor: kill switch: {kill[0]['message']}")
        say(f"doctor: ready on Wayland {os.environ['WAYLAND_DISPLAY']}; read_tree and act_semantic available; "
            "capture unavailable (PipeWire does not run here); takeover as the portal allows")
        async with h.host(ns.shim, broker, "wayland-e2e", "2025-11-25") as c:
            say("MCP: connected to nish-mcp")
            await fails(c, "list_windows", {}, "no_session")

            # Answered Allow and ended at once: a denial would hold off this program's next
            # request (the broker's cool-down after a denial).
            say(f"start_session {{apps: [{GTK3}, {GTK4}, {CHROMIUM}]}}, answered through files only to read what "
                "the request shows; the session is ended at once")
            t, got = answer_in_thread(person, True, [GTK3, GTK4, CHROMIUM])
            st = await ok(c, "start_session", {"apps": [GTK3, GTK4, CHROMIUM]})
            t.join()
            r = await ok(c, "end_session")
            check(r["ended"] is True, str(r))
            req = got[0]
            check(not isinstance(req, BaseException), f"the person: {req}")
            lines = {a["name"].lower(): a for a in req["apps"]}
            check(lines.get(GTK3, {}).get("windows") == 2, f"the request shows both widget factories: {req['apps']}")
            check(all(lines.get(a, {}).get("ticked") is True for a in (GTK3, GTK4, CHROMIUM)),
                  f"the requested apps' lines come ticked: {req['apps']}")
            check("gtk3-demo" in lines and lines["gtk3-demo"]["ticked"] is False,
                  f"the request lists every app with a window, gtk3-demo unticked: {req['apps']}")
            check(req["takeover"] is False and req["clipboard"] is False, "no takeover or clipboard line on Wayland")
            check(req["program"]["pid"] == os.getpid(), f"the request names the asking program: {req['program']}")
            say(f"  the request listed {[(a['name'], a['windows'], a['ticked']) for a in req['apps']]}; "
                f"program {req['program']['exe']} pid {req['program']['pid']}")
            await fails(c, "list_windows", {}, "no_session")

            say(f"start_session {{apps: [{GTK3}, {GTK4}, {CHROMIUM}]}}: the person clicks Allow on the consent dialog "
                "(a native Wayland client; the click comes through mutter's RemoteDesktop API)")
            person.close()
            dialog = DialogPerson(broker)
            t, got = in_thread(lambda: dialog.answer(True))
            st = await ok(c, "start_session", {"apps": [GTK3, GTK4, CHROMIUM]})
            t.join()
            check(not isinstance(got[0], BaseException), f"the person: {got[0]}")
            apps = sorted(a["app"].lower() for a in st["apps"])
            check(apps == sorted([GTK3, GTK4, CHROMIUM]), f"granted apps {apps}")
            check(st["input"] == "headless", f"input {st['input']}")
            say(f"  granted by the click: {[(a['app'], a['pids']) for a in st['apps']]}, input {st['input']}, takeover {st.get('takeover')}")

            wins = await ok(c, "list_windows")
            names = [w["app"].lower() for w in wins["windows"]]
            say(f"list_windows: {[(w['app'], w['pid'], w['window_id'], w['title']) for w in wins['windows']]}")
            check("gtk3-demo" not in names, "unapproved apps are not listed")
            check(sorted(set(names)) == sorted([GTK3, GTK4, CHROMIUM]), f"windows {names}")
            for w in wins["windows"]:
                check(w["origin"] == "window" and w["frame"]["x"] == 0 and w["frame"]["y"] == 0 and w["frame"]["w"] > 0,
                      f"a window's frame is in its own coordinates: {w}")
                check((1 << 32) < w["window_id"] < (1 << 53), f"window ids are exact JSON numbers: {w}")
            again = await ok(c, "list_windows")
            check([w["window_id"] for w in again["windows"]] == [w["window_id"] for w in wins["windows"]],
                  "window ids are stable from list to list")
            check(len({w["window_id"] for w in wins["windows"]}) == len(wins["windows"]), "window ids are distinct")

            say("targets:")
            err = await fails(c, "get_window_state", {"app": GTK3}, "ambiguous_target")
            check(len(err["candidates"]) == 2 and all(x["app"] == GTK3 for x in err["candidates"]), str(err))
            err = await fails(c, "get_window_state", {}, "ambiguous_window_target")
            check(len(err["candidates"]) == len(wins["windows"]), str(err))
            await fails(c, "get_window_state", {"app": "no-such-app"}, "window_target_not_found")
            await fails(c, "get_window_state", {"window_id": 424242}, "window_target_not_found")
            pid = next(w["pid"] for w in wins["windows"] if w["app"].lower() == GTK3)

            say("reads (full, skeleton, root) share one snapshot per window:")
            g3 = await views_share_tokens(c, GTK3, {"pid": pid})
            for app in (GTK4, CHROMIUM):
                await views_share_tokens(c, app, {"app": app})

            say("no capture without PipeWire:")
            err = await fails(c, "get_window_state", {"pid": pid, "include_screenshot": True}, "backend_unavailable")
            check("PipeWire" in err["message"], str(err))

            say(f"headless acts on {GTK3}:")
            cb = next(e for e in g3["elements"] if e["role"] == "check_box" and e["label"] == "checkbutton"
                      and not set(e["states"]) & {"disabled", "checked", "indeterminate"})
            a = await act(c, "click", {"element_token": cb["element_token"]}, f"click check button {cb['element_token']}")
            check(a["effect"] == "confirmed" and a["verified"] is True, str(a))
            check(cb["element_index"] in {x["element_index"] for x in a["diff"]["changed"]}, "the check button's row changed")
            now = await ok(c, "get_window_state", {"pid": pid, "max_elements": 5000})
            check("checked" in now["elements"][cb["element_index"]]["states"], "the check button reads back checked")
            entry = next(e for e in now["elements"] if e["role"] == "text" and e.get("value") == "entry" and "disabled" not in e["states"])
            a = await act(c, "set_value", {"element_token": entry["element_token"], "value": "set on Wayland"}, "set_value on the entry")
            check(a["readback"] == "match" and a["effect"] == "confirmed", str(a))
            now = await ok(c, "get_window_state", {"pid": pid, "max_elements": 5000})
            check(now["elements"][entry["element_index"]].get("value") == "set on Wayland", "the entry reads back")

            say("Chromium: a structural change makes older tokens stale:")
            ch = await ok(c, "get_window_state", {"app": CHROMIUM, "max_elements": 5000})
            pw = next(e for e in ch["elements"] if e["role"] == "password_text")
            check(pw.get("value") is None and "secure" in pw["states"], f"the password field is redacted: {pw}")
            check("hunter2" not in json.dumps(ch), "the secret value never leaves the driver")
            add = next(e for e in ch["elements"] if e["role"] == "push_button" and e["label"] == "Add item")
            heading = next(e for e in ch["elements"] if e["role"] == "heading")
            old = ch["snapshot_id"]
            a = await act(c, "click", {"element_token": add["element_token"]}, "press 'Add item' (headless)")
            check(a["path"].startswith("atspi_action:"), str(a))
            deadline = time.monotonic() + 10
            while True:
                now = await ok(c, "get_window_state", {"app": CHROMIUM, "max_elements": 5000})
                if now["snapshot_id"] != old and any(e["label"] == "Item 2" for e in now["elements"]):
                    break
                check(time.monotonic() < deadline, "the page's new item never showed")
                await anyio.sleep(0.1)
            await fails(c, "get_window_state", {"root": heading["element_token"]}, "stale_element_token")
            await fails(c, "click", {"element_token": add["element_token"]}, "stale_element_token")
            say(f"  new snapshot {now['snapshot_id']} (was {old}) with 'Item 2'; the old tokens are stale")

            say("scope: an app the person did not approve")
            await fails(c, "get_window_state", {"window_id": ns.unapproved_window}, "app_not_in_scope")

            say("kill switch: `nish-driver stop` from a terminal")
            before = len(broker.audit_events())
            p = broker.cli("stop")
            check(p.stdout.startswith("stopped "), f"nish-driver stop: {p.stdout}")
            await fails(c, "get_window_state", {"pid": pid}, "stopped_by_person")
            stops = [e for e in broker.audit_events()[before:]
                     if e.get("event") == "stop" and e.get("origin") == "terminal"]
            check(len(stops) == 1, f"the stop audited from a terminal: {stops}")
            say(f"  {p.stdout.strip()}; the host's next call answers stopped_by_person")

        # A stopped host's calls answer stopped_by_person from then on; the person's Deny is
        # asked by a new connection of the same program.
        async with h.host(ns.shim, broker, "wayland-e2e", "2025-11-25") as c:
            say("start_session again; the person clicks Deny on the dialog")
            t, got = in_thread(lambda: dialog.answer(False))
            await fails(c, "start_session", {"apps": [GTK3]}, "consent_denied")
            t.join()
            check(not isinstance(got[0], BaseException), f"the person: {got[0]}")
            dialog.stop()

        agents_and_audit(broker)
    except BaseException:
        say("broker log:\n" + broker.log_text())
        raise
    finally:
        broker.stop()
    say("ALL CHECKS PASSED")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--driver", required=True, help="nish-testd (its consent through files)")
    p.add_argument("--shim", required=True)
    p.add_argument("--unapproved-window", type=int, required=True)
    p.add_argument("--demo", action="store_true")
    ns = p.parse_args()
    anyio.run(run, ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
