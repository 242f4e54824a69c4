#!/usr/bin/env python3
"""What a host's MCP client gets beyond tools, on the mock desktop, with the official MCP
Python client through the real `nish-mcp` and the test daemon `nish-testd serve --backend mock`:

- `initialize` carries the server's instructions;
- a cancelled `start_session` (the client abandons the call: the SDK sends
  `notifications/cancelled`) closes the consent dialog, is audited as withdrawn and is not
  the person's denial: the next start_session opens a dialog at once;
- a cancelled `wait_for` stops at once, audited as withdrawn;
- a call with a progress token hears progress while the consent dialog waits;
- with `--approve-consequential` and no control pipe, a client that offers elicitation is
  asked each approval (and each clipboard read) through `elicitation/create`: accepting
  with the box ticked lets the act happen, declining or leaving it unticked refuses it, and
  a call withdrawn while it is asked withdraws the question.

    mock_mcp.py --driver target/debug/nish-testd --shim target/debug/nish-mcp
"""

from __future__ import annotations

import argparse
import sys
import threading
import time

import anyio

import nishhost as h
from nishhost import check, ok, say


async def wait_audit(broker: h.Broker, event: str, since: int, within: float) -> dict:
    """The first `event` in the audit after its first `since` lines, within `within` s (the
    event loop keeps running meanwhile: the client still has to write its cancel)."""
    deadline = time.monotonic() + within
    while True:
        for e in broker.audit_events()[since:]:
            if e["event"] == event:
                return e
        check(time.monotonic() < deadline, f"no {event} in the audit within {within} s")
        await anyio.sleep(0.05)


async def session(ns: argparse.Namespace, broker: h.Broker, version: str) -> None:
    async with h.host(ns.shim, broker, f"mcp-{version}", version) as c:
        say(f"== MCP {version}: connected to nish-mcp")
        instr = c.instructions or ""
        check("start_session first" in instr and "skeleton" in instr, f"instructions: {instr!r}")
        say(f"  instructions: {instr[:72]}...")

        say("  start_session, abandoned by the client after 1 s while the dialog is up")
        n = len(broker.audit_events())
        t0 = time.monotonic()
        with anyio.move_on_after(1.0) as scope:
            await c.call_tool("start_session", {"apps": ["Notes"]})
        check(scope.cancelled_caught, "start_session answered before the person did")
        e = await wait_audit(broker, "consent.withdrawn", n, 5.0)
        say(f"    audit: {e['event']} {time.monotonic() - t0:.1f} s after the call")
        events = [x["event"] for x in broker.audit_events()[n:]]
        check("consent.answer" not in events, f"a withdrawal is not the person's answer: {events}")
        p = broker.cli("person", "deny", expect_ok=False)
        check(p.returncode != 0 and "no consent dialog is open" in p.stderr,
              f"the dialog is still up: {p.stdout}{p.stderr}")
        say("    the dialog is gone (the person has nothing to answer)")
        st = await ok(c, "get_session_state")
        check(st["state"] == "none", f"after a withdrawal the session is {st['state']}")

        say("  start_session again at once, with a progress token: no cooldown; the person "
            "approves after 6 s")
        progress: list[tuple[float, str | None]] = []

        async def on_progress(p: float, total: float | None, message: str | None) -> None:
            progress.append((p, message))

        def approve_later() -> None:
            time.sleep(6)
            broker.person("approve")

        t = threading.Thread(target=approve_later)
        t.start()
        r = await c.call_tool("start_session", {"apps": ["Notes"]}, progress_callback=on_progress)
        t.join()
        check(r.is_error is False and r.structured_content["state"] == "granted",
              str(r.structured_content))
        check(len(progress) >= 1, "no progress while the dialog waited")
        check(all("person" in (m or "") for _, m in progress), str(progress))
        say(f"    granted; {len(progress)} progress notification(s): {progress[0][1]!r}")

        say("  wait_for a label that never appears (timeout 30 s), abandoned after 1 s")
        n = len(broker.audit_events())
        t0 = time.monotonic()
        with anyio.move_on_after(1.0) as scope:
            await c.call_tool("wait_for", {"app": "Notes", "name": "No such label",
                                           "until": "appears", "timeout_ms": 30000})
        check(scope.cancelled_caught, "wait_for answered early")
        e = await wait_audit(broker, "call.withdrawn", n, 5.0)
        check(e["tool"] == "wait_for", str(e))
        took = time.monotonic() - t0
        check(took < 6, f"the wait went on for {took:.1f} s")
        say(f"    audit: call.withdrawn (wait_for) {took:.1f} s after the call, not at 30 s")
        await ok(c, "end_session")


