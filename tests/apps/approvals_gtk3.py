#!/usr/bin/env python3
"""A GTK 3 window for the host-approval tests (the person's app, not part of the driver).

- an entry "Search" and an entry "Message";
- a check button "Urgent" (so that from Message, Tab, Tab reaches Send);
- a box "Actions" whose only child is the button "Send", filling it (the box's centre lies on
  Send); Send counts its presses in the status label ("Sent 1", "Sent 2", ...);
- the lexicon's row: buttons "Sell", "Move to Trash", "Check out", "Ѕend" (a Cyrillic "Ѕ",
  U+0405) and "➤" (an icon-only button whose tooltip, its accessible description, says
  "Send"), and an entry "Recipient email address"; each button counts its presses in its own
  status label ("Pressed: none", then "Pressed Sell 1"...), which comes before the main one;
- the status label, "Ready" until the first press.
"""

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import GLib, Gtk  # noqa: E402


class Window(Gtk.Window):
    def __init__(self) -> None:
        super().__init__(title="nish approvals gtk3")
        self.set_default_size(460, 400)
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
        # After Send, so Tab from Message still reaches Send second.
        self.pressed = 0
        shop = Gtk.Box(orientation=Gtk.Orientation.HORIZONTAL, spacing=4)
        for label in ("Sell", "Move to Trash", "Check out", "\u0405end"):
            b = Gtk.Button(label=label)
            b.connect("clicked", self.on_press, label)
            shop.pack_start(b, False, False, 0)
        icon = Gtk.Button(label="\u27a4")
        icon.set_tooltip_text("Send")
        icon.connect("clicked", self.on_press, "icon")
        shop.pack_start(icon, False, False, 0)
        box.pack_start(shop, False, False, 0)
        self.recipient = Gtk.Entry()
        self.recipient.get_accessible().set_name("Recipient email address")
        box.pack_start(self.recipient, False, False, 0)
        self.pressed_status = Gtk.Label(label="Pressed: none")
        box.pack_start(self.pressed_status, False, False, 0)
        self.status = Gtk.Label(label="Ready")
        box.pack_start(self.status, False, False, 0)

    def on_press(self, _button: Gtk.Button, what: str) -> None:
        self.pressed += 1
        self.pressed_status.set_text(f"Pressed {what} {self.pressed}")

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
