#!/usr/bin/env python3
"""A nish-driver session on sway (wlroots) headless, no X server: the official MCP Python
client through the real `nish-mcp` and `nish-driver serve` with its reader and input agents.

Consent: the session is granted by the person's click on Allow on the real consent dialog (a
native Wayland client in nish-indicator, handed sway's socket by the broker); wlroots'
virtual-pointer protocol plays their pointer (tests/indicator/tests/wayland/wlr_person.py). Before
the click the test asks sway (its IPC, $SWAYSOCK) that the focused window is the dialog, full
screen, on the connection the broker handed the indicator. sway tiles the dialog when another
window takes the focus: the dialog lays its box out again for the tiled size (every control inside
the window), and a click on the centre of Allow there, once sway focuses the dialog again, grants;
`nish-driver stop` from a terminal then ends that session (the host's next call answers
`stopped_by_person`). A session with the clipboard line ticked by the person then writes and
reads the clipboard through sway's data-control protocol (wayland_clipboard.py). For a last request, from a new connection, sway focuses another window; a click on the dialog's Allow then does not count,
and a click on Deny, past the arming delay, refuses. nish-driver has no other way to answer.

First the doctor names the compositor sway (wlroots), from the executable of the process that
serves the Wayland socket (sway owns no name on the session bus). Then: list_windows (only the
approved app), a read, headless acts (an AT-SPI action and a value) each verified by a read-back,
and an unapproved app's window out of scope.

Run inside the sway desktop's environment; the caller has started gtk3-widget-factory and
gtk3-demo (not requested), native Wayland clients.

    sway_session.py --driver .../nish-driver --shim .../nish-mcp --unapproved-window ID
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time

import anyio

import nishhost as h
import wayland_clipboard
from nishhost import check, fails, ok, say
from wayland_session import CONTROL, DialogPerson, act, agents_and_audit, in_thread

LAID = re.compile(r"consent dialog laid out: box \d+x\d+ in a \d+x\d+ surface at scale \d+")

GTK3 = "gtk3-widget-factory"
WLR_PERSON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "indicator", "tests",
                          "wayland", "wlr_person.py")


def sway_views() -> list[dict]:
    """Every window (view) in sway's tree."""
    tree = json.loads(subprocess.run(["/usr/bin/swaymsg", "-t", "get_tree"], check=True,
                                     capture_output=True, text=True).stdout)
    views, stack = [], [tree]
    while stack:
        n = stack.pop()
        if n.get("pid"):
            views.append(n)
        stack.extend(n.get("nodes", []) + n.get("floating_nodes", []))
    return views


def dialog_is_focused_full_screen(broker: h.Broker) -> None:
    """sway's view of the dialog: the focused window, full screen, app id nish-driver. sway
    names a window's pid from its client's socket credentials, taken when the socket was
    connected: the broker connects to the compositor and hands the connection to the indicator,
    so the dialog's pid there is the broker's."""
    focused = [v for v in sway_views() if v.get("focused")]
    check(len(focused) == 1, f"one focused window: {focused}")
    v = focused[0]
    check("nish-indicator" in broker.children(), "the indicator runs")
    check(v.get("app_id") == "nish-driver" and v.get("pid") == broker.proc.pid,
          f"the focused window is the dialog on the broker's (pid {broker.proc.pid}) connection: "
          f"{v.get('app_id')} pid {v.get('pid')}")
    check(v.get("fullscreen_mode") == 1 and (v["rect"]["width"], v["rect"]["height"]) == (1280, 800),
          f"the dialog is full screen: mode {v.get('fullscreen_mode')} rect {v['rect']}")
    say(f"    sway: the focused window is the dialog (the broker's connection, pid {v['pid']}; app id "
        f"{v['app_id']}), full screen {v['rect']}")


def swaymsg(*args: str) -> None:
    subprocess.run(["/usr/bin/swaymsg", *args], check=True, capture_output=True)


