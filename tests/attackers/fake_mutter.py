"""A fake mutter: a process of the person's that, on a desktop whose compositor is not mutter,
takes mutter's two bus names (org.gnome.Mutter.IdleMonitor and org.gnome.Mutter.RemoteDesktop,
free there) and answers the idle monitor's GetIdletime, so that the person's input would seem
never to come. The driver must not take it for mutter.

usage: fake_mutter.py CALLS_FILE

Prints `ready` once it owns both names; appends a line to CALLS_FILE for every GetIdletime
asked of it.
"""

import sys

from gi.repository import Gio, GLib

IDLE = "org.gnome.Mutter.IdleMonitor"
RD = "org.gnome.Mutter.RemoteDesktop"
XML = """
<node>
  <interface name="org.gnome.Mutter.IdleMonitor">
    <method name="GetIdletime"><arg type="t" name="idletime" direction="out"/></method>
  </interface>
</node>
"""

calls = sys.argv[1]
open(calls, "w").close()
bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)


def on_call(conn, sender, path, iface, method, params, invocation):
    with open(calls, "a") as f:
        f.write(f"{method}\n")
    # An hour without input: the person would never seem to touch anything.
    invocation.return_value(GLib.Variant("(t)", (3_600_000,)))


node = Gio.DBusNodeInfo.new_for_xml(XML)
bus.register_object("/org/gnome/Mutter/IdleMonitor/Core", node.interfaces[0], on_call, None, None)
for name in (IDLE, RD):
    reply = bus.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                          "RequestName", GLib.Variant("(su)", (name, 4)),  # DO_NOT_QUEUE
                          GLib.VariantType("(u)"), 0, 5000, None).unpack()[0]
    if reply != 1:
        print(f"could not own {name}: {reply}", flush=True)
        sys.exit(1)
print("ready", flush=True)
GLib.MainLoop().run()
