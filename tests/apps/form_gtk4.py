#!/usr/bin/env python3
"""A GTK 4 form for the takeover tests on Wayland (the person's app, not part of the driver):
an application "nish-form-gtk4" whose window "nish-driver GTK 4 form" has an entry "Your name"
holding the keyboard focus from the start, a password entry "Password" and a button "Save".
The entry's text is what its accessible shows, so a test reads back what was typed. The window
is maximized, so on the test desktop's one monitor its own coordinates are the screen's (a
Wayland client learns no window position), and its fields start 240 px down, below where
mutter places a small window such as the driver's takeover surface.

Once "Your name" holds the text #dialog#, the app opens a modal dialog of its own, "nish-driver
GTK 4 dialog", whose entry "Dialog field" takes the keyboard focus (as an app asks "Save
changes?" while the driver types): typing held to "Your name" must stop there. Return in the
dialog's field sets its text to "activated".

While "Your name" holds #cover#, a popover of the app's own ("nish-driver cover", no grab:
the focus stays in the entry) lies below the entry, over the password field: a click there
would reach the popover, not the field.

With --small the window is 480x240 and not maximized (title "nish-driver GTK 4 small form",
its own application id, the same application name): a window with its shadow around it, as
most windows are."""

import sys

import gi

gi.require_version("Gtk", "4.0")
from gi.repository import GLib, Gtk  # noqa: E402

NAME = "nish-form-gtk4"
TRIGGER = "#dialog#"
COVER = "#cover#"


SMALL = "--small" in sys.argv[1:]


def on_activate(app: Gtk.Application) -> None:
    title = "nish-driver GTK 4 small form" if SMALL else "nish-driver GTK 4 form"
    win = Gtk.ApplicationWindow(application=app, title=title)
    win.set_default_size(480, 240)
    box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=8)
    for side in ("bottom", "start", "end"):
        getattr(box, f"set_margin_{side}")(16)
    box.set_margin_top(16 if SMALL else 240)
    name = Gtk.Entry()
    name.update_property([Gtk.AccessibleProperty.LABEL], ["Your name"])
    password = Gtk.PasswordEntry()
    password.update_property([Gtk.AccessibleProperty.LABEL], ["Password"])
    save = Gtk.Button(label="Save")
    for w in (Gtk.Label(label="Your name"), name, Gtk.Label(label="Password"), password, save):
        box.append(w)
    win.set_child(box)
    opened = [False]

    def on_changed(entry: Gtk.Entry) -> None:
        if opened[0] or TRIGGER not in entry.get_text():
            return
        opened[0] = True
        dialog = Gtk.Window(title="nish-driver GTK 4 dialog", transient_for=win, modal=True)
        dialog.set_default_size(320, 120)
        field = Gtk.Entry()
        field.update_property([Gtk.AccessibleProperty.LABEL], ["Dialog field"])
        # Return in the dialog's field (its default action) leaves a mark a read shows.
        field.connect("activate", lambda f: f.set_text("activated"))
        dialog.set_child(field)
        dialog.present()
        field.grab_focus()

    cover = Gtk.Popover()
    cover.set_autohide(False)
    cover.set_has_arrow(False)
    cover.set_position(Gtk.PositionType.BOTTOM)
    label = Gtk.Label(label="nish-driver cover")
    label.set_size_request(360, 160)
    cover.set_child(label)
    cover.set_parent(name)

    def on_cover(entry: Gtk.Entry) -> None:
        if COVER in entry.get_text():
            if not cover.get_visible():
                cover.popup()
        elif cover.get_visible():
            cover.popdown()

    name.connect("changed", on_changed)
    name.connect("changed", on_cover)
    if not SMALL:
        win.maximize()
    win.present()
    name.grab_focus()


def main() -> int:
    GLib.set_prgname(NAME)
    GLib.set_application_name(NAME)
    app = Gtk.Application(application_id="org.nishdriver.FormGtk4" + ("Small" if SMALL else ""))
    app.connect("activate", on_activate)
    return app.run([sys.argv[0]])


if __name__ == "__main__":
    sys.exit(main())
