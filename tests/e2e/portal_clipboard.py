"""The desktop portal's Clipboard (org.freedesktop.portal.Clipboard, xdg-desktop-portal 1.18 with
GNOME 45 and later), within a takeover's remote-desktop session, on the Wayland test desktop
(mutter headless, no X server), through the official MCP Python client, nish-mcp and the real
nish-driver serve with its agents.

The machines here run GNOME 43, whose portal has no Clipboard. So this test runs a stand-in for
the portal's frontend (tests/src/bin/xdg-desktop-portal.rs: RemoteDesktop 1 and Clipboard 1 as
the portal documents them, under the frontend's executable name, which the broker checks), which
plays the other programs that copy and paste. What it shows is the broker's side of the portal's
API; the real portal's, and GNOME's, are not reached here.

- The doctor: clipboard_read and clipboard_write available (the portal offers Clipboard, and
  a takeover works), the desktop portal probe lists Clipboard 1.
- A headless session with the clipboard line: the portal's clipboard exists only within a
  remote-desktop session, so clipboard_write and clipboard_read (without asking the host)
  answer backend_unavailable, saying that a takeover is needed.
- A takeover session with the clipboard line: the broker asks for the clipboard between
  SelectDevices and Start; clipboard_write offers the three text types (SetSelection); another
  program's paste (SelectionTransfer) gets the whole text, non-ASCII characters included;
  clipboard_read of the driver's own text is that text; of another program's copy, its text
  (SelectionRead as text/plain;charset=utf-8); refused by the host: consent_denied, no text;
  a credential-looking text: secure_field; no text type: unsupported; more than 1 MiB:
  unsupported; an owner that never writes: app_not_responding within the read's bound.
- Another program forging the portal's signals for the driver's session (an owner change with
  no text type, a paste): both are ignored.
- 200 pastes at once by programs that never read a text larger than a pipe holds: at most 4
  are handed over at once (each bounded), the rest left unanswered; a later paste gets the
  whole text and a later read works (the takeover's connection is never held).
- end_session closes the portal session; the desktop's Session.Closed of a later takeover
  stops everything (audited with origin remote_desktop).
- The broker's log and the audit carry no text.

    portal_clipboard.py --driver .../nish-driver --shim .../nish-mcp --portal .../xdg-desktop-portal
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import sys
import threading
import time

import anyio

import nishhost as h
from nishhost import check, fails, ok, say
from wayland_clipboard import tick_then_allow
from wayland_session import DialogPerson, in_thread
from wayland_takeover import window_on_bus

APP = "nish-form-gtk4"
HERE = os.path.dirname(os.path.abspath(__file__))
FORM = os.path.join(HERE, "..", "apps", "form_gtk4.py")
TEXT_TYPES = ["text/plain;charset=utf-8", "UTF8_STRING", "text/plain"]
WRITTEN = "written through the portal: clip-canary-w ünïcödé ✓ 漢字"
OTHER = "copied by another program: clip-canary-o"
CREDENTIAL = "password=clip-canary-Secr3t!"
BIG = "clip-canary-b " * 7_000  # more than a pipe holds unread
HANDOVERS = 4  # pastes the broker hands over at once (remote/clipboard.rs)
CANARIES = ("clip-canary",)
# Another program of the person's forges the portal's clipboard signals for the driver's session
# (argv: the session's path, `owner` or `transfer`), from its own connection.
FORGE = """
import sys
from gi.repository import Gio, GLib
path, what = sys.argv[1], sys.argv[2]
bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
if what == "owner":
    member = "SelectionOwnerChanged"
    body = GLib.Variant("(oa{sv})", (path, {"mime_types": GLib.Variant("as", ["image/png"]),
                                            "session_is_owner": GLib.Variant("b", False)}))
else:
    member = "SelectionTransfer"
    body = GLib.Variant("(osu)", (path, "text/plain;charset=utf-8", 4242))
