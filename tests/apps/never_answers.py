#!/usr/bin/env python3
"""An application that registers on the accessibility bus and then never answers.

    never_answers.py [--title TEXT] [--name BUS.NAME] [--no-window]

It connects to the accessibility bus (its address from org.a11y.Bus on the session bus), owns
a well-known name (default org.nish.NeverAnswers), registers with the registry through the
socket's Embed as every toolkit does, and from then on drops every method call it receives:
no reply, no error, as a hung application behaves. It maps a plain X window (title default
"nish never answers") with its pid, so it has a window to list and to read. It prints
"ready <unique name>" on standard output once registered.
"""
import argparse
import os
import sys
import threading

from gi.repository import Gio, GLib

p = argparse.ArgumentParser()
p.add_argument("--title", default="nish never answers")
p.add_argument("--name", default="org.nish.NeverAnswers")
p.add_argument("--no-window", action="store_true")
a = p.parse_args()

session = Gio.bus_get_sync(Gio.BusType.SESSION, None)
addr = session.call_sync(
    "org.a11y.Bus", "/org/a11y/bus", "org.a11y.Bus", "GetAddress",
    None, GLib.VariantType("(s)"), Gio.DBusCallFlags.NONE, 5000, None,
).unpack()[0]
bus = Gio.DBusConnection.new_for_address_sync(
    addr,
    Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT
    | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION,
    None, None,
)
dropped = [0]


def drop_calls(_conn, message, incoming):
    # Runs on GDBus's worker thread for every message: method calls to us vanish here.
    if incoming and message.get_message_type() == Gio.DBusMessageType.METHOD_CALL:
        dropped[0] += 1
        return None
    return message


bus.add_filter(drop_calls)
bus.call_sync(
    "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
    "RequestName", GLib.Variant("(su)", (a.name, 4)), GLib.VariantType("(u)"),
    Gio.DBusCallFlags.NONE, 5000, None,
)
root = "/org/a11y/atspi/accessible/root"
bus.call_sync(
    "org.a11y.atspi.Registry", root, "org.a11y.atspi.Socket", "Embed",
    GLib.Variant("((so))", ((bus.get_unique_name(), root),)), GLib.VariantType("((so))"),
    Gio.DBusCallFlags.NONE, 5000, None,
)

if not a.no_window:
    from Xlib import X, Xatom, display

    d = display.Display()
    s = d.screen()
    w = s.root.create_window(
        60, 60, 360, 240, 0, s.root_depth, X.InputOutput, X.CopyFromParent,
        background_pixel=s.white_pixel,
    )
    w.set_wm_name(a.title)
    w.change_property(
        d.intern_atom("_NET_WM_NAME"), d.intern_atom("UTF8_STRING"), 8, a.title.encode()
    )
    w.change_property(d.intern_atom("_NET_WM_PID"), Xatom.CARDINAL, 32, [os.getpid()])
    w.map()
    d.flush()

    def x_events():
        while True:
            d.next_event()

    threading.Thread(target=x_events, daemon=True).start()

print("ready", bus.get_unique_name(), flush=True)
GLib.MainLoop().run()
