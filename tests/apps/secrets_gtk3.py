#!/usr/bin/env python3
"""A GTK 3 window for the secrets tests (the person's app, not part of the driver).

    secrets_gtk3.py --password TEXT --notes TEXT

- a password entry with no accessible name (only its role says secret) holding TEXT, and a
  check button "Show characters" that switches it to visible (GTK 3 then gives it the plain
  `text` role); SIGUSR2 switches it too, without any client of the accessibility bus;
- an ordinary entry "Comment" to type into, and one, "Deploy notes", holding a
  credential-looking value;
- a list of people, each row a name and an "Open" button; SIGUSR1 relabels the rows in place
  (the names move one row down), as a list that recycles its rows does: the structure stays
  the same, each row shows another person;
- a button "Save" that SIGHUP renames "Delete everything" (and back), as an app that changes
  what a control does under the same structure; a click says which it was;
- a status label saying which person was opened last, or which button was clicked.
"""

import argparse
import signal

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import GLib, Gtk  # noqa: E402

PEOPLE = ["Alice Martin", "Bruno Costa", "Chen Wei", "Dana Kowalska"]


class Window(Gtk.Window):
    def __init__(self, password: str, notes: str) -> None:
        super().__init__(title="nish secrets gtk3")
        self.set_default_size(560, 460)
        box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=6)
        box.set_border_width(12)
        self.add(box)

        self.pw = Gtk.Entry()
        self.pw.set_visibility(False)
        self.pw.set_text(password)
        box.pack_start(self.pw, False, False, 0)
        self.show_chars = Gtk.CheckButton(label="Show characters")
        self.show_chars.connect("toggled", lambda b: self.pw.set_visibility(b.get_active()))
        box.pack_start(self.show_chars, False, False, 0)

        self.comment = Gtk.Entry()
        self.comment.get_accessible().set_name("Comment")
        box.pack_start(self.comment, False, False, 0)
        self.notes = Gtk.Entry()
        self.notes.get_accessible().set_name("Deploy notes")
        self.notes.set_text(notes)
        box.pack_start(self.notes, False, False, 0)

        self.list = Gtk.ListBox()
        self.list.get_accessible().set_name("People")
        self.labels = []
        for name in PEOPLE:
            row = Gtk.Box(orientation=Gtk.Orientation.HORIZONTAL, spacing=8)
            label = Gtk.Label(label=name, xalign=0)
            button = Gtk.Button(label="Open")
            button.connect("clicked", self.opened, label)
            row.pack_start(label, True, True, 0)
            row.pack_start(button, False, False, 0)
            self.list.add(row)
            self.labels.append(label)
        box.pack_start(self.list, False, False, 0)

        self.save = Gtk.Button(label="Save")
        self.save.connect("clicked", lambda b: self.status.set_text(f"Status: clicked {b.get_label()}"))
        box.pack_start(self.save, False, False, 0)

        self.status = Gtk.Label(label="Status: idle", xalign=0)
        box.pack_start(self.status, False, False, 0)

        GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGUSR1, self.relabel)
        GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGUSR2, self.toggle)
        GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGHUP, self.rename)
        self.connect("destroy", Gtk.main_quit)

    def opened(self, _button: Gtk.Button, label: Gtk.Label) -> None:
        self.status.set_text(f"Status: opened {label.get_text()}")

    def relabel(self) -> bool:
        names = [l.get_text() for l in self.labels]
        for label, name in zip(self.labels, names[-1:] + names[:-1]):
            label.set_text(name)
        return True

    def rename(self) -> bool:
        self.save.set_label("Delete everything" if self.save.get_label() == "Save" else "Save")
        return True

    def toggle(self) -> bool:
        self.pw.set_visibility(not self.pw.get_visibility())
        return True


def main() -> None:
    GLib.set_prgname("nish-secrets-gtk3")
    ap = argparse.ArgumentParser()
    ap.add_argument("--password", required=True)
    ap.add_argument("--notes", required=True)
    ns = ap.parse_args()
    w = Window(ns.password, ns.notes)
    w.show_all()
    Gtk.main()


if __name__ == "__main__":
    main()
