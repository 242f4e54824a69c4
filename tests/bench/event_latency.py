#!/usr/bin/python3
"""What AT-SPI events an act brings, per toolkit: the ground an event-driven settle would stand on.

Listens, as any AT-SPI client can, for object:state-changed, object:children-changed,
object:property-change, object:text-changed and object:value-changed (pyatspi, the system's
python3), then does one action on one element of the app `--pid` (the first element with the
given role and action, optionally needing a state), `--acts` times, and for each act records:

- whether the element's own change arrived as an event, and how long after the call returned;
- how many events the app sent, and when the last one came (an act is counted as quiet after
  `--quiet` ms without an event from the app, bounded at `--max` ms);
- whether the element's state read afterwards agrees with the last state event.

Prints one JSON object. Run inside a test desktop's environment (tests/benches/events.rs).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import pyatspi
from gi.repository import GLib

KINDS = [
    "object:state-changed",
    "object:children-changed",
    "object:property-change",
    "object:text-changed",
    "object:value-changed",
]


def find(acc, pred, depth=0):
    if acc is None or depth > 60:
        return None
    try:
        if pred(acc):
            return acc
        for c in acc:
            r = find(c, pred, depth + 1)
            if r is not None:
                return r
    except Exception:
        return None
    return None


def actions(acc):
    try:
        a = acc.queryAction()
        return [a.getName(i) for i in range(a.nActions)]
    except Exception:
        return []


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--role", required=True)
    ap.add_argument("--action", required=True, help="its name; alternatives split by commas")
    ap.add_argument("--state", default="", help="a state the element must have (pyatspi name)")
    ap.add_argument("--acts", type=int, default=20)
    ap.add_argument("--quiet", type=float, default=30.0)
    ap.add_argument("--max", type=float, default=1000.0)
    ns = ap.parse_args()

    app = next(a for a in pyatspi.Registry.getDesktop(0)
               if a is not None and a.get_process_id() == ns.pid)
    want_state = getattr(pyatspi, "STATE_" + ns.state.upper()) if ns.state else None

    def pred(a):
        if a.getRoleName() != ns.role or not set(ns.action.split(",")) & set(actions(a)):
            return False
        st = a.getState()
        return st.contains(pyatspi.STATE_SENSITIVE) and st.contains(pyatspi.STATE_VISIBLE) and (
            want_state is None or st.contains(want_state))

    el = find(app, pred)
    if el is None:
        print(json.dumps({"error": f"no {ns.role} with action {ns.action}"}))
        return 1
    act = el.queryAction()
    index = next(i for i, n in enumerate(actions(el)) if n in ns.action.split(","))

    events: list[tuple[float, str, bool, int]] = []

    def on_event(e):
        try:
            if e.host_application is None or e.host_application.get_process_id() != ns.pid:
                return
            own = e.source == el
        except Exception:
            return
        events.append((time.perf_counter(), e.type, own, e.detail1))

    pyatspi.Registry.registerEventListener(on_event, *KINDS)
    ctx = GLib.MainContext.default()

    def pump(until: float) -> None:
        while time.perf_counter() < until:
            if not ctx.iteration(False):
                time.sleep(0.0002)

    pump(time.perf_counter() + 0.3)
    rows = []
    for _ in range(ns.acts):
        events.clear()
        t0 = time.perf_counter()
        act.doAction(index)
        t1 = time.perf_counter()
        deadline = t0 + ns.max / 1000
        last = t1
        while True:
            now = time.perf_counter()
            if events:
                last = max(last, events[-1][0])
            if now - last >= ns.quiet / 1000 or now >= deadline:
                break
            pump(min(now + 0.001, deadline))
        own = [e for e in events if e[2]]
        own_states = [e for e in own if e[1].startswith("object:state-changed")]
        agree = None
        if own_states:
            kind = own_states[-1][1].split(":")[-1]
            st = getattr(pyatspi, "STATE_" + kind.upper().replace("-", "_"), None)
            if st is not None:
                agree = el.getState().contains(st) == bool(own_states[-1][3])
        rows.append({
            "call_ms": (t1 - t0) * 1000,
            "own_event": bool(own),
            "own_ms": (own[0][0] - t1) * 1000 if own else None,
            "events": len(events),
            "last_ms": (events[-1][0] - t1) * 1000 if events else None,
            "quiet_at_ms": (last - t1) * 1000 + ns.quiet,
            "bounded": time.perf_counter() >= deadline,
            "state_agrees": agree,
            "kinds": sorted({e[1] for e in events}),
        })
        pump(time.perf_counter() + 0.05)
    pyatspi.Registry.deregisterEventListener(on_event, *KINDS)

    def med(key):
        v = [r[key] for r in rows if r[key] is not None]
        return statistics.median(v) if v else None

    print(json.dumps({
        "acts": len(rows),
        "own_event_seen": sum(r["own_event"] for r in rows),
        "own_ms_median": med("own_ms"),
        "own_ms_max": max((r["own_ms"] for r in rows if r["own_ms"] is not None), default=None),
        "events_median": med("events"),
        "last_ms_median": med("last_ms"),
        "quiet_at_ms_median": med("quiet_at_ms"),
        "bounded": sum(r["bounded"] for r in rows),
        "state_agrees": sum(1 for r in rows if r["state_agrees"]),
        "state_checked": sum(1 for r in rows if r["state_agrees"] is not None),
        "kinds": sorted({k for r in rows for k in r["kinds"]}),
        "own_by_act": [None if r["own_ms"] is None else round(r["own_ms"], 1) for r in rows],
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
