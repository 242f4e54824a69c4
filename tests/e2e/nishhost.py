"""A small MCP host for nish-driver's end-to-end tests and demos.

It starts the real broker (`nish-driver serve`), connects the real shim (`nish-mcp`) with the
official MCP Python client over stdio, gives the shim a control pipe (a socketpair on an
inherited fd), and checks every result against the contract's shapes.
"""

from __future__ import annotations

import base64
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import asynccontextmanager, contextmanager
from typing import Any, AsyncIterator, Iterator

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


# What an agent's SIGSYS handler writes (nish-sandbox's sys module) for a call outside its
# allow-list, and once it stops logging them.
SECCOMP_REFUSED = "nish-sandbox: refused system call "
SECCOMP_SILENCED = "nish-sandbox: further refused system calls not logged"

NO_CAPS = ["setpriv", "--bounding-set=-all", "--inh-caps=-all", "--ambient-caps=-all"]


class Broker:
    """`nish-driver serve` on a private socket; stopped by pid. `driver` is `nish-driver` (the
    real desktop; `backend` "linux"), or the test daemon `nish-testd`, which serves the mock
    desktop (`backend` "mock") or the real one with the tests' switches ("linux")."""

    def __init__(self, driver: str, backend: str, env: dict[str, str] | None = None,
                 no_caps: bool = False) -> None:
        """`no_caps`: the broker runs with no capabilities at all (as the person's programs do
        when the tests run as root), so that only its own defences keep other processes of
        the same uid out."""
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
        testd = os.path.basename(driver) == "nish-testd"
        check(testd or backend == "linux", f"nish-driver serves the real desktop only, not {backend}")
        self.proc = subprocess.Popen(
            (NO_CAPS if no_caps else []) + [driver, "serve"]
            + (["--backend", backend] if testd else []) + ["--socket", self.socket],
            env=e, stdout=self.log, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while not os.path.exists(self.socket):
            check(self.proc.poll() is None, f"the broker exited early: {self.log_text()}")
            check(time.monotonic() < deadline, "the broker did not listen within 30 s")
            time.sleep(0.02)

    def children(self) -> dict[str, int]:
        """The broker's running children (its agents), by program name."""
        out: dict[str, int] = {}
        for tid in os.listdir(f"/proc/{self.proc.pid}/task"):
            try:
                with open(f"/proc/{self.proc.pid}/task/{tid}/children", encoding="ascii") as f:
                    pids = [int(p) for p in f.read().split()]
            except OSError:
                continue
            for pid in pids:
                try:
                    with open(f"/proc/{pid}/comm", encoding="utf-8") as f:
                        out[f.read().strip()] = pid
                except OSError:
                    pass
        return out

    def log_text(self, tail: int | None = 4000) -> str:
        """The broker's log (its and the agents' lines): its last `tail` characters, or all."""
        self.log.flush()
        with open(os.path.join(self.dir, "broker.log"), "rb") as f:
            text = f.read().decode(errors="replace")
        return text if tail is None else text[-tail:]

    def cli(self, *args: str, expect_ok: bool = True) -> subprocess.CompletedProcess[str]:
        sock = [] if args[0] == "manifest" else ["--socket", self.socket]
        p = subprocess.run([self.driver, *args, *sock], env=self.env,
                           capture_output=True, text=True, timeout=60)
        if expect_ok:
            check(p.returncode == 0, f"nish-driver {' '.join(args)} failed: {p.stdout}{p.stderr}")
        return p

    def person(self, *args: str, timeout: float = 20.0) -> str:
        """`nish-testd person ...`, retried while the consent dialog is not up yet."""
        deadline = time.monotonic() + timeout
        while True:
            p = self.cli("person", *args, expect_ok=False)
            if p.returncode == 0:
                return p.stdout.strip()
            if "no consent dialog is open" not in p.stderr or time.monotonic() > deadline:
                raise AssertionError(f"person {args}: {p.stderr}")
            time.sleep(0.05)

    def audit_events(self) -> list[dict[str, Any]]:
        with open(self.audit, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    def stop(self) -> None:
        """Stops the broker, then fails if an agent met its seccomp allow-list during the run
        (a refused-system-call line in the broker's log, or an agent killed by SIGSYS): a
        change that makes an agent need a new system call is caught here."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()
        refused = self.seccomp_refusals()
        if not os.environ.get("NISH_KEEP_E2E_DIR"):
            shutil.rmtree(self.dir, ignore_errors=True)
        check(not refused, "an agent met its seccomp allow-list:\n" + "\n".join(refused))

    def seccomp_refusals(self) -> list[str]:
        """The broker log's lines of a system call refused by an agent's allow-list, and the
        audit's agent exits by SIGSYS (a trap with SIGSYS blocked kills the agent)."""
        out: list[str] = []
        with open(os.path.join(self.dir, "broker.log"), "rb") as f:
            for raw in f:
                line = raw.decode(errors="replace").rstrip("\n")
                if SECCOMP_REFUSED in line or SECCOMP_SILENCED in line:
                    out.append(line)
        try:
            events = self.audit_events()
        except (OSError, ValueError):
            events = []
        out.extend(json.dumps(e) for e in events
                   if e.get("event") == "agent.exit" and e.get("status") == f"signal {int(signal.SIGSYS)}")
        return out


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
               control: Control | None = None, extra: tuple[str, ...] = (),
               elicitation: Any = None) -> AsyncIterator[Any]:
    """An MCP client session with nish-mcp, negotiating `version` (`extra`: more shim flags;
    `elicitation`: the client's elicitation callback, which declares the capability)."""
    args = ["--socket", broker.socket, *extra]
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
                          read_timeout_seconds=120, elicitation_callback=elicitation) as c:
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


