#!/usr/bin/env python3
"""A whole nish-driver session on the mock desktop, driven by the official MCP Python client
through the real `nish-mcp` shim and the test daemon `nish-testd serve --backend mock` (the
broker's decider over the mock desktop).

The person is played with `nish-testd person ...`. Every step is printed; every result is
checked, and every failure this script provokes must come back in the contract's envelope and
text form. Exit status 0 means every check held.

    mock_session.py --driver target/debug/nish-testd --shim target/debug/nish-mcp
"""

from __future__ import annotations

import argparse
import sys
import threading

import anyio

import nishhost as h
from nishhost import check, fails, find, ok, say


async def session(ns: argparse.Namespace, broker: h.Broker, version: str, last: bool) -> None:
    ctl = h.Control()
    async with h.host(ns.shim, broker, f"e2e-{version}", version, ctl) as c:
        say(f"== MCP {version}: connected to nish-mcp")
        tools = [t.name for t in (await c.list_tools()).tools]
        manifest = broker.cli("manifest")
        import json
        want = json.loads(manifest.stdout)["tools"]
        check(tools == want, f"tools/list {tools} != manifest {want}")
        say(f"  tools/list: {len(tools)} tools, the same as `nish-driver manifest`")

        await fails(c, "list_windows", {}, "no_session")

        say("  start_session {apps: [Notes, Atlas]}; the person approves (person approve)")
        approve = threading.Thread(target=lambda: say("    person: " + broker.person("approve")))
        approve.start()
        st = await ok(c, "start_session", {"apps": ["Notes", "Atlas"], "lease_s": 600})
        approve.join()
        check(st["state"] == "granted" and st["input"] == "headless", str(st))
        check(sorted(a["app"] for a in st["apps"]) == ["Atlas", "Notes"], str(st["apps"]))
        say(f"    granted: session {st['session']}, apps {[a['app'] for a in st['apps']]}, lease {st['lease']}")

        wins = await ok(c, "list_windows")
        say(f"  list_windows: {[(w['app'], w['window_id']) for w in wins['windows']]}")
        check({w["app"] for w in wins["windows"]} == {"Notes", "Atlas"}, str(wins))

        full = await ok(c, "get_window_state", {"app": "Notes"})
        sid = full["snapshot_id"]
        say(f"  get_window_state Notes (full): snapshot {sid}, {len(full['elements'])} rows")
        say("    " + "\n    ".join(full["tree_text"].splitlines()[:8]) + "\n    ...")
        sk = await ok(c, "get_window_state", {"app": "Atlas", "skeleton": True})
        say(f"  get_window_state Atlas (skeleton): {len(sk['elements'])} rows of {sk['element_count']}")
        region = next(e for e in sk["elements"] if e["label"] == "Region 2")
        root = await ok(c, "get_window_state", {"root": region["element_token"]})
        check(root["snapshot_id"] == sk["snapshot_id"], "a drill-down shares the skeleton's snapshot")
        check(root["elements"][0]["element_token"] == region["element_token"], "root row first")
        say(f"  get_window_state root={region['element_token']}: {len(root['elements'])} rows")
        check(len(sk["tree_text"]) * 100 < 15 * len((await ok(c, "get_window_state", {"app": "Atlas", "max_elements": 5000}))["tree_text"]),
              "skeleton text is under 15% of the full text")

        bold = find(full, "check_box", "Bold")
        r = await ok(c, "click", {"element_token": bold["element_token"]})
        say(f"  click Bold: effect {r['effect']}, verified {r['verified']}, path {r['path']}")
        check(r["effect"] == "confirmed" and r["verified"] is True, str(r))
        save = find(full, "push_button", "Save")
        r = await ok(c, "click", {"element_token": save["element_token"], "observe": {"tree": True}})
        say(f"  click Save: effect {r['effect']}, verified {r['verified']}, diff {r['diff']['changed']}")
        check(r["effect"] == "dispatched" and r["verified"] is False, "a plain button is dispatched, not verified")
        check("label \"Saved\"" in r["observe"]["tree_text"] or "\"Saved\"" in r["observe"]["tree_text"], "observe shows the new status")

        name = find(full, "entry", "Name")
        r = await ok(c, "type_text", {"element_token": name["element_token"], "text": "Ada"})
        say(f"  type_text 'Ada' into Name: readback {r['readback']}")
        check(r["readback"] == "match", str(r))
        r = await ok(c, "set_value", {"element_token": name["element_token"], "value": "Grace Hopper"})
        say(f"  set_value Name: readback {r['readback']}, effect {r['effect']}")
        check(r["readback"] == "match" and r["effect"] == "confirmed", str(r))
        after = await ok(c, "get_window_state", {"app": "Notes"})
        check(find(after, "entry", "Name").get("value") == "Grace Hopper", "the value reads back")
        r = await ok(c, "set_value", {"element_token": find(full, "slider", "Volume")["element_token"], "value": 150})
        say(f"  set_value Volume 150 (the slider stops at 100): readback {r['readback']}, effect {r['effect']}")
        check(r["readback"] == "mismatch" and r["verified"] is False, str(r))

        say("  failures the model can provoke:")
        await fails(c, "get_window_state", {"app": "Notes", "skeleton": "yes"}, "invalid_arguments")
        await fails(c, "get_window_state", {"window_id": 999999}, "window_target_not_found")
        await fails(c, "type_text", {"element_token": find(full, "password_text", "Password")["element_token"], "text": "x"}, "secure_field")
        err = await fails(c, "type_text", {"element_token": find(full, "entry", "Search")["element_token"], "text": "x"}, "requires_takeover")
        check(err["escalation"] == {"recommend": "takeover", "reason": "no_editable_text"}, str(err))
        await fails(c, "press_key", {"key": "Return"}, "requires_takeover")
        add = await ok(c, "click", {"element_token": find(full, "push_button", "Add row")["element_token"]})
        check(add["snapshot_id"] != sid, "a structural change gives a new snapshot")
        await fails(c, "click", {"element_token": bold["element_token"]}, "stale_element_token")
        await fails(c, "takeover.resume", {}, "unknown_method")
        await fails(c, "clipboard_read", {}, "capability_not_consented")
        await fails(c, "list_notifications", {}, "unsupported")

        say("  takeover: start_session {input: takeover}; the person ticks visible takeover")
        approve = threading.Thread(target=lambda: broker.person("approve", "--takeover"))
        approve.start()
        st = await ok(c, "start_session", {"input": "takeover", "apps": ["Notes"]})
        approve.join()
        check(st["input"] == "takeover" and st["takeover"]["on"] is True, str(st))
        fresh = await ok(c, "get_window_state", {"app": "Notes"})
        r = await ok(c, "click", {"element_token": find(fresh, "toggle_button", "Italic")["element_token"], "delivery_mode": "foreground"})
        say(f"    foreground click Italic: path {r['path']}, took_cursor {r['took_cursor']}, verified {r['verified']}")
        say("    the person moves the mouse (person move 5 5)")
        broker.person("move", "5", "5")
        ev = await ctl.wait(lambda e: e.get("event") == "takeover.paused", "takeover.paused")
        check(ev["session"] == st["session"] and ev["reason"] == "pointer_moved", str(ev))
        say(f"    control pipe: {ev}")
        err = await fails(c, "press_key", {"key": "Return"}, "user_took_over")
        check(err["effect"] == "refused", str(err))
        await ok(c, "get_window_state", {"app": "Notes"})
        say("    reads still work while paused; the host resumes after its own Resume click")
        ctl.send({"method": "takeover.resume", "params": {"session": st["session"]}})
        ack = await ctl.wait(lambda e: e.get("event") == "ack", "the resume ack")
        check(ack == {"event": "ack", "method": "takeover.resume", "resumed": [st["session"]]}, str(ack))
        ev = await ctl.wait(lambda e: e.get("event") == "takeover.resumed", "takeover.resumed")
        check(ev["by"] == "host", str(ev))
        await fails(c, "click", {"element_token": find(fresh, "toggle_button", "Italic")["element_token"]}, "stale_element_token")
        await ok(c, "press_key", {"key": "Return"})

        status = broker.cli("status", "--json")
        check(st["session"] in status.stdout, status.stdout)
        r = await ok(c, "end_session")
        check(r["ended"] is True, str(r))
        say("  end_session: ended")
        await fails(c, "list_windows", {}, "no_session")

        if last:
            say("  start_session again: the consent dialog opens; the person denies")
            deny = threading.Thread(target=lambda: broker.person("deny"))
            deny.start()
            await fails(c, "start_session", {"apps": ["Notes", "Atlas"]}, "consent_denied")
            deny.join()
            say("  and at once again: refused without a dialog (the person is not worn down)")
            err = await fails(c, "start_session", {"apps": ["Notes"]}, "consent_denied")
            check("no new dialog" in err["message"], str(err))
            p = broker.cli("person", "deny", expect_ok=False)
            check(p.returncode != 0 and "no consent dialog is open" in p.stderr, p.stderr)


