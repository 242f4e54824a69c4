"""A program of the person's that forges KWin's answer about its windows: it finds the
broker's connections on the session bus (by the broker's pid), keeps asking them what objects
they serve under /org/nishdriver/KwinScene (D-Bus introspection: the broker's answer method
lives there, at a random path, while it waits for KWin) and calls each one it finds
(org.nishdriver.KwinScene.Scene) with a scene of its own: the form's window 50 px lower than it is, and
the pointer already there, so that a click taken from it would land 50 px below the point the
driver meant. The broker must take KWin's answer only.

usage: forged_kwin_scene.py BROKER_PID FORM_PID

Prints `ready` once it found the broker's connections, then `calls N` every second (calls
made, answered without an error: the method was there and took the call).
"""

import json
import re
import sys
import time

from gi.repository import Gio, GLib

broker, form = int(sys.argv[1]), int(sys.argv[2])
bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)


def dbus(method, args):
    return bus.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                         method, args, None, 0, 1000, None).unpack()


names = []
for n in dbus("ListNames", None)[0]:
    if not n.startswith(":"):
        continue
    try:
        if dbus("GetConnectionUnixProcessID", GLib.Variant("(s)", (n,)))[0] == broker:
            names.append(n)
    except GLib.Error:
        pass


def answers(name):
    """Whether the connection answers at all (an error is an answer): one that reads no
    calls cannot be the broker's answer method's, and would hold the loop up."""
    try:
        bus.call_sync(name, "/", "org.freedesktop.DBus.Peer", "Ping", None, None, 0, 300, None)
        return True
    except GLib.Error as e:
        return "Timeout" not in str(e) and "timed out" not in str(e).lower()


names = [n for n in names if answers(n)]
full = {"x": 0, "y": 50, "w": 1280, "h": 800}
# In the broker's schema (all but the nonce of the broker's script, which it cannot know).
scene = json.dumps({"windows": [{"pid": form, "caption": "nish-driver GTK 4 form", "frame": full,
                                 "buffer": full, "stacking": 99, "minimized": False, "here": True}],
                    "screen": {"x": 0, "y": 0, "w": 1280, "h": 900}, "cursor": [0, 0]})
print("ready", len(names), flush=True)
made = taken = 0
last = time.monotonic()
NODE = re.compile(r'<node name="([^"]+)"')
while True:
    for name in names:
        try:
            xml = bus.call_sync(name, "/org/nishdriver/KwinScene", "org.freedesktop.DBus.Introspectable",
                                "Introspect", None, GLib.VariantType("(s)"), 0, 300, None).unpack()[0]
        except GLib.Error:
            continue
        for node in NODE.findall(xml):
            made += 1
            try:
                bus.call_sync(name, f"/org/nishdriver/KwinScene/{node}", "org.nishdriver.KwinScene",
                              "Scene", GLib.Variant("(s)", (scene,)), None, 0, 300, None)
                taken += 1
            except GLib.Error:
                pass
    if time.monotonic() - last > 1:
        print("calls", made, taken, flush=True)
        last = time.monotonic()