def error_of(r: Any) -> dict[str, Any]:
    """The error of a tool result that must have failed (its code not yet known)."""
    check(r.is_error is True, f"expected an error, got {r.structured_content}")
    return r.structured_content["error"]


async def clipboard_read(c: Any, ctl: Control, approve: bool, canaries: tuple[str, ...]) -> Any:
    """clipboard_read, the host answering its approval request on the control pipe; the
    request must carry none of `canaries` (no clipboard text reaches the host's prompt)."""
    seen: list[dict[str, Any]] = []
    failed: list[BaseException] = []

    def answer() -> None:
        try:
            ev = ctl.wait_for(lambda e: e.get("event") == "approval.request", "the approval request", 20)
            seen.append(ev)
            ctl.send({"method": "approval.answer", "params": {"id": ev["id"], "approve": approve}})
        except BaseException as e:  # noqa: BLE001 (re-raised below)
            failed.append(e)

    t = threading.Thread(target=answer)
    t.start()
    try:
        r = await c.call_tool("clipboard_read", {})
    finally:
        t.join()
    if failed:
        raise failed[0]
    check(bool(seen) and seen[0]["tool"] == "clipboard_read", f"approval request: {seen}")
    check(not any(x in json.dumps(seen[0]) for x in canaries), "the approval request carries no text")
    return r


def find(read: dict[str, Any], role: str, label: str) -> dict[str, Any]:
    for e in read["elements"]:
        if e["role"] == role and e["label"] == label:
            return e
    raise AssertionError(f"no {role} {label!r} in snapshot {read['snapshot_id']}")


# ---- the person, on a real X display -----------------------------------------------------------

