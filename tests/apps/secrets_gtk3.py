#!/usr/bin/env python3
"""A GTK 3 window for the secrets tests (the person's app, not part of the driver).

    secrets_gtk3.py --password TEXT --notes TEXT [--cvv TEXT]

- a menu bar with an Edit menu (Cut, Copy, Paste, Select All) acting on the field that has the
  keyboard focus;
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
- a status label saying which person was opened last, or which button was clicked;
- a payment form: an entry "CVV" holding the --cvv text, plain text to GTK (only its name says
  secret: its context menu's Copy and Select All work on it), and an ordinary entry "Billing
  note";
- SIGWINCH shows (and hides again) a second window of the app, "nish secrets gtk3 notes", with
  an ordinary entry "Scratch".
"""

import argparse
import signal

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import GLib, Gtk  # noqa: E402

PEOPLE = ["Alice Martin", "Bruno Costa", "Chen Wei", "Dana Kowalska"]


class Window(Gtk.Window):
    def __init__(self, password: str, notes: str, cvv: str) -> None:
        super().__init__(title="nish secrets gtk3")
        self.set_default_size(560, 560)
        outer = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=0)
        self.add(outer)
        bar = Gtk.MenuBar()
        edit = Gtk.MenuItem(label="Edit")
        menu = Gtk.Menu()
        for name, act in [("Cut", "cut_clipboard"), ("Copy", "copy_clipboard"),
                          ("Paste", "paste_clipboard"), ("Select All", None)]:
            item = Gtk.MenuItem(label=name)
            item.connect("activate", self.edit, act)
            menu.append(item)
        edit.set_submenu(menu)
        bar.append(edit)
        outer.pack_start(bar, False, False, 0)
        box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=6)
        box.set_border_width(12)
        outer.pack_start(box, True, True, 0)

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

        self.cvv = Gtk.Entry()
        self.cvv.get_accessible().set_name("CVV")
        self.cvv.set_text(cvv)
        box.pack_start(self.cvv, False, False, 0)
        self.note = Gtk.Entry()
        self.note.get_accessible().set_name("Billing note")
        box.pack_start(self.note, False, False, 0)

        self.second = Gtk.Window(title="nish secrets gtk3 notes")
        self.second.set_default_size(320, 120)
        scratch = Gtk.Entry()
        scratch.get_accessible().set_name("Scratch")
        self.second.add(scratch)
        self.second.connect("delete-event", lambda w, e: w.hide_on_delete())

        GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGUSR1, self.relabel)
        GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGUSR2, self.toggle)
        GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGHUP, self.rename)
        GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGWINCH, self.toggle_second)
        self.connect("destroy", Gtk.main_quit)

    def edit(self, _item: Gtk.MenuItem, act: str | None) -> None:
        focus = self.get_focus()
        if not isinstance(focus, Gtk.Editable):
            return
        if act is None:
            focus.select_region(0, -1)
        else:
            getattr(focus, act)()

    def toggle_second(self) -> bool:
        if self.second.get_visible():
            self.second.hide()
        else:
            self.second.show_all()
        return True

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
    ap.add_argument("--cvv", default="")
    ns = ap.parse_args()
    w = Window(ns.password, ns.notes, ns.cvv)
    w.show_all()
    Gtk.main()


if __name__ == "__main__":
    main()
