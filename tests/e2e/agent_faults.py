#!/usr/bin/env python3
"""Agents killed under the real broker on a real (nested) desktop: the official MCP Python
client, `nish-mcp`, `nish-driver serve --backend linux` with its reader, input and indicator
agents, and gtk3-widget-factory.

Each fault shows what the caller gets (code and disposition), that the agent is reaped at once
and started again (with backoff for the reader killed five times in a row), that the stop
hotkey, pressed by the person on their own keyboard one second after the kill, stops
everything, that no key or button is held (the X server's keymap), and the audit's
agent.exit / agent.start events.

    agent_faults.py --driver .../nish-driver --shim .../nish-mcp
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

import anyio

import nishhost as h
from nishhost import check, fails, ok, say

GTK3 = "gtk3-widget-factory"
HOTKEY = "ctrl+alt+shift+Escape"


def held(person: h.Person) -> list[int]:
    """Keycodes the X server has down now (QueryKeymap), and pointer buttons held."""
    from Xlib import X

    d = person._display()
    try:
        bits = d.query_keymap()
        keys = [i * 8 + b for i, byte in enumerate(bits) for b in range(8) if byte & (1 << b)]
        mask = d.screen().root.query_pointer().mask
        buttons = [n for n, m in ((1, X.Button1Mask), (2, X.Button2Mask), (3, X.Button3Mask)) if mask & m]
        return keys + [-b for b in buttons]
    finally:
        d.close()


def no_held_input(person: h.Person, within: float = 1.0) -> None:
    deadline = time.monotonic() + within
    while held(person):
        check(time.monotonic() < deadline, f"held input (keycodes; buttons negative): {held(person)}")
        time.sleep(0.02)


def proc_state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            s = f.read()
    except (FileNotFoundError, ProcessLookupError):
        # Gone, or going while it was read (ESRCH from an entry opened just before).
        return None
    return s[s.rfind(")") + 2]


def kill9(pid: int) -> float:
    os.kill(pid, signal.SIGKILL)
    return time.monotonic()


def reaped(pid: int, within: float = 0.5) -> float:
    """Waits until `pid` is gone from the process table (no zombie); the time it took."""
    t = time.monotonic()
    while proc_state(pid) is not None:
        check(time.monotonic() - t < within, f"pid {pid} still in the process table ({proc_state(pid)})")
        time.sleep(0.005)
    return time.monotonic() - t


def audited(broker: h.Broker, n: int = 1, timeout: float = 10.0, **want) -> list[dict]:
    """Audit events with every field of `want`, once there are at least `n`."""
    deadline = time.monotonic() + timeout
    while True:
        got = [e for e in broker.audit_events() if all(e.get(k) == v for k, v in want.items())]
        if len(got) >= n:
            return got
        check(time.monotonic() < deadline, f"{len(got)} of {n} audit events {want}")
        time.sleep(0.01)


def agent_pid(broker: h.Broker, agent: str) -> int:
    return audited(broker, agent=agent, event="agent.start")[-1]["pid"]


def exited(broker: h.Broker, agent: str, pid: int) -> dict:
    e = audited(broker, timeout=2.0, event="agent.exit", agent=agent, pid=pid)[0]
    check(e["status"] == "signal 9", str(e))
    return e


def restarted(broker: h.Broker, agent: str, exit_ev: dict, timeout: float = 8.0) -> dict:
    """The agent.start after `exit_ev`, and the gap on the broker's clock."""
    deadline = time.monotonic() + timeout
    while True:
        later = [e for e in broker.audit_events() if e.get("event") == "agent.start"
                 and e.get("agent") == agent and e["mono_ms"] >= exit_ev["mono_ms"]]
        if later:
            s = later[0]
            check(s["restart"] is True, str(s))
            return s
        check(time.monotonic() < deadline, f"{agent} was not started again")
        time.sleep(0.01)


async def hotkey_works(c, broker: h.Broker, person: h.Person, killed_at: float,
                       session_tool: bool) -> float:
    """The person presses the stop hotkey one second after the kill; the stop must be audited
    within a second of the press. Returns the press-to-stop time on the broker's clock."""
    before = len(audited(broker, 0, event="stop"))
    await anyio.sleep(max(0.0, killed_at + 1.0 - time.monotonic()))
    pressed = time.monotonic()
    person.xdotool("key", HOTKEY)
    stops = audited(broker, before + 1, timeout=1.0, event="stop")
    took = time.monotonic() - pressed
    check(stops[-1]["origin"] == "hotkey", str(stops[-1]))
    if session_tool:
        await fails(c, "get_window_state", {"app": GTK3}, "stopped_by_person")
    return took


