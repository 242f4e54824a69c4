"""Visible takeover on the Wayland test desktop (mutter headless, the desktop portal by D-Bus
activation with its GNOME backend, no gnome-shell, no X server), through the official MCP Python
client, nish-mcp and the real nish-driver serve with its agents, on a GTK 4 form
(tests/apps/form_gtk4.py, a native Wayland client):

- the person ticks the takeover line in the driver's own consent dialog and clicks Allow (their
  pointer played through mutter's RemoteDesktop API, as in wayland_session.py); then the
  desktop's own "Remote desktop" dialog asks, and the person answers it with their keyboard
  (portal_dialog_person.py): Escape once (the takeover is not granted), then the switch and
  Share;
- captures (mutter's own screen cast of the focused window): the form's, its password field
  black; with a second, smaller form of the app focused, the first form's capture is refused
  and the small form's is found inside its shadow;
- foreground typing lands in the GTK 4 entry (read back), press_key too; a click on the
  password field gives it the focus (read back), through mutter's own remote desktop mapped by
  a screen cast of the focused window; a typing into the name field then clicks it first; a
  click under the app's own popover is refused (occluded, nothing pressed); a double click
  selects a word;
- the person's own key, and their pointer, pause the driver (takeover.paused with
  person_input); acts are refused while paused; the host's takeover.resume resumes; the pause
  latency (the person's input to the host's event) is measured over repeated trials;
- the person's pointer during a typing stops it part-way (user_took_over, typed_characters
  fewer than the text's);
- the desktop portal's backend leaving the bus (mutter then ends the remote-desktop session
  and the frontend says nothing) stops everything: the kill switch, audited with origin
  remote_desktop.

    wayland_takeover.py --driver .../nish-driver --shim .../nish-mcp
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

import anyio

import nishhost as h
from nishhost import check, fails, ok, say
from wayland_session import PERSON, DialogPerson, in_thread

APP = "nish-form-gtk4"
TRIGGER = "#dialog#"
HERE = os.path.dirname(os.path.abspath(__file__))
PORTAL_PERSON = os.path.join(HERE, "portal_dialog_person.py")
FORM = os.path.join(HERE, "..", "apps", "form_gtk4.py")
# Waits (20 s at most) until a window titled argv[1] is on the accessibility bus (the system
# python's GI).
ON_BUS = """
import sys, time
import gi
gi.require_version("Atspi", "2.0")
from gi.repository import Atspi
deadline = time.monotonic() + 20
while time.monotonic() < deadline:
    d = Atspi.get_desktop(0)
    for i in range(d.get_child_count()):
        a = d.get_child_at_index(i)
        for j in range(a.get_child_count() if a else 0):
            if a.get_child_at_index(j).get_name() == sys.argv[1]:
                sys.exit(0)
    time.sleep(0.2)