async def main_async(ns: argparse.Namespace) -> None:
    broker = h.Broker(ns.driver, "mock")
    try:
        versions = ns.versions.split(",")
        for i, version in enumerate(versions):
            await session(ns, broker, version, i == len(versions) - 1)
        events = [e["event"] for e in broker.audit_events()]
        for want in ("consent.request", "consent.answer", "consent.cooldown", "session.start", "read",
                     "act", "refusal", "takeover.paused", "takeover.resumed", "session.end"):
            check(want in events, f"the audit lacks {want}: {sorted(set(events))}")
        with open(broker.audit, encoding="utf-8") as f:
            raw = f.read()
        check("Grace Hopper" not in raw and "Ada" not in raw, "typed text reached the audit")
        say(f"audit: {len(events)} events in {broker.audit}, none with typed text")
        say("kill switch: nish-driver stop")
        say("  " + broker.cli("stop").stdout.strip())
    finally:
        broker.stop()
    say("ALL CHECKS PASSED")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--driver", required=True)
    p.add_argument("--shim", required=True)
    p.add_argument("--versions", default="2025-11-25,2025-06-18,2026-07-28")
    p.add_argument("--quiet", action="store_true")
    ns = p.parse_args()
    h.VERBOSE = not ns.quiet
    anyio.run(main_async, ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