def wait_log(dialog: DialogPerson, start: int, what: str, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while what not in (text := dialog.log_since(start)):
        check(time.monotonic() < deadline, f"the broker's log never said {what!r}")
        time.sleep(0.05)
    return text


def controls(text: str) -> dict[str, tuple[int, int, int, int]]:
    """The consent controls as the indicator's last layout in `text` placed them, in the
    dialog's surface: name -> (x, y, w, h)."""
    return {m[1]: (int(m[2]), int(m[3]), int(m[4]), int(m[5])) for m in CONTROL.finditer(text)}


def tiled_at(view: dict) -> tuple[int, int, int, int]:
    """Where sway shows a window's surface on the screen, and its size: x, y, w, h."""
    r, wr = view["rect"], view["window_rect"]
    return r["x"] + wr["x"], r["y"] + wr["y"], wr["width"], wr["height"]


def controls_inside(dialog: DialogPerson, start: int, surface_w: int, surface_h: int) -> dict:
    """The dialog's controls as last laid out (from the log since `start`), checked to lie
    inside its `surface_w` x `surface_h` surface: the dialog lays its box out again for the size
    sway gives it, smaller text rather than a button cut off."""
    text = dialog.log_since(start)
    at = controls(text)
    for name in ("Deny", "Allow"):
        x, y, w, h = at[name]
        check(x >= 0 and y >= 0 and x + w <= surface_w and y + h <= surface_h,
              f"{name} at {at[name]} lies inside the dialog's {surface_w}x{surface_h} surface "
              f"(as laid out: {LAID.findall(text)[-1:]})")
    return at


def unfocused_click_then_deny(dialog: DialogPerson) -> dict:
    """The dialog comes up focused and full screen; sway focuses another window (as a person's
    key binding would): the dialog is no longer full screen (sway tiles it beside the apps) nor
    activated. A click on its Allow, which sway answers by focusing it, does not count (a press
    counts only while the dialog is the activated toplevel, the arming delay after it became
    it); past the arming delay a click on Deny counts."""
    start = dialog.seen
    wait_log(dialog, start, "consent dialog focus changed activated=true", timeout=30)
    swaymsg(f"[app_id=\"{GTK3}\"]", "focus")
    wait_log(dialog, start, "consent dialog focus changed activated=false")
    view = next(v for v in sway_views() if v.get("app_id") == "nish-driver")
    check(view.get("focused") is False and view.get("fullscreen_mode") == 0, f"the dialog: {view}")
    ox, oy, surface_w, surface_h = tiled_at(view)
    # Past the arming delay since the resize, at a point told afresh: only the focus is missing.
    time.sleep(1.0)
    at = controls_inside(dialog, start, surface_w, surface_h)
    say(f"    sway: another window focused; the dialog tiled at {(ox, oy)} {surface_w}x{surface_h}, "
        f"not full screen; laid out again, its controls now {at}")
    x, y, w, h = at["Allow"]
    px, py = ox + x + w / 2, oy + y + h / 2
    mark = len(dialog.log_since(0).encode())
    dialog.click((px, py))
    text = wait_log(dialog, mark, "did not count")
    wait_log(dialog, mark, "consent dialog focus changed activated=true")
    said = [l.split("INFO ")[-1].removesuffix(' agent="nish-indicator"') for l in text.splitlines()
            if "button event" in l or "did not count" in l]
    check(any("press=true activated=false control=Some(Allow)" in l for l in said),
          f"the press reached the dialog's Allow while it was not activated: {said}")
    say(f"    person: clicked Allow at ({px}, {py}) on the unfocused dialog: {said}")
    time.sleep(1.0)  # past the arming delay
    view = next(v for v in sway_views() if v.get("app_id") == "nish-driver")
    check(view.get("focused") is True, f"the click focused the dialog: {view}")
    x, y, w, h = controls(dialog.log_since(start))["Deny"]
    dialog.click((ox + x + w / 2, oy + y + h / 2))
    say(f"    person: clicked Deny at {dialog.at} on the focused dialog")
    dialog.seen = len(dialog.log_since(0).encode())
    return {"clicked": "Deny"}


def tiled_then_allow(dialog: DialogPerson) -> dict:
    """The dialog comes up focused and full screen; sway focuses another window, which tiles
    the dialog (narrower than its full-screen box); sway focuses the dialog again. Its box, laid
    out again for the tiled size, shows Allow whole inside the window: a click on Allow's
    centre, past the arming delay after the dialog was laid out again and focused, counts."""
    start = dialog.seen
    wait_log(dialog, start, "consent dialog focus changed activated=true", timeout=30)
    swaymsg(f"[app_id=\"{GTK3}\"]", "focus")
    wait_log(dialog, start, "consent dialog focus changed activated=false")
    mark = len(dialog.log_since(0).encode())
    swaymsg("[app_id=\"nish-driver\"]", "focus")
    wait_log(dialog, mark, "consent dialog focus changed activated=true")
    view = next(v for v in sway_views() if v.get("app_id") == "nish-driver")
    check(view.get("focused") is True and view.get("fullscreen_mode") == 0,
          f"the dialog is focused and tiled: {view}")
    ox, oy, surface_w, surface_h = tiled_at(view)
    time.sleep(1.0)  # past the arming delay
    at = controls_inside(dialog, start, surface_w, surface_h)
    x, y, w, h = at["Allow"]
    dialog.click((ox + x + w / 2, oy + y + h / 2))
    say(f"    person: the dialog tiled at {(ox, oy)} {surface_w}x{surface_h} and focused again; "
        f"clicked the centre of Allow {at['Allow']} at {dialog.at}")
    dialog.seen = len(dialog.log_since(0).encode())
    return {"clicked": "Allow"}


async def run(ns: argparse.Namespace) -> None:
    check("DISPLAY" not in os.environ, "the sway desktop has no DISPLAY")
    check(os.environ.get("XDG_SESSION_TYPE") == "wayland" and os.environ.get("WAYLAND_DISPLAY"),
          "run in the sway desktop's environment")
    check(os.environ.get("SWAYSOCK"), "sway's IPC socket is given")
    broker = h.Broker(ns.driver, "linux")
    try:
        report = json.loads(broker.cli("doctor", "--json").stdout)
        check(report["ready"] is True and report["session_type"] == "wayland", f"doctor: {report}")
        caps = {c["name"]: c for c in report["capabilities"]}
        for n in ("read_tree", "act_semantic"):
            check(caps[n]["status"] == "available", f"doctor: {caps[n]}")
        portal = [p for p in report["probes"] if p["label"] == "desktop portal"]
        check(len(portal) == 1 and "compositor sway (wlroots)" in portal[0]["message"],
              f"the doctor names sway, by the executable serving the Wayland socket: {portal}")
        say(f"doctor: ready on sway's {os.environ['WAYLAND_DISPLAY']}; read_tree and act_semantic available; "
            f"desktop portal: {portal[0]['message']}")
        async with h.host(ns.shim, broker, "sway-e2e", "2025-11-25") as c:
            say("MCP: connected to nish-mcp")
            await fails(c, "list_windows", {}, "no_session")

            say(f"start_session {{apps: [{GTK3}]}}: the person clicks Allow on the consent dialog "
                "(a native Wayland client; the click comes through wlroots' virtual pointer)")
            dialog = DialogPerson(broker, person=WLR_PERSON, keyboard=False)
            def allow() -> dict:
                try:
                    return dialog.answer(True, shown=lambda _at: dialog_is_focused_full_screen(broker))
                except BaseException as e:
                    say(f"    person: {e!r} (the request times out as denied)")
                    raise

            t, got = in_thread(allow)
            st = await ok(c, "start_session", {"apps": [GTK3]})
            t.join()
            check(not isinstance(got[0], BaseException), f"the person: {got[0]}")
            check([a["app"].lower() for a in st["apps"]] == [GTK3], f"granted apps {st['apps']}")
            check(st["input"] == "headless", f"input {st['input']}")
            say(f"  granted by the click: {[(a['app'], a['pids']) for a in st['apps']]}, input {st['input']}")

            wins = await ok(c, "list_windows")
            say(f"list_windows: {[(w['app'], w['pid'], w['window_id'], w['title']) for w in wins['windows']]}")
            names = [w["app"].lower() for w in wins["windows"]]
            check(names == [GTK3], f"only the approved app is listed: {names}")
            w = wins["windows"][0]
            check(w["origin"] == "window" and (w["frame"]["x"], w["frame"]["y"]) == (0, 0) and w["frame"]["w"] > 0,
                  f"the window's frame is in its own coordinates: {w}")
            check((1 << 32) < w["window_id"] < (1 << 53), f"a Wayland window id: {w}")
            target = {"window_id": w["window_id"]}

            g3 = await ok(c, "get_window_state", {**target, "max_elements": 5000})
            check(len(g3["elements"]) > 100, f"a full read: {len(g3['elements'])} rows")
            say(f"read: {len(g3['elements'])} rows (of {g3['element_count']}), snapshot {g3['snapshot_id']}")

            say(f"headless acts on {GTK3}:")
            cb = next(e for e in g3["elements"] if e["role"] == "check_box" and e["label"] == "checkbutton"
                      and not set(e["states"]) & {"disabled", "checked", "indeterminate"})
            a = await act(c, "click", {"element_token": cb["element_token"]}, f"click check button {cb['element_token']}")
            check(a["effect"] == "confirmed" and a["verified"] is True, str(a))
            check(a["path"].startswith("atspi_action:"), f"an AT-SPI action: {a['path']}")
            now = await ok(c, "get_window_state", {**target, "max_elements": 5000})
            check("checked" in now["elements"][cb["element_index"]]["states"], "the check button reads back checked")
            entry = next(e for e in now["elements"] if e["role"] == "text" and e.get("value") == "entry"
                         and "disabled" not in e["states"])
            a = await act(c, "set_value", {"element_token": entry["element_token"], "value": "set on sway"},
                          "set_value on the entry")
            check(a["readback"] == "match" and a["effect"] == "confirmed", str(a))
            now = await ok(c, "get_window_state", {**target, "max_elements": 5000})
            check(now["elements"][entry["element_index"]].get("value") == "set on sway", "the entry reads back")
            say("  the check button reads back checked, the entry reads back its new value")

            say("scope: an app the person did not approve")
            await fails(c, "get_window_state", {"window_id": ns.unapproved_window}, "app_not_in_scope")

            r = await ok(c, "end_session")
            check(r["ended"] is True, str(r))
            say("end_session: ended")

            say("start_session again; sway tiles the dialog (another window focused), then "
                "focuses it again; the person clicks the centre of Allow as laid out in the tiled window")
            t, got = in_thread(lambda: tiled_then_allow(dialog))
            st = await ok(c, "start_session", {"apps": [GTK3]})
            t.join()
            check(not isinstance(got[0], BaseException), f"the person: {got[0]}")
            check([a["app"].lower() for a in st["apps"]] == [GTK3], f"granted apps {st['apps']}")
            say(f"  granted by the click on the tiled dialog: {[a['app'] for a in st['apps']]}")

            say("kill switch: `nish-driver stop` from a terminal")
            before = len(broker.audit_events())
            p = broker.cli("stop")
            check(p.stdout.startswith("stopped "), f"nish-driver stop: {p.stdout}")
            await fails(c, "get_window_state", {"app": GTK3}, "stopped_by_person")
            stops = [e for e in broker.audit_events()[before:]
                     if e.get("event") == "stop" and e.get("origin") == "terminal"]
            check(len(stops) == 1, f"the stop audited from a terminal: {stops}")
            say(f"  {p.stdout.strip()}; the host's next call answers stopped_by_person")

        # The clipboard through sway's data-control, a new connection with a control pipe.
        await wayland_clipboard.session(ns, broker, dialog, GTK3, "sway-clipboard")

        # A stopped host stays stopped: the person's Deny is asked by a new connection.
        async with h.host(ns.shim, broker, "sway-e2e", "2025-11-25") as c:
            say("start_session again; another window takes focus; a click on Allow on the unfocused "
                "dialog does not count; then the person clicks Deny")
            t, got = in_thread(lambda: unfocused_click_then_deny(dialog))
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
    p.add_argument("--driver", required=True, help="nish-driver")
    p.add_argument("--shim", required=True)
    p.add_argument("--unapproved-window", type=int, required=True)
    ns = p.parse_args()
    anyio.run(run, ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
