#!/usr/bin/env python3
"""A GTK 3 window shaped like a prompt, for the system-prompt tests (the person's app, not part
of the driver). What it calls itself is given on its command line, so that one script runs as
an app with an ordinary name under a prompt's executable name, and as an app with a prompt's
name under the ordinary interpreter:

    prompt_gtk3.py --name NAME --title TITLE --pressed FILE

- `--name`: the program name GLib and the accessibility bus show (`g_set_prgname`, which GTK 3
  gives its application's accessible) and the application name;
- `--title`: the window's title;
- a label "Enter your password to continue", an entry "User name", a button "Cancel" and a
  button "Allow"; pressing Allow appends a line "pressed" to FILE, so a test sees whether
  anything reached it.
"""

import argparse
import sys

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import GLib  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--name", required=True)
    p.add_argument("--title", required=True)
    p.add_argument("--pressed", required=True)
    ns = p.parse_args()
    # Before GTK starts (its init names the program after argv[0] otherwise), and again after.
    GLib.set_prgname(ns.name)
    GLib.set_application_name(ns.name)
    from gi.repository import Gtk  # noqa: E402

    GLib.set_prgname(ns.name)

    def on_allow(_button: Gtk.Button) -> None:
        with open(ns.pressed, "a", encoding="utf-8") as f:
            f.write("pressed\n")

    win = Gtk.Window(title=ns.title)
    win.set_default_size(420, 220)
    box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=8)
    box.set_border_width(12)
    win.add(box)
    box.pack_start(Gtk.Label(label="Enter your password to continue"), False, False, 0)
    entry = Gtk.Entry()
    entry.get_accessible().set_name("User name")
    box.pack_start(entry, False, False, 0)
    buttons = Gtk.Box(orientation=Gtk.Orientation.HORIZONTAL, spacing=8)
    buttons.pack_start(Gtk.Button(label="Cancel"), True, True, 0)
    allow = Gtk.Button(label="Allow")
    allow.connect("clicked", on_allow)
    buttons.pack_start(allow, True, True, 0)
    box.pack_start(buttons, False, False, 0)
    win.connect("destroy", Gtk.main_quit)
    win.show_all()
    Gtk.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
