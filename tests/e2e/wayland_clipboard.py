"""The clipboard on a Wayland compositor that offers wlroots' data-control protocol (sway, KDE's
KWin), through a whole session: used by sway_session.py and kwin_session.py.

- The doctor has clipboard_read and clipboard_write available.
- start_session {clipboard_read: true}: the dialog shows the clipboard line; the person ticks it
  and clicks Allow (their pointer, as for the rest of the dialog).
- clipboard_write: another Wayland client (wl-paste, of wl-clipboard, itself through
  data-control) reads the text back, non-ASCII characters included.
- clipboard_read of the driver's own text, then of what wl-copy holds: each asked on the host's
  control pipe first, approved, the same text; a refused read returns no text; a
  credential-looking text is refused as secure_field, a text over 1 MiB as unsupported, and an
  owner that never sends its text (nish-clip-hostile stall) as app_not_responding by the read's
  deadline, after which the clipboard works on.
- Hostile programs (nish-clip-hostile): a copy replaced while the driver reads it reads as the
  new copy, not as empty text; an owner announcing 200 long junk types before its text type
  is read as holding no text (the agent keeps 64 names); 200 requests for the driver's text
  that are never read, then 5 more every 100 ms, do not hold its clipboard thread, and a
  paste by another program meanwhile gets the whole text.
- end_session: the driver's text is gone from the clipboard (wl-paste finds nothing).
- The input agent's log and the audit carry the texts' lengths, never the texts.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from contextlib import contextmanager
from typing import Iterator

import nishhost as h
from nishhost import check, ok, say
from wayland_session import DialogPerson, in_thread

WL_PASTE = "/usr/bin/wl-paste"
WL_COPY = "/usr/bin/wl-copy"

WRITTEN = "written on Wayland: clip-canary-w ünïcödé ✓ 漢字"
OTHER = "held by wl-copy: clip-canary-o"
CREDENTIAL = "password=clip-canary-Secr3t!"
CANARIES = ("clip-canary",)
HUGE = "clip-canary-h " * 100_000
BIG = "clip-canary-b " * 7_000
SWITCHED = "switched copy: clip-canary-s"


def wl_paste() -> str | None:
    """The clipboard's text as another Wayland client reads it (None: nothing is copied)."""
    p = subprocess.run([WL_PASTE, "--no-newline", "--type", "text/plain;charset=utf-8"],
                       capture_output=True, timeout=10)
    if p.returncode != 0:
        return None
    return p.stdout.decode()


def copied() -> bool:
    """Whether anything is copied, as another Wayland client sees it: wl-paste lists the
    selection's types. KWin 5.27 sends a new client no selection event while nothing is copied,
    and wl-paste then waits for one: no answer within 2 s is nothing copied (a held selection is
    listed at once)."""
    try:
        p = subprocess.run([WL_PASTE, "--list-types"], capture_output=True, timeout=2)
    except subprocess.TimeoutExpired:
        return False
    return p.returncode == 0 and p.stdout.strip() != b""