def write_png(path: str, width: int, height: int, rgb: bytes) -> None:
    """A minimal PNG writer (8-bit RGB, one IDAT), so the demo needs no imaging library."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        c = struct.pack(">I", len(data)) + kind + data
        return c + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + rgb[y * width * 3:(y + 1) * width * 3] for y in range(height))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(raw, 6)))
        f.write(chunk(b"IEND", b""))


async def window_capture(c: Any, target: dict[str, Any]) -> tuple[dict[str, Any], bytes, tuple[int, int, int, bytes]]:
    """get_window_state of the window `target` names, with its capture, checked to be the
    window's own frame: the state, the PNG, and its pixels (width, height, channels, bytes)."""
    r = await c.call_tool("get_window_state", {**target, "include_screenshot": True})
    check(r.is_error is False, f"capture: {text_of(r)}")
    shot = r.structured_content
    png = base64.b64decode(next(b for b in r.content if b.type == "image").data)
    pixels = read_png(png)
    wf = shot["window"]["frame"]
    check(pixels[:2] == (wf["w"], wf["h"]), f"the image is the window's own frame: {pixels[:2]}, {wf}")
    return shot, png, pixels


def black_where(png: bytes, rect: dict, window: dict) -> bool:
    """Whether the part of a capture (of `window`) under `rect` (screen coordinates, as the
    read gives them) is black, its edge pixels left out."""
    w, hgt, ch, px = read_png(png)
    x0 = max(0, rect["x"] - window["frame"]["x"] + 1)
    y0 = max(0, rect["y"] - window["frame"]["y"] + 1)
    x1 = min(w, rect["x"] - window["frame"]["x"] + rect["w"] - 1)
    y1 = min(hgt, rect["y"] - window["frame"]["y"] + rect["h"] - 1)
    check(x1 > x0 and y1 > y0, f"rectangle {rect} is outside the capture")
    return all(px[(y * w + x) * ch:(y * w + x) * ch + 3] == b"\0\0\0"
               for y in range(y0, y1) for x in range(x0, x1, 2))


def read_png(data: bytes) -> tuple[int, int, int, bytes]:
    """Decodes a non-interlaced 8-bit RGB or RGBA PNG: (width, height, channels, pixels)."""
    import struct
    import zlib

    check(data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG")
    pos, idat, w, h, ch = 8, b"", 0, 0, 0
    while pos < len(data):
        n = struct.unpack(">I", data[pos:pos + 4])[0]
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, inter = struct.unpack(">IIBBBBB", body)
            check(depth == 8 and inter == 0 and ctype in (2, 6), f"unsupported PNG (type {ctype})")
            ch = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * ch
    out = bytearray(h * stride)
    prev = bytearray(stride)
    i = 0
    for y in range(h):
        f = raw[i]
        line = bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - ch] if x >= ch else 0
            b = prev[x]
            c = prev[x - ch] if x >= ch else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out[y * stride:(y + 1) * stride] = line
        prev = line
    return w, h, ch, bytes(out)


