"""Asks the desktop portal for a RemoteDesktop + ScreenCast session and calls Start, so the
portal's own dialog ("Remote desktop", app xdg-desktop-portal-gnome) shows and waits for the
person. Prints one line per portal answer; runs until killed."""

from gi.repository import Gio, GLib

bus = Gio.bus_get_sync(Gio.BusType.SESSION)
sender = bus.get_unique_name()[1:].replace(".", "_")
state = {}


def call(method, args, iface="org.freedesktop.portal.RemoteDesktop"):
    bus.call_sync("org.freedesktop.portal.Desktop", "/org/freedesktop/portal/desktop", iface,
                  method, args, None, 0, -1, None)


def step():
    token, code, res = state.get("last", (None, None, None))
    if token is None:
        call("CreateSession", GLib.Variant("(a{sv})", ({
            "handle_token": GLib.Variant("s", "c1"),
            "session_handle_token": GLib.Variant("s", "s1")},)))
    elif token == "c1":
        state["session"] = res["session_handle"]
        call("SelectDevices", GLib.Variant("(oa{sv})", (state["session"], {
            "handle_token": GLib.Variant("s", "d1"), "types": GLib.Variant("u", 3)})))
    elif token == "d1":
        call("SelectSources", GLib.Variant("(oa{sv})", (state["session"], {
            "handle_token": GLib.Variant("s", "x1"), "types": GLib.Variant("u", 1)})),
             "org.freedesktop.portal.ScreenCast")
    elif token == "x1":
        call("Start", GLib.Variant("(osa{sv})", (state["session"], "", {
            "handle_token": GLib.Variant("s", "t1")})))
        print("start", flush=True)


def on_response(_conn, _sender, path, _iface, _signal, params):
    code, res = params.unpack()
    token = path.rsplit("/", 1)[1]
    print(f"response {token} {code}", flush=True)
    state["last"] = (token, code, res)
    step()


bus.signal_subscribe("org.freedesktop.portal.Desktop", "org.freedesktop.portal.Request",
                     "Response", None, None, 0, on_response)
GLib.idle_add(lambda: step() and False)
GLib.MainLoop().run()
