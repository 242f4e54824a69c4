#!/usr/bin/env python3
"""The host side on a real (nested) desktop with the real `nish-driver serve --backend linux`,
its agents (the consent dialog is the indicator's) and the real `nish-mcp`:

- a_withdrawn_start_session_closes_the_dialog: the official MCP client abandons start_session
  while the person's dialog is on screen (the SDK sends `notifications/cancelled`): the dialog
  goes away, the audit says `consent.withdrawn` and not the person's answer, and a new
  start_session at once gets a dialog again (no cooldown), which the person allows.

Two attacks of a same-user process:

- host_runs_another_program: a host connects through its shim (a first call pins it: pid,
  start time, executable), then runs another program in the same process (exec), and that
  program, holding the shim's pipes, asks for a session. No consent dialog may show (it would
  name the other program), the answer is `consent_denied`, and the audit says
  `consent.host_changed`. The same host that does not exec gets its dialog (the control case,
  answered Deny by the person's real click).
- stop_under_a_flood: the official MCP client holds a session the person allowed; another
  process keeps every connection the broker's socket allows open (the flood that made 4 of 5
  stops answer `rate_limited`). An ordinary request (`nish-driver status`) is refused, and
  every `nish-driver stop` stops: the session ends (the host's next call answers
  `stopped_by_person`), audited as the kill switch from a terminal.

    desktop_hosts.py --driver .../nish-driver --shim .../nish-mcp --app NAME
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

import anyio

import nishhost as h
from nishhost import check, fails, say

# What the host writes to its shim: the MCP handshake and one call, JSON-RPC lines.
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "exec-host", "version": "1.0"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
PIN = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
       "params": {"name": "get_session_state", "arguments": {}}}

# The host's first stage (python): starts the shim on two pipes, makes a first call so that the
# shim connects and the broker pins this process, then either execs /bin/sh, which asks for a
# session over the same pipes, or asks itself (the control). Either way the answer line of
# id 3 is written to the file named by argv[3].
HOST = r"""
import json, os, subprocess, sys
shim, sock, out, mode, apps = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
p = subprocess.Popen([shim, "--socket", sock], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                     env={**os.environ, "NISH_LOG": "warn"})
def send(obj):
    p.stdin.write((json.dumps(obj) + "\n").encode()); p.stdin.flush()
def answer(want):
    while True:
        line = p.stdout.readline()
        if not line:
            sys.exit("the shim closed its output")
        if json.loads(line).get("id") == want:
            return line.decode()
for m in json.loads(sys.argv[6]):
    send(m)
    if "id" in m:
        answer(m["id"])
ask = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
       "params": {"name": "start_session", "arguments": {"apps": [apps], "lease_minutes": 5}}}
if mode == "exec":
    w, r = p.stdin.fileno(), p.stdout.fileno()
    os.set_inheritable(w, True); os.set_inheritable(r, True)
    script = ('printf "%s\\n" "$ASK" >&' + str(w) + '; '
              'while IFS= read -r line <&' + str(r) + '; do case "$line" in '
              '*\'"id":3\'*) printf "%s\\n" "$line" > "$OUT"; exit 0;; esac; done; exit 1')
    os.environ["ASK"] = json.dumps(ask); os.environ["OUT"] = out
    os.execv("/bin/sh", ["sh", "-c", script])