class Person:
    """Plays the person on the test desktop with xdotool.

    On a nested desktop (NISH_PERSON_DISPLAY set: an outer Xvfb with the desktop's Xephyr in
    it) the person's pointer and keys go to the outer display, so the desktop gets them from its
    real input devices. `attacker_xdotool` runs on the desktop itself: XTEST, what any other
    program of the session can inject (and what the consent dialog must ignore).
    """

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        outer = env.get("NISH_PERSON_DISPLAY") or os.environ.get("NISH_PERSON_DISPLAY")
        self.person_env = {**env, "DISPLAY": outer} if outer else env

    INPUT = {"mousemove", "mousemove_relative", "click", "mousedown", "mouseup", "key", "keydown",
             "keyup", "type"}

    def xdotool(self, *args: str) -> str:
        """xdotool as the person: pointer and keys from their real devices (the outer display of
        a nested desktop); window commands (search, windowactivate, ...) and `--window`
        (SendEvent) input on the desktop itself."""
        real_input = args and args[0] in self.INPUT and "--window" not in args
        return self._xdotool(self.person_env if real_input else self.env, args)

    def attacker_xdotool(self, *args: str) -> str:
        """xdotool on the desktop itself: XTEST input of another program."""
        return self._xdotool(self.env, args)

    @staticmethod
    def _xdotool(env: dict[str, str], args: tuple[str, ...]) -> str:
        p = subprocess.run(["xdotool", *args], env=env, capture_output=True, text=True, timeout=20)
        check(p.returncode == 0, f"xdotool {' '.join(args)}: {p.stderr.strip()}")
        return p.stdout

    def windows(self, name: str) -> list[int]:
        p = subprocess.run(["xdotool", "search", "--name", f"^{re.escape(name)}$"], env=self.env,
                           capture_output=True, text=True, timeout=20)
        return [int(x) for x in p.stdout.split()]

    def wait_window(self, name: str, timeout: float = 30.0) -> int:
        deadline = time.monotonic() + timeout
        while True:
            w = self.windows(name)
            if w:
                return w[0]
            check(time.monotonic() < deadline, f"no window named {name!r} within {timeout} s")
            time.sleep(0.05)

    def _display(self):
        from Xlib import display

        return display.Display(self.env["DISPLAY"])

    def geometry(self, wid: int) -> tuple[int, int, int, int]:
        """Root-relative (x, y, width, height) of any window, child windows included."""
        d = self._display()
        try:
            w = d.create_resource_object("window", wid)
            g = w.get_geometry()
            t = d.screen().root.translate_coords(w, 0, 0)

            return t.x, t.y, g.width, g.height
        finally:
            d.close()

    def pointer(self) -> tuple[int, int]:
        d = self._display()
        try:
            p = d.screen().root.query_pointer()
            return p.root_x, p.root_y
        finally:
            d.close()

    def click_window(self, wid: int) -> None:
        x, y, w, h = self.geometry(wid)
        self.click_at(x + w // 2, y + h // 2)

    def move(self, x: int, y: int) -> None:
        """Moves the person's pointer and waits until the desktop reports it there."""
        self.xdotool("mousemove", str(x), str(y))
        self._wait_pointer(x, y)

    def _wait_pointer(self, x: int, y: int) -> None:
        deadline = time.monotonic() + 5
        while self.pointer() != (x, y):
            check(time.monotonic() < deadline, f"the pointer did not reach {x},{y}")
            time.sleep(0.01)

    def click_at(self, x: int, y: int) -> None:
        """The person's left click (from their real device on a nested desktop)."""
        self.move(x, y)
        self.xdotool("click", "1")

    def attacker_click_window(self, wid: int) -> None:
        """An XTEST left click on a window's centre, as another program would inject it."""
        x, y, w, h = self.geometry(wid)
        self.attacker_xdotool("mousemove", str(x + w // 2), str(y + h // 2))
        self._wait_pointer(x + w // 2, y + h // 2)
        self.attacker_xdotool("click", "1")


    def cover(self, wid: int, click_through: bool = True):
        """Another program maps an override-redirect window over window `wid` (click-through:
        an empty input shape, so a click goes to what is under it) and keeps it on top; returns
        a function that removes it."""
        from Xlib import X
        from Xlib.ext import shape

        x, y, w, h = self.geometry(wid)
        d = self._display()
        root = d.screen().root
        win = root.create_window(x, y, w, h, 0, X.CopyFromParent, X.InputOutput, X.CopyFromParent,
                                 background_pixel=d.screen().black_pixel, override_redirect=1)
        if click_through:
            win.shape_rectangles(shape.SO.Set, shape.SK.Input, X.Unsorted, 0, 0, [])
        win.map()
        d.sync()
        stop = threading.Event()

        def fight() -> None:
            while not stop.is_set():
                win.configure(stack_mode=X.Above)
                d.sync()
                time.sleep(0.02)

        t = threading.Thread(target=fight)
        t.start()

        def remove() -> None:
            stop.set()
            t.join()
            win.unmap()
            win.destroy()
            d.sync()
            d.close()

        return remove

    def move_window_under_pointer(self, top: int, control: int) -> None:
        """Another program slides window `top` so that `control` is under the pointer."""
        px, py = self.pointer()
        cx, cy, cw, ch = self.geometry(control)
        tx, ty, _, _ = self.geometry(top)
        d = self._display()
        try:
            d.create_resource_object("window", top).configure(
                x=tx + px - (cx + cw // 2), y=ty + py - (cy + ch // 2))
            d.sync()
        finally:
            d.close()

    def read_window_text(self, wid: int, path: str, scale: int = 2) -> str:
        """What tesseract reads in a window as it is on screen (saved at `scale` times its size,
        which bitmap fonts need, to `path`)."""
        from Xlib import X

        x, y, w, h = self.geometry(wid)
        d = self._display()
        try:
            img = d.screen().root.get_image(x, y, w, h, X.ZPixmap, 0xFFFFFFFF)
        finally:
            d.close()
        data = img.data
        rows = []
        for yy in range(h):
            line = bytearray()
            for xx in range(w):
                i = (yy * w + xx) * 4
                px = bytes((data[i + 2], data[i + 1], data[i]))
                line += px * scale
            rows.append(bytes(line) * scale)
        write_png(path, w * scale, h * scale, b"".join(rows))
        p = subprocess.run(["tesseract", path, "stdout"], capture_output=True, text=True, timeout=60)
        check(p.returncode == 0, f"tesseract: {p.stderr}")
        return p.stdout

    def screenshot(self, path: str) -> None:
        from Xlib import X, display

        d = display.Display(self.env["DISPLAY"])
        root = d.screen().root
        g = root.get_geometry()
        img = root.get_image(0, 0, g.width, g.height, X.ZPixmap, 0xFFFFFFFF)
        data = img.data
        rgb = bytearray(g.width * g.height * 3)
        for i in range(g.width * g.height):
            b, gr, r = data[i * 4], data[i * 4 + 1], data[i * 4 + 2]
            rgb[i * 3:i * 3 + 3] = bytes((r, gr, b))
        d.close()
        write_png(path, g.width, g.height, bytes(rgb))


PTRACE_ATTACH = (
    "import ctypes, sys; libc = ctypes.CDLL(None, use_errno=True); "
    "r = libc.ptrace(16, int(sys.argv[1]), 0, 0); print(r, ctypes.get_errno())"
)


def ptrace_attach_as_plain_user_process(pid: int) -> tuple[int, int]:
    """PTRACE_ATTACH to `pid` from a process of the same uid with no capabilities (setpriv
    empties the bounding and inheritable sets, so even root's child has none), as any other
    program of the person would. Returns (result, errno)."""
    out = subprocess.run(
        NO_CAPS + [sys.executable, "-c", PTRACE_ATTACH, str(pid)],
        capture_output=True, text=True, timeout=20,
    )
    check(out.returncode == 0, f"the ptrace attempt ran: {out.stderr}")
    r, errno = out.stdout.split()
    return int(r), int(errno)


def check_ptrace_refused(broker: Broker) -> None:
    """A same-user process without capabilities cannot ptrace the broker (started with
    `no_caps`) or its agents (they are not dumpable), while it can ptrace an ordinary process
    of the same user and capabilities (so the attempt itself works)."""
    plain = subprocess.Popen(NO_CAPS + ["sleep", "30"])
    try:
        r, errno = ptrace_attach_as_plain_user_process(plain.pid)
        check(r == 0, f"the control attach to an ordinary process worked: {r} errno {errno}")
    finally:
        plain.kill()
        plain.wait()
    targets = {"nish-driver": broker.proc.pid, **broker.children()}
    for name in ("nish-reader", "nish-input", "nish-indicator"):
        check(name in targets, f"{name} runs under the broker: {targets}")
    for name, pid in targets.items():
        r, errno = ptrace_attach_as_plain_user_process(pid)
        check(r == -1 and errno == 1, f"ptrace of {name} ({pid}): {r} errno {errno}")
    say(f"ptrace attach refused (EPERM) to {', '.join(sorted(targets))}; allowed to a plain process")


CONNECTION_VARS = ("DBUS_SESSION_BUS_ADDRESS", "AT_SPI_BUS_ADDRESS", "DISPLAY", "XAUTHORITY",
                   "WAYLAND_DISPLAY")


def environ_of(pid: int) -> dict[str, str]:
    """The environment a process started with (/proc/<pid>/environ)."""
    with open(f"/proc/{pid}/environ", "rb") as f:
        raw = f.read()
    out: dict[str, str] = {}
    for entry in raw.split(b"\0"):
        if b"=" in entry:
            k, v = entry.split(b"=", 1)
            out[k.decode(errors="replace")] = v.decode(errors="replace")
    return out


def check_agent_environ(broker: Broker) -> None:
    """The reader, the input agent and the indicator run with no bus address, display or X
    authority in their environment (the broker hands their connections in). The broker's own
    environment has the bus and the display (so the reading works and the check can fail)."""
    mine = environ_of(broker.proc.pid)
    check("DISPLAY" in mine and "DBUS_SESSION_BUS_ADDRESS" in mine,
          f"the broker's environment has the display and the bus: {sorted(mine)}")
    kids = broker.children()
    for name in ("nish-reader", "nish-input", "nish-indicator"):
        check(name in kids, f"{name} runs under the broker: {kids}")
        env = environ_of(kids[name])
        found = [k for k in CONNECTION_VARS if k in env]
        check(not found, f"{name} ({kids[name]}) has {found} in its environment")
    say("no bus address, DISPLAY or XAUTHORITY in the reader's, the input agent's and the "
        "indicator's environments")


def check_agent_groups(broker: Broker) -> None:
    """Each agent runs in a process group of its own: a signal an agent sends its group
    (kill(0, ...)) cannot reach the broker or the other agents."""
    broker_group = os.getpgid(broker.proc.pid)
    kids = broker.children()
    for name in ("nish-reader", "nish-input", "nish-indicator"):
        check(name in kids, f"{name} runs under the broker: {kids}")
        group = os.getpgid(kids[name])
        check(group == kids[name] and group != broker_group,
              f"{name} ({kids[name]}) is in group {group}, the broker's is {broker_group}")
    say("every agent leads a process group of its own, apart from the broker's")


@contextmanager
def consent_answered(person: Person, tick: tuple[str, ...] = ()) -> Iterator[list[str]]:
    """The person answers the consent dialog while the body runs: after the dialog's arming
    delay, real clicks on the named controls (e.g. "takeover"), then on Allow. Yields a list
    that holds "allow" once clicked, or why the person could not answer."""
    answered: list[str] = []

    def answer() -> None:
        try:
            allow = person.wait_window("nish-driver consent: allow")
            # The dialog ignores clicks in its first 500 ms, and for 1.5 s after the driver's
            # own last synthetic press (a takeover session may have just acted).
            time.sleep(1.6)
            for name in tick:
                person.click_window(person.wait_window(f"nish-driver consent: {name}"))
            person.click_window(allow)
            answered.append("allow")
            say("    person (xdotool, a real click): Allow")
        except Exception as e:  # the caller's own call fails too, and says this
            answered.append(f"no answer: {e}")

    t = threading.Thread(target=answer)
    t.start()
    try:
        yield answered
    finally:
        t.join()


async def start_with_consent(c: Any, person: Person, args: dict[str, Any], tick: tuple[str, ...] = ()) -> dict[str, Any]:
    """start_session, answered by the person ([`consent_answered`])."""
    with consent_answered(person, tick) as answered:
        try:
            st = await ok(c, "start_session", args)
        except Exception as e:
            raise AssertionError(f"start_session was not answered as asked ({answered}): {e}") from e
    check(answered == ["allow"], f"the person's answer: {answered}")
    return st
