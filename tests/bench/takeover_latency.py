#!/usr/bin/env python3
"""The takeover benchmark (not a test: it prints figures), through the official MCP Python
client, nish-mcp and nish-driver serve --backend linux, on a nested desktop (the person has a
real device) with gtk3-widget-factory.

1. Hand-back: the person's input to "nothing more sent and all released". The driver types a
   long text (or glides the pointer); the person presses a key (or moves the mouse) on the outer
   display. Both ends are read on the X server's own clock: the person's raw event (from the
   real device) and the last raw event of the XTEST devices after it (the driver's last release),
   watched with XInput 2 on the desktop. The keymap is checked empty afterwards.
2. Indicator removal after end_session, the kill switch (`nish-driver stop`), session.revoke on
   the control pipe, and the host connection closing: from the request to the frame window's
   DestroyNotify on the desktop.
3. A foreground click on a GTK 3 check button: MCP call to verified result.

    takeover_latency.py --driver .../nish-driver --shim .../nish-mcp [--trials 50]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import struct
import sys
import threading
import time

import anyio

sys.path.insert(0, __file__.rsplit("/", 2)[0] + "/e2e")
import nishhost as h  # noqa: E402
from nishhost import check, ok  # noqa: E402


def pct(v: list[float], p: float) -> float:
    s = sorted(v)
    return s[min(len(s) - 1, int(round(p * (len(s) - 1))))]


class RawWatch:
    """XInput 2 raw events of every device on the desktop, with the server's timestamps."""

    def __init__(self, display: str) -> None:
        from Xlib import display as xdisplay
        from Xlib.ext import xinput

        self.d = xdisplay.Display(display)
        self.xinput = xinput
        root = self.d.screen().root
        mask = (xinput.RawKeyPressMask | xinput.RawKeyReleaseMask | xinput.RawButtonPressMask
                | xinput.RawButtonReleaseMask | xinput.RawMotionMask)
        root.xinput_select_events([(xinput.AllDevices, mask)])
        self.xtest = self._xtest_ids()
        # Trials in which the driver still sent something (a release, the rest of a step) at or
        # after the person's input.
        self.sent_after = 0
        self.events: list[tuple[int, int, int]] = []  # (server ms, sourceid, evtype)
        self.lock = threading.Lock()
        self.stop = False
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _xtest_ids(self) -> set[int]:
        info = self.d.xinput_query_device(self.xinput.AllDevices)
        return {dev.deviceid for dev in info.devices if "XTEST" in dev.name.upper()}

    def _run(self) -> None:
        while not self.stop:
            if self.d.pending_events() == 0:
                time.sleep(0.001)
                continue
            ev = self.d.next_event()
            data = getattr(ev, "data", None)
            if not isinstance(data, bytes) or len(data) < 12:
                continue
            # python-xlib leaves raw events unparsed: deviceid, time, detail, sourceid.
            deviceid, ms, _detail, sourceid = struct.unpack_from("<HIIH", data, 0)
            if deviceid != sourceid:
                continue  # the master's copy of a device's event
            with self.lock:
                self.events.append((ms, sourceid, ev.evtype))

    def clear(self) -> None:
        with self.lock:
            self.events.clear()

    def handback_ms(self) -> float:
        """Server ms from the first real-device event to the last XTEST event after it."""
        with self.lock:
            evs = list(self.events)
        person = [t for (t, src, _) in evs if src not in self.xtest]
        check(person != [], "no input from the person's device was seen")
        t0 = min(person)
        before = [t for (t, src, _) in evs if src in self.xtest and t < t0]
        check(before != [], "the driver sent nothing before the person's input: not a mid-act trial")
        after = [t for (t, src, _) in evs if src in self.xtest and t >= t0]
        self.sent_after += 1 if after else 0
        return float(max(after) - t0) if after else 0.0


def destroyed_watch(display: str, name: str):
    """Returns (start(), wait()): wait() gives the seconds from start() to the DestroyNotify of the
    first root child named `name` (found when start() is called)."""
    from Xlib import X
    from Xlib import display as xdisplay

    d = xdisplay.Display(display)
    root = d.screen().root
    root.change_attributes(event_mask=X.SubstructureNotifyMask)
    target = None
    for w in root.query_tree().children:
        try:
            if w.get_wm_name() == name:
                target = w.id
        except Exception:
            pass
    check(target is not None, f"no window {name!r}")
    state = {}

    def start() -> None:
        while d.pending_events():
            d.next_event()
        state["t0"] = time.perf_counter()

    def wait() -> float:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if d.pending_events():
                ev = d.next_event()
                if ev.type == X.DestroyNotify and ev.window.id == target:
                    t = time.perf_counter() - state["t0"]
                    d.close()
                    return t
            else:
                time.sleep(0.0005)
        d.close()
        raise AssertionError(f"{name} was not destroyed within 5 s")

    return start, wait


async def takeover(c, person: h.Person, app: str) -> dict:
    st = await h.start_with_consent(c, person, {"input": "takeover", "apps": [app]}, ("takeover",))
    check(st["takeover"]["on"] is True, str(st))
    person.wait_window("nish-driver indicator: frame")
    return st


