#!/usr/bin/env python3
"""Host approvals of consequential acts on a real desktop, through the official MCP Python
client, the real nish-mcp (--approve-consequential, a control pipe), `nish-driver serve
--backend linux` and its agents, with the GTK 3 app tests/apps/approvals_gtk3.py.

The person grants the session with a real click on the nested desktop. Then:
- a click on "Send" raises `approval.request` (reason consequential_label, the action and its
  digest) and waits; a denial answers consent_denied with effect refused, and the app's status
  still says "Ready" (nothing was clicked);
- approving without the digest is refused and the request stays open; approving with it
  clicks once ("Sent 1"); answering the same id again is refused (single use);
- no answer within 60 s answers consent_denied, nothing is clicked, and meanwhile the MCP
  client received progress notifications;
- typing into "Search" needs no approval; typing into "Message" does, with the text's length
  and never the text;
- the audit has the requests and answers with their outcomes, and not the typed text.
- a process of the same user without capabilities cannot ptrace the broker or its agents;
- the reader and the input agent have no bus address, DISPLAY or XAUTHORITY in their
  environment (/proc/<pid>/environ), the indicator no bus address.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import anyio

import nishhost as h
from nishhost import check, fails, find, ok, say

APP = "nish-approvals-gtk3"
TYPED = "approval-canary-5521"


async def status(c) -> str:
    r = await ok(c, "get_window_state", {"app": APP})
    labels = [e for e in r["elements"] if e["role"] == "label"]
    check(labels, "the app's status label")
    return labels[-1]["label"]


async def call_and_answer(c, ctl: h.Control, tool: str, args: dict, answer):
    """Calls `tool`; when its approval request arrives, `answer(request)` runs; returns
    (request, result)."""
    seen: dict = {}

    async def call() -> None:
        seen["result"] = await c.call_tool(tool, args)

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        req = await ctl.wait(lambda e: e.get("event") == "approval.request", "approval.request", 20)
        check("result" not in seen, f"{tool} returned before the host's approval")
        seen["request"] = req
        await answer(req)
    return seen["request"], seen["result"]


async def run(ns: argparse.Namespace) -> None:
    # Without capabilities, as the person's own programs run: only the broker's and agents'
    # own defences keep other processes of the uid out (checked below with ptrace).
    broker = h.Broker(ns.driver, "linux", no_caps=True)
    person = h.Person(broker.env)
    try:
        ctl = h.Control()
        async with h.host(ns.shim, broker, "approvals-e2e", "2025-11-25", ctl,
                          extra=("--approve-consequential",)) as c:
            await h.start_with_consent(c, person, {"apps": [APP]})
            check(await status(c) == "Ready", "the app starts Ready")
            # The reader, the indicator and (after a first act) the input agent run now.
            r = await ok(c, "get_window_state", {"app": APP})
            await ok(c, "type_text", {"element_token": find(r, "text", "Search")["element_token"],
                                      "text": "x"})
            h.check_ptrace_refused(broker)
            h.check_agent_environ(broker)
            h.check_agent_groups(broker)

            # 1. A denial sends nothing.
            r = await ok(c, "get_window_state", {"app": APP})
            send = find(r, "push_button", "Send")["element_token"]

            async def deny(req):
                check(req["tool"] == "click", str(req))
                check(req["reasons"] == ["consequential_label"], str(req))
                check(req["action"]["label"] == "Send" and req["action"]["element"] == send, str(req))
                check(len(req["digest"]) == 16 and req["expires_in_ms"] == 60000, str(req))
                ctl.send({"method": "approval.answer", "params": {"id": req["id"], "approve": False}})

            req, res = await call_and_answer(c, ctl, "click", {"element_token": send}, deny)
            env = res.structured_content
            check(res.is_error and env["error"]["code"] == "consent_denied", str(env))
            check(env["error"].get("effect") == "refused", str(env))
            check(await status(c) == "Ready", "a denied click clicked nothing")
            say("a denied approval: consent_denied, effect refused, the app still Ready")

            # 2. The digest binds the approval; it is single use.
            r = await ok(c, "get_window_state", {"app": APP})
            send = find(r, "push_button", "Send")["element_token"]
            used: dict = {}

            async def approve(req):
                ctl.send({"method": "approval.answer", "params": {"id": req["id"], "approve": True}})
                err = await ctl.wait(lambda e: e.get("event") == "error", "the refusal of a digest-less approval")
                check("digest" in err["error"]["message"], str(err))
                ctl.send({"method": "approval.answer",
                          "params": {"id": req["id"], "approve": True, "digest": req["digest"]}})
                used.update(req)

            req, res = await call_and_answer(c, ctl, "click", {"element_token": send}, approve)
            check(not res.is_error, f"the approved click: {res.structured_content}")
            check(await status(c) == "Sent 1", "the approved click clicked once")
            ctl.send({"method": "approval.answer",
                      "params": {"id": used["id"], "approve": True, "digest": used["digest"]}})
            err = await ctl.wait(lambda e: e.get("event") == "error", "the refusal of a reused approval")
            check("no approval request is open" in err["error"]["message"], str(err))
            say("an approval needs its digest, clicks once, and cannot be used again")

            # 3. No answer: 60 s, progress notifications meanwhile, nothing sent.
            r = await ok(c, "get_window_state", {"app": APP})
            send = find(r, "push_button", "Send")["element_token"]
            progress: list[float] = []

            async def on_progress(p: float, total, message) -> None:
                progress.append(p)

            t0 = time.monotonic()
            res = await c.call_tool("click", {"element_token": send}, progress_callback=on_progress)
            took = time.monotonic() - t0
            env = res.structured_content
            check(res.is_error and env["error"]["code"] == "consent_denied", str(env))
            check("did not answer" in env["error"]["message"], str(env))
            check(55 <= took <= 75, f"the unanswered approval took {took:.1f} s")
            check(len(progress) >= 5, f"progress notifications while waiting: {progress}")
            check(await status(c) == "Sent 1", "an expired approval clicked nothing")
            say(f"no answer: consent_denied after {took:.0f} s, {len(progress)} progress notifications, "
                "nothing clicked")
            ctl.wait_for(lambda e: e.get("event") == "approval.request", "the unanswered request", 1)

            # 4. Typing: a search field needs no approval, another field does.
            r = await ok(c, "get_window_state", {"app": APP})
            await ok(c, "type_text", {"element_token": find(r, "text", "Search")["element_token"],
                                      "text": "maps"})
            msg = find(r, "text", "Message")["element_token"]

            async def approve_typing(req):
                check(req["reasons"] == ["typing"], str(req))
                check(req["action"]["text_len"] == len(TYPED), str(req))
                check(TYPED not in json.dumps(req), "the request does not carry the text")
                ctl.send({"method": "approval.answer",
                          "params": {"id": req["id"], "approve": True, "digest": req["digest"]}})

            req, res = await call_and_answer(c, ctl, "type_text", {"element_token": msg, "text": TYPED},
                                             approve_typing)
            check(not res.is_error, f"the approved typing: {res.structured_content}")
            say("typing into Search: no approval; into Message: approved, length only")
            await ok(c, "end_session")
        with open(broker.audit, encoding="utf-8") as f:
            audit = [json.loads(line) for line in f]
        outcomes = [e["outcome"] for e in audit if e["event"] == "approval.answer"]
        check(outcomes == ["denied", "approved", "expired", "approved"], f"audited outcomes {outcomes}")
        check(all(TYPED not in json.dumps(e) for e in audit), "the typed text is not in the audit")
        say(f"audit: {len(outcomes)} approval answers ({', '.join(outcomes)})")
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
    ns = p.parse_args()
    anyio.run(run, ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
