#!/usr/bin/env python3
"""The X11 clipboard through a whole session on a real (nested) desktop: the official MCP
Python client, the real `nish-mcp` with a control pipe, `nish-driver serve --backend linux`
(logging at debug) and its agents, and xclip as the other program on the same display.

- The consent dialog shows the clipboard line; the person ticks it with a real click.
- clipboard_write: xclip reads the text back (UTF8_STRING), and the owner offers TARGETS,
  UTF8_STRING and STRING.
- clipboard_read of what xclip owns: asked on the host's control pipe first; an approved read
  returns the text, a refused one returns nothing (consent_denied); a credential-looking text is
  refused (secure_field); an incremental (INCR) transfer is refused (unsupported).
- The owner stops with the session: after end_session, and after the host's connection closes,
  xclip reads nothing from the driver.
- The broker hands one agent process at most 16 display connections (and starts it again once it
  had its last); the input agent keeps one connection for its clipboard reads: 20 approved reads
  in a row all return xclip's text, and the input agent is not started again on the way.
- Clipboard texts appear in no audit record, broker or agent log line, or error (lengths only).

    desktop_clipboard.py --driver .../nish-driver --shim .../nish-mcp --app NAME
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time

import anyio

import nishhost as h
from nishhost import check, ok, say

LATIN = "clip-canary-latin caf\u00e9 4410"
WRITTEN = "clip-canary-written \u00e9t\u00e9 \u2713 2209"
OTHER = "clip-canary-other caf\u00e9 7734"
SECOND = "clip-canary-second-session 5120"
CREDENTIAL = "password=clip-canary-Hunter2-9917"
# Over 4 MiB: xclip sends it incrementally (INCR) whatever the server's request size.
INCR_TEXT = "clip-canary-incr " + "y" * (5 * 1024 * 1024)
CANARIES = ["clip-canary"]


def xclip(env: dict[str, str], *args: str, timeout: float = 10.0) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["xclip", "-selection", "clipboard", *args], env=env,
                          capture_output=True, timeout=timeout)


def xclip_text(env: dict[str, str], target: str = "UTF8_STRING") -> str:
    """What another program reads from the CLIPBOARD selection ("" when nobody owns it)."""
    p = xclip(env, "-o", "-t", target)
    if p.returncode != 0:
        return ""
    return p.stdout.decode("latin-1" if target == "STRING" else "utf-8", errors="replace")


class Holder:
    """xclip owning the CLIPBOARD selection with a text, in the foreground (stopped by pid)."""

    def __init__(self, env: dict[str, str], text: str) -> None:
        self.proc = subprocess.Popen(["xclip", "-quiet", "-selection", "clipboard", "-i"], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        assert self.proc.stdin is not None
        self.proc.stdin.write(text.encode())
        self.proc.stdin.close()
        # Owning: TARGETS answers with xclip's list, exactly TARGETS and UTF8_STRING (a cheap
        # conversion even for a huge text). The driver's own selection also offers UTF8_STRING,
        # with TIMESTAMP and STRING besides: while it still owns the clipboard, keep waiting.
        deadline = time.monotonic() + 15
        while sorted(xclip_text(env, "TARGETS").split()) != ["TARGETS", "UTF8_STRING"]:
            check(self.proc.poll() is None, "xclip exited before owning the clipboard")
            check(time.monotonic() < deadline, "xclip did not own the clipboard within 15 s")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


# Clipboard reads in a row: more than the X connections one input agent process is handed.
RUN = 20


def input_starts(broker: h.Broker) -> list[dict]:
    """The audit's agent.start events of the input agent."""
    return [e for e in broker.audit_events()
            if e.get("event") == "agent.start" and e.get("agent") == "nish-input"]


async def read(c, ctl: h.Control, approve: bool):
    return await h.clipboard_read(c, ctl, approve, CANARIES)