send(ask)
open(out, "w").write(answer(3))
"""


def consent_windows(person: h.Person) -> list[int]:
    return person.windows("nish-driver consent: allow")


def host_runs_another_program(broker: h.Broker, person: h.Person, ns: argparse.Namespace) -> None:
    say("host_runs_another_program: a python host pins itself with a first call, then execs /bin/sh")
    out = os.path.join(tempfile.mkdtemp(prefix="nish-exec-host-"), "answer.json")
    before = len(broker.audit_events())
    seen: list[int] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            seen.extend(consent_windows(person))
            time.sleep(0.05)

    t = threading.Thread(target=watch)
    t.start()
    try:
        p = subprocess.run(
            [sys.executable, "-c", HOST, ns.shim, broker.socket, out, "exec", ns.app,
             json.dumps([INIT, INITIALIZED, PIN])],
            env=broker.env, capture_output=True, text=True, timeout=60)
        time.sleep(0.5)
    finally:
        stop.set()
        t.join()
    check(p.returncode == 0, f"the exec'ing host failed: {p.stdout}{p.stderr}")
    answer = json.loads(open(out, encoding="utf-8").read())
    result = answer.get("result", {})
    text = json.dumps(result)
    check(result.get("isError") is True and "consent_denied" in text,
          f"start_session from the program the host ran afterwards: {answer}")
    check(not seen, f"a consent dialog showed for the program the host ran afterwards: {seen}")
    events = broker.audit_events()[before:]
    changed = [e for e in events if e.get("event") == "consent.host_changed"]
    check(len(changed) == 1, f"consent.host_changed audited once: {events}")
    check(not [e for e in events if e.get("event") == "consent.request"],
          f"no dialog was shown: {events}")
    say("    /bin/sh, holding the shim's pipes, asked: consent_denied, no dialog, "
        "consent.host_changed audited")

    # The control: the same host, not exec'ing, gets the person's dialog (answered Deny).
    say("host_runs_another_program (control): the same host without exec gets a dialog")
    out2 = os.path.join(os.path.dirname(out), "control.json")
    proc = subprocess.Popen(
        [sys.executable, "-c", HOST, ns.shim, broker.socket, out2, "ask", ns.app,
         json.dumps([INIT, INITIALIZED, PIN])],
        env=broker.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deny = person.wait_window("nish-driver consent: deny", timeout=30)
        time.sleep(0.7)  # the dialog ignores clicks in its first 500 ms
        person.click_window(deny)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    check(proc.returncode == 0, f"the control host failed: {stdout}{stderr}")
    text = open(out2, encoding="utf-8").read()
    check("consent_denied" in text, f"the person's Deny: {text}")
    say("    the dialog showed and the person's Deny answered consent_denied")


async def a_withdrawn_start_session_closes_the_dialog(broker: h.Broker, person: h.Person,
                                                     ns: argparse.Namespace) -> None:
    say("a_withdrawn_start_session_closes_the_dialog: the client gives up while the dialog is up")
    async with h.host(ns.shim, broker, "withdraw-e2e", "2025-11-25") as c:
        n = len(broker.audit_events())
        shown: list[int] = []

        async def give_up_once_shown(scope: anyio.CancelScope) -> None:
            shown.append(await anyio.to_thread.run_sync(
                lambda: person.wait_window("nish-driver consent: allow", timeout=30)))
            scope.cancel()

        async with anyio.create_task_group() as tg:
            with anyio.CancelScope() as scope:
                tg.start_soon(give_up_once_shown, scope)
                await c.call_tool("start_session", {"apps": [ns.app], "lease_minutes": 5})
            check(scope.cancelled_caught and shown, "start_session answered before it was abandoned")
        deadline = time.monotonic() + 10
        while consent_windows(person):
            check(time.monotonic() < deadline, "the consent dialog is still on screen")
            await anyio.sleep(0.05)
        say("    the dialog left the screen")
        deadline = time.monotonic() + 10
        while True:
            events = broker.audit_events()[n:]
            if any(e.get("event") == "consent.withdrawn" for e in events):
                break
            check(time.monotonic() < deadline, f"no consent.withdrawn: {events}")
            await anyio.sleep(0.05)
        check(not any(e.get("event") == "consent.answer" for e in events),
              f"a withdrawal is not the person's answer: {events}")
        say("    audit: consent.withdrawn, no consent.answer")
        await h.start_with_consent(c, person, {"apps": [ns.app], "lease_minutes": 5})
        st = await h.ok(c, "get_session_state")
        check(st["state"] == "granted", f"start_session again: {st}")
        say("    start_session again at once: a dialog (no cooldown), allowed by the person")
        await h.ok(c, "end_session")


async def stop_under_a_flood(broker: h.Broker, person: h.Person, ns: argparse.Namespace) -> None:
    say("stop_under_a_flood: a session the person allowed, then every connection held")
    async with h.host(ns.shim, broker, "flood-e2e", "2025-11-25") as c:
        await h.start_with_consent(c, person, {"apps": [ns.app], "lease_minutes": 5})
        stop = threading.Event()
        held: list[socket.socket] = []
        lock = threading.Lock()

        def flood() -> None:
            # More connections than the per-uid bound, each opened again as soon as the broker
            # closes it (a connection that never says hello is closed after the handshake time).
            while not stop.is_set():
                with lock:
                    alive = []
                    for s in held:
                        try:
                            if s.recv(1, socket.MSG_DONTWAIT | socket.MSG_PEEK) == b"":
                                s.close()
                                continue
                        except BlockingIOError:
                            pass
                        except OSError:
                            s.close()
                            continue
                        alive.append(s)
                    held[:] = alive
                    while len(held) < 80:
                        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                        try:
                            s.connect(broker.socket)
                        except OSError:
                            s.close()
                            break
                        held.append(s)
                time.sleep(0.01)

        t = threading.Thread(target=flood)
        t.start()
        try:
            time.sleep(1.0)
            refused = 0
            for _ in range(5):
                p = broker.cli("status", expect_ok=False)
                if p.returncode != 0:
                    refused += 1
            check(refused >= 4, f"the flood refuses ordinary requests ({refused} of 5 status refused)")
            say(f"    the flooded socket refused {refused} of 5 `nish-driver status`")
            before = len(broker.audit_events())
            for i in range(5):
                p = broker.cli("stop", expect_ok=False)
                check(p.returncode == 0 and p.stdout.startswith("stopped "),
                      f"stop {i} under the flood: {p.stdout}{p.stderr}")
            stops = [e for e in broker.audit_events()[before:]
                     if e.get("event") == "stop" and e.get("origin") == "terminal"]
            check(len(stops) == 5, f"five stops audited from a terminal: {stops}")
            say("    five `nish-driver stop` under the flood: each stopped, each audited")
        finally:
            stop.set()
            t.join()
            with lock:
                for s in held:
                    s.close()
        await fails(c, "get_window_state", {"window_id": 1}, "stopped_by_person")
        say("    the host's session ended: its next call answers stopped_by_person")


async def run(ns: argparse.Namespace) -> None:
    broker = h.Broker(ns.driver, "linux")
    person = h.Person(broker.env)
    cases = [("a_withdrawn_start_session_closes_the_dialog",
              lambda: a_withdrawn_start_session_closes_the_dialog(broker, person, ns)),
             ("host_runs_another_program", lambda: anyio.to_thread.run_sync(
                  host_runs_another_program, broker, person, ns)),
             ("stop_under_a_flood", lambda: stop_under_a_flood(broker, person, ns))]
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
    p.add_argument("--app", required=True)
    anyio.run(run, p.parse_args())
    return 0


if __name__ == "__main__":
    sys.exit(main())
