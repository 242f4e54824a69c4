#!/usr/bin/env python3
"""A nish-driver session on a real (headless) X desktop, driven by the official MCP Python
client through the real `nish-mcp` and `nish-driver serve --backend linux`, with the real
reader and indicator agents.

The person is played with xdotool (XTEST: real clicks) and says so. Run inside a test desktop's
environment (DISPLAY, DBUS_SESSION_BUS_ADDRESS); the caller has started the apps:
gtk3-widget-factory (twice, for an ambiguous target), gtk4-demo, gtk3-demo (not requested: out
of scope) and Chromium on tests/pages/form.html.

    desktop_session.py --driver .../nish-driver --shim .../nish-mcp --out DIR [--demo]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import threading
import time

import anyio

import nishhost as h
from nishhost import check, fails, ok, say

GTK3 = "gtk3-widget-factory"
GTK4 = "gtk4-demo"
CHROMIUM = "chromium"


def person_allows(person: h.Person, out: str, demo: bool) -> None:
    """The person answers the consent dialog: injected clicks first (ignored), then their own."""
    allow = person.wait_window("nish-driver consent: allow")
    time.sleep(0.7)  # the dialog ignores clicks in its first 500 ms (anti click-through)
    person.screenshot(os.path.join(out, "consent-dialog.png"))
    say(f"    person: the consent dialog is up; screenshot saved to {out}/consent-dialog.png")
    unticked = person.windows("nish-driver consent: app:gtk3-demo")
    check(unticked != [], "the dialog lists every app with a window, gtk3-demo (not asked for) too")
    dialog = person.wait_window("nish-driver consent")
    text = person.read_window_text(dialog, os.path.join(out, "consent-ocr.png"))
    host_exe = os.path.basename(os.path.realpath(sys.executable))
    wants = ("Program:", "/python", f"pid{os.getpid()}", "desktop-e2e", "15minutes",
             "gtk3-widget-factory", "2windows", "gtk4-demo", "press,tickandfillin")
    # OCR of a bitmap font sometimes splits or joins words: compare without spaces. It has also
    # misread one digit of the pid once ("901" as "904"): what one reading misses must be read
    # at another scale; each word must be read exactly, by one of the two.
    flat = text.replace(" ", "")
    missed = [w for w in wants if w not in flat]
    if missed:
        again = person.read_window_text(dialog, os.path.join(out, "consent-ocr-3x.png"), scale=3)
        text += "\n--- read again at 3x ---\n" + again
        flat3 = again.replace(" ", "")
        for want in missed:
            check(want in flat3, f"the dialog does not say {want!r}; OCR read:\n{text}")
    say(f"    the dialog names the program ({host_exe}, pid {os.getpid()}) beside its claimed name, the "
        "15-minute lease and each app with its window count (read back by OCR)")
    person.attacker_xdotool("click", "--window", str(allow), "1")
    time.sleep(0.5)
    check(person.windows("nish-driver consent: allow") != [], "a SendEvent click must not answer the dialog")
    say("    another program: a SendEvent click on Allow is ignored")
    person.attacker_click_window(allow)
    time.sleep(0.5)
    check(person.windows("nish-driver consent: allow") != [], "an XTEST click must not answer the dialog")
    say("    another program: an XTEST click on Allow (any X client can send one) is ignored")

    top = person.wait_window("nish-driver consent")
    remove = person.cover(top)
    time.sleep(0.8)
    person.click_window(allow)
    time.sleep(0.3)
    person.click_window(allow)
    time.sleep(0.3)
    check(person.windows("nish-driver consent: allow") != [], "a click under a click-through cover answered")
    remove()
    person.click_window(allow)
    time.sleep(0.3)
    check(person.windows("nish-driver consent: allow") != [], "a click right after the cover left answered")
    say("    another program covers the dialog with a click-through window that it keeps on top: the "
        "person's clicks on what they see do nothing, nor one right after the cover goes")

    person.move(*(lambda g: (g[0] - 120, g[1] - 40))(person.geometry(allow)[:2]))
    time.sleep(0.7)
    person.move_window_under_pointer(top, allow)
    person.xdotool("click", "1")
    time.sleep(0.3)
    check(person.windows("nish-driver consent: allow") != [], "Allow slid under the pointer answered")
    say("    another program slides the dialog so Allow is under the person's pointer as they click: "
        "nothing (and the dialog moves back)")
    time.sleep(0.7)
    person.click_window(allow)
    say("    person (their own mouse, a real device, the dialog uncovered for 500 ms): Allow")


def person_denies(person: h.Person) -> None:
    deny = person.wait_window("nish-driver consent: deny")
    time.sleep(0.7)
    person.click_window(deny)
    say("    person: Deny")


def first(read: dict, role: str) -> dict:
    for e in read["elements"]:
        if e["role"] == role:
            return e
    raise AssertionError(f"no {role} in snapshot {read['snapshot_id']}")


def pixels_in(png: bytes, rect: dict, window: dict, inset: int = 2) -> list[tuple[int, ...]]:
    """Pixels of a capture inside a screen rectangle (the capture is the window's own image)."""
    w, hgt, ch, px = h.read_png(png)
    x0 = max(0, rect["x"] - window["frame"]["x"] + inset)
    y0 = max(0, rect["y"] - window["frame"]["y"] + inset)
    x1 = min(w, rect["x"] - window["frame"]["x"] + rect["w"] - inset)
    y1 = min(hgt, rect["y"] - window["frame"]["y"] + rect["h"] - inset)
    check(x1 > x0 and y1 > y0, f"rectangle {rect} is outside the capture")
    out = []
    for y in range(y0, y1, 2):
        for x in range(x0, x1, 3):
            i = (y * w + x) * ch
            out.append(tuple(px[i:i + 3]))
    return out


async def views_share_tokens(c, app: str, target: dict) -> dict:
    full = await ok(c, "get_window_state", {**target, "max_elements": 5000})
    sk = await ok(c, "get_window_state", {**target, "skeleton": True})
    check(sk["snapshot_id"] == full["snapshot_id"], f"{app}: skeleton and full share a snapshot")
    rows = {e["element_index"]: e for e in full["elements"]}
    for r in sk["elements"]:
        f = rows[r["element_index"]]
        check((f["role"], f["label"]) == (r["role"], r["label"]), f"{app}: row {r['element_index']} differs between views")
        for k in ("parent_index", "depth", "child_count", "descendant_count"):
            check(k in r, f"{app}: skeleton rows carry {k}")
    region = next((r for r in sk["elements"] if r["element_index"] != 0 and r["descendant_count"] > 0), sk["elements"][0])
    root = await ok(c, "get_window_state", {"root": region["element_token"]})
    check(root["snapshot_id"] == full["snapshot_id"], f"{app}: a drill-down shares the snapshot")
    check(root["elements"][0]["element_token"] == region["element_token"], f"{app}: the root row comes first")
    for r in root["elements"]:
        f = rows[r["element_index"]]
        check((f["role"], f["label"]) == (r["role"], r["label"]), f"{app}: drill-down row differs")
    say(f"  {app}: full {len(full['elements'])} rows (of {full['element_count']}), skeleton {len(sk['elements'])}, "
        f"root {region['element_token']} {len(root['elements'])} rows, one snapshot {full['snapshot_id']}; "
        f"text {len(full['tree_text'])} B full vs {len(sk['tree_text'])} B skeleton")
    return full


async def run(ns: argparse.Namespace) -> None:
    os.makedirs(ns.out, exist_ok=True)
    broker = h.Broker(ns.driver, "linux")
    person = h.Person(broker.env)
    try:
        doctor = broker.cli("doctor", "--json")
        report = json.loads(doctor.stdout)
        check(report["ready"] is True and report["session_type"] == "x11", f"doctor: {report}")
        say(f"doctor: ready on X11 {os.environ.get('DISPLAY')}; agents locked down: "
            f"{[p['message'] for p in report['probes'] if p['label'] == 'agent sandbox']}")
        ctl = h.Control()
        async with h.host(ns.shim, broker, "desktop-e2e", "2025-11-25", ctl) as c:
            tools = [t.name for t in (await c.list_tools()).tools]
            say(f"MCP: connected to nish-mcp, {len(tools)} tools")
            await fails(c, "list_windows", {}, "no_session")

            say(f"start_session {{apps: [{GTK3}, {GTK4}, {CHROMIUM}]}}: the consent dialog opens")
            t = threading.Thread(target=person_allows, args=(person, ns.out, ns.demo))
            t.start()
            st = await ok(c, "start_session", {"apps": [GTK3, GTK4, CHROMIUM]})
            t.join()
            apps = sorted(a["app"].lower() for a in st["apps"])
            check(apps == sorted([GTK3, GTK4, CHROMIUM]), f"granted apps {apps}")
            check(len(next(a for a in st["apps"] if a["app"].lower() == GTK3)["pids"]) == 2, "both widget factories")
            say(f"  granted: {[(a['app'], a['pids']) for a in st['apps']]}, input {st['input']}")

            wins = await ok(c, "list_windows")
            names = [w["app"].lower() for w in wins["windows"]]
            say(f"list_windows: {[(w['app'], w['pid'], w['window_id']) for w in wins['windows']]}")
            check("gtk3-demo" not in names, "unapproved apps are not listed")
            check(sorted(set(names)) == sorted([GTK3, GTK4, CHROMIUM]), f"windows {names}")

            say("targets:")
            err = await fails(c, "get_window_state", {"app": GTK3}, "ambiguous_target")
            check(len(err["candidates"]) == 2 and all(x["app"] == GTK3 for x in err["candidates"]), str(err))
            err = await fails(c, "get_window_state", {}, "ambiguous_window_target")
            check(len(err["candidates"]) == len(wins["windows"]), str(err))
            await fails(c, "get_window_state", {"app": "no-such-app"}, "window_target_not_found")
            pid = next(w["pid"] for w in wins["windows"] if w["app"].lower() == GTK3)


            say("reads (full, skeleton, root) share one snapshot per window:")
            g3 = await views_share_tokens(c, GTK3, {"pid": pid})
            check_box = next(e for e in g3["elements"] if e["role"] == "check_box" and "disabled" not in e["states"])
            check("click" in check_box["actions"], f"a GTK 3 check button offers click: {check_box}")
            wf = g3["window"]["frame"]
            fr = check_box["frame"]
            check(wf["x"] <= fr["x"] and fr["x"] + fr["w"] <= wf["x"] + wf["w"] + 2, "frames are screen coordinates in the window")
            say(f"  {GTK3} (pid {pid}): {g3['element_count']} rows; {check_box['element_token']} check_box "
                f"{check_box['label']!r} actions {check_box['actions']} at {fr}")
            for app in (GTK4, CHROMIUM):
                await views_share_tokens(c, app, {"app": app})

            say("Chromium: the page, its secure field, a capture:")
            ch = await ok(c, "get_window_state", {"app": CHROMIUM, "max_elements": 5000, "include_screenshot": True})
            doc = first(ch, "document_web")
            check("form test page" in doc["label"], f"the page's document: {doc}")
            pw = first(ch, "password_text")
            check(pw.get("value") is None and "secure" in pw["states"], f"the password field is redacted: {pw}")
            check("hunter2" not in json.dumps(ch), "the secret value never leaves the driver")
            r = await c.call_tool("get_window_state", {"app": CHROMIUM, "include_screenshot": True})
            img = next(b for b in r.content if b.type == "image")
            png = base64.b64decode(img.data)
            check(r.structured_content["screenshot"]["redacted"] >= 1, "one secure field blacked out")
            path = os.path.join(ns.out, "chromium-window.png")
            with open(path, "wb") as f:
                f.write(png)
            inside = pixels_in(png, pw["frame"], ch["window"])
            check(all(p == (0, 0, 0) for p in inside), "the password field is black in the capture")
            heading = next(e for e in ch["elements"] if e["role"] == "heading" and "Form test" in e["label"])
            outside = pixels_in(png, heading["frame"], ch["window"])
            check(any(p != (0, 0, 0) for p in outside), "the rest of the capture is not black")
            say(f"  document {doc['label']!r}; password field {pw['element_token']} has no value, states {pw['states']}")
            say(f"  capture {img.mime_type} {r.structured_content['screenshot']['width']}x"
                f"{r.structured_content['screenshot']['height']}, the password field blacked out; saved to {path}")

            say("a structural change makes older tokens stale:")
            add = next(e for e in ch["elements"] if e["role"] == "push_button" and e["label"] == "Add item")
            old = ch["snapshot_id"]
            ax, ay = add["frame"]["x"] + add["frame"]["w"] // 2, add["frame"]["y"] + add["frame"]["h"] // 2
            person.click_at(ax, ay)
            say(f"  person (xdotool): clicks 'Add item' at {ax},{ay}")
            deadline = time.monotonic() + 10
            while True:
                now = await ok(c, "get_window_state", {"app": CHROMIUM, "max_elements": 5000})
                if now["snapshot_id"] != old:
                    break
                check(time.monotonic() < deadline, "the page's new item never showed")
                await anyio.sleep(0.1)
            check(any(e["label"] == "Item 2" for e in now["elements"]), "the new item is in the read")
            await fails(c, "get_window_state", {"root": add["element_token"]}, "stale_element_token")
            say(f"  new snapshot {now['snapshot_id']} (was {old}); the old token is stale")

            say("scope: an app the person did not approve")
            await fails(c, "get_window_state", {"window_id": ns.unapproved_window}, "app_not_in_scope")

            r = await ok(c, "end_session")
            check(r["ended"] is True, str(r))
            say("end_session: ended")

            say("start_session {apps: [no-such-app]}: the dialog still opens (no answer about windows before it); the person denies")
            t = threading.Thread(target=person_denies, args=(person,))
            t.start()
            await fails(c, "start_session", {"apps": ["no-such-app"]}, "consent_denied")
            t.join()
            say("start_session again at once: refused without a dialog (the person is not worn down)")
            err = await fails(c, "start_session", {"apps": [GTK3]}, "consent_denied")
            check("no new dialog" in err["message"], str(err))
            time.sleep(1.0)
            check(person.windows("nish-driver consent: allow") == [], "no dialog opened during the cooldown")
        events = [e["event"] for e in broker.audit_events()]
        for want in ("consent.request", "consent.answer", "consent.cooldown", "session.start", "read",
                     "refusal", "session.end"):
            check(want in events, f"audit lacks {want}")
        say(f"audit: {len(events)} events, {broker.audit}")
    except BaseException:
        say("broker log:\n" + broker.log_text())
        raise
    finally:
        broker.stop()
    say("ALL CHECKS PASSED")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--driver", required=True)
    p.add_argument("--shim", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--unapproved-window", type=int, required=True)
    p.add_argument("--demo", action="store_true")
    ns = p.parse_args()
    anyio.run(run, ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