bus.emit_signal(None, "/org/freedesktop/portal/desktop", "org.freedesktop.portal.Clipboard", member, body)
bus.flush_sync(None)
"""


def forge(path: str, what: str) -> None:
    r = subprocess.run(["/usr/bin/python3", "-c", FORGE, path, what], capture_output=True, text=True,
                       timeout=30)
    check(r.returncode == 0, f"the forger ran: {r.stderr}")
    time.sleep(0.5)


class Portal:
    """The stand-in portal frontend: commands on its stdin, its events (JSON lines) read from
    its stdout by a thread."""

    def __init__(self, exe: str) -> None:
        self.proc = subprocess.Popen([exe], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, bufsize=1)
        self.events: queue.Queue[dict] = queue.Queue()
        # Every event so far, and those no wait has taken yet (an event may come before the
        # answer to the command that caused it).
        self.seen: list[dict] = []
        self.backlog: list[dict] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.wait(lambda e: e.get("event") == "ready", "the stand-in portal owns its name")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.events.put(json.loads(line))
            except ValueError:
                self.events.put({"event": "garbage", "line": line})

    def wait(self, pred, what: str, timeout: float = 20.0) -> dict:
        for i, e in enumerate(self.backlog):
            if pred(e):
                return self.backlog.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            check(left > 0, f"the stand-in portal: no {what} within {timeout} s (seen {self.seen[-10:]})")
            try:
                e = self.events.get(timeout=left)
            except queue.Empty:
                continue
            self.seen.append(e)
            if pred(e):
                return e
            self.backlog.append(e)

    def send(self, cmd: dict) -> dict:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        e = self.wait(lambda e: e.get("event") in ("ok", "error") and e.get("cmd") == cmd["cmd"],
                      f"answer to {cmd['cmd']}")
        check(e["event"] == "ok", f"the stand-in portal refused {cmd['cmd']}: {e}")
        return e

    def drain(self) -> list[dict]:
        """Every event so far."""
        while True:
            try:
                e = self.events.get_nowait()
            except queue.Empty:
                return self.seen
            self.seen.append(e)
            self.backlog.append(e)

    def calls(self) -> list[str]:
        return [e["method"] for e in self.drain() if e.get("event") == "call"]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


async def read(c, ctl: h.Control, approve: bool = True):
    return await h.clipboard_read(c, ctl, approve, CANARIES)


def copied(portal: Portal, **owner) -> None:
    """Another program copies: the portal tells the session its types."""
    portal.send({"cmd": "own", **owner})
    # The broker hears of it by a signal: a moment for it to arrive.
    time.sleep(0.3)


async def takeover_session(c, dialog: DialogPerson) -> dict:
    t, got = in_thread(tick_then_allow(dialog, "Takeover", "Clipboard"))
    st = await ok(c, "start_session", {"input": "takeover", "apps": [APP], "clipboard_read": True})
    t.join()
    check(not isinstance(got[0], BaseException), f"the person: {got[0]}")
    check(st["input"] == "takeover" and st["takeover"]["on"] is True and st["clipboard_read"] is True,
          f"a takeover with the clipboard line: {st}")
    return st


async def run(ns: argparse.Namespace) -> None:
    check("DISPLAY" not in os.environ, "the Wayland desktop has no DISPLAY")
    portal = Portal(ns.portal)
    form = subprocess.Popen(["/usr/bin/python3", FORM])
    broker = None
    try:
        window_on_bus("nish-driver GTK 4 form")
        broker = h.Broker(ns.driver, "linux")
        report = json.loads(broker.cli("doctor", "--json").stdout)
        caps = {c["name"]: c for c in report["capabilities"]}
        for n in ("clipboard_read", "clipboard_write", "input_takeover"):
            check(caps[n]["status"] == "available", f"doctor: {caps[n]}")
        probe = next(p for p in report["probes"] if p["label"] == "desktop portal")
        check("Clipboard 1" in probe["message"], f"doctor: {probe}")
        say("doctor: clipboard_read and clipboard_write available (the portal's Clipboard 1, and a takeover "
            "works: RemoteDesktop and mutter's idle monitor)")

        ctl = h.Control()
        async with h.host(ns.shim, broker, "portal-clipboard", "2025-11-25", ctl) as c:
            dialog = DialogPerson(broker)

            say("a headless session with the clipboard line: no remote-desktop session, so no clipboard")
            t, got = in_thread(tick_then_allow(dialog, "Clipboard"))
            st = await ok(c, "start_session", {"apps": [APP], "clipboard_read": True})
            t.join()
            check(not isinstance(got[0], BaseException), f"the person: {got[0]}")
            check(st["clipboard_read"] is True and st["input"] == "headless", f"{st}")
            err = await fails(c, "clipboard_write", {"text": WRITTEN}, "backend_unavailable")
            check("takeover" in err["message"], str(err))
            e = await fails(c, "clipboard_read", {}, "backend_unavailable")
            check("takeover" in e["message"], str(e))
            check("CreateSession" not in portal.calls(), f"no portal session yet: {portal.calls()}")
            say(f"  clipboard_write and clipboard_read (the host not asked): backend_unavailable "
                f"({err['message']!r})")
            await ok(c, "end_session")

            say("a takeover session with the takeover and clipboard lines")
            await takeover_session(c, dialog)
            calls = portal.calls()
            check("RequestClipboard" in calls and "Start" in calls
                  and calls.index("SelectDevices") < calls.index("RequestClipboard") < calls.index("Start"),
                  f"the clipboard asked for between SelectDevices and Start: {calls}")
            say(f"  the portal was asked: {', '.join(calls)}")

            await ok(c, "clipboard_write", {"text": WRITTEN})
            sel = portal.wait(lambda e: e.get("event") == "set_selection", "SetSelection")
            check(sel["mime_types"] == TEXT_TYPES, f"the driver offers the text types: {sel}")
            paste = portal.send({"cmd": "paste", "mime": "text/plain;charset=utf-8"})
            w = portal.wait(lambda e: e.get("event") == "written" and e.get("serial") == paste["serial"],
                            "the driver's text handed over")
            check(w.get("success") is True and w.get("text") == WRITTEN, f"the pasting program's text: {w}")
            say(f"clipboard_write: SetSelection with {', '.join(TEXT_TYPES)}; another program's paste gets "
                f"the {len(WRITTEN)} characters, written and acknowledged")
            paste = portal.send({"cmd": "paste", "mime": "image/png"})
            w = portal.wait(lambda e: e.get("event") == "written" and e.get("serial") == paste["serial"],
                            "the refused hand-over")
            check(w.get("success") is False and w.get("len", 0) == 0, f"no text as image/png: {w}")
            say("  a paste asking for image/png: refused (SelectionWriteDone false), nothing written")

            r = await read(c, ctl)
            check(r.is_error is False and r.structured_content["text"] == WRITTEN,
                  f"the driver's own text reads back: {h.text_of(r)}")
            say("clipboard_read (approved) of the driver's own text: the same text")

            copied(portal, mime_types=["text/html", "text/plain;charset=utf-8"], mode="text", text=OTHER)
            r = await read(c, ctl)
            check(r.is_error is False and r.structured_content["text"] == OTHER,
                  f"the other program's text: {h.text_of(r)}")
            sr = [e for e in portal.drain() if e.get("event") == "selection_read"]
            check(sr and sr[-1]["mime"] == "text/plain;charset=utf-8", f"read as text: {sr}")
            say(f"clipboard_read (approved) of another program's copy: {len(OTHER)} characters, read as "
                "text/plain;charset=utf-8")
            r = await read(c, ctl, approve=False)
            e = h.error_of(r)
            check(e["code"] == "consent_denied" and "clip-canary" not in h.text_of(r), str(e))
            say("  refused by the host: consent_denied, no text")

            path = [e["path"] for e in portal.drain() if e.get("event") == "session"][-1]
            forge(path, "owner")
            r = await read(c, ctl)
            check(r.is_error is False and r.structured_content["text"] == OTHER,
                  f"a forged owner change is ignored: {h.text_of(r)}")
            await ok(c, "clipboard_write", {"text": WRITTEN})
            portal.wait(lambda e: e.get("event") == "set_selection", "SetSelection")
            writes = portal.calls().count("SelectionWrite")
            forge(path, "transfer")
            check(portal.calls().count("SelectionWrite") == writes,
                  f"a forged paste is not answered: {portal.calls()}")
            say("another program forges the portal's signals for the driver's session: its owner change "
                "(no text type) does not change what a read takes, and its paste gets no SelectionWrite")
            copied(portal, mime_types=TEXT_TYPES, mode="text", text=OTHER)

            copied(portal, mime_types=TEXT_TYPES, mode="text", text=CREDENTIAL)
            e = h.error_of(await read(c, ctl))
            check(e["code"] == "secure_field" and "clip-canary" not in json.dumps(e), str(e))
            say("a credential-looking text: refused (secure_field), the text in no error")

            copied(portal, mime_types=["image/png"], mode="text", text="not text")
            e = h.error_of(await read(c, ctl))
            check(e["code"] == "unsupported" and "no text" in e["message"], str(e))
            say("a copy with no text type: unsupported")

            copied(portal, mime_types=TEXT_TYPES, mode="huge", bytes=2 * 1024 * 1024)
            e = h.error_of(await read(c, ctl))
            check(e["code"] == "unsupported" and "larger than" in e["message"], str(e))
            say("a text of 2 MiB: unsupported")

            copied(portal, mime_types=TEXT_TYPES, mode="stall")
            t0 = time.monotonic()
            e = h.error_of(await read(c, ctl))
            took = time.monotonic() - t0
            check(e["code"] == "app_not_responding", str(e))
            check(took < 8, f"the read's bound held: {took:.1f} s")
            say(f"an owner that never writes: app_not_responding after {took:.1f} s (with the host's approval)")

            copied(portal, mime_types=TEXT_TYPES, mode="text", text=OTHER)
            r = await read(c, ctl)
            check(r.is_error is False and r.structured_content["text"] == OTHER, f"{h.text_of(r)}")
            say("  the clipboard works on: the next copy reads")

            say(f"200 pastes at once by programs that never read the driver's {len(BIG)} characters")
            await ok(c, "clipboard_write", {"text": BIG})
            portal.wait(lambda e: e.get("event") == "set_selection", "SetSelection")
            portal.send({"cmd": "flood", "count": 200})
            time.sleep(1.5)  # past the hand-overs' bound
            stalled = [e for e in portal.drain() if e.get("event") == "stalled"]
            check(1 <= len(stalled) <= HANDOVERS, f"{len(stalled)} hand-overs at once")
            paste = portal.send({"cmd": "paste", "mime": "text/plain;charset=utf-8"})
            w = portal.wait(lambda e: e.get("event") == "written" and e.get("serial") == paste["serial"],
                            "the paste after the flood")
            check(w.get("success") is True and w.get("len") == len(BIG.encode()), f"the whole text: {w}")
            copied(portal, mime_types=TEXT_TYPES, mode="text", text=OTHER)
            r = await read(c, ctl)
            check(r.is_error is False and r.structured_content["text"] == OTHER, f"{h.text_of(r)}")
            say(f"  {len(stalled)} hand-overs were tried at once, the rest left unanswered; a paste after "
                "them gets the whole text, and a copy by another program then reads: the takeover's "
                "connection was never held")

            await ok(c, "end_session")
            portal.wait(lambda e: e.get("event") == "closed_by_client", "the portal session closed")
            say("end_session: the broker closed the portal session")

            say("a takeover again; the desktop ends the remote-desktop session (Session.Closed)")
            await takeover_session(c, dialog)
            portal.send({"cmd": "close"})
            deadline = time.monotonic() + 20
            while True:
                stops = [a for a in broker.audit_events() if a.get("event") == "stop"]
                if stops:
                    break
                check(time.monotonic() < deadline, "no stop was audited")
                await anyio.sleep(0.1)
            check(stops[-1]["origin"] == "remote_desktop", str(stops[-1]))
            await fails(c, "clipboard_write", {"text": "x"}, "stopped_by_person")
            say(f"  everything stopped: audited stop, origin {stops[-1]['origin']}; the next call: stopped_by_person")
            dialog.stop()

        log = broker.log_text(tail=None)
        audit = json.dumps(broker.audit_events())
        for canary in CANARIES:
            check(canary not in log, "the broker's log carries no clipboard text")
            check(canary not in audit, "the audit carries no clipboard text")
        say("the broker's log and the audit: no clipboard text")
    except BaseException:
        if broker is not None:
            print(broker.log_text(), file=sys.stderr)
        print(f"the stand-in portal's events: {portal.seen}", file=sys.stderr)
        raise
    finally:
        if broker is not None:
            broker.stop()
        form.terminate()
        form.wait(timeout=10)
        portal.stop()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--driver", required=True)
    p.add_argument("--shim", required=True)
    p.add_argument("--portal", required=True)
    ns = p.parse_args()
    anyio.run(run, ns)
    say("ALL CHECKS PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
