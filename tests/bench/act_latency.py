#!/usr/bin/env python3
"""The act benchmark: MCP call to verified result, through the official MCP Python client,
nish-mcp and nish-driver serve --backend linux (release build), for click (a GTK 3 check button)
and set_value (a GTK 3 entry), 50 acts each right after the previous act and 50 each right after
a read of the window (the read not timed); beside the same acts done by a Python pyatspi script
(do the action, then read until the element shows it). Run inside a test desktop's environment
with gtk3-widget-factory started; prints a markdown table.

    act_latency.py --driver .../nish-driver --testd .../nish-testd --shim .../nish-mcp --pid PID [--acts 50]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import anyio

sys.path.insert(0, __file__.rsplit("/", 2)[0] + "/e2e")
import nishhost as h  # noqa: E402
from nishhost import check, ok  # noqa: E402


def pct(v: list[float], p: float) -> float:
    s = sorted(v)
    return s[min(len(s) - 1, int(round(p * (len(s) - 1))))]


def row(name: str, total: list[float], settle: list[float] | None) -> str:
    line = f"| {name} | {statistics.median(total):.1f} | {pct(total, 0.95):.1f} |"
    if settle is not None:
        excl = [t - s for t, s in zip(total, settle)]
        line += f" {statistics.median(excl):.1f} | {pct(excl, 0.95):.1f} | {statistics.median(settle):.1f} |"
    else:
        line += " n/a | n/a | n/a |"
    return line


PYATSPI = r"""
import sys, time, json, pyatspi
pid, n, kind = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
app = [a for a in pyatspi.Registry.getDesktop(0) if a is not None and a.get_process_id() == pid][0]
def find(acc, pred, depth=0):
    if acc is None or depth > 60: return None
    if pred(acc): return acc
    for c in acc:
        r = find(c, pred, depth + 1)
        if r is not None: return r
win = app[0]
times = []
if kind == "click":
    el = find(win, lambda a: a.getRoleName() == "check box" and a.name == "checkbutton"
              and a.getState().contains(pyatspi.STATE_SENSITIVE) and not a.getState().contains(pyatspi.STATE_INDETERMINATE))
    act = el.queryAction()
    idx = [act.getName(i) for i in range(act.nActions)].index("click")
    for _ in range(n):
        t = time.perf_counter()
        before = el.getState().contains(pyatspi.STATE_CHECKED)
        act.doAction(idx)
        while el.getState().contains(pyatspi.STATE_CHECKED) == before:
            el.clear_cache()
        times.append((time.perf_counter() - t) * 1000)
else:
    el = find(win, lambda a: a.getRoleName() == "text" and a.getState().contains(pyatspi.STATE_EDITABLE)
              and a.getState().contains(pyatspi.STATE_SENSITIVE) and a.queryText().getText(0, -1) != "")
    et = el.queryEditableText()
    tx = el.queryText()
    for i in range(n):
        value = f"value {i}"
        t = time.perf_counter()
        et.setTextContents(value)
        while tx.getText(0, -1) != value:
            el.clear_cache()
        times.append((time.perf_counter() - t) * 1000)
