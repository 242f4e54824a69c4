#!/usr/bin/env python3
"""Calls stay bounded whatever the apps do: the official MCP Python client, `nish-mcp` and
`nish-driver serve --backend linux` on a test desktop with gtk3-widget-factory, an app on the
accessibility bus that never answers (tests/apps/never_answers.py, started by the caller), and
a Chromium started a moment before each round (0.3 to 4 s: from before it registers on the bus
to its tree loading).

Twenty rounds in a row: start_session opens its dialog within 3 s (the person answers it),
list_windows and a read of gtk3-widget-factory answer within 3 s; then the session ends and
that round's Chromium is stopped.

    hung_apps.py --driver .../nish-driver --shim .../nish-mcp --page .../form.html [--rounds 20]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import anyio

import nishhost as h
from nishhost import check, ok, say

GTK3 = "gtk3-widget-factory"
BOUND = 3.0
# How long after Chromium's start each round's start_session comes, in turn.
DELAYS = (0.3, 0.8, 1.5, 2.5, 4.0)


def chromium(page: str, profile: str) -> subprocess.Popen:
    return subprocess.Popen(
        ["/usr/bin/chromium", "--force-renderer-accessibility", "--no-sandbox",
         f"--user-data-dir={profile}", "--no-first-run", "--no-default-browser-check",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-quic", "--disable-gpu", "--password-store=basic",
         "--disable-features=Translate,MediaRouter", "--window-size=900,600", f"file://{page}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def stop(p: subprocess.Popen) -> None:
    """Stops that Chromium: its process group (it was started in its own session)."""
    try:
        os.killpg(p.pid, 15)
        p.wait(10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(p.pid, 9)
        except ProcessLookupError:
            pass
        p.wait(5)


async def run(ns: argparse.Namespace) -> None:
    broker = h.Broker(ns.driver, "linux")
    person = h.Person(broker.env)
    profiles = tempfile.mkdtemp(prefix="nish-hung-")
    times: dict[str, list[float]] = {"dialog": [], "list_windows": [], "read": []}
    try:
        async with h.host(ns.shim, broker, "hung-apps-e2e") as c:
            for n in range(1, ns.rounds + 1):
                browser = chromium(ns.page, os.path.join(profiles, str(n)))
                try:
                    # From just after its start to when its tree is loading.
                    time.sleep(DELAYS[(n - 1) % len(DELAYS)])
                    opened: list[float] = []
                    t0 = time.monotonic()

                    def answer() -> None:
                        allow = person.wait_window("nish-driver consent: allow", timeout=30)
                        opened.append(time.monotonic() - t0)
                        time.sleep(0.7)
                        for _ in range(4):
                            if not person.windows("nish-driver consent: allow"):
                                return
                            person.click_window(allow)
                            time.sleep(1.0)

                    t = threading.Thread(target=answer)
                    t.start()
                    try:
                        st = await ok(c, "start_session", {"apps": [GTK3]})
                    finally:
                        t.join()
                    check(opened and opened[0] < BOUND, f"round {n}: the dialog opened after {opened} s")
                    check([a["app"] for a in st["apps"]] == [GTK3], str(st["apps"]))
                    t1 = time.monotonic()
                    wins = await ok(c, "list_windows")
                    t2 = time.monotonic()
                    r = await ok(c, "get_window_state", {"app": GTK3})
                    t3 = time.monotonic()
                    check(len(r["elements"]) > 50, f"round {n}: {len(r['elements'])} rows")
                    check(t2 - t1 < BOUND and t3 - t2 < BOUND,
                          f"round {n}: list_windows {t2 - t1:.2f} s, read {t3 - t2:.2f} s")
                    times["dialog"].append(opened[0])
                    times["list_windows"].append(t2 - t1)
                    times["read"].append(t3 - t2)
                    listed = [e for e in broker.audit_events() if e.get("event") == "consent.request"][-1]
                    say(f"round {n} (Chromium started {DELAYS[(n - 1) % len(DELAYS)]} s before): dialog after "
                        f"{opened[0]:.2f} s listing {listed['apps']} apps; list_windows {t2 - t1:.2f} s, "
                        f"read {t3 - t2:.2f} s ({len(r['elements'])} rows)")
                    await ok(c, "end_session")
                finally:
                    stop(browser)
        for k, v in times.items():
            say(f"{k}: max {max(v):.2f} s, median {sorted(v)[len(v) // 2]:.2f} s over {len(v)} rounds")
    except BaseException:
        say("broker log:\n" + broker.log_text())
        raise
    finally:
        broker.stop()
        shutil.rmtree(profiles, ignore_errors=True)
    say("ALL CHECKS PASSED")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--driver", required=True)
    p.add_argument("--shim", required=True)
    p.add_argument("--page", required=True)
    p.add_argument("--rounds", type=int, default=20)
    ns = p.parse_args()
    anyio.run(run, ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
