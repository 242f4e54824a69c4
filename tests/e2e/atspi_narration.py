"""Reads the consent dialog's text-only accessible as a screen reader and as an attacker would
(run by desktop_narrate.py with the system python, which has pyatspi and GI).

    atspi_narration.py read    -> JSON: the application "nish-driver consent" read with
                                  pyatspi: its dialog, every line with its states, and which
                                  objects offer an action (none may)
    atspi_narration.py attack  -> JSON: every state-changing call an accessibility client can
                                  make on every object of the application, on the raw
                                  accessibility bus; each must fail
"""

from __future__ import annotations

import json
import os
import sys

APP = "nish-driver consent"


def read() -> dict:
    import pyatspi

    desktop = pyatspi.Registry.getDesktop(0)
    apps = [a for a in desktop if a is not None and a.name == APP]
    if not apps:
        seen = []
        for a in desktop:
            try:
                seen.append(a.name if a is not None else None)
            except Exception as e:  # noqa: BLE001 - what the reader saw, for the failure's text
                seen.append(f"error: {e}")
        return {"found": False, "apps_seen": seen}
    app = apps[0]
    out: dict = {"found": True, "apps": len(apps), "role": app.getRoleName(),
                 "interfaces": list(app.get_interfaces())}
    offers_action: list[str] = []

    def action(obj) -> bool:
        try:
            obj.queryAction()
            return True
        except NotImplementedError:
            return False

    def walk(obj, depth: int):
        if action(obj) or "Action" in obj.get_interfaces():
            offers_action.append(obj.name)
        for i in range(obj.childCount):
            c = obj.getChildAtIndex(i)
            if c is not None and depth < 4:
                yield c
                yield from walk(c, depth + 1)

    objects = list(walk(app, 0))
    out["objects"] = 1 + len(objects)
    dialog = app.getChildAtIndex(0)
    out["dialog"] = {"name": dialog.name, "role": dialog.getRoleName(),
                     "description": dialog.description}
    lines = []
    for i in range(dialog.childCount):
        c = dialog.getChildAtIndex(i)
        st = c.getState()
        lines.append({"name": c.name, "role": c.getRoleName(),
                      "checked": st.contains(pyatspi.STATE_CHECKED),
                      "focused": st.contains(pyatspi.STATE_FOCUSED),
                      "interfaces": list(c.get_interfaces())})
    out["lines"] = lines
    out["offers_action"] = offers_action
    return out


def attack() -> dict:
    from gi.repository import Gio, GLib

    addr = os.environ.get("AT_SPI_BUS_ADDRESS")
    if not addr:
        session = Gio.bus_get_sync(Gio.BusType.SESSION, None)
        addr = session.call_sync("org.a11y.Bus", "/org/a11y/bus", "org.a11y.Bus", "GetAddress",
                                 None, GLib.VariantType("(s)"), 0, 5000, None).unpack()[0]
    flags = (Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT
             | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION)
    bus = Gio.DBusConnection.new_for_address_sync(addr, flags, None, None)

    def call(dest, path, iface, member, args=None):
        return bus.call_sync(dest, path, iface, member, args, None, 0, 5000, None)

    root = "/org/a11y/atspi/accessible/root"
    apps = call("org.a11y.atspi.Registry", root, "org.a11y.atspi.Accessible",
                "GetChildren").unpack()[0]
    mine = None
    errors = []
    for name, path in apps:
        try:
            v = call(name, path, "org.freedesktop.DBus.Properties", "Get",
                     GLib.Variant("(ss)", ("org.a11y.atspi.Accessible", "Name"))).unpack()[0]
        except GLib.Error as e:
            errors.append(f"{name}: {e}")
            continue
        if v == APP:
            mine = (name, path)
    if mine is None:
        return {"found": False, "registry": [n for n, _ in apps], "errors": errors}
    name = mine[0]
    paths = [mine[1]]
    i = 0
    while i < len(paths) and len(paths) < 200:
        kids = call(name, paths[i], "org.a11y.atspi.Accessible", "GetChildren").unpack()[0]
        paths.extend(p for _, p in kids)
        i += 1
    hostile = [
        ("org.a11y.atspi.Action", "DoAction", GLib.Variant("(i)", (0,))),
        ("org.a11y.atspi.Action", "GetActions", None),
        ("org.a11y.atspi.Action", "GetName", GLib.Variant("(i)", (0,))),
        ("org.a11y.atspi.EditableText", "SetTextContents", GLib.Variant("(s)", ("Allow",))),
        ("org.a11y.atspi.EditableText", "InsertText", GLib.Variant("(isi)", (0, "x", 1))),
        ("org.a11y.atspi.Text", "SetCaretOffset", GLib.Variant("(i)", (0,))),
        ("org.a11y.atspi.Component", "GrabFocus", None),
        ("org.a11y.atspi.Component", "ScrollTo", GLib.Variant("(u)", (0,))),
        ("org.a11y.atspi.Value", "SetCurrentValue", GLib.Variant("(d)", (1.0,))),
        ("org.a11y.atspi.Selection", "SelectChild", GLib.Variant("(i)", (0,))),
        ("org.a11y.atspi.Selection", "SelectAll", None),
        ("org.a11y.atspi.Cache", "GetItems", None),
        ("org.freedesktop.DBus.Properties", "Set",
         GLib.Variant("(ssv)", ("org.a11y.atspi.Value", "CurrentValue", GLib.Variant("d", 1.0)))),
        ("org.freedesktop.DBus.Properties", "Set",
         GLib.Variant("(ssv)", ("org.a11y.atspi.Accessible", "Name", GLib.Variant("s", "x")))),
        ("org.freedesktop.DBus.Properties", "Set",
         GLib.Variant("(ssv)", ("org.a11y.atspi.Application", "Id", GLib.Variant("i", 7)))),
        ("org.freedesktop.DBus.Properties", "Get",
         GLib.Variant("(ss)", ("org.a11y.atspi.Action", "NActions"))),
        ("org.freedesktop.DBus.Properties", "Get",
         GLib.Variant("(ss)", ("org.a11y.atspi.Accessible", "N" * 100_000))),
        ("org.a11y.atspi.Accessible", "GetChildAtIndex", GLib.Variant("(s)", ("0",))),
        ("org.a11y.atspi.Accessible", "GetChildAtIndex", GLib.Variant("(i)", (-5,))),
        ("org.a11y.atspi.Accessible", "GetChildAtIndex", GLib.Variant("(i)", (2**31 - 1,))),
        ("org.a11y.atspi.Accessible", "SetName", GLib.Variant("(s)", ("x",))),
    ]
    succeeded: list[str] = []
    calls = 0
    for p in paths + ["/org/a11y/atspi/accessible/999", "/"]:
        for iface, member, args in hostile:
            calls += 1
            try:
                call(name, p, iface, member, args)
                succeeded.append(f"{p} {iface}.{member}")
            except GLib.Error:
                pass
    # Still there and still answering reads.
    role = call(name, mine[1], "org.a11y.atspi.Accessible", "GetRole").unpack()[0]
    return {"found": True, "objects": len(paths), "calls": calls, "succeeded": succeeded,
            "role_after": role}


def main() -> int:
    what = sys.argv[1]
    try:
        out = read() if what == "read" else attack()
    except BaseException:
        import traceback

        print(json.dumps({"error": traceback.format_exc()}))
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