async def consent(c, person: h.Person, args: dict, tick: tuple[str, ...] = ()) -> dict:
    """start_session answered by the person: their clicks on the ticked lines, then Allow; a
    click that came while the dialog was re-armed (the window manager restacked it) is made
    again."""
    import threading

    def answer() -> None:
        allow = person.wait_window("nish-driver consent: allow")
        time.sleep(0.7)
        for name in tick:
            person.click_window(person.wait_window(f"nish-driver consent: {name}"))
        for _ in range(4):
            if not person.windows("nish-driver consent: allow"):
                return
            person.click_window(allow)
            time.sleep(1.0)

    t = threading.Thread(target=answer)
    t.start()
    try:
        return await ok(c, "start_session", args)
    finally:
        t.join()


async def run(ns: argparse.Namespace) -> None:
    broker = h.Broker(ns.driver, "linux")
    person = h.Person(broker.env)
    try:
        ind = audited(broker, event="agent.start", agent="nish-indicator", timeout=15)[0]
        say(f"the indicator runs from the start (pid {ind['pid']}): it holds the stop hotkey")
        async with h.host(ns.shim, broker, "faults-e2e") as c:
            # ---- the reader killed five times in a row ---------------------------------------
            await consent(c, person, {"apps": [GTK3]})
            await ok(c, "get_window_state", {"app": GTK3, "max_elements": 5000})
            say("the reader killed five times in a row (each time once its successor runs)")
            waits = []
            for n in range(1, 6):
                pid = agent_pid(broker, "nish-reader")
                if n == 1:
                    # Killed while a read waits for it.
                    async with anyio.create_task_group() as tg:
                        got: list = []

                        async def read() -> None:
                            got.append(await c.call_tool("get_window_state", {"app": GTK3, "max_elements": 5000}))

                        tg.start_soon(read)
                        await anyio.sleep(0.03)
                        killed = kill9(pid)
                    r = got[0]
                else:
                    killed = kill9(pid)
                    r = None
                gone = reaped(pid)
                ex = exited(broker, "nish-reader", pid)
                if r is None:
                    r = await c.call_tool("get_window_state", {"app": GTK3, "max_elements": 5000})
                took = time.monotonic() - killed
                if r.is_error:
                    e = r.structured_content["error"]
                    check(e["disposition"]["retry"] == "safe", f"kill {n}: {e}")
                    check("retry in" in e["message"], f"kill {n}: {e['message']}")
                    answer = f"{e['code']} (retry {e['disposition']['retry']}): {e['message']}"
                else:
                    answer = "ok (the reader was already back)"
                st = restarted(broker, "nish-reader", ex)
                gap = st["mono_ms"] - ex["mono_ms"]
                waits.append(ex["restart_in_ms"])
                check(gap + 5 >= ex["restart_in_ms"] and gap < ex["restart_in_ms"] + 1000,
                      f"kill {n}: restarted {gap} ms after the exit, backoff {ex['restart_in_ms']}")
                say(f"  kill {n}: reaped in {gone * 1000:.0f} ms; agent.exit {ex['status']}, "
                    f"restart_in_ms {ex['restart_in_ms']}; restarted after {gap} ms (pid {st['pid']})")
                say(f"    the read {took * 1000:.0f} ms after the kill answered {answer}")
            check(waits == [0, 250, 500, 1000, 2000], f"backoff {waits}")
            # Once back, reads work.
            await ok(c, "get_window_state", {"app": GTK3, "max_elements": 5000})
            say("  the reader is back: get_window_state ok")
            t = await hotkey_works(c, broker, person, time.monotonic() - 1.0, True)
            no_held_input(person)
            say(f"  the person's stop hotkey: stop audited {t * 1000:.0f} ms after the press; "
                "no key or button held (QueryKeymap)")

        # ---- the input agent killed mid-act (a new host: the stop ended the last one) --------
        async with h.host(ns.shim, broker, "faults-e2e-input") as c:
            say("the input agent killed while it types (a takeover session)")
            st = await consent(c, person, {"input": "takeover", "apps": [GTK3]}, ("takeover",))
            check(st["takeover"]["on"] is True, str(st))
            person.wait_window("nish-driver indicator: frame")
            await ok(c, "bring_to_front", {"app": GTK3})
            r = await ok(c, "get_window_state", {"app": GTK3, "max_elements": 5000})
            entry = next(e for e in r["elements"] if e["role"] == "text" and e.get("value") == "entry"
                         and "disabled" not in e["states"])
            pid = agent_pid(broker, "nish-input")
            got = []
            async with anyio.create_task_group() as tg:

                async def typing() -> None:
                    got.append(await c.call_tool("type_text", {"element_token": entry["element_token"],
                                                               "text": "abcdefghij" * 40,
                                                               "delivery_mode": "foreground"}))

                tg.start_soon(typing)
                await anyio.sleep(1.0)
                killed = kill9(pid)
            r = got[0]
            check(r.is_error, f"the act should fail: {r.structured_content}")
            e = r.structured_content["error"]
            check(e["code"] == "app_not_responding" and e["disposition"]["retry"] == "unsafe", str(e))
            check("during the act" in e["message"], e["message"])
            gone = reaped(pid)
            ex = exited(broker, "nish-input", pid)
            st = restarted(broker, "nish-input", ex)
            say(f"  type_text answered {e['code']} (retry {e['disposition']['retry']}): {e['message']}")
            say(f"  reaped in {gone * 1000:.0f} ms; agent.exit {ex['status']}; restarted after "
                f"{st['mono_ms'] - ex['mono_ms']} ms (pid {st['pid']})")
            no_held_input(person)
            say("  no key or button held (QueryKeymap, the pointer's button mask)")
            t = await hotkey_works(c, broker, person, killed, True)
            deadline = time.monotonic() + 2
            while person.windows("nish-driver indicator: frame"):
                check(time.monotonic() < deadline, "the frame did not go")
                time.sleep(0.02)
            no_held_input(person)
            say(f"  the stop hotkey one second after the kill: stop audited {t * 1000:.0f} ms after "
                "the press, the frame is gone, stopped_by_person; nothing held")

        # ---- the indicator killed with a takeover on -----------------------------------------
        async with h.host(ns.shim, broker, "faults-e2e-indicator") as c:
            say("the indicator killed with a takeover on")
            st = await consent(c, person, {"input": "takeover", "apps": [GTK3]}, ("takeover",))
            check(st["takeover"]["on"] is True, str(st))
            person.wait_window("nish-driver indicator: frame")
            pid = agent_pid(broker, "nish-indicator")
            killed = kill9(pid)
            gone = reaped(pid)
            ex = exited(broker, "nish-indicator", pid)
            st = restarted(broker, "nish-indicator", ex)
            while True:
                ss = await ok(c, "get_session_state")
                if ss["takeover"]["on"] is False:
                    break
                check(time.monotonic() - killed < 2, f"the takeover did not end: {ss['takeover']}")
                await anyio.sleep(0.02)
            check(person.windows("nish-driver indicator: frame") == [], "the frame is gone")
            await fails(c, "press_key", {"key": "Return"}, "requires_takeover")
            say(f"  reaped in {gone * 1000:.0f} ms; agent.exit {ex['status']}; restarted after "
                f"{st['mono_ms'] - ex['mono_ms']} ms (pid {st['pid']}); the takeover ended "
                f"({ss['takeover'].get('reason')}); synthetic acts refused (requires_takeover)")
            no_held_input(person)
            t = await hotkey_works(c, broker, person, killed, True)
            say(f"  the stop hotkey one second after the kill: stop audited {t * 1000:.0f} ms after "
                "the press; stopped_by_person; nothing held")

        # ---- the indicator killed with no session (no host connected) ------------------------
        say("the indicator killed with no session")
        pid = agent_pid(broker, "nish-indicator")
        killed = kill9(pid)
        gone = reaped(pid)
        ex = exited(broker, "nish-indicator", pid)
        st = restarted(broker, "nish-indicator", ex)
        t = await hotkey_works(None, broker, person, killed, False)
        no_held_input(person)
        say(f"  reaped in {gone * 1000:.0f} ms; agent.exit {ex['status']}, restart_in_ms "
            f"{ex['restart_in_ms']}; restarted after {st['mono_ms'] - ex['mono_ms']} ms; the stop "
            f"hotkey one second after the kill: stop audited {t * 1000:.0f} ms after the press")

        events = broker.audit_events()
        for agent, n in (("nish-reader", 5), ("nish-input", 1), ("nish-indicator", 2)):
            exits = [e for e in events if e["event"] == "agent.exit" and e["agent"] == agent]
            starts = [e for e in events if e["event"] == "agent.start" and e["agent"] == agent and e["restart"]]
            check(len(exits) >= n and len(starts) >= n, f"{agent}: {len(exits)} exits, {len(starts)} restarts")
            say(f"audit: {agent}: {len(exits)} agent.exit, {len(starts)} agent.start (restart)")
    except BaseException:
        say("broker log:\n" + broker.log_text())
        with open(os.path.join(broker.dir, "broker.log"), encoding="utf-8", errors="replace") as f:
            say("broker log, agents and the hotkey:\n" + "".join(
                line for line in f if "hotkey" in line or "agent" in line and "tree read" not in line))
        raise
    finally:
        broker.stop()
    say("ALL CHECKS PASSED")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--driver", required=True)
    p.add_argument("--shim", required=True)
    ns = p.parse_args()
    anyio.run(run, ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
