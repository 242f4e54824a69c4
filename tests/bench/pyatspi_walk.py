#!/usr/bin/env python3
"""The reference walker for the read benchmark: the way peer drivers read a window, in Python
with pyatspi, reading for every node the same fields nish-reader reads (role, name, states,
extents in screen coordinates, action names), under the same caps (5,000 nodes, depth 200).

    pyatspi_walk.py --pid PID --x X --y Y --w W --h H [--repeats N]

Prints one JSON line: {"nodes": n, "ms": [one figure per repeat]}.
"""

import argparse
import json
import sys
import time

import pyatspi

MAX_NODES = 5000
MAX_DEPTH = 200


def find_frame(pid, x, y, w, h):
    desktop = pyatspi.Registry.getDesktop(0)
    best = None
    for app in desktop:
        if app is None:
            continue
        try:
            if app.get_process_id() != pid:
                continue
        except Exception:
            continue
        for win in app:
            if win is None:
                continue
            try:
                e = win.queryComponent().getExtents(pyatspi.DESKTOP_COORDS)
            except Exception:
                continue
            d = abs(e.x - x) + abs(e.y - y) + abs(e.width - w) + abs(e.height - h)
            if best is None or d < best[0]:
                best = (d, win)
    if best is None:
        sys.exit(f"no accessible window for pid {pid}")
    return best[1]


def walk(root):
    count = 0
    stack = [(root, 0)]
    while stack and count < MAX_NODES:
        acc, depth = stack.pop()
        count += 1
        acc.getRoleName()
        acc.name
        acc.getState().getStates()
        try:
            acc.queryComponent().getExtents(pyatspi.DESKTOP_COORDS)
        except NotImplementedError:
            pass
        try:
            a = acc.queryAction()
            [a.getName(i) for i in range(a.nActions)]
        except Exception:
            # Not an Action, or a toolkit that counts actions it cannot name (GTK 4).
            pass

        if depth < MAX_DEPTH:
            kids = [c for c in acc if c is not None]
            for c in reversed(kids):
                stack.append((c, depth + 1))
    return count


def main():
    p = argparse.ArgumentParser()
    for k in ("pid", "x", "y", "w", "h"):
        p.add_argument(f"--{k}", type=int, required=True)
    p.add_argument("--repeats", type=int, default=5)
    ns = p.parse_args()
    frame = find_frame(ns.pid, ns.x, ns.y, ns.w, ns.h)
    times = []
    nodes = 0
    for _ in range(ns.repeats):
        # Each repeat starts cold, as a per-call walker process would.
        frame.clear_cache()

        t = time.perf_counter()
        nodes = walk(frame)
        times.append((time.perf_counter() - t) * 1000)
    print(json.dumps({"nodes": nodes, "ms": times}))


if __name__ == "__main__":
    main()
