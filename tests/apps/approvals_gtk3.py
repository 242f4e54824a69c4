#!/usr/bin/env python3
"""A GTK 3 window for the host-approval tests (the person's app, not part of the driver).

- an entry "Search" and an entry "Message";
- a check button "Urgent" (so that from Message, Tab, Tab reaches Send);
- a box "Actions" whose only child is the button "Send", filling it (the box's centre lies on
  Send); Send counts its presses in the status label ("Sent 1", "Sent 2", ...);
- the status label, "Ready" until the first press.
"""

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import GLib, Gtk  # noqa: E402


class Window(Gtk.Window):
    def __init__(self) -> None:
        super().__init__(title="nish approvals gtk3")
        self.set_default_size(420, 260)
        box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=6)
        box.set_border_width(12)
        self.add(box)
        self.search = Gtk.Entry()
        self.search.get_accessible().set_name("Search")
        box.pack_start(self.search, False, False, 0)
        self.message = Gtk.Entry()
        self.message.get_accessible().set_name("Message")
        box.pack_start(self.message, False, False, 0)
        box.pack_start(Gtk.CheckButton(label="Urgent"), False, False, 0)
        self.sent = 0
        actions = Gtk.Box(orientation=Gtk.Orientation.HORIZONTAL)
        actions.get_accessible().set_name("Actions")
        send = Gtk.Button(label="Send")
        send.connect("clicked", self.on_send)
        actions.pack_start(send, True, True, 0)
        box.pack_start(actions, False, False, 0)
        self.status = Gtk.Label(label="Ready")
        box.pack_start(self.status, False, False, 0)

    def on_send(self, _button: Gtk.Button) -> None:
        self.sent += 1
        self.status.set_text(f"Sent {self.sent}")


def main() -> None:
    GLib.set_prgname("nish-approvals-gtk3")
    w = Window()
    w.connect("destroy", Gtk.main_quit)
    w.show_all()
    Gtk.main()


if __name__ == "__main__":
    main()