async def start_with_clipboard(c, person: h.Person) -> dict:
    """start_session {clipboard_read: true}, answered by the person with real clicks: the
    clipboard line, then Allow, each well past the dialog's arming delay (500 ms after it was
    last shown or moved, which a window manager placing it may do after it appears)."""
    def answer() -> None:
        allow = person.wait_window("nish-driver consent: allow")
        clip = person.wait_window("nish-driver consent: clipboard")
        time.sleep(1.5)
        person.click_window(clip)
        time.sleep(0.8)
        person.click_window(allow)
        say("    person (xdotool, real clicks): ticks the clipboard line, then Allow")

    t = threading.Thread(target=answer)
    t.start()
    try:
        return await ok(c, "start_session", {"apps": [ARGS.app], "clipboard_read": True})
    finally:
        t.join()


async def first_session(c, ctl: h.Control, person: h.Person, env: dict[str, str], errors: list[str],
                        broker: h.Broker) -> None:
    st = await start_with_clipboard(c, person)
    check(st["clipboard_read"] is True, f"the person ticked the clipboard line: {st}")
    say("granted with the clipboard line ticked by the person (a real click)")

    w = await ok(c, "clipboard_write", {"text": LATIN})
    check(w["length"] == len(LATIN) and w["effect"] == "confirmed", str(w))
    targets = xclip_text(env, "TARGETS").split()
    check({"TARGETS", "UTF8_STRING", "STRING"} <= set(targets), f"targets: {targets}")
    check(xclip_text(env) == LATIN, "xclip reads the text back as UTF8_STRING")
    check(xclip_text(env, "STRING") == LATIN, "xclip reads the text back as STRING (Latin-1)")
    say(f"clipboard_write: xclip reads the {len(LATIN)} characters back as UTF8_STRING and STRING; "
        f"targets {targets}")
    w = await ok(c, "clipboard_write", {"text": WRITTEN})
    check(w["length"] == len(WRITTEN), str(w))
    got = xclip_text(env)
    check(got == WRITTEN, f"xclip read {len(got)} characters, not the {len(WRITTEN)} written")
    check(xclip_text(env, "STRING") == "", "a text beyond Latin-1 is not offered as STRING")
    say(f"  a text beyond Latin-1: {len(WRITTEN)} characters as UTF8_STRING, STRING refused")
    r = await read(c, ctl, True)
    check(r.is_error is False and r.structured_content["text"] == WRITTEN,
          "clipboard_read returns what clipboard_write put in the selection")
    say("  clipboard_read (approved) of the driver's own selection: the same text")

    holder = Holder(env, OTHER)
    try:
        r = await read(c, ctl, True)
        check(r.is_error is False, f"approved read: {h.text_of(r)}")
        check(r.structured_content["text"] == OTHER, "the approved read returns xclip's text")
        say(f"clipboard_read of xclip's text: the host was asked, approved, {len(OTHER)} characters")
        starts = input_starts(broker)
        for i in range(RUN):
            r = await read(c, ctl, True)
            check(r.is_error is False and r.structured_content["text"] == OTHER,
                  f"approved read {i} of {RUN} in a row: {h.text_of(r)}")
        later = input_starts(broker)
        check(len(later) == len(starts),
              f"the reads shared one X connection, and the input agent was not started again: {later}")
        say(f"  {RUN} approved reads in a row: all returned xclip's text on one X connection, "
            "the input agent not started again")
        r = await read(c, ctl, False)
        e = h.error_of(r)
        check(e["code"] == "consent_denied", str(e))
        errors.append(json.dumps(e))
        check("clip-canary" not in h.text_of(r), "a refused read returns nothing")
        say("  refused by the host: consent_denied, no text")
    finally:
        holder.stop()

    holder = Holder(env, CREDENTIAL)
    try:
        r = await read(c, ctl, True)
        e = h.error_of(r)
        check(e["code"] == "secure_field", str(e))
        errors.append(json.dumps(e) + h.text_of(r))
        say("a credential-looking text: refused (secure_field), the text in no error")
    finally:
        holder.stop()

    holder = Holder(env, INCR_TEXT)
    try:
        r = await read(c, ctl, True)
        e = h.error_of(r)
        check(e["code"] == "unsupported" and "INCR" in e["message"], str(e))
        errors.append(json.dumps(e) + h.text_of(r))
        say(f"an incremental transfer ({len(INCR_TEXT)} bytes from xclip): refused (unsupported)")
    finally:
        holder.stop()

    await ok(c, "clipboard_write", {"text": WRITTEN})
    check(xclip_text(env) == WRITTEN, "the driver owns the clipboard again")
    await ok(c, "end_session")
    deadline = time.monotonic() + 5
    while xclip_text(env, "TARGETS"):
        check(time.monotonic() < deadline, "the clipboard is still owned after end_session")
        time.sleep(0.05)
    check(xclip_text(env) == "", "nothing is read from the driver after end_session")
    say("end_session: the owner stopped (xclip reads nothing)")