sys.exit("not on the bus")
"""


def window_on_bus(title: str) -> None:
    """Waits until the window titled `title` is on the accessibility bus."""
    r = subprocess.run(["/usr/bin/python3", "-c", ON_BUS, title], capture_output=True, text=True,
                       timeout=60)
    check(r.returncode == 0, f"{title} on the bus: {r.stdout} {r.stderr}")


TRIALS = 20


def person_quiet(quiet_ms: int = 300, timeout: float = 10.0) -> None:
    """Waits until the person's last input is `quiet_ms` old, as mutter's idle monitor tells
    (asked on the desktop's session bus with gdbus). mutter stamps a RemoteDesktop event when
    its input thread takes it, after the call returned: under load the release of the person's
    click may come well after the click, and a resume before it would see it as new input."""
    deadline = time.monotonic() + timeout
    while True:
        r = subprocess.run(["/usr/bin/gdbus", "call", "--session", "--dest", "org.gnome.Mutter.IdleMonitor",
                            "--object-path", "/org/gnome/Mutter/IdleMonitor/Core", "--method",
                            "org.gnome.Mutter.IdleMonitor.GetIdletime"], capture_output=True, text=True)
        check(r.returncode == 0, f"GetIdletime: {r.stderr}")
        idle = int(r.stdout.strip().strip("(),").split()[-1])
        if idle >= quiet_ms:
            return
        check(time.monotonic() < deadline, f"the person's input did not settle within {timeout} s")
        time.sleep(0.05)


def portal_dialog(answer: str) -> str:
    r = subprocess.run(["/usr/bin/python3", PORTAL_PERSON, PERSON, answer, "--timeout", "30"],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        # Said at once: the driver's start_session waits for the dialog meanwhile.
        print(f"the person at the portal's dialog failed: {r.stdout} {r.stderr}", file=sys.stderr, flush=True)
    check(r.returncode == 0, f"the person at the portal's dialog: {r.stdout} {r.stderr}")
    return r.stdout.strip()


def tick_takeover(dialog: DialogPerson, at: dict) -> None:
    """The person ticks the takeover line of the driver's dialog (its controls at `at`)."""
    check("Takeover" in at, f"the dialog shows the takeover line: {sorted(at)}")
    # A click the dialog does not count (it was re-armed: a stall of the indicator under
    # load, a new output) ticks nothing: the person looks and clicks again.
    for _ in range(5):
        time.sleep(1.0)  # past the arming delay
        start = os.path.getsize(dialog.log)
        dialog.click(at["Takeover"])
        time.sleep(0.3)
        text = dialog.log_since(start)
        if "control=Some(Takeover)" in text and "did not count" not in text:
            return
    check(False, "the dialog never counted the person's click on the takeover line")


def consent_with_takeover(dialog: DialogPerson, portal_answer: str):
    """The person ticks the takeover line and clicks Allow, then answers the desktop's dialog."""

    def run() -> str:
        dialog.answer(True, shown=lambda at: tick_takeover(dialog, at))
        return portal_dialog(portal_answer)

    return in_thread(run)


def entry_of(read: dict, label: str) -> dict:
    for e in read["elements"]:
        if e["role"] in ("text", "entry", "password_text") and e["label"] == label:
            return e
    raise AssertionError(f"no entry {label!r}: {[(e['role'], e['label']) for e in read['elements']]}")


def field_value(read: dict, label: str) -> str:
    return entry_of(read, label).get("value", "")


async def captured(c, target: dict) -> tuple[dict, bytes]:
    """A capture of the window `target` names, checked to be that window's own frame with its
    password field black and its name field not."""
    shot, png, (w, _, ch, px) = await h.window_capture(c, target)
    wf = shot["window"]["frame"]
    pw = next(e for e in shot["elements"] if e["role"] == "password_text")
    check(h.black_where(png, pw["frame"], shot["window"]), "the password field is black")
    name = entry_of(shot, "Your name")["frame"]
    check(not h.black_where(png, name, shot["window"]), "the name field is not black")
    # The image is cut where the window is: the empty name field's inside is its white
    # background (a cut a few pixels off takes in its border and what lies around it).
    x0, y0 = name["x"] - wf["x"], name["y"] - wf["y"]
    inside = [(x, y) for y in range(y0 + 4, y0 + name["h"] - 4) for x in range(x0 + 12, x0 + name["w"] - 4, 3)]
    white = sum(px[(y * w + x) * ch:(y * w + x) * ch + 3] == b"\xff\xff\xff" for x, y in inside)
    check(white >= 0.97 * len(inside), f"the name field's inside is white: {white} of {len(inside)}")
    check(shot["screenshot"]["redacted"] >= 1, str(shot["screenshot"]))
    return shot, png


async def capture_focused(c) -> int:
    """The form has the focus: its capture is its own frame with the password field black.
    Returns its window id."""
    say("capture of the form, which has the focus: its own frame, the password field black")
    shot, _ = await captured(c, {"app": APP})
    say(f"  {shot['window']['frame']['w']}x{shot['window']['frame']['h']}, "
        f"{shot['screenshot']['redacted']} field(s) blacked out")
    return shot["window"]["window_id"]


async def captures_of_two(c, dialog: "DialogPerson", big: int) -> None:
    """A second, smaller form of the same app opens and takes the focus; a session the person
    grants then sees both. mutter's screen cast records the focused window only: the first
    form's capture is refused (its stream would show the other), and the small form's is found
    inside its shadow. The small form closes and the first has the focus again."""
    say("a second, smaller form of the app opens and takes the focus; the person grants a session")
    small = subprocess.Popen(["/usr/bin/python3", FORM, "--small"])
    try:
        # On the accessibility bus before the person is asked: the session's scope is the
        # app's processes there when it starts.
        window_on_bus("nish-driver GTK 4 small form")
        t, got = in_thread(lambda: dialog.answer(True))
        await ok(c, "start_session", {"apps": [APP]})
        t.join()
        check(not isinstance(got[0], BaseException), f"the person: {got[0]}")
        deadline = time.monotonic() + 20
        while True:
            wins = (await ok(c, "list_windows", {}))["windows"]
            other = [w for w in wins if w["app"] == APP and w["window_id"] != big]
            if other and other[0].get("active"):
                break
            check(time.monotonic() < deadline, f"the small form did not come up focused: {wins}")
            await anyio.sleep(0.2)
        err = await fails(c, "get_window_state", {"window_id": big, "include_screenshot": True}, "unsupported")
        check("focus" in err["message"], str(err))
        say("  the first form, no longer focused: refused (unsupported); its stream would show the other")
        shot, _ = await captured(c, {"window_id": other[0]["window_id"]})
        f = shot["window"]["frame"]
        check(f["w"] < 1000, f"the small form is a small window: {f}")
        say(f"  the small form: found inside its shadow, {f['w']}x{f['h']}, its password field black")
    finally:
        small.terminate()
        small.wait(timeout=10)
    deadline = time.monotonic() + 20
    while not any(w["window_id"] == big and w.get("active") for w in (await ok(c, "list_windows", {}))["windows"]):
        check(time.monotonic() < deadline, "the form did not get the focus back")
        await anyio.sleep(0.2)
    await ok(c, "end_session")


async def read_entry(c, label: str = "Your name") -> dict:
    # A reader that was killed (the reader-death step) starts again after a short back-off;
    # reads meanwhile answer rate_limited (retry safe), and a host waits and asks again.
    deadline = time.monotonic() + 10
    while True:
        r = await c.call_tool("get_window_state", {"app": APP})
        err = (r.structured_content or {}).get("error") or {}
        if not (r.is_error and err.get("code") == "rate_limited" and time.monotonic() < deadline):
            break
        await anyio.sleep(0.3)
    check(r.is_error is False, f"get_window_state failed: {h.text_of(r)}")
    return entry_of(r.structured_content, label)


async def reads_back(c, want: str) -> dict:
    deadline = time.monotonic() + 5
    while True:
        e = await read_entry(c)
        if e.get("value") == want:
            return e
        check(time.monotonic() < deadline, f"the entry reads {e.get('value')!r}, not {want!r}")
        await anyio.sleep(0.1)


async def cleared(c) -> dict:
    """The entry emptied by a headless set_value (so that what is typed next reads back whole,
    values being cut at 200 characters, and lands at the caret of an empty field)."""
    e = await read_entry(c)
    await ok(c, "set_value", {"element_token": e["element_token"], "value": ""})
    deadline = time.monotonic() + 5
    while True:
        e = await read_entry(c)
        if not e.get("value"):
            return e
        check(time.monotonic() < deadline, f"the entry still holds {len(e['value'])} characters")
        await anyio.sleep(0.1)


async def focused_within(c, label: str, want: bool, what: str) -> dict:
    deadline = time.monotonic() + 5
    while ("focused" in (e := await read_entry(c, label))["states"]) != want:
        check(time.monotonic() < deadline, f"{what}: {e}")
        await anyio.sleep(0.1)
    return e


async def clicks_on_gnome(c) -> None:
    """Clicks through mutter's own remote desktop, mapped by a stream of the focused window:
    one lands (the focus read back), a typing into a field without the focus clicks it first,
    and a click under the app's own popover is refused with nothing pressed. The entry holds
    "Ada Lovelac" with the focus before and after."""
    say("clicks on GNOME: a point of the focused window's own screen cast, mapped by mutter")
    pw = await read_entry(c, "Password")
    a = await ok(c, "click", {"element_token": pw["element_token"], "delivery_mode": "foreground"})
    check(a["path"] == "portal:click", str(a))
    await focused_within(c, "Password", True, "the click did not give the password field the focus")
    await focused_within(c, "Your name", False, "the name field kept the focus")
    say("  a foreground click on the password field: it holds the keyboard focus (read back)")
    e = await read_entry(c)
    # A text the layout cannot type is refused before the focusing click: no click goes.
    err = await fails(c, "type_text", {"element_token": e["element_token"], "text": "café",
                                       "delivery_mode": "foreground"}, "unsupported")
    check(err.get("effect") == "refused" and "character 4 of the text" in err["message"], str(err))
    await anyio.sleep(0.3)
    await focused_within(c, "Password", True, "a refused typing clicked its field")
    say("  type_text 'café' into the name field: refused before its focusing click (the password "
        "field keeps the focus)")
    a = await ok(c, "type_text", {"element_token": e["element_token"], "text": " #cover#",
                                  "delivery_mode": "foreground"})
    check(a["path"] == "portal:type", str(a))
    await reads_back(c, "Ada Lovelac #cover#")
    say("  type_text into the name field without the keyboard focus: a focusing click, then the "
        "keys; the entry reads back 'Ada Lovelac #cover#'")
    # The app's popover (no grab) now lies over the password field; mutter draws it a frame
    # or two after the text changed.
    await anyio.sleep(0.5)
    pw = await read_entry(c, "Password")
    err = await fails(c, "click", {"element_token": pw["element_token"], "delivery_mode": "foreground"},
                      "occluded")
    check(err.get("effect") == "stopped" and "nothing was pressed" in err["message"], str(err))
    await anyio.sleep(0.3)
    await focused_within(c, "Password", False, "the click under the popover reached the field")
    say(f"  a click on the password field under the app's popover: occluded ({err['message']})")
    for _ in range(len(" #cover#")):
        await ok(c, "press_key", {"key": "BackSpace"})
    await reads_back(c, "Ada Lovelac")
    say("  BackSpace x8: the entry reads 'Ada Lovelac' again, the popover gone")
    # A double click selects the word under the pointer (GTK takes two presses within its
    # time as one double click; a single click only moves the caret): the typing then
    # replaces it. One word wider than the field lies under any point of it.
    word = "m" * 150
    e = await read_entry(c)
    await ok(c, "set_value", {"element_token": e["element_token"], "value": word})
    e = await reads_back(c, word)
    a = await ok(c, "double_click", {"element_token": e["element_token"], "delivery_mode": "foreground"})
    check(a["path"] == "portal:double_click", str(a))
    await anyio.sleep(0.3)
    e = await read_entry(c)
    await ok(c, "type_text", {"element_token": e["element_token"], "text": "Byron",
                              "delivery_mode": "foreground"})
    await reads_back(c, "Byron")
    say("  double_click on a word wider than the name field selects it: the typing replaces it, 'Byron'")
    e = await read_entry(c)
    await ok(c, "set_value", {"element_token": e["element_token"], "value": "Ada Lovelac"})
    await reads_back(c, "Ada Lovelac")
    await ok(c, "press_key", {"key": "End"})


async def pointer_stops_typing(c, ctl, dialog, before: str) -> None:
    """The person moves their pointer while the driver types a long text: the typing stops
    part-way (user_took_over, effect stopped, person_input), the host gets takeover.paused, and
    the entry holds `before` plus exactly the characters reported typed. The text is short
    enough that the entry's value reads back whole (values are cut at 200 characters) and long
    enough (at least 15 ms a character) to be well under way when the person starts moving,
    0.6 s in (0.1 s was too soon on a loaded machine: once the pause came before the first
    character)."""
    e = await read_entry(c)
    text = "x" * 180
    typing = [True]

    def person_moves() -> None:
        time.sleep(0.6)
        while typing[0]:
            dialog.say("move 4 0")
            time.sleep(0.02)

    mover, _ = in_thread(person_moves)
    res = await c.call_tool("type_text", {"element_token": e["element_token"], "text": text,
                                          "delivery_mode": "foreground"})
    typing[0] = False
    mover.join()
    check(res.is_error, f"the typing should stop: {res.structured_content}")
    err = res.structured_content["error"]
    check(err["code"] == "user_took_over" and err["effect"] == "stopped"
          and err["paused_reason"] == "person_input"
          and 0 < err["typed_characters"] < len(text), str(err))
    await ctl.wait(lambda x: x.get("event") == "takeover.paused", "takeover.paused")
    typed = (await read_entry(c)).get("value", "")
    check(typed == before + "x" * err["typed_characters"],
          f"the entry holds what was reported typed: {len(typed)} characters, "
          f"{err['typed_characters']} reported")
    say(f"  type_text: user_took_over, stopped after {err['typed_characters']} of {len(text)} characters; "
        "the entry holds exactly those")

async def resumed_after_pause(ctl: h.Control, sid: str, err: dict) -> None:
    """A pause on input the idle monitor showed during a step whose subject it is not: under
    load mutter may stamp a key of the driver's late enough to read as the person's
    (docs/security.md). Resumes, for the step to try again."""
    say(f"    paused by input the idle monitor showed ({err['code']}); resumed, once more")
    await ctl.wait(lambda x: x.get("event") == "takeover.paused", "takeover.paused")
    await anyio.to_thread.run_sync(person_quiet)
    ctl.send({"method": "takeover.resume", "params": {"session": sid}})
    await ctl.wait(lambda x: x.get("event") == "takeover.resumed", "takeover.resumed")


def on_this_bus(pid: int) -> bool:
    """Whether process `pid` runs on this desktop's session bus (other test desktops may run)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read().split(b"\0")
    except OSError:
        return False
    return f"DBUS_SESSION_BUS_ADDRESS={os.environ['DBUS_SESSION_BUS_ADDRESS']}".encode() in env


def audit(broker: h.Broker) -> list[dict]:
    with open(broker.audit, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


async def run(ns: argparse.Namespace) -> None:
    check("DISPLAY" not in os.environ, "the Wayland desktop has no DISPLAY")
    broker = h.Broker(ns.driver, "linux")
    try:
        report = json.loads(broker.cli("doctor", "--json").stdout)
        caps = {c["name"]: c for c in report["capabilities"]}
        for n in ("input_takeover", "takeover_indicator", "takeover_handback"):
            check(caps[n]["status"] == "available", f"doctor: {caps[n]}")
        check(caps["capture_window"]["status"] == "available", f"doctor: {caps['capture_window']}")
        entry = next(b for b in report["backends"] if b["id"] == "wayland-portal")
        check(entry["status"] == "available", f"doctor: {entry}")
        say("doctor: input_takeover, takeover_indicator and takeover_handback available on Wayland "
            "(the portal's RemoteDesktop and mutter's idle monitor); capture_window available (mutter's screen cast)")
        ctl = h.Control()
        async with h.host(ns.shim, broker, "wayland-takeover", "2025-11-25", ctl) as c:
            dialog = DialogPerson(broker)

            say("start_session {input: takeover}: the person ticks the takeover line and clicks Allow, "
                "then presses Escape in the desktop's own dialog")
            t, got = consent_with_takeover(dialog, "deny")
            st = await ok(c, "start_session", {"input": "takeover", "apps": [APP]})
            t.join()
            check(not isinstance(got[0], BaseException), f"the person: {got[0]}")
            check(st["input"] == "headless" and st["takeover"]["on"] is False
                  and st["takeover"].get("reason") == "not_granted", f"declined in the desktop's dialog: {st}")
            say(f"  {got[0]}; takeover {st['takeover']}")
            e = await read_entry(c)
            await fails(c, "type_text", {"element_token": e["element_token"], "text": "x",
                                         "delivery_mode": "foreground"}, "requires_takeover")
            big = await capture_focused(c)
            await ok(c, "end_session")
            await captures_of_two(c, dialog, big)

            say("start_session {input: takeover} again: the person allows it in both dialogs")
            t, got = consent_with_takeover(dialog, "allow")
            st = await ok(c, "start_session", {"input": "takeover", "apps": [APP]})
            t.join()
            check(not isinstance(got[0], BaseException), f"the person: {got[0]}")
            check(st["input"] == "takeover" and st["takeover"]["on"] is True, f"takeover: {st}")
            sid = st["session"]
            say(f"  {got[0]}; takeover {st['takeover']}")

            # mutter gives the keyboard to the takeover surface when it appears (a Wayland
            # client cannot refuse it): typing is refused until the person gives it back.
            e = await read_entry(c)
            check("focused" not in e["states"], f"the surface took the keyboard focus: {e}")
            err = await fails(c, "type_text", {"element_token": e["element_token"], "text": "x",
                                               "delivery_mode": "foreground"}, "occluded")
            check(err.get("effect") == "refused", str(err))
            err = await fails(c, "click", {"element_token": e["element_token"], "delivery_mode": "foreground"},
                              "occluded")
            check(err.get("effect") == "refused", str(err))
            say("  the takeover surface has the keyboard: type_text and a click are occluded (no listed window "
                "has the keyboard; on GNOME a click goes only into the window that has it), refused before "
                "anything was sent")
            f = e["frame"]
            dialog.click((f["x"] + f["w"] / 2, f["y"] + f["h"] / 2))
            # mutter stamps a RemoteDesktop event when its input thread takes it, after the
            # call returns: the person's click is whole before the host resumes.
            await anyio.sleep(0.5)
            ev = await ctl.wait(lambda x: x.get("event") == "takeover.paused", "takeover.paused")
            check(ev["reason"] == "person_input", f"paused: {ev}")
            await anyio.to_thread.run_sync(person_quiet)
            ctl.send({"method": "takeover.resume", "params": {"session": sid}})
            await ctl.wait(lambda x: x.get("event") == "takeover.resumed", "takeover.resumed")
            e = await read_entry(c)
            check("focused" in e["states"], f"the entry holds the keyboard focus: {e}")
            say("  the person clicks into the form (a pause: their own input), and the host resumes")
            for attempt in (1, 2):
                res = await c.call_tool("type_text", {"element_token": e["element_token"],
                                                      "text": "Ada Lovelace",
                                                      "delivery_mode": "foreground"})
                if not res.is_error:
                    a = res.structured_content
                    break
                err = res.structured_content["error"]
                check(err.get("paused_reason") == "person_input" and attempt == 1,
                      f"type_text failed: {err}")
                await resumed_after_pause(ctl, sid, err)
                e = await cleared(c)
            check(a["path"] == "portal:type", str(a))
            await reads_back(c, "Ada Lovelace")
            say(f"  foreground type_text: effect {a['effect']}, path {a['path']}; the GTK 4 entry reads back 'Ada Lovelace'")
            a = await ok(c, "press_key", {"key": "BackSpace"})
            check(a["path"] == "portal:key", str(a))
            await reads_back(c, "Ada Lovelac")
            say("  press_key BackSpace: the entry reads back 'Ada Lovelac'")
            # The desktop's layout (US) has no key for é: mutter would drop its keysym without a word.
            e = await read_entry(c)
            err = await fails(c, "type_text", {"element_token": e["element_token"], "text": "e café",
                                               "delivery_mode": "foreground"}, "unsupported")
            check(err.get("effect") == "refused" and "character 6 of the text" in err["message"], str(err))
            await anyio.sleep(0.3)
            await reads_back(c, "Ada Lovelac")
            say("  type_text with a character the desktop's keyboard layout (US) has no key for: unsupported, "
                "refused before anything was sent; the entry still reads 'Ada Lovelac'")
            await clicks_on_gnome(c)

            say("the person presses a key of their own")
            dialog.say("key 0xffe1 1")
            dialog.say("key 0xffe1 0")
            ev = await ctl.wait(lambda x: x.get("event") == "takeover.paused", "takeover.paused")
            check(ev["session"] == sid and ev["reason"] == "person_input", f"paused: {ev}")
            st = await ok(c, "get_session_state")
            check(st["takeover"]["paused"] is True and st["takeover"]["paused_reason"] == "person_input", str(st))
            err = await fails(c, "press_key", {"key": "BackSpace"}, "user_took_over")
            check(err.get("effect") == "refused", str(err))
            await reads_back(c, "Ada Lovelac")
            say("  takeover.paused (person_input); press_key refused with user_took_over; nothing was sent")
            await anyio.to_thread.run_sync(person_quiet)
            ctl.send({"method": "takeover.resume", "params": {"session": sid}})
            await ctl.wait(lambda x: x.get("event") == "takeover.resumed", "takeover.resumed")
            say("  the host's takeover.resume (after its own Resume click): takeover.resumed")

            say(f"the person's pointer pauses the driver: {TRIALS} trials, the move to the host's event")
            waits = []
            for i in range(TRIALS):
                await anyio.sleep(0.3)
                t0 = time.monotonic()
                dialog.say(f"move {3 if i % 2 else -3} 2")
                await ctl.wait(lambda x: x.get("event") == "takeover.paused", "takeover.paused")
                waits.append((time.monotonic() - t0) * 1000)
                await anyio.to_thread.run_sync(person_quiet)
                ctl.send({"method": "takeover.resume", "params": {"session": sid}})
                await ctl.wait(lambda x: x.get("event") == "takeover.resumed", "takeover.resumed")
            waits.sort()
            p99 = waits[min(len(waits) - 1, int(len(waits) * 0.99))]
            say(f"  pause latency over {TRIALS}: median {statistics.median(waits):.1f} ms, "
                f"p99 {p99:.1f} ms, max {waits[-1]:.1f} ms (measured, not asserted)")

            say("the person moves their pointer while the driver types a long text")
            await pointer_stops_typing(c, ctl, dialog, "Ada Lovelac")
            await anyio.to_thread.run_sync(person_quiet)
            ctl.send({"method": "takeover.resume", "params": {"session": sid}})
            await ctl.wait(lambda x: x.get("event") == "takeover.resumed", "takeover.resumed")

            say("the reader dies while the driver types: the focus can no longer be checked, the typing stops")
            text = "z" * 120
            for attempt in range(3):
                e = await cleared(c)
                reader = broker.children().get("nish-reader")
                check(reader is not None, f"the reader runs: {broker.children()}")

                def kill_reader(pid: int = reader) -> None:
                    time.sleep(0.5)
                    os.kill(pid, signal.SIGKILL)

                killer, _ = in_thread(kill_reader)
                res = await c.call_tool("type_text", {"element_token": e["element_token"], "text": text,
                                                      "delivery_mode": "foreground"})
                killer.join()
                check(res.is_error, f"the typing should stop: {res.structured_content}")
                err = res.structured_content["error"]
                if err.get("paused_reason") != "person_input" or attempt == 2:
                    break
                await resumed_after_pause(ctl, sid, err)
            # The reader restarted at once holds no walk of the window: the field is in none
            # (focus_changed); one that did not answer in time is app_not_responding.
            check(err["code"] in ("focus_changed", "app_not_responding") and err["effect"] == "stopped"
                  and 0 < err["typed_characters"] < len(text), str(err))
            got = (await read_entry(c)).get("value", "")
            check(got == "z" * err["typed_characters"],
                  f"the entry holds what was reported typed: {len(got)} of {err['typed_characters']}")
            say(f"  type_text: {err['code']} (retry {err['disposition']['retry']}), stopped after "
                f"{err['typed_characters']} of {len(text)} characters; the entry holds exactly those")

            say("the app opens a dialog of its own while the driver types: the typing stops there")
            before = ""
            # A Return right after the trigger: it would activate the dialog's default action.
            head = "abc" + TRIGGER
            text = head + "\n" + "y" * 60
            for attempt in range(3):
                e = await cleared(c)
                res = await c.call_tool("type_text", {"element_token": e["element_token"], "text": text,
                                                      "delivery_mode": "foreground"})
                check(res.is_error, f"the typing should stop: {res.structured_content}")
                err = res.structured_content["error"]
                if err.get("paused_reason") != "person_input" or err["typed_characters"] >= len(head) \
                        or attempt == 2:
                    break
                await resumed_after_pause(ctl, sid, err)
            check(err["code"] == "focus_changed" and err["effect"] == "stopped"
                  and len(head) <= err["typed_characters"] < len(text), str(err))
            n = err["typed_characters"]
            wins = (await ok(c, "list_windows"))["windows"]
            main = next(w for w in wins if w["title"] == "nish-driver GTK 4 form")
            dlg = next(w for w in wins if w["title"] == "nish-driver GTK 4 dialog")
            r = await ok(c, "get_window_state", {"window_id": main["window_id"]})
            got = field_value(r, "Your name")
            r = await ok(c, "get_window_state", {"window_id": dlg["window_id"]})
            leaked = field_value(r, "Dialog field")
            # The form's field holds what was typed until its window lost the focus; what was sent
            # after that (before the next check saw it) went to the dialog, whose field may not
            # have had the focus yet (a key sent to it then is lost).
            k = len(got) - len(before)
            check(got == before + text[:k] and len(head) <= k <= n,
                  f"the form's field holds the first characters typed: {k} of {n} after {len(before)}")
            check(n - k <= 5 and len(leaked) <= n - k and set(leaked) <= {"y"},
                  f"after the form lost the focus: {n - k} sent, {len(leaked)} in the dialog's field")
            # Before a Return the app gets time to show what the characters before opened.
            check(n == k == len(head) and leaked == "",
                  f"the Return after the trigger was not sent: {n} typed, {k} in the form, "
                  f"the dialog's field {leaked!r}")
            say(f"  type_text: focus_changed, stopped after {n} of {len(text)} characters, before the "
                f"Return that followed the trigger; the form's field holds {k}, the dialog's field "
                f"{len(leaked)} ({err['message']})")

            say("the desktop portal's backend leaves the bus: the kill switch")
            pids = [p for p in subprocess.run(["pgrep", "-f", "xdg-desktop-portal-gnome"], capture_output=True,
                                              text=True).stdout.split() if on_this_bus(int(p))]
            check(len(pids) == 1, f"one portal backend runs on this desktop's bus: {pids}")
            os.kill(int(pids[0]), signal.SIGKILL)
            deadline = time.monotonic() + 10
            while True:
                stops = [a for a in audit(broker) if a.get("event") == "stop"]
                if stops:
                    break
                check(time.monotonic() < deadline, "no stop was audited")
                await anyio.sleep(0.1)
            check(stops[-1]["origin"] == "remote_desktop" and stops[-1]["sessions"] >= 1, str(stops[-1]))
            await fails(c, "press_key", {"key": "BackSpace"}, "stopped_by_person")
            say(f"  audited stop, origin {stops[-1]['origin']}, sessions {stops[-1]['sessions']}; "
                "the next act: stopped_by_person")
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
    ns = p.parse_args()
    anyio.run(run, ns)
    say("ALL CHECKS PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
