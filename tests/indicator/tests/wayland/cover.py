"""A small GTK 3 window another client maps while the consent dialog is open: as a new
toplevel it takes focus from the dialog. Prints `focused` when it has focus."""

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import Gtk  # noqa: E402

w = Gtk.Window(title="nish-test other window")
w.set_default_size(160, 80)
told = []


def focused(*_args) -> None:
    if not told:
        told.append(True)
        print("focused", flush=True)


w.connect("focus-in-event", focused)
w.connect("destroy", Gtk.main_quit)
w.show_all()
Gtk.main()
