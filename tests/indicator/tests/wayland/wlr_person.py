"""Plays the person on a wlroots compositor (sway) through its virtual-pointer protocol
(`zwlr_virtual_pointer_manager_v1`), the way a pointer device's events arrive: a plain Wayland
client of the compositor at $XDG_RUNTIME_DIR/$WAYLAND_DISPLAY, speaking the wire protocol
itself (no Wayland library is needed for these few requests).

Reads the commands of person.py (mutter's), one a line, and answers `ok` (or `error: ...`):
  move DX DY        pointer motion by DX, DY (sent as an absolute position on the output)
  corner            to the top-left corner
  button 1|0        left button press (1) or release (0)
Each command ends with a round trip: a protocol error the compositor sends is reported.
"""

import os
import socket
import struct
import sys
import time

BTN_LEFT = 0x110
# The output the test desktop configures (tests/src/wayland.rs, sway's config).
EXTENT = (1280, 800)


class Wire:
    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.next_id = 2
        self.buf = b""
        self.globals: dict[str, tuple[int, int]] = {}
        self.done: set[int] = set()

    def new_id(self) -> int:
        n = self.next_id
        self.next_id += 1
        return n

    def send(self, obj: int, opcode: int, args: bytes = b"") -> None:
        self.sock.sendall(struct.pack("<II", obj, ((8 + len(args)) << 16) | opcode) + args)

    @staticmethod
    def string(s: str) -> bytes:
        b = s.encode() + b"\0"
        return struct.pack("<I", len(b)) + b + b"\0" * (-len(b) % 4)

    def roundtrip(self) -> None:
        cb = self.new_id()
        self.send(1, 0, struct.pack("<I", cb))  # wl_display.sync
        while cb not in self.done:
            self.read_event()

    def read_event(self) -> None:
        while len(self.buf) < 8:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("the compositor closed the connection")
            self.buf += chunk
        obj, word = struct.unpack_from("<II", self.buf)
        size, opcode = word >> 16, word & 0xFFFF
        while len(self.buf) < size:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("the compositor closed the connection")
            self.buf += chunk
        body, self.buf = self.buf[8:size], self.buf[size:]
        if obj == 1 and opcode == 0:  # wl_display.error
            oid, code, n = struct.unpack_from("<III", body)
            msg = body[12:12 + n - 1].decode(errors="replace")
            raise RuntimeError(f"protocol error on object {oid} (code {code}): {msg}")
        if obj == self.registry and opcode == 0:  # wl_registry.global
            name, n = struct.unpack_from("<II", body)
            iface = body[8:8 + n - 1].decode()
            (version,) = struct.unpack_from("<I", body, 8 + n + (-n % 4))
            self.globals[iface] = (name, version)
        elif obj >= 2 and opcode == 0 and len(body) == 4:  # wl_callback.done (and alike)
            self.done.add(obj)

    def start(self) -> None:
        self.registry = self.new_id()
        self.send(1, 1, struct.pack("<I", self.registry))  # wl_display.get_registry
        self.roundtrip()

    def bind(self, iface: str, version: int) -> int:
        if iface not in self.globals:
            raise RuntimeError(f"the compositor offers no {iface}")
        name, have = self.globals[iface]
        oid = self.new_id()
        args = struct.pack("<I", name) + self.string(iface) + struct.pack("<II", min(version, have), oid)
        self.send(self.registry, 0, args)
        return oid


def now_ms() -> int:
    return int(time.monotonic() * 1000) & 0xFFFFFFFF


def main() -> None:
    path = os.path.join(os.environ["XDG_RUNTIME_DIR"], os.environ["WAYLAND_DISPLAY"])
    w = Wire(path)
    w.start()
    seat = w.bind("wl_seat", 1)
    manager = w.bind("zwlr_virtual_pointer_manager_v1", 1)
    pointer = w.new_id()
    w.send(manager, 0, struct.pack("<II", seat, pointer))  # create_virtual_pointer
    w.roundtrip()
    at = [0.0, 0.0]

    def absolute() -> None:
        x = round(min(max(at[0], 0), EXTENT[0] - 1))
        y = round(min(max(at[1], 0), EXTENT[1] - 1))
        w.send(pointer, 1, struct.pack("<IIIII", now_ms(), x, y, *EXTENT))  # motion_absolute
        w.send(pointer, 4)  # frame

    print("ready", flush=True)
    for line in sys.stdin:
        words = line.split()
        try:
            if not words:
                continue
            if words[0] == "move":
                at[0] += float(words[1])
                at[1] += float(words[2])
                absolute()
            elif words[0] == "corner":
                at[0], at[1] = 0.0, 0.0
                absolute()
            elif words[0] == "button":
                w.send(pointer, 2, struct.pack("<III", now_ms(), BTN_LEFT, 1 if words[1] == "1" else 0))
                w.send(pointer, 4)  # frame
            else:
                raise ValueError(f"unknown command {words[0]}")
            w.roundtrip()
            print("ok", flush=True)
        except Exception as e:  # noqa: BLE001 - reported to the test
            print(f"error: {e}", flush=True)
    w.send(pointer, 8)  # destroy
    w.roundtrip()


if __name__ == "__main__":
    main()
