#!/usr/bin/env python3
"""Drives the real nish-mcp binary as an MCP host would, with the official MCP Python client.

Run by mcp-shim/tests/shim.rs, which starts a fake broker first. The fake broker answers:
  get_window_state -> success with one image/png (bytes 0..255) and structured {"ok", "snapshot_id"}
  click            -> the requires_takeover error envelope (with an escalation)
  no_such_tool     -> the invalid_arguments envelope (an unknown tool still reaches the broker)
  fake.drop        -> closes the connection without answering
  fake.shutdown    -> closes the connection and stops listening (the broker is gone)
  start_session    -> pushes a takeover.paused event, then answers like any other tool
  any other tool   -> success {"ok": true, "tool", "args", "session"}, text "<tool> ok";
                      with args.hold_until = M it answers only after it has sent the result of
                      the call with args.marker = M
  a control line   -> pushes {"event": "ack", "method": <the line's method>, "resumed": [session]}

Each scenario raises AssertionError on a mismatch; the exit status is what the Rust test reads.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import select
import socket
import subprocess
import sys
import time
from typing import Any

import anyio
import mcp.client.session as mcp_session
import mcp.client.stdio as mcp_stdio
from mcp import Client, StdioServerParameters
from mcp_types import Implementation

IMAGE_BYTES = bytes(range(256))
ERROR_TEXT = re.compile(r"^([a-z_]+): (.+) \[retry: (safe|unsafe|after_refresh|never)\] (.+\.)$")


def check(cond: bool, msg: str) -> None:
    if not cond:
        raise AssertionError(msg)


class Ctx:
    def __init__(self, ns: argparse.Namespace) -> None:
        self.shim: str = ns.shim
        self.socket: str = ns.socket
        self.server_version: str = ns.server_version
        self.contract_version: str = ns.contract_version
        with open(ns.tools_file, encoding="utf-8") as f:
            self.expected_tools: list[dict[str, Any]] = json.load(f)

    def params(self, extra: list[str] | None = None) -> StdioServerParameters:
        return StdioServerParameters(
            command=self.shim,
            args=["--socket", self.socket, *(extra or [])],
            env={"NISH_LOG": "debug"},
        )


def host_name(tag: str) -> str:
    return f"nish-test-{tag}"


def client(ctx: Ctx, version: str, tag: str, extra: list[str] | None = None) -> Client:
    """An official-SDK client that negotiates `version`.

    mcp 2.3 offers only its newest handshake version (2025-11-25) in mode="legacy" and has no
    public setting for an older one; 2025-06-18 is selected by setting the module constant the
    session reads when it builds the initialize request. 2026-07-28 is reached by mode="auto",
    which probes server/discover.
    """
    if version == "2026-07-28":
        mode = "auto"
    else:
        mode = "legacy"
        mcp_session.LATEST_HANDSHAKE_VERSION = version  # type: ignore[misc]
    return Client(
        ctx.params(extra),
        mode=mode,
        client_info=Implementation(name=host_name(tag), version="1.0"),
        read_timeout_seconds=30,
    )


def tool_dump(tool: Any) -> dict[str, Any]:
    return tool.model_dump(by_alias=True, exclude_unset=True, mode="json")


def check_tools(ctx: Ctx, tools: list[Any], where: str) -> None:
    tools = [t if isinstance(t, dict) else tool_dump(t) for t in tools]
    names = [t["name"] for t in tools]
    want = [t["name"] for t in ctx.expected_tools]
    check(names == want, f"{where}: tool names {names} != {want}")
    check(len(tools) == len(ctx.expected_tools), f"{where}: {len(tools)} tools")
    for got, exp in zip(tools, ctx.expected_tools):
        d = got
        check("outputSchema" not in d, f"{where}: {d['name']} advertises an outputSchema")
        for key in ("name", "title", "description", "inputSchema", "annotations"):
            check(d.get(key) == exp[key], f"{where}: {exp['name']}.{key} differs: {d.get(key)!r} != {exp[key]!r}")


def text_of(result: Any) -> str:
    texts = [c.text for c in result.content if c.type == "text"]
    check(len(texts) == 1, f"expected one text block, got {result.content}")
    return texts[0]


async def sdk_scenario(ctx: Ctx, version: str) -> None:
    tag = f"sdk-{version}"
    async with client(ctx, version, tag) as c:
        check(c.protocol_version == version, f"negotiated {c.protocol_version}, wanted {version}")
        check(c.server_info is not None, "no server info")
        check(c.server_info.name == "nish-driver", f"server name {c.server_info.name}")
        check(c.server_info.version == ctx.server_version, f"server version {c.server_info.version}")
        res = c.session.initialize_result or c.session.discover_result
        meta = (res.meta if res is not None else None) or {}
        check(meta.get("contract_version") == ctx.contract_version, f"contract version in _meta: {meta}")
        check(ctx.contract_version in (c.server_info.description or ""), str(c.server_info))

        tools = (await c.list_tools()).tools
        check_tools(ctx, tools, tag)

        args = {"app": "Text Editor \u2713", "marker": f"{tag}-1", "nested": {"n": [1, 2.5, None, True]}}
        r = await c.call_tool("list_windows", args)
        check(r.is_error is False, f"list_windows failed: {r}")
        check(r.structured_content["tool"] == "list_windows", str(r.structured_content))
        check(r.structured_content["args"] == args, f"args not forwarded intact: {r.structured_content}")
        check(r.structured_content["session"] == f"mcp:{host_name(tag)}:1", str(r.structured_content))
        check(text_of(r) == "list_windows ok", text_of(r))

        r = await c.call_tool("get_session_state")
        check(r.is_error is False and r.structured_content["args"] == {}, f"missing arguments: {r}")

        r = await c.call_tool("get_window_state", {"window_id": 5})
        check(r.is_error is False, f"get_window_state: {r}")
        check(r.structured_content == {"ok": True, "snapshot_id": "s1"}, str(r.structured_content))
        images = [b for b in r.content if b.type == "image"]
        check(len(images) == 1, f"images: {r.content}")
        check(images[0].mime_type == "image/png", images[0].mime_type)
        check(base64.b64decode(images[0].data, validate=True) == IMAGE_BYTES, "image bytes differ")
        check(text_of(r) == "snapshot s1", text_of(r))

        r = await c.call_tool("click", {"element": "s1:4"})
        check(r.is_error is True, f"click should fail: {r}")
        err = r.structured_content["error"]
        check(r.structured_content["ok"] is False, str(r.structured_content))
        check(err["code"] == "requires_takeover", str(err))
        check(err["disposition"] == {"retry": "never"}, str(err))
        check(err["escalation"] == {"recommend": "takeover", "reason": "no_accessible_action"}, str(err))
        m = ERROR_TEXT.match(text_of(r))
        check(m is not None and m.group(1) == "requires_takeover" and m.group(3) == "never", text_of(r))

        r = await c.call_tool("no_such_tool", {"x": 1})
        check(r.is_error is True, f"unknown tool: {r}")
        check(r.structured_content["error"]["code"] == "invalid_arguments", str(r.structured_content))
        check("no_such_tool" in r.structured_content["error"]["message"], str(r.structured_content))

        # Concurrency: the broker holds A until it has sent B's result. A shim that serialized
        # calls would not send B while A waits, and A would fail at the broker's hold limit.
        # Each result carrying its own call's marker shows results are routed by id.
        done: list[str] = []
        results: dict[str, Any] = {}

        async def call(marker: str, hold: str | None) -> None:
            a: dict[str, Any] = {"marker": marker}
            if hold:
                a["hold_until"] = hold
            results[marker] = await c.call_tool("list_windows", a)
            done.append(marker)

        a_mark, b_mark = f"{tag}-A", f"{tag}-B"
        started = time.monotonic()
        async with anyio.create_task_group() as tg:
            tg.start_soon(call, a_mark, b_mark)
            await anyio.sleep(1.0)  # so that A is surely on the wire first
            tg.start_soon(call, b_mark, None)
        for mk in (a_mark, b_mark):
            res = results[mk]
            check(res.is_error is False, f"{mk}: {res}")
            check(res.structured_content["args"]["marker"] == mk, f"{mk} got another call's result: {res}")
        # (Which of the two responses the client sees first is not fixed: the broker sends B's
        # result before releasing A, but the two MCP responses are written by separate tasks.)
        check(sorted(done) == sorted([a_mark, b_mark]), f"completed: {done}")
        check(time.monotonic() - started < 9, "the held call waited for the broker's limit")
    print(f"ok {tag}", flush=True)


class Raw:
    """Plain JSON-RPC lines over the shim's stdio, for checking exact wire shapes."""

    def __init__(self, ctx: Ctx) -> None:
        env = dict(os.environ, NISH_LOG="debug")
        self.p = subprocess.Popen(
            [ctx.shim, "--socket", ctx.socket],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        self.next_id = 1

    def send(self, msg: dict[str, Any]) -> None:
        assert self.p.stdin
        self.p.stdin.write((json.dumps(msg) + "\n").encode())
        self.p.stdin.flush()

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        rid = self.next_id
        self.next_id += 1
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        assert self.p.stdout
        while True:
            line = self.p.stdout.readline()
            check(line != b"", f"shim closed stdout while waiting for {method}")
            reply = json.loads(line)
            if reply.get("id") == rid:
                return reply

    def close(self) -> None:
        assert self.p.stdin
        self.p.stdin.close()
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            raise AssertionError("shim did not exit after stdin closed")
        check(self.p.returncode == 0, f"shim exit status {self.p.returncode}")


def raw_scenario(ctx: Ctx, version: str) -> None:
    tag = f"raw-{version}"
    raw = Raw(ctx)
    client_info = {"name": host_name(tag), "version": "1.0"}
    meta: dict[str, Any] | None = None
    if version == "2026-07-28":
        meta = {
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": client_info,
        }
        r = raw.request("server/discover", {"_meta": meta})
        res = r.get("result")
        check(res is not None, f"discover: {r}")
        check(version in res["supportedVersions"], f"discover versions {res['supportedVersions']}")
        check("tools" in res["capabilities"], str(res))
        server_info = res["_meta"]["io.modelcontextprotocol/serverInfo"]
        check(res["_meta"].get("contract_version") == ctx.contract_version, f"discover _meta: {res['_meta']}")
    else:
        r = raw.request(
            "initialize", {"protocolVersion": version, "capabilities": {}, "clientInfo": client_info}
        )
        res = r.get("result")
        check(res is not None, f"initialize: {r}")
        check(res["protocolVersion"] == version, f"negotiated {res['protocolVersion']}")
        server_info = res["serverInfo"]
        check(res["_meta"]["contract_version"] == ctx.contract_version, f"initialize _meta: {res}")
        raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    check(server_info["name"] == "nish-driver", str(server_info))
    check(server_info["version"] == ctx.server_version, str(server_info))

    def with_meta(p: dict[str, Any]) -> dict[str, Any]:
        return {**p, "_meta": meta} if meta else p

    r = raw.request("tools/list", with_meta({}))
    check("result" in r, f"tools/list: {r}")
    check_tools(ctx, r["result"]["tools"], tag)

    args = {"marker": f"{tag}-1", "text": "line one\nline \"two\""}
    r = raw.request("tools/call", with_meta({"name": "type_text", "arguments": args}))
    res = r.get("result")
    check(res is not None, f"tools/call: {r}")
    check(res["isError"] is False, str(res))
    check(res["structuredContent"]["args"] == args, str(res))
    check(res["content"] == [{"type": "text", "text": "type_text ok"}], str(res["content"]))
    if version == "2026-07-28":
        check(res.get("resultType") == "complete", f"2026-07-28 result without resultType: {res}")
    else:
        check("resultType" not in res, f"legacy result carries resultType: {res}")

    r = raw.request("tools/call", with_meta({"name": "click", "arguments": {"element": "s1:2"}}))
    res = r["result"]
    check(res["isError"] is True and res["structuredContent"]["error"]["code"] == "requires_takeover", str(res))
    raw.close()
    print(f"ok {tag}", flush=True)


def with_fds(fds: tuple[int, ...]):
    """The SDK's stdio_client spawns the server with anyio.open_process and no pass_fds, so an
    inherited control descriptor would be closed. Wrap its spawn helper to pass `fds` through;
    everything else about the spawn stays the SDK's own."""
    original = mcp_stdio._create_platform_compatible_process  # type: ignore[attr-defined]

    async def spawn(command, args, env=None, errlog=sys.stderr, cwd=None):  # type: ignore[no-untyped-def]
        return await anyio.open_process(
            [command, *args], env=env, stderr=errlog, cwd=cwd, start_new_session=True, pass_fds=fds
        )

    mcp_stdio._create_platform_compatible_process = spawn  # type: ignore[attr-defined]
    return original


class HostSide:
    """The host's end of the control pipe: write verbs, read event lines (bounded waits)."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd = read_fd
        self.write_fd = write_fd
        self.buf = b""

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self.write_fd, view)
            view = view[n:]

    def read_line(self, what: str, timeout: float = 15.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            check(left > 0, f"no control output line for {what} within {timeout} s")
            ready, _, _ = select.select([self.read_fd], [], [], left)
            if ready:
                chunk = os.read(self.read_fd, 65536)
                check(chunk != b"", f"control output closed while waiting for {what}")
                self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        try:
            return json.loads(line)
        except ValueError as e:
            raise AssertionError(f"{what}: not JSON: {line[:200]!r}") from e

    async def line(self, what: str) -> dict[str, Any]:
        return await anyio.to_thread.run_sync(self.read_line, what)


async def control_scenario(ctx: Ctx, kind: str) -> None:
    """The host passes --control-fd: verbs go to the broker, events come back."""
    tag = f"control-{kind}"
    if kind == "socketpair":
        host_end, shim_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        shim_fds: tuple[int, ...] = (shim_end.fileno(),)
        arg = str(shim_end.fileno())
        host = HostSide(host_end.fileno(), host_end.fileno())

        def close_shim_side() -> None:
            shim_end.close()

        def end_verbs() -> None:
            host_end.shutdown(socket.SHUT_WR)

    elif kind == "pipes":
        verbs_r, verbs_w = os.pipe()
        events_r, events_w = os.pipe()
        shim_fds = (verbs_r, events_w)
        arg = f"{verbs_r}:{events_w}"
        host = HostSide(events_r, verbs_w)

        def close_shim_side() -> None:
            os.close(verbs_r)
            os.close(events_w)

        def end_verbs() -> None:
            os.close(verbs_w)

    else:
        raise SystemExit(f"unknown control kind {kind}")

    session = f"mcp:{host_name(tag)}:1"
    original = with_fds(shim_fds)
    try:
        async with client(ctx, "2025-11-25", tag, ["--control-fd", arg]) as c:
            close_shim_side()  # the shim holds its own copies; ours would hide end-of-file

            # A verb before any tool call: the shim connects to forward it.
            host.write(b'{"method":"takeover.resume"}\n')
            ev = await host.line("the takeover.resume ack")
            check(ev == {"event": "ack", "method": "takeover.resume", "resumed": [session]}, str(ev))

            # A line over 16 KiB is discarded with an error line; the next line still goes through.
            host.write(b'{"method":"' + b"x" * 20000 + b'"}\n')
            ev = await host.line("the long-line error")
            check(ev.get("event") == "error", str(ev))
            check(ev["error"]["code"] == "invalid_arguments", str(ev))
            check(ev["error"]["disposition"] == {"retry": "never"}, str(ev))
            check("16384" in ev["error"]["message"], str(ev))
            host.write(b'{"method":"session.revoke"}\r\n')
            ev = await host.line("the session.revoke ack")
            check(ev == {"event": "ack", "method": "session.revoke", "resumed": [session]}, str(ev))

            # An event the broker pushes during a call reaches the host.
            r = await c.call_tool("start_session", {"input": "takeover"})
            check(r.is_error is False, str(r))
            ev = await host.line("the takeover.paused event")
            check(ev == {"event": "takeover.paused", "session": session, "reason": "pointer_moved", "at_ms": 1}, str(ev))

            # End of the host's verbs stops reading only: calls and events keep working.
            end_verbs()
            await anyio.sleep(0.2)
            r = await c.call_tool("start_session", {"input": "headless"})
            check(r.is_error is False, str(r))
            ev = await host.line("an event after the verbs ended")
            check(ev.get("event") == "takeover.paused", str(ev))
    finally:
        mcp_stdio._create_platform_compatible_process = original  # type: ignore[attr-defined]
    print(f"ok {tag}", flush=True)


async def down_scenario(ctx: Ctx) -> None:
    """No broker at the socket: tools/list still answers, a call returns the envelope."""
    for version in ("2025-11-25", "2026-07-28"):
        tag = f"down-{version}"
        async with client(ctx, version, tag) as c:
            check_tools(ctx, (await c.list_tools()).tools, tag)
            for attempt in range(2):
                r = await c.call_tool("list_windows", {"marker": f"{tag}-{attempt}"})
                check(r.is_error is True, f"{tag}: {r}")
                env = r.structured_content
                check(env["ok"] is False, str(env))
                err = env["error"]
                check(err["code"] == "backend_unavailable", str(err))
                check(err["message"] == "the nish-driver broker is not reachable", str(err))
                check(err["disposition"] == {"retry": "unsafe"}, str(err))
                check(err["suggestion"] == "Ask the person to run nish-driver doctor and follow its next steps.", str(err))
                m = ERROR_TEXT.match(text_of(r))
                check(m is not None, f"text form: {text_of(r)!r}")
                check(m.group(1) == "backend_unavailable" and m.group(3) == "unsafe", text_of(r))
                check(text_of(r) == f"backend_unavailable: {err['message']} [retry: unsafe] {err['suggestion']}", text_of(r))
        print(f"ok {tag}", flush=True)


async def reconnect_scenario(ctx: Ctx) -> None:
    """The broker drops the connection mid-call, then goes away entirely."""
    tag = "reconnect"
    async with client(ctx, "2025-11-25", tag) as c:
        r = await c.call_tool("list_windows", {"marker": "r1"})
        check(r.is_error is False and r.structured_content["session"] == f"mcp:{host_name(tag)}:1", str(r))

        r = await c.call_tool("fake.drop", {})
        check(r.is_error is True, str(r))
        err = r.structured_content["error"]
        check(err["code"] == "backend_unavailable", str(err))
        check("lost during the call" in err["message"] and "start_session" in err["message"], str(err))

        # The next call connects again and lands in a new session.
        r = await c.call_tool("list_windows", {"marker": "r2"})
        check(r.is_error is False, str(r))
        check(r.structured_content["session"] == f"mcp:{host_name(tag)}:2", str(r.structured_content))

        # Now the broker goes away: the call in flight and the next one both say so.
        r = await c.call_tool("fake.shutdown", {})
        check(r.is_error is True and "lost during the call" in r.structured_content["error"]["message"], str(r))
        r = await c.call_tool("list_windows", {"marker": "r3"})
        check(r.is_error is True, str(r))
        err = r.structured_content["error"]
        check(err["code"] == "backend_unavailable", str(err))
        check(err["message"].startswith("the nish-driver broker is not reachable"), str(err))
        check("earlier connection was lost" in err["message"], str(err))
    print(f"ok {tag}", flush=True)


async def main_async(ctx: Ctx, scenarios: list[str]) -> None:
    for s in scenarios:
        kind, _, arg = s.partition(":")
        if kind == "sdk":
            await sdk_scenario(ctx, arg)
        elif kind == "raw":
            raw_scenario(ctx, arg)
        elif kind == "control":
            await control_scenario(ctx, arg)
        elif kind == "down":
            await down_scenario(ctx)
        elif kind == "reconnect":
            await reconnect_scenario(ctx)
        else:
            raise SystemExit(f"unknown scenario {s}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shim", required=True)
    ap.add_argument("--socket", required=True)
    ap.add_argument("--tools-file", required=True)
    ap.add_argument("--server-version", required=True)
    ap.add_argument("--contract-version", required=True)
    ap.add_argument("scenarios", nargs="+")
    ns = ap.parse_args()
    anyio.run(main_async, Ctx(ns), ns.scenarios)
    return 0


if __name__ == "__main__":
    sys.exit(main())
