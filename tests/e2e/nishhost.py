"""A small MCP host for nish-driver's end-to-end tests and demos.

It starts the real broker (`nish-driver serve`), connects the real shim (`nish-mcp`) with the
official MCP Python client over stdio, gives the shim a control pipe (a socketpair on an
inherited fd), and checks every result against the contract's shapes.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import anyio
import mcp.client.session as mcp_session
import mcp.client.stdio as mcp_stdio
from mcp import Client, StdioServerParameters
from mcp_types import Implementation

ERROR_TEXT = re.compile(r"^([a-z_]+): (.+) \[retry: (safe|unsafe|after_refresh|never)\] (.+)$", re.S)
VERBOSE = True


def say(msg: str) -> None:
    if VERBOSE:
        print(msg, flush=True)


def check(cond: bool, msg: str) -> None:
    if not cond:
        raise AssertionError(msg)


class Broker:
    """`nish-driver serve` on a private socket; stopped by pid."""

    def __init__(self, driver: str, backend: str, env: dict[str, str] | None = None) -> None:
        self.driver = driver
        self.dir = tempfile.mkdtemp(prefix="nish-e2e-")
        self.socket = os.path.join(self.dir, "run", "broker.sock")
        self.audit = os.path.join(self.dir, "audit.jsonl")
        e = dict(os.environ)
        e.update(env or {})
        e["NISH_AUDIT_FILE"] = self.audit
        e.setdefault("NISH_LOG", "info")
        e.pop("NOTIFY_SOCKET", None)
        self.env = e
        self.log = open(os.path.join(self.dir, "broker.log"), "wb")
        self.proc = subprocess.Popen(
            [driver, "serve", "--backend", backend, "--socket", self.socket],
            env=e, stdout=self.log, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while not os.path.exists(self.socket):
            check(self.proc.poll() is None, f"the broker exited early: {self.log_text()}")
            check(time.monotonic() < deadline, "the broker did not listen within 30 s")
            time.sleep(0.02)

    def log_text(self) -> str:
        self.log.flush()
        with open(os.path.join(self.dir, "broker.log"), "rb") as f:
            return f.read().decode(errors="replace")[-4000:]

    def cli(self, *args: str, expect_ok: bool = True) -> subprocess.CompletedProcess[str]:
        sock = [] if args[0] in ("manifest", "doctor") else ["--socket", self.socket]
        p = subprocess.run([self.driver, *args, *sock], env=self.env,
                           capture_output=True, text=True, timeout=60)
        if expect_ok:
            check(p.returncode == 0, f"nish-driver {' '.join(args)} failed: {p.stdout}{p.stderr}")
        return p

    def person(self, *args: str, timeout: float = 20.0) -> str:
        """`nish-driver mock-person ...`, retried while the consent dialog is not up yet."""
        deadline = time.monotonic() + timeout
        while True:
            p = self.cli("mock-person", *args, expect_ok=False)
            if p.returncode == 0:
                return p.stdout.strip()
            if "no consent dialog is open" not in p.stderr or time.monotonic() > deadline:
                raise AssertionError(f"mock-person {args}: {p.stderr}")
            time.sleep(0.05)

    def audit_events(self) -> list[dict[str, Any]]:
        with open(self.audit, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()
        if not os.environ.get("NISH_KEEP_E2E_DIR"):
            shutil.rmtree(self.dir, ignore_errors=True)


class Control:
    """The host's end of the shim's control pipe: verbs out, events and acks in."""

    def __init__(self) -> None:
        self.host, self.shim = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.buf = b""
        self.pending: list[dict[str, Any]] = []

    def send(self, obj: dict[str, Any]) -> None:
        self.host.sendall(json.dumps(obj).encode() + b"\n")

    def _read(self, timeout: float) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.host], [], [], left)
            if ready:
                chunk = self.host.recv(65536)
                check(chunk != b"", "the control pipe closed")
                self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return json.loads(line)

    def wait_for(self, pred, what: str, timeout: float = 15.0) -> dict[str, Any]:
        for i, ev in enumerate(self.pending):
            if pred(ev):
                return self.pending.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            ev = self._read(max(0.0, deadline - time.monotonic()))
            check(ev is not None, f"no control line for {what} within {timeout} s")
            if pred(ev):
                return ev
            self.pending.append(ev)

    async def wait(self, pred, what: str, timeout: float = 15.0) -> dict[str, Any]:
        return await anyio.to_thread.run_sync(lambda: self.wait_for(pred, what, timeout))


def _spawn_with(fds: tuple[int, ...]):
    """The SDK spawns the server without pass_fds; pass the control fd through."""
    original = mcp_stdio._create_platform_compatible_process  # type: ignore[attr-defined]

    async def spawn(command, args, env=None, errlog=sys.stderr, cwd=None):  # type: ignore[no-untyped-def]
        return await anyio.open_process(
            [command, *args], env=env, stderr=errlog, cwd=cwd, start_new_session=True, pass_fds=fds
        )

    mcp_stdio._create_platform_compatible_process = spawn  # type: ignore[attr-defined]
    return original


@asynccontextmanager
async def host(shim: str, broker: Broker, name: str, version: str = "2025-11-25",
               control: Control | None = None) -> AsyncIterator[Any]:
    """An MCP client session with nish-mcp, negotiating `version`."""
    args = ["--socket", broker.socket]
    fds: tuple[int, ...] = ()
    if control is not None:
        args += ["--control-fd", str(control.shim.fileno())]
        fds = (control.shim.fileno(),)
    if version == "2026-07-28":
        mode = "auto"
    else:
        mode = "legacy"
        mcp_session.LATEST_HANDSHAKE_VERSION = version  # type: ignore[misc]
    params = StdioServerParameters(command=shim, args=args, env={**broker.env, "NISH_LOG": "warn"})
    original = _spawn_with(fds)
    try:
        async with Client(params, mode=mode, client_info=Implementation(name=name, version="1.0"),
                          read_timeout_seconds=120) as c:
            if control is not None:
                control.shim.close()
            check(c.protocol_version == version, f"negotiated {c.protocol_version}, wanted {version}")
            yield c
    finally:
        mcp_stdio._create_platform_compatible_process = original  # type: ignore[attr-defined]


def text_of(result: Any) -> str:
    texts = [c.text for c in result.content if c.type == "text"]
    check(len(texts) == 1, f"expected one text block, got {result.content}")
    return texts[0]


async def ok(c: Any, tool: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    r = await c.call_tool(tool, args or {})
    check(r.is_error is False, f"{tool} failed: {text_of(r)}")
    sc = r.structured_content
    check(sc.get("ok") is True, f"{tool}: {sc}")
    return sc


async def fails(c: Any, tool: str, args: dict[str, Any] | None, code: str) -> dict[str, Any]:
    """Calls a tool that must fail with `code`; checks the envelope and the text form."""
    r = await c.call_tool(tool, args or {})
    check(r.is_error is True, f"{tool} should fail with {code}, got {r.structured_content}")
    env = r.structured_content
    check(env["ok"] is False, str(env))
    err = env["error"]
    check(err["code"] == code, f"{tool}: wanted {code}, got {err['code']}: {err['message']}")
    for k in ("message", "disposition", "suggestion"):
        check(k in err, f"{tool}: envelope lacks {k}")
    check(err["disposition"]["retry"] in ("safe", "unsafe", "after_refresh", "never"), str(err))
    t = text_of(r)
    m = ERROR_TEXT.match(t)
    check(m is not None, f"{tool}: text form {t!r}")
    check(t == f"{err['code']}: {err['message']} [retry: {err['disposition']['retry']}] {err['suggestion']}",
          f"{tool}: text {t!r} does not render the envelope")
    say(f"    refused as expected: {t}")
    return err


def find(read: dict[str, Any], role: str, label: str) -> dict[str, Any]:
    for e in read["elements"]:
        if e["role"] == role and e["label"] == label:
            return e
    raise AssertionError(f"no {role} {label!r} in snapshot {read['snapshot_id']}")
