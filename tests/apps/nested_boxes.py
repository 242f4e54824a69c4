#!/usr/bin/env python3
"""A GTK 3 window of tens of thousands of accessible objects built of nested containers, not a
list, for reads of huge windows of any shape.

    nested_boxes.py [--frames 4500] [--title TEXT] [--other TITLE]

The window, top to bottom: a tool bar ("Tools", buttons "Refresh" and "Filter"), a scrolled
vertical box ("Frames") of FRAMES frames ("Frame 1" ...), each holding a horizontal box of four
labels ("Label 1.1" ... "Label 1.4") and four buttons ("Button 1.1" ... "Button 1.4"), the
first frame also a password field ("Password", holding "nested-secret-FRAMES"), then a status
bar ("Status"). With 4,500 frames GTK 3 holds about 50,000 accessible objects (each
button's label is one more), and answers a whole-cache call or a children list of the box
only after seconds of its own work. With `--other`, the same application shows a second,
small window titled TITLE (a button "Other button" and a label "Other label"), shown before
the big one, to see whether the application is left free to answer about it.
"""
import argparse

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import Gtk  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--frames", type=int, default=4500)
p.add_argument("--title", default="nish nested boxes")
p.add_argument("--other", default=None)
a = p.parse_args()

if a.other:
    other = Gtk.Window(title=a.other)
    other.set_default_size(240, 120)
    obox = Gtk.Box(orientation=Gtk.Orientation.VERTICAL)
    obox.pack_start(Gtk.Button(label="Other button"), False, False, 0)
    obox.pack_start(Gtk.Label(label="Other label"), False, False, 0)
    other.add(obox)
    other.show_all()

win = Gtk.Window(title=a.title)
win.set_default_size(700, 560)
win.connect("destroy", Gtk.main_quit)
box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL)
win.add(box)

bar = Gtk.Toolbar()
bar.get_accessible().set_name("Tools")
for label in ("Refresh", "Filter"):
    b = Gtk.ToolButton(label=label)
    b.set_is_important(True)
    bar.insert(b, -1)
box.pack_start(bar, False, False, 0)

scroll = Gtk.ScrolledWindow()
scroll.set_vexpand(True)
frames = Gtk.Box(orientation=Gtk.Orientation.VERTICAL)
frames.get_accessible().set_name("Frames")
for i in range(1, a.frames + 1):
    frame = Gtk.Frame(label="Frame %d" % i)
    row = Gtk.Box(orientation=Gtk.Orientation.HORIZONTAL)
    for j in range(1, 5):
        row.pack_start(Gtk.Label(label="Label %d.%d" % (i, j)), False, False, 0)
    for j in range(1, 5):
        row.pack_start(Gtk.Button(label="Button %d.%d" % (i, j)), False, False, 0)
    if i == 1:
        # A password field holding a secret, for the secure-field rules on bounded reads.
        secret = Gtk.Entry(visibility=False)
        secret.set_text("nested-secret-%d" % a.frames)
        secret.get_accessible().set_name("Password")
        row.pack_start(secret, False, False, 0)
    frame.add(row)
    frames.pack_start(frame, False, False, 0)
scroll.add(frames)
box.pack_start(scroll, True, True, 0)

status = Gtk.Statusbar()
status.get_accessible().set_name("Status")
status.push(0, "Ready: %d frames" % a.frames)
box.pack_start(status, False, False, 0)

win.show_all()
Gtk.main()