async def run(ns: argparse.Namespace) -> None:
    broker = h.Broker(ns.driver, "linux", env={"NISH_LOG": "debug"})
    person = h.Person(broker.env)
    env = dict(broker.env)
    errors: list[str] = []
    try:
        report = json.loads(broker.cli("doctor", "--json").stdout)
        caps = {cap["name"]: cap["status"] for cap in report["capabilities"]}
        check(report["ready"] is True and caps["clipboard_read"] == "available"
              and caps["clipboard_write"] == "available", f"doctor with the broker running: {report}")
        say("doctor: ready with the broker running; clipboard_read and clipboard_write available")
        ctl = h.Control()
        async with h.host(ns.shim, broker, "clipboard-e2e", "2025-11-25", ctl) as c:
            await first_session(c, ctl, person, env, errors, broker)

        say("a second host: the owner stops when its connection closes")
        ctl2 = h.Control()
        async with h.host(ns.shim, broker, "clipboard-e2e-2", "2025-11-25", ctl2) as c:
            await h.start_with_consent(c, person, {"apps": [ns.app]})
            await ok(c, "clipboard_write", {"text": SECOND})
            check(xclip_text(env) == SECOND, "the second session owns the clipboard")
        deadline = time.monotonic() + 10
        while xclip_text(env, "TARGETS"):
            check(time.monotonic() < deadline, "the clipboard is still owned after the host left")
            time.sleep(0.05)
        say("  the host's connection closed: the owner stopped (xclip reads nothing)")

        events = broker.audit_events()
        writes = [e for e in events if e.get("event") == "act" and e.get("tool") == "clipboard_write"]
        check(len(writes) == 4 and all(e.get("length") for e in writes), f"clipboard writes audited: {writes}")
        with open(broker.audit, encoding="utf-8") as f:
            audit = f.read()
        broker.log.flush()
        with open(os.path.join(broker.dir, "broker.log"), encoding="utf-8", errors="replace") as f:
            log = f.read()
        check("DEBUG" in log, "the broker and its agents logged at debug")
        for where, blob in (("the audit", audit), ("the broker's or an agent's log", log),
                            ("an error", "\n".join(errors))):
            for x in CANARIES:
                check(x not in blob, f"clipboard text is in {where}")
        say(f"clipboard texts: in none of {len(audit.splitlines())} audit records, "
            f"{len(log.splitlines())} log lines (debug) and {len(errors)} errors; lengths only")
    except BaseException:
        say("broker log:\n" + broker.log_text())
        raise
    finally:
        broker.stop()
    say("ALL CHECKS PASSED")


ARGS: argparse.Namespace


def main() -> int:
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--driver", required=True)
    p.add_argument("--shim", required=True)
    p.add_argument("--app", required=True)
    ARGS = p.parse_args()
    anyio.run(run, ARGS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
