#!/usr/bin/env python3
"""The load benchmark (not a test: it prints figures): N hosts (default 20), each its own
`nish-mcp` and MCP session with the real `nish-driver serve --backend linux`, read and act on
gtk3-widget-factory for a fixed time (default 60 s) on a nested desktop (the person answers
each host's consent dialog with a real click).

Each host loops: a full read (max_elements 5000), a skeleton read, list_windows, and a headless
act (a click on the toggle button, or set_value on the spin button), with no pause between
calls. Printed: latency percentiles per tool (every call, failed or not), the answers' codes,
and the resident memory of the broker and of each agent (sampled every second: at the start of
the load, its peak, at the end).

    load.py --driver .../nish-driver --shim .../nish-mcp [--hosts 20] [--seconds 60]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import random
import sys
import threading
import time

import anyio

sys.path.insert(0, __file__.rsplit("/", 2)[0] + "/e2e")
import nishhost as h  # noqa: E402
from nishhost import check, ok  # noqa: E402

GTK3 = "gtk3-widget-factory"


def pct(v: list[float], p: float) -> float:
    s = sorted(v)
    return s[min(len(s) - 1, int(round(p * (len(s) - 1))))]


def rss_kb(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except FileNotFoundError:
        return None
    return None


async def consent(c, person: h.Person, args: dict) -> dict:
    def answer() -> None:
        allow = person.wait_window("nish-driver consent: allow")
        time.sleep(0.7)
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
    broker = h.Broker(ns.driver, "linux", {"NISH_LOG": "warn"})
    person = h.Person(broker.env)
    lat: dict[str, list[float]] = collections.defaultdict(list)
    codes: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    mem: dict[str, list[int]] = collections.defaultdict(list)
    messages: list[str] = []
    try:
        async with contextlib.AsyncExitStack() as stack:
            hosts = []
            for i in range(ns.hosts):
                c = await stack.enter_async_context(h.host(ns.shim, broker, f"load-{i}"))
                await consent(c, person, {"apps": [GTK3]})
                hosts.append(c)
            print(f"{ns.hosts} hosts with a session each", flush=True)
            r = await ok(hosts[0], "get_window_state", {"app": GTK3, "max_elements": 5000})
            deadline = time.monotonic() + ns.seconds

            def agents() -> dict[str, int]:
                pids: dict[str, int] = {}
                for e in broker.audit_events():
                    if e.get("event") == "agent.start":
                        pids[e["agent"]] = e["pid"]
                return pids

            def sample() -> None:
                procs = {"nish-driver serve": broker.proc.pid, **agents()}
                for name, pid in procs.items():
                    kb = rss_kb(pid)
                    if kb is not None:
                        mem[name].append(kb)

            async def call(c, tool: str, args: dict, label: str | None = None) -> dict | None:
                label = label or tool
                t = time.monotonic()
                res = await c.call_tool(tool, args)
                lat[label].append(time.monotonic() - t)
                sc = res.structured_content or {}
                if res.is_error:
                    err = sc.get("error", {})
                    codes[label][err.get("code", "?")] += 1
                    if len(messages) < 10:
                        messages.append(f"{label}: {err.get('code')} (retry {err.get('disposition', {}).get('retry')}): "
                                        f"{err.get('message')}")
                    return None
                codes[label]["ok"] += 1
                return sc

            async def host_loop(c, n: int) -> None:
                rng = random.Random(n)
                while time.monotonic() < deadline:
                    full = await call(c, "get_window_state", {"app": GTK3, "max_elements": 5000},
                                      "get_window_state (full, max_elements 5000)")
                    await call(c, "get_window_state", {"app": GTK3, "skeleton": True},
                               "get_window_state (skeleton)")
                    await call(c, "list_windows", {})
                    if full is None:
                        continue
                    tb = next((e for e in full["elements"] if e["role"] == "toggle_button"
                               and e["label"] == "togglebutton" and "disabled" not in e["states"]), None)
                    spin = next((e for e in full["elements"] if e["role"] == "spin_button"
                                 and "disabled" not in e["states"]), None)
                    if rng.random() < 0.5 and tb is not None:
                        await call(c, "click", {"element_token": tb["element_token"]})
                    elif spin is not None:
                        await call(c, "set_value", {"element_token": spin["element_token"],
                                                    "value": rng.randint(1, 99)})

            async def sampler() -> None:
                while time.monotonic() < deadline:
                    sample()
                    await anyio.sleep(1.0)

            check(len(r["elements"]) > 50, "the window reads")
            sample()
            load_before = os.getloadavg()[0]
            started = time.monotonic()
            async with anyio.create_task_group() as tg:
                tg.start_soon(sampler)
                for n, c in enumerate(hosts):
                    tg.start_soon(host_loop, c, n)
            took = time.monotonic() - started
            sample()
        total = sum(len(v) for v in lat.values())
        print(f"\n{ns.hosts} hosts for {took:.0f} s: {total} calls ({total / took:.1f} a second); "
              f"{os.cpu_count()} cores, load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after\n")
        print("| tool | calls | p50 ms | p90 ms | p99 ms | max ms | answers |")
        print("|---|---|---|---|---|---|---|")
        for tool in sorted(lat):
            v = lat[tool]
            answers = ", ".join(f"{k} {n}" for k, n in codes[tool].most_common())
            print(f"| {tool} | {len(v)} | {pct(v, .5) * 1000:.0f} | {pct(v, .9) * 1000:.0f} | "
                  f"{pct(v, .99) * 1000:.0f} | {max(v) * 1000:.0f} | {answers} |")
        print("\n| process | RSS at the start MB | peak MB | at the end MB |")
        print("|---|---|---|---|")
        for name, v in mem.items():
            print(f"| {name} | {v[0] / 1024:.1f} | {max(v) / 1024:.1f} | {v[-1] / 1024:.1f} |")
        for m in messages:
            print(f"  failed: {m}")
        restarts = [e for e in broker.audit_events() if e.get("event") == "agent.exit"]
        print(f"\nagents that exited during the run: {len(restarts)}")
    except BaseException:
        print("broker log:\n" + broker.log_text())
        raise
    finally:
        broker.stop()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--driver", required=True)
    p.add_argument("--shim", required=True)
    p.add_argument("--hosts", type=int, default=20)
    p.add_argument("--seconds", type=float, default=60)
    ns = p.parse_args()
    anyio.run(run, ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