class WlCopy:
    """wl-copy holding `text` in the foreground until it is replaced or stopped."""

    def __init__(self, text: str) -> None:
        self.proc = subprocess.Popen([WL_COPY, "--foreground", "--type", "text/plain;charset=utf-8"],
                                     stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        assert self.proc.stdin is not None
        self.proc.stdin.write(text.encode())
        self.proc.stdin.close()
        deadline = time.monotonic() + 10
        while wl_paste() != text:
            check(self.proc.poll() is None, "wl-copy exited before holding the clipboard")
            check(time.monotonic() < deadline, "wl-copy did not hold the clipboard within 10 s")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


def tick_then_allow(dialog: DialogPerson, *lines: str):
    """The person ticks each of `lines` in the dialog (a click the dialog does not count, as
    after a stall under load, ticks nothing: they look and click again), then clicks Allow."""

    def tick(at: dict) -> None:
        for line in lines:
            check(line in at, f"the dialog shows the {line} line: {sorted(at)}")
            for _ in range(5):
                time.sleep(1.0)  # past the arming delay
                start = os.path.getsize(dialog.log)
                dialog.click(at[line])
                time.sleep(0.3)
                text = dialog.log_since(start)
                if f"control=Some({line})" in text and "did not count" not in text:
                    break
            else:
                check(False, f"the dialog never counted the person's click on the {line} line")

    return lambda: dialog.answer(True, shown=tick)


async def read(c, ctl: h.Control, approve: bool):
    return await h.clipboard_read(c, ctl, approve, CANARIES)


@contextmanager
def hostile(ns, mode: str) -> Iterator[None]:
    """nish-clip-hostile in `mode`, ready, for the block's length."""
    p = subprocess.Popen([os.path.join(os.path.dirname(ns.driver), "nish-clip-hostile"), mode],
                         stdout=subprocess.PIPE, text=True)
    try:
        check(p.stdout.readline().strip() == "ready", f"nish-clip-hostile {mode} is ready")
        yield
    finally:
        p.kill()
        p.wait(timeout=10)


def doctor_has_clipboard(broker: h.Broker) -> None:
    report = json.loads(broker.cli("doctor", "--json").stdout)
    caps = {c["name"]: c for c in report["capabilities"]}
    for n in ("clipboard_read", "clipboard_write"):
        check(caps[n]["status"] == "available" and caps[n]["consent"] in ("separate", "session"),
              f"doctor: {caps[n]}")
    say("doctor: clipboard_read and clipboard_write available (the compositor's data-control)")


async def session(ns, broker: h.Broker, dialog: DialogPerson, app: str, name: str) -> None:
    """A whole clipboard session on a new connection with a control pipe."""
    doctor_has_clipboard(broker)
    ctl = h.Control()
    async with h.host(ns.shim, broker, name, "2025-11-25", ctl) as c:
        say(f"start_session {{apps: [{app}], clipboard_read: true}}: the person ticks the clipboard "
            "line, then clicks Allow")
        t, got = in_thread(tick_then_allow(dialog, "Clipboard"))
        st = await ok(c, "start_session", {"apps": [app], "clipboard_read": True})
        t.join()
        check(not isinstance(got[0], BaseException), f"the person: {got[0]}")
        check(st["clipboard_read"] is True, f"the person ticked the clipboard line: {st}")
        say("  granted with the clipboard line ticked by the person")

        errors: list[str] = []
        await ok(c, "clipboard_write", {"text": WRITTEN})
        got_back = wl_paste()
        check(got_back == WRITTEN, f"wl-paste reads the driver's text back: {got_back!r}")
        say(f"clipboard_write: wl-paste (another Wayland client) reads the {len(WRITTEN)} characters back")

        r = await read(c, ctl, True)
        check(r.is_error is False and r.structured_content["text"] == WRITTEN,
              f"the driver's own text reads back: {h.text_of(r)}")
        say("clipboard_read (approved) of the driver's own text: the same text")

        holder = WlCopy(OTHER)
        try:
            r = await read(c, ctl, True)
            check(r.is_error is False and r.structured_content["text"] == OTHER,
                  f"wl-copy's text: {h.text_of(r)}")
            say(f"clipboard_read (approved) of wl-copy's text: {len(OTHER)} characters")
            r = await read(c, ctl, False)
            e = h.error_of(r)
            check(e["code"] == "consent_denied", str(e))
            check("clip-canary" not in h.text_of(r), "a refused read returns nothing")
            errors.append(json.dumps(e))
            say("  refused by the host: consent_denied, no text")
        finally:
            holder.stop()

        holder = WlCopy(CREDENTIAL)
        try:
            r = await read(c, ctl, True)
            e = h.error_of(r)
            check(e["code"] == "secure_field", str(e))
            errors.append(json.dumps(e) + h.text_of(r))
            say("a credential-looking text: refused (secure_field), the text in no error")
        finally:
            holder.stop()

        holder = WlCopy(HUGE)
        try:
            r = await read(c, ctl, True)
            e = h.error_of(r)
            check(e["code"] == "unsupported" and "larger than" in e["message"], str(e))
            say(f"a text of {len(HUGE)} bytes (more than 1 MiB) from wl-copy: refused (unsupported)")
        finally:
            holder.stop()

        with hostile(ns, "stall"):
            t0 = time.monotonic()
            r = await read(c, ctl, True)
            took = time.monotonic() - t0
            e = h.error_of(r)
            check(e["code"] == "app_not_responding", str(e))
            check(took < 6.0, f"the read ended by its deadline: {took:.1f} s")
            say(f"an owner that never sends its text (nish-clip-hostile stall): app_not_responding "
                f"after {took:.1f} s (approval included)")

        with hostile(ns, "switch"):
            r = await read(c, ctl, True)
            check(r.is_error is False and r.structured_content["text"] == SWITCHED,
                  f"a copy replaced during the read: the new copy's text, not empty: {h.text_of(r)}")
            check("the selection was replaced while it was read" in broker.log_text(tail=None),
                  "the agent read the first copy, then the new one (not the new one alone)")
            say("a copy replaced while the driver read it, its pipe closed empty "
                "(nish-clip-hostile switch): the read answers the new copy's text")

        with hostile(ns, "many-types"):
            r = await read(c, ctl, True)
            e = h.error_of(r)
            check(e["code"] == "unsupported" and "no text" in e["message"], str(e))
            say("an owner announcing 200 junk types of 250 bytes before its text type "
                "(nish-clip-hostile many-types): the agent keeps the first 64, finds no text "
                "(unsupported) and works on")

        await ok(c, "clipboard_write", {"text": BIG})
        with hostile(ns, "flood"):
            t0 = time.monotonic()
            r = await read(c, ctl, True)
            took = time.monotonic() - t0
            check(r.is_error is False and r.structured_content["text"] == BIG,
                  f"the driver's own text under a flood of requests: {h.text_of(r)[:200]}")
            check(took < 6.0, f"the flood held the clipboard for {took:.1f} s")
            say(f"200 requests for the driver's {len(BIG)} characters, none read "
                f"(nish-clip-hostile flood): clipboard_read answered in {took:.1f} s "
                "(approval included)")
            # The flood goes on (5 requests every 100 ms, one-page pipes never read): another
            # program pasting meanwhile gets the whole text (before the agent wrote each
            # request on its own deadline: nothing, every time). While the flood's pipes fill
            # the agent's room, a paste may be turned away: then with nothing, never with a
            # part (before, a paste turned away had had its pipe's first 64 KiB).
            got = []
            for _ in range(5):
                got.append(len(wl_paste() or ""))
                if got[-1] == len(BIG):
                    break
                time.sleep(0.3)
            check(all(g in (0, len(BIG)) for g in got) and got[-1] == len(BIG),
                  f"pastes during the flood got {got} of {len(BIG)} characters (a part is a cut)")
            say(f"pastes (wl-paste) during the flood got {got} of the driver's {len(BIG)} characters")

        await ok(c, "clipboard_write", {"text": WRITTEN})
        check(wl_paste() == WRITTEN, "the driver holds the clipboard again")
        await ok(c, "end_session")
        deadline = time.monotonic() + 5
        while copied():
            check(time.monotonic() < deadline, "the clipboard is still held after end_session")
            time.sleep(0.05)
        say("end_session: the driver's text is gone (wl-paste finds nothing copied)")
        for e in errors:
            check(not any(x in e for x in CANARIES), f"an error carries clipboard text: {e}")

    log = broker.log_text(tail=None)
    check(not any(x in log for x in CANARIES), "the broker's and agents' log carry no clipboard text")
    audit = json.dumps(broker.audit_events())
    check(not any(x in audit for x in CANARIES), "the audit carries no clipboard text")
    check("clipboard: Wayland data-control" in log, "the input agent used data-control")
    say("the log and the audit carry lengths only, no clipboard text")
