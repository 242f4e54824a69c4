"""Visible takeover on KDE's KWin (`kwin_wayland --virtual`, no X server, no Plasma shell), through
the desktop portal with KDE's backend (by D-Bus activation), the official MCP Python client,
nish-mcp and the real nish-driver serve with its agents, on a GTK 4 form
(tests/apps/form_gtk4.py, a native Wayland client):

- the person ticks the takeover line in the driver's own consent dialog and clicks Allow (their
  pointer and keyboard played through the KDE portal's RemoteDesktop,
  tests/indicator/tests/wayland/kde_person.py); KDE's portal grants the driver's keyboard with
  a notification only, no dialog: the driver's own consent is the only one; the takeover
  surface and the red frame round the screen (four layer surfaces, in KWin's list) are up;
- foreground typing lands in the GTK 4 entry (read back), press_key too; typing into a field
  that does not hold the keyboard focus clicks it first (as on X11);
- a capture of the form, while the takeover surface lies over it and has the focus, is the
  form's own pixels (KWin's screen cast of that window, which KWin offers the driver by the
  package's desktop file), its password field black;
- foreground clicks land where KWin says the form's fields are (KWin tells its windows' places
  to a script the broker loads; the pointer moves through the portal): the keyboard focus
  moves to the field clicked, read back, while another program forges KWin's answer; a click
  on a button under a window moved over it is refused, and so is one under the context menu
  a right click opened;
- the person's own key, and their pointer, pause the driver (takeover.paused with
  person_input: KWin's idle notification, ext-idle-notify-v1); acts are refused while paused;
  the person's click on Continue on the takeover surface resumes (its place from KWin and the
  indicator's log), and so does the host's takeover.resume; the pause latency (the person's input to the host's
  event) is measured over repeated trials;
- the person's pointer during a typing stops it part-way (user_took_over, typed_characters
  fewer than the text's, the entry holding exactly those);
- the person's stop hotkey (Ctrl+Alt+Shift+Escape, bound through the portal's GlobalShortcuts)
  ends everything: audited with origin hotkey, the next act answers stopped_by_person.

    kwin_takeover.py --driver .../nish-driver --shim .../nish-mcp --kwin-log .../kwin_wayland.log
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time

import anyio

import nishhost as h
from kwin_session import KDE_PERSON, Kwin, press_stop_hotkey, wait_stop
from nishhost import check, fails, ok, say
from wayland_session import DialogPerson, in_thread
from wayland_takeover import APP, captured, pointer_stops_typing, read_entry, reads_back, tick_takeover

TRIALS = 20
FORGER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "attackers", "forged_kwin_scene.py")
# The takeover surface (the broker's titled window; the frame's sides have no title) moved over
# the form's Save button (at 33,381 1214x24 in the maximised form: its centre 640,393).
MOVE_SURFACE = """var all = workspace.clientList();
for (var i = 0; i < all.length; i++) {
    var c = all[i];
    if (c.pid == PID && String(c.caption) != "") { c.frameGeometry = {x: 500, y: 350, width: c.width, height: c.height}; }
}
print("TAG end");
"""
ACTIVATE_PID = """var all = workspace.clientList();
for (var i = 0; i < all.length; i++) {
    if (all[i].pid == PID && String(all[i].caption) != "") { workspace.activeClient = all[i]; }
}
print("TAG end");
"""


CONTINUE = re.compile(r"takeover surface laid out: \d+x\d+ at scale 1; continue at (\d+),(\d+) (\d+)x(\d+)")


def continue_on_screen(kwin: Kwin, broker: h.Broker, dialog: DialogPerson) -> tuple[float, float]:
    """Where the takeover surface's Continue is on the screen: the surface's place as KWin
    tells it (the window of the broker's connection, class nish-driver), plus Continue's place
    in the surface as the indicator's log says it."""
    found = CONTINUE.findall(dialog.log_since(0))
    check(found, "the indicator's log says where Continue is")
    x, y, w, hgt = (int(v) for v in found[-1])
    surfaces = [w for w in kwin.windows()
                if w["class"] == "nish-driver" and w["pid"] == broker.proc.pid and w["titled"]]
    check(len(surfaces) == 1, f"one takeover surface on the broker's connection: {kwin.windows()}")
    s = surfaces[0]
    return (s["x"] + x + w / 2, s["y"] + y + hgt / 2)


def form_pid(kwin: Kwin) -> int:
    """The form's process: the one window of python3 (KWin's resource class) or of the form."""
    wins = kwin.windows()
    forms = [w for w in wins if w["class"] not in ("nish-driver", "")]
    check(len(forms) == 1, f"one window besides the driver's: {wins}")
    return forms[0]["pid"]


def element(read: dict, role: str, label: str) -> dict:
    found = [e for e in read["elements"] if e["role"] == role and e["label"] == label]
    check(len(found) == 1, f"one {role} {label!r}: {[(e['role'], e['label']) for e in read['elements']]}")
    return found[0]


async def focus_on(c, role: str, label: str) -> dict:
    """Waits until the form's `label` field holds the keyboard focus (read back)."""
    deadline = time.monotonic() + 5
    while True:
        e = element(await ok(c, "get_window_state", {"app": APP}), role, label)
        if "focused" in e["states"]:
            return e
        check(time.monotonic() < deadline, f"{label} never got the keyboard focus: {e}")
        await anyio.sleep(0.1)


def lines_of(proc: subprocess.Popen) -> list[str]:
    """A list that a thread fills with the child's lines as it prints them."""
    lines: list[str] = []

    def pump() -> None:
        for line in proc.stdout:
            lines.append(line.strip())

    threading.Thread(target=pump, daemon=True).start()
    return lines


def pointer_at(kwin: Kwin) -> tuple[float, float]:
    """Where KWin's pointer is."""
    p = json.loads(kwin.run('print("TAG " + JSON.stringify([workspace.cursorPos.x, workspace.cursorPos.y]));\n'
                            'print("TAG end");\n')[0])
    return (float(p[0]), float(p[1]))


async def clicks_land(c, kwin: Kwin, broker: h.Broker) -> None:
    """Foreground clicks on KWin: KWin tells where the form is (a script of the broker's
    through org.kde.kwin.Scripting), the pointer moves there through the portal, and the click
    moves the keyboard focus to the field clicked, read back; then back to the name field."""
    say("foreground click on the password field, then on the name field (KWin tells where the form is)")
    r = await ok(c, "get_window_state", {"app": APP})
    pw = element(r, "password_text", "Password")
    check("focused" not in pw["states"], f"the password field starts without the focus: {pw}")
    a = await ok(c, "click", {"element_token": pw["element_token"], "delivery_mode": "foreground"})
    check(a["path"] == "portal:click" and a["effect"] == "dispatched", str(a))
    await focus_on(c, "password_text", "Password")
    name = await read_entry(c)
    check("focused" not in name["states"], f"the name field lost the focus: {name}")
    say(f"  click: effect {a['effect']}, path {a['path']}; the password field holds the focus (read back)")
    a = await ok(c, "click", {"element_token": name["element_token"], "delivery_mode": "foreground"})
    check(a["path"] == "portal:click", str(a))
    await focus_on(c, "text", "Your name")
    say("  click on the name field: it holds the focus again (read back)")

    say("another program forges KWin's answer (the form 50 px lower, where Save would be hit) "
        "while the driver clicks the password field")
    forger = subprocess.Popen(["/usr/bin/python3", FORGER, str(broker.proc.pid), str(form_pid(kwin))],
                              stdout=subprocess.PIPE, text=True)
    try:
        line = forger.stdout.readline().split()
        check(line[:1] == ["ready"] and int(line[1]) > 0, f"the forger finds the broker's connections: {line}")
        printed = lines_of(forger)
        taken = 0
        for attempt in range(10):
            for role, label in (("password_text", "Password"), ("text", "Your name")):
                e = element(await ok(c, "get_window_state", {"app": APP}), role, label)
                a = await ok(c, "click", {"element_token": e["element_token"], "delivery_mode": "foreground"})
                await focus_on(c, role, label)
            await anyio.sleep(1.1)
            counts = [l.split() for l in list(printed)]
            taken = max([int(l[2]) for l in counts if l[:1] == ["calls"]] or [taken])
            if taken:
                break
        check(taken > 0, f"the forged answers reached the broker's method while it waited for KWin: {line} {printed[-3:]}")
    finally:
        forger.kill()
        forger.wait()
    check("an answer about KWin's windows from another connection was ignored" in broker.log_text(tail=None),
          "the broker says it ignored the forged answers")
    say(f"  {taken} forged answers taken by the broker's method, every one ignored: each click "
        "landed on the field meant (the focus read back), not 50 px below")

    say("type_text into the name field while the password field holds the keyboard focus: a "
        "focusing click first, judged as any click")
    r = await ok(c, "get_window_state", {"app": APP})
    await ok(c, "click", {"element_token": element(r, "password_text", "Password")["element_token"],
                          "delivery_mode": "foreground"})
    await focus_on(c, "password_text", "Password")
    name = await read_entry(c)
    check("focused" not in name["states"], f"the name field lost the focus: {name}")
    a = await ok(c, "type_text", {"element_token": name["element_token"], "text": "e",
                                  "delivery_mode": "foreground"})
    check(a["path"] == "portal:type", str(a))
    await reads_back(c, "Ada Lovelace")
    await focus_on(c, "text", "Your name")
    a = await ok(c, "press_key", {"key": "BackSpace"})
    await reads_back(c, "Ada Lovelac")
    say("  the focusing click gave the name field the focus (read back); the 'e' went in at its "
        "end, and BackSpace took it out")

    say("another program moves the takeover surface over Save and raises it; the driver is asked "
        "to click Save")
    r = await ok(c, "get_window_state", {"app": APP})
    save = h.find(r, "push_button", "Save")
    kwin.run(MOVE_SURFACE.replace("PID", str(broker.proc.pid)))
    kwin.run(ACTIVATE_PID.replace("PID", str(broker.proc.pid)))
    surface = [w for w in kwin.windows() if w["pid"] == broker.proc.pid and w["titled"]]
    check(len(surface) == 1 and (surface[0]["x"], surface[0]["y"]) == (500, 350),
          f"the takeover surface lies over Save: {kwin.windows()}")
    before = pointer_at(kwin)
    err = await fails(c, "click", {"element_token": save["element_token"], "delivery_mode": "foreground"},
                      "occluded")
    check(err.get("effect") == "refused", str(err))
    check(pointer_at(kwin) == before, "nothing was sent: the pointer did not move")
    say(f"  occluded, refused: {err['message']}")

    say("a capture of the form while the takeover surface lies over it and has the focus: KWin's "
        "stream of the form itself")
    shot, png = await captured(c, {"app": APP})
    # Where the takeover surface lies over the form (the form is maximised at 0,0): the form's
    # pixels there, none of the surface's red.
    w, _, ch, px = h.read_png(png)
    red = sum(px[(y * w + x) * ch:(y * w + x) * ch + 3] == b"\xe0\x1b\x24"
              for y in range(352, 438, 2) for x in range(502, 815, 2))
    check(red == 0, f"the capture shows the form under the takeover surface, not the surface: {red} red pixels")
    say(f"  {shot['window']['frame']['w']}x{shot['window']['frame']['h']}, the form's own pixels (the "
        f"name field's inside white, not the surface's red), {shot['screenshot']['redacted']} field(s) "
        "blacked out")
    # The person brings the form back (as Alt+Tab would; no input event).
    pid = form_pid(kwin)
    kwin.run(ACTIVATE_PID.replace("PID", str(pid)))
    await focus_on(c, "text", "Your name")

    say("a right click on the name field opens the form's context menu; a click under the open "
        "menu is refused")
    name = await read_entry(c)
    a = await ok(c, "right_click", {"element_token": name["element_token"], "delivery_mode": "foreground"})
    check(a["path"] == "portal:right_click", str(a))
    deadline = time.monotonic() + 5
    while not (menus := [w for w in kwin.windows() if w["pid"] == pid and (w["width"], w["height"]) != (1280, 800)]):
        check(time.monotonic() < deadline, f"the right click opened no menu: {kwin.windows()}")
        await anyio.sleep(0.1)
    m = menus[0]
    say(f"  the menu is KWin's window {m['width']}x{m['height']} at {m['x']},{m['y']} (the app's pid)")
    before = pointer_at(kwin)
    err = await fails(c, "click", {"element_token": (await read_entry(c))["element_token"],
                                   "delivery_mode": "foreground"}, "occluded")
    check(err.get("effect") == "refused" and pointer_at(kwin) == before, f"nothing was sent: {err}")
    say("  a click on the name field under the menu: occluded, refused, the pointer unmoved")
    # The menu stays open: the person's Escape, next, closes it.
    # The driver's own scripts are gone: KWin loaded each for its one answer, from a
    # directory made for it.
    left = [f for f in os.listdir(os.environ["XDG_RUNTIME_DIR"]) if f.startswith("nish-driver-kwin-")]
    check(not left, f"the broker's KWin scripts and their directories are removed: {left}")
    loaded = subprocess.run(["/usr/bin/gdbus", "introspect", "--session", "--dest", "org.kde.KWin",
                             "--object-path", "/"], capture_output=True, text=True, check=True).stdout
    check(not re.search(r"node /?\d+ ", loaded), f"no script is left loaded in KWin: {loaded}")
    log = broker.log_text(tail=None)
    check("Ada Lovelac" not in log, "the log carries no typed text")
    st = await ok(c, "get_session_state")
    check(st["takeover"].get("paused") is not True, f"the driver's own clicks pause nothing: {st['takeover']}")


def form_pid_with_menus(kwin: Kwin) -> int:
    """The form's process: the pid of its maximised window."""
    forms = [w for w in kwin.windows() if (w["width"], w["height"]) == (1280, 800) and w["class"] != "nish-driver"]
    check(len(forms) == 1, f"one maximised form: {kwin.windows()}")
    return forms[0]["pid"]


async def quiet() -> None:
    """The person's input settles (KWin's portal takes a key after its call returns)."""
    await anyio.sleep(0.4)


async def resume(ctl: h.Control, sid: str) -> None:
    await quiet()
    ctl.send({"method": "takeover.resume", "params": {"session": sid}})
    await ctl.wait(lambda x: x.get("event") == "takeover.resumed", "takeover.resumed")


async def run(ns: argparse.Namespace) -> None:
    check("DISPLAY" not in os.environ, "the KWin desktop has no DISPLAY")
    check(os.environ.get("XDG_CURRENT_DESKTOP") == "KDE", "a KDE session's XDG_CURRENT_DESKTOP")
    kwin = Kwin(ns.kwin_log)
    broker = h.Broker(ns.driver, "linux")
    try:
        report = json.loads(broker.cli("doctor", "--json").stdout)
        caps = {c["name"]: c for c in report["capabilities"]}
        for n in ("input_takeover", "takeover_indicator", "takeover_handback", "capture_window"):
            check(caps[n]["status"] == "available", f"doctor: {caps[n]}")
        entry = next(b for b in report["backends"] if b["id"] == "wayland-portal")
        check(entry["status"] == "available", f"doctor: {entry}")
        portal = {p["label"]: p for p in report["probes"]}["desktop portal"]
        check("a capture records the window itself through KWin's screen cast" in portal["message"],
              f"doctor's desktop portal probe: {portal}")
        say("doctor: input_takeover, takeover_indicator and takeover_handback available on KWin "
            "(the KDE portal's RemoteDesktop and KWin's idle notification); capture_window available "
            "(KWin's screen cast, which KWin offers the driver by its desktop file)")
        ctl = h.Control()
        async with h.host(ns.shim, broker, "kwin-takeover", "2025-11-25", ctl) as c:
            dialog = DialogPerson(broker, person=KDE_PERSON, keyboard=False)

            say("start_session {input: takeover}: the person ticks the takeover line and clicks Allow "
                "(KDE's portal asks nothing more)")
            t, got = in_thread(lambda: dialog.answer(True, shown=lambda at: tick_takeover(dialog, at)))
            st = await ok(c, "start_session", {"input": "takeover", "apps": [APP]})
            t.join()
            check(not isinstance(got[0], BaseException), f"the person: {got[0]}")
            check(st["input"] == "takeover" and st["takeover"]["on"] is True, f"takeover: {st}")
            sid = st["session"]
            say(f"  takeover {st['takeover']}")
            sides = sorted((w["x"], w["y"], w["width"], w["height"]) for w in kwin.windows()
                           if w["pid"] == broker.proc.pid and not w["titled"])
            check(sides == [(0, 0, 6, 800), (0, 0, 1280, 6), (0, 794, 1280, 6), (1274, 0, 6, 800)],
                  f"the red frame's four sides round the screen, as KWin shows them: {sides}")
            say("  the takeover surface and the red frame round the screen are up (KWin lists the frame's "
                "four sides at the screen's edges)")

            # The takeover surface is a window of its own: KWin may give it the keyboard. The
            # person brings the form back (as Alt+Tab would; no input event, so no pause).
            await quiet()
            e = await read_entry(c)
            if "focused" not in e["states"]:
                kwin.run(ACTIVATE_PID.replace("PID", str(form_pid(kwin))))
                deadline = time.monotonic() + 5
                while "focused" not in (e := await read_entry(c))["states"]:
                    check(time.monotonic() < deadline, f"the entry never got the keyboard focus: {e}")
                    await anyio.sleep(0.1)
                say("  the takeover surface took the keyboard; the person activated the form again")
            st = await ok(c, "get_session_state")
            check(st["takeover"].get("paused") is not True, f"not paused: {st['takeover']}")

            a = await ok(c, "type_text", {"element_token": e["element_token"], "text": "Ada Lovelace",
                                          "delivery_mode": "foreground"})
            check(a["path"] == "portal:type", str(a))
            await reads_back(c, "Ada Lovelace")
            say(f"  foreground type_text: effect {a['effect']}, path {a['path']}; the GTK 4 entry reads back "
                "'Ada Lovelace'")
            a = await ok(c, "press_key", {"key": "BackSpace"})
            check(a["path"] == "portal:key", str(a))
            await reads_back(c, "Ada Lovelac")
            say("  press_key BackSpace: the entry reads back 'Ada Lovelac'")

            await clicks_land(c, kwin, broker)
            # The person's pointer is where the driver left it: their next moves start there.
            dialog.at = pointer_at(kwin)

            say("the person presses a key of their own: Escape, which closes the form's menu")
            dialog.say("key 0xff1b 1")
            dialog.say("key 0xff1b 0")
            ev = await ctl.wait(lambda x: x.get("event") == "takeover.paused", "takeover.paused")
            check(ev["session"] == sid and ev["reason"] == "person_input", f"paused: {ev}")
            pid = form_pid_with_menus(kwin)
            deadline = time.monotonic() + 5
            while [w for w in kwin.windows() if w["pid"] == pid and (w["width"], w["height"]) != (1280, 800)]:
                check(time.monotonic() < deadline, f"the menu did not close: {kwin.windows()}")
                await anyio.sleep(0.1)
            st = await ok(c, "get_session_state")
            check(st["takeover"]["paused"] is True and st["takeover"]["paused_reason"] == "person_input", str(st))
            err = await fails(c, "press_key", {"key": "BackSpace"}, "user_took_over")
            check(err.get("effect") == "refused", str(err))
            await reads_back(c, "Ada Lovelac")
            say("  takeover.paused (person_input); press_key refused with user_took_over; nothing was sent")

            say("the person clicks Continue on the takeover surface")
            # The surface raised (as the person's Alt+Tab would; no input), past Continue's
            # arming (0.5 s) and past the 1.5 s in which the driver's last press quiets it (the
            # right click that opened the menu; a run on two cores once clicked Continue 1.49 s
            # after a click of the driver's), the pointer moved onto it, then the click.
            kwin.run(ACTIVATE_PID.replace("PID", str(broker.proc.pid)))
            at = continue_on_screen(kwin, broker, dialog)
            await anyio.sleep(1.7)
            dialog.say(f"move {at[0] + 1 - dialog.at[0]} {at[1] - dialog.at[1]}")
            dialog.at = (at[0] + 1, at[1])
            dialog.click(at)
            ev = await ctl.wait(lambda x: x.get("event") == "takeover.resumed", "takeover.resumed")
            check(ev["session"] == sid, f"resumed: {ev}")
            st = await ok(c, "get_session_state")
            check(st["takeover"]["paused"] is False, str(st))
            say(f"  Continue at {at}: takeover.resumed")
            # The click gave the surface the keyboard: the person activates the form again.
            kwin.run(ACTIVATE_PID.replace("PID", str(form_pid(kwin))))
            deadline = time.monotonic() + 5
            while "focused" not in (e := await read_entry(c))["states"]:
                check(time.monotonic() < deadline, f"the entry never got the keyboard focus: {e}")
                await anyio.sleep(0.1)
            st = await ok(c, "get_session_state")
            check(st["takeover"]["paused"] is False, f"still resumed: {st}")

            say(f"the person's key or pointer pauses the driver: {TRIALS} trials, the input to the host's event")
            waits = []
            for i in range(TRIALS):
                await anyio.sleep(0.3)
                t0 = time.monotonic()
                if i % 2:
                    dialog.say(f"move {3 if i % 4 == 1 else -3} 2")
                else:
                    dialog.say("key 0xffe1 1")
                await ctl.wait(lambda x: x.get("event") == "takeover.paused", "takeover.paused")
                waits.append((time.monotonic() - t0) * 1000)
                if not i % 2:
                    dialog.say("key 0xffe1 0")
                await resume(ctl, sid)
            waits.sort()
            p99 = waits[min(len(waits) - 1, int(len(waits) * 0.99))]
            say(f"  pause latency over {TRIALS}: median {statistics.median(waits):.1f} ms, "
                f"p99 {p99:.1f} ms, max {waits[-1]:.1f} ms (measured, not asserted)")

            say("the person moves their pointer while the driver types a long text")
            await pointer_stops_typing(c, ctl, dialog, "Ada Lovelac")
            await resume(ctl, sid)

            say("the person presses the stop hotkey, Ctrl+Alt+Shift+Escape, during the takeover")
            before = len(broker.audit_events())
            press_stop_hotkey(dialog)
            stops = wait_stop(broker, before, "hotkey")
            check(stops[0].get("sessions") == 1, f"the one session stopped: {stops}")
            await fails(c, "press_key", {"key": "BackSpace"}, "stopped_by_person")
            say(f"  audited {stops}; the next act answers stopped_by_person")
            dialog.stop()
    except BaseException:
        print(broker.log_text(), file=sys.stderr)
        raise
    finally:
        broker.stop()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--driver", required=True)
    p.add_argument("--shim", required=True)
    p.add_argument("--kwin-log", required=True)
    ns = p.parse_args()
    anyio.run(run, ns)
    say("ALL CHECKS PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