print(json.dumps(times))
"""


def pyatspi_times(env: dict, pid: int, n: int, kind: str) -> list[float]:
    import json

    p = subprocess.run(["/usr/bin/python3", "-c", PYATSPI, str(pid), str(n), kind], env=env,
                       capture_output=True, text=True, timeout=600)
    check(p.returncode == 0, f"pyatspi {kind}: {p.stderr}")
    return json.loads(p.stdout)


async def driver_times(ns: argparse.Namespace, filter_on: bool, acts: int, settle: str = "events") -> dict:
    """One broker (the agents' D-Bus filters on or off; the settle by events where the app sends
    them, or by reads alone), `acts` of each kind after 3 warm-ups."""
    env = {"NISH_LOG": "warn"}
    # Both honoured only by the test daemon nish-testd; nish-driver always filters and always
    # follows the events, and runs the side that has neither switch.
    if not filter_on:
        env["NISH_BENCH_READER_FILTER"] = "off"
    if settle == "reads":
        env["NISH_BENCH_SETTLE"] = "reads"
    daemon = ns.driver if filter_on and settle == "events" else ns.testd
    broker = h.Broker(daemon, "linux", env)
    person = h.Person(broker.env)
    try:
        async with h.host(ns.shim, broker, "act-bench") as c:
            await h.start_with_consent(c, person, {"apps": ["gtk3-widget-factory"]})
            r = await ok(c, "get_window_state", {"pid": ns.pid, "max_elements": 5000})
            cb = next(e for e in r["elements"] if e["role"] == "check_box" and e["label"] == "checkbutton"
                      and not set(e["states"]) & {"disabled", "indeterminate"})
            entry = next(e for e in r["elements"] if e["role"] == "text" and e.get("value") == "entry"
                         and "disabled" not in e["states"])
            # The reader keeps walks only once it asked for events a second ago.
            await anyio.sleep(1.2)
            results = {}
            for name, tool, args in (
                ("click (check button)", "click", lambda i: {"element_token": cb["element_token"]}),
                ("set_value (entry)", "set_value", lambda i: {"element_token": entry["element_token"], "value": f"v{i}"}),
            ):
                # Every other act follows a read of the window (not timed): its re-check may
                # then be the read's kept walk. The others follow an act.
                for key in (name, f"{name} after a read"):
                    results[key] = ([], [])
                for i in range(2 * acts + 3):
                    after_read = i % 2 == 1
                    if after_read:
                        await ok(c, "get_window_state", {"pid": ns.pid, "max_elements": 5000})
                    t0 = time.perf_counter()
                    res = await ok(c, tool, args(i))
                    dt = (time.perf_counter() - t0) * 1000
                    check(res["verified"] is True, f"{tool} not verified: {res}")
                    if i >= 3:  # warm-up
                        total, settle = results[f"{name} after a read" if after_read else name]
                        total.append(dt)
                        settle.append(float(res["settle"]["ms"]))
                    # Acts start at least 60 ms apart: the policy refuses more than 20 a second
                    # (not timed).
                    await anyio.sleep(max(0.0, 0.06 - (time.perf_counter() - t0)))
            # The entry's text back as it was, for the next broker's run to find it.
            await ok(c, "set_value", {"element_token": entry["element_token"], "value": "entry"})
            await ok(c, "end_session")
            # How each act's re-check was made, from the broker's audit (gone once the broker
            # stops): the kept walk or a walk, and what it took.
            rechecks: dict = {}
            with open(broker.audit) as f:
                for line in f:
                    e = json.loads(line)
                    if e.get("event") == "act":
                        rechecks.setdefault(e.get("recheck", "?"), []).append(float(e.get("recheck_ms", 0)))
            results["_rechecks"] = rechecks
    finally:
        broker.stop()
    return results


async def run(ns: argparse.Namespace) -> None:
    h.VERBOSE = False
    # The agents' filters on and off, and the settle by reads alone, alternating in halves so
    # the machine's drift hits all three.
    on: dict = {}
    off: dict = {}
    reads: dict = {}
    rechecks: dict = {}
    half = max(1, ns.acts // 2)
    for _ in range(2):
        for filter_on, settle_by, into in ((True, "events", on), (False, "events", off), (True, "reads", reads)):
            got = await driver_times(ns, filter_on, half, settle_by)
            for k, ms in got.pop("_rechecks").items():
                rechecks.setdefault((filter_on, settle_by, k), []).extend(ms)
            for name, (total, settle) in got.items():
                t, s = into.setdefault(name, ([], []))
                t.extend(total)
                s.extend(settle)
    env = dict(os.environ)  # the test desktop's, as the script was started
    py_click = pyatspi_times(env, ns.pid, ns.acts, "click")
    py_set = pyatspi_times(env, ns.pid, ns.acts, "set")
    print(f"{2 * half} acts each, three brokers alternating (filters on; filters off; filters on and the settle by reads alone); milliseconds\n")
    print("| act | median | p95 | median excl. settle | p95 excl. settle | settle median |")
    print("|---|---|---|---|---|---|")
    for name in on:
        for label, res in (("filter on", on), ("filter off", off), ("filter on, settle by reads", reads)):
            total, settle = res[name]
            print(row(f"nish-driver ({label}), MCP call to verified result: {name}", total, settle))
    print(row("pyatspi script: click (check button), do_action then read until checked", py_click, None))
    print(row("pyatspi script: set_value (entry), setTextContents then read back", py_set, None))
    print()
    for (filter_on, settle_by, k), ms in sorted(rechecks.items()):
        print(f"re-checks before the act (the broker's audit), filters {'on' if filter_on else 'off'},"
              f" settle by {settle_by}: {len(ms)} by {k}, median {statistics.median(ms):.1f} ms")
    for name in on:
        ratio = statistics.median(on[name][0]) / statistics.median(off[name][0])
        print(f"{name}: filter on / off, median: {ratio:.2f}")
    for name in on:
        ratio = statistics.median(reads[name][0]) / statistics.median(on[name][0])
        print(f"{name}: settle by reads / by events (filters on), median: {ratio:.2f}")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--driver", required=True)
    p.add_argument("--testd", required=True, help="nish-testd, for the filter-off and settle-by-reads sides")
    p.add_argument("--shim", required=True)
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--acts", type=int, default=50)
    anyio.run(run, p.parse_args())
    return 0


if __name__ == "__main__":
    sys.exit(main())