async def run(ns: argparse.Namespace) -> None:
    h.VERBOSE = False
    broker = h.Broker(ns.driver, "linux")
    person = h.Person(broker.env)
    inner = broker.env["DISPLAY"]
    trials = ns.trials
    try:
        # ---- hand-back and the foreground click ---------------------------------------------
        ctl = h.Control()
        key_ms, ptr_ms, click_ms = [], [], []
        async with h.host(ns.shim, broker, "bench-takeover", "2025-11-25", ctl) as c:
            st = await takeover(c, person, "gtk3-widget-factory")
            sid = st["session"]
            await ok(c, "bring_to_front", {"app": "gtk3-widget-factory"})
            watch = RawWatch(inner)
            for i in range(trials):
                r = await ok(c, "get_window_state", {"app": "gtk3-widget-factory", "max_elements": 5000})
                cb = next(e for e in r["elements"] if e["role"] == "check_box" and e["label"] == "checkbutton"
                          and not set(e["states"]) & {"disabled", "indeterminate", "offscreen"})
                t = time.perf_counter()
                a = await ok(c, "click", {"element_token": cb["element_token"], "delivery_mode": "foreground"})
                click_ms.append((time.perf_counter() - t) * 1000)
                check(a["verified"] is True, str(a))
            for kind in ("key", "pointer"):
                for i in range(trials):
                    r = await ok(c, "get_window_state", {"app": "gtk3-widget-factory", "max_elements": 5000})
                    entry = next(e for e in r["elements"] if e["role"] == "text" and "disabled" not in e["states"]
                                 and e.get("value") is not None)
                    watch.clear()

                    def interrupt() -> None:
                        time.sleep(0.25 + random.random() * 0.25)
                        if kind == "key":
                            person.xdotool("key", "shift")
                        else:
                            # Relative, so it moves whatever the two pointers' positions.
                            step = "25" if i % 2 == 0 else "-25"
                            person.xdotool("mousemove_relative", "--", step, step)

                    th = threading.Thread(target=interrupt)
                    th.start()
                    if kind == "key":
                        res = await c.call_tool("type_text", {"element_token": entry["element_token"],
                                                              "text": "x" * 400, "delivery_mode": "foreground"})
                    else:
                        res = await c.call_tool("move_cursor", {"element_token": entry["element_token"],
                                                                "duration_ms": 4000})
                    th.join()
                    check(res.is_error and res.structured_content["error"]["code"] == "user_took_over",
                          f"trial {i}: {res.structured_content}")
                    await ctl.wait(lambda e: e.get("event") == "takeover.paused", "takeover.paused")
                    time.sleep(0.3)
                    (key_ms if kind == "key" else ptr_ms).append(watch.handback_ms())
                    d = person._display()
                    check(not any(d.query_keymap()), "a key is held after the hand-back")
                    d.close()
                    ctl.send({"method": "takeover.resume", "params": {"session": sid}})
                    await ctl.wait(lambda e: e.get("event") == "takeover.resumed", "takeover.resumed")
            watch.stop = True
            sent_after = watch.sent_after
            await ok(c, "end_session")

        # ---- indicator removal ------------------------------------------------------------------
        removal: dict[str, list[float]] = {"end_session": [], "kill switch": [], "session.revoke": [],
                                           "connection closed": []}
        for i in range(trials):
            for how in removal:
                ctl = h.Control()
                async with h.host(ns.shim, broker, f"bench-{i}", "2025-11-25", ctl) as c:
                    st = await takeover(c, person, "gtk3-widget-factory")
                    start, wait = destroyed_watch(inner, "nish-driver indicator: frame")
                    start()
                    if how == "end_session":
                        await ok(c, "end_session")
                    elif how == "kill switch":
                        broker.cli("stop")
                    elif how == "session.revoke":
                        ctl.send({"method": "session.revoke", "params": {"session": st["session"]}})
                    else:
                        pass  # the `async with` exit closes the connection below
                    if how != "connection closed":
                        removal[how].append(wait() * 1000)
                if how == "connection closed":
                    removal[how].append(wait() * 1000)

        print()
        print(f"Takeover benchmark, {trials} trials each (nested desktop, gtk3-widget-factory)")
        print()
        print("| measure | median ms | p99 ms | max ms |")
        print("|---|---|---|---|")
        for name, v in [("person's key press mid-typing -> all sent and released (X server clock)", key_ms),
                        ("person's mouse move mid-glide -> all sent and released (X server clock)", ptr_ms)]:
            print(f"| {name} | {statistics.median(v):.1f} | {pct(v, 0.99):.1f} | {max(v):.1f} |")
        for how, v in removal.items():
            print(f"| indicator removed after {how} | {statistics.median(v):.1f} | {pct(v, 0.99):.1f} | {max(v):.1f} |")
        print(f"| foreground click, MCP call to verified result | {statistics.median(click_ms):.1f} | "
              f"{pct(click_ms, 0.99):.1f} | {max(click_ms):.1f} |")
        print()
        print(f"In {sent_after} of {2 * trials} hand-back trials the driver still sent something (a "
              "release) at or after the person's input; in the others nothing at all followed it. "
              "The X server's clock counts whole milliseconds.")
    finally:
        broker.stop()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--driver", required=True)
    p.add_argument("--shim", required=True)
    p.add_argument("--trials", type=int, default=50)
    ns = p.parse_args()
    anyio.run(run, ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