async def approvals(ns: argparse.Namespace, broker: h.Broker) -> None:
    import mcp.types as t

    asked: list[str] = []
    answers: list[object] = []

    async def elicit(_ctx: object, params: t.ElicitRequestParams) -> t.ElicitResult:
        asked.append(params.message)
        a = answers.pop(0)
        if a == "hang":
            await anyio.sleep(3600)
        if a == "decline":
            return t.ElicitResult(action="decline")
        return t.ElicitResult(action="accept", content={"allow": a})

    async with h.host(ns.shim, broker, "mcp-elicit", "2025-11-25",
                      extra=("--approve-consequential",), elicitation=elicit) as c:
        say("== MCP 2025-11-25 with elicitation, --approve-consequential, no control pipe")
        t_ = threading.Thread(target=lambda: broker.person("approve", "--clipboard"))
        t_.start()
        st = await ok(c, "start_session", {"apps": ["Notes"], "clipboard_read": True})
        t_.join()
        check(st["state"] == "granted", str(st))
        read = await ok(c, "get_window_state", {"app": "Notes"})
        send = h.find(read, "push_button", "Send")

        answers.append("decline")
        err = await h.fails(c, "click", {"element_token": send["element_token"]}, "consent_denied")
        check(len(asked) == 1 and "\"Send\"" in asked[0] and "sending" in asked[0], str(asked))
        say(f"  click Send: asked through elicitation ({asked[0].splitlines()[1]}); declined: "
            f"{err['message']}")
        answers.append(False)
        await h.fails(c, "click", {"element_token": send["element_token"]}, "consent_denied")
        say("  click Send again: accepted with the box unticked: refused")
        answers.append(True)
        r = await ok(c, "click", {"element_token": send["element_token"], "observe": {"tree": True}})
        check("Sent" in r["observe"]["tree_text"], "the click happened after the approval")
        say("  click Send again: accepted with the box ticked: clicked, the status says Sent")
        check(len(asked) == 3, f"one question per act: {len(asked)}")

        answers.append(True)
        r = await ok(c, "clipboard_read")
        check(len(asked) == 4 and "clipboard" in asked[3], asked[-1])
        say(f"  clipboard_read: asked ({asked[3].splitlines()[-1]}); allowed")
        answers.append("decline")
        await h.fails(c, "clipboard_read", {}, "consent_denied")
        say("  clipboard_read declined: refused")

        answers.append("hang")
        n = len(broker.audit_events())
        with anyio.move_on_after(1.5) as scope:
            await c.call_tool("click", {"element_token": send["element_token"]})
        check(scope.cancelled_caught, "the click answered while its approval was unanswered")
        e = await wait_audit(broker, "approval.answer", n, 5.0)
        check(e["outcome"] == "withdrawn", str(e))
        await wait_audit(broker, "call.withdrawn", n, 5.0)
        say("  click Send, withdrawn while the question was open: approval withdrawn, nothing sent")
        await ok(c, "end_session")

    async with h.host(ns.shim, broker, "mcp-no-elicit", "2025-11-25",
                      extra=("--approve-consequential", "--no-elicitation"),
                      elicitation=elicit) as c:
        say("== the same client, nish-mcp --no-elicitation: no way to ask, so consequential acts "
            "are refused")
        t_ = threading.Thread(target=lambda: broker.person("approve"))
        t_.start()
        await ok(c, "start_session", {"apps": ["Notes"]})
        t_.join()
        read = await ok(c, "get_window_state", {"app": "Notes"})
        send = h.find(read, "push_button", "Send")
        before = len(asked)
        await h.fails(c, "click", {"element_token": send["element_token"]},
                      "capability_not_consented")
        check(len(asked) == before, "the client was asked although elicitation is off")
        await ok(c, "end_session")


async def main_async(ns: argparse.Namespace) -> None:
    broker = h.Broker(ns.driver, "mock")
    try:
        for version in ns.versions.split(","):
            await session(ns, broker, version)
        await approvals(ns, broker)
    finally:
        broker.stop()
    say("ALL CHECKS PASSED")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--driver", required=True)
    p.add_argument("--shim", required=True)
    p.add_argument("--versions", default="2025-11-25,2026-07-28")
    ns = p.parse_args()
    anyio.run(main_async, ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
