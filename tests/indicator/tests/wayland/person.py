"""Plays the person on the Wayland test desktop through mutter's RemoteDesktop API on the
desktop's private session bus (DBUS_SESSION_BUS_ADDRESS).

Reads commands, one a line, and answers `ok` (or `error: ...`) for each:
  move DX DY        relative pointer motion (exact in mutter: no acceleration)
  corner            to the top-left corner (a large motion up and left, clamped)
  button 1|0        left button press (1) or release (0)
  key KEYSYM 1|0    a key press or release (X keysym, decimal or 0x hex)
"""

import sys

from gi.repository import Gio, GLib

BTN_LEFT = 0x110


def main() -> None:
    bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
    rd = Gio.DBusProxy.new_sync(bus, 0, None, "org.gnome.Mutter.RemoteDesktop",
                                "/org/gnome/Mutter/RemoteDesktop",
                                "org.gnome.Mutter.RemoteDesktop", None)
    path = rd.call_sync("CreateSession", None, 0, 5000, None).unpack()[0]
    s = Gio.DBusProxy.new_sync(bus, 0, None, "org.gnome.Mutter.RemoteDesktop", path,
                               "org.gnome.Mutter.RemoteDesktop.Session", None)
    s.call_sync("Start", None, 0, 5000, None)

    def call(method: str, sig: str, *args) -> None:
        s.call_sync(method, GLib.Variant(sig, args), 0, 5000, None)

    print("ready", flush=True)
    for line in sys.stdin:
        w = line.split()
        try:
            if not w:
                continue
            if w[0] == "move":
                call("NotifyPointerMotionRelative", "(dd)", float(w[1]), float(w[2]))
            elif w[0] == "corner":
                call("NotifyPointerMotionRelative", "(dd)", -20000.0, -20000.0)
            elif w[0] == "button":
                call("NotifyPointerButton", "(ib)", BTN_LEFT, w[1] == "1")
            elif w[0] == "key":
                call("NotifyKeyboardKeysym", "(ub)", int(w[1], 0), w[2] == "1")
            else:
                raise ValueError(f"unknown command {w[0]}")
            print("ok", flush=True)
        except Exception as e:  # noqa: BLE001 - reported to the test
            print(f"error: {e}", flush=True)
    s.call_sync("Stop", None, 0, 5000, None)


if __name__ == "__main__":
    main()
