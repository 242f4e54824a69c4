#!/usr/bin/env python3
"""A GTK 3 window with one huge list between a toolbar and a status bar, for reads of big trees.

    big_list.py [--rows 50000] [--kind tree|listbox] [--title TEXT]

The window, top to bottom: a tool bar ("Tools", buttons "Refresh" and "Filter"), a scrolled
list of ROWS labelled rows ("Item 1" ...), a button "After the list", a second tool bar
("Pager", buttons "Previous" and "Next") and a status bar ("Status"). `tree` is a one-column GtkTreeView (each row a table cell, the list managing its
descendants); `listbox` a GtkListBox whose rows each hold a GtkLabel (GTK 3 lays out every row
of a list box: keep it to a few thousand rows, 50,000 take minutes to show).
"""
import argparse

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import Gtk  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--rows", type=int, default=50000)
p.add_argument("--kind", choices=["tree", "listbox"], default="tree")
p.add_argument("--title", default="nish big list")
a = p.parse_args()

win = Gtk.Window(title=a.title)
win.set_default_size(700, 560)
win.connect("destroy", Gtk.main_quit)
box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL)
win.add(box)


def toolbar(name, labels):
    bar = Gtk.Toolbar()
    bar.get_accessible().set_name(name)
    for label in labels:
        b = Gtk.ToolButton(label=label)
        b.set_is_important(True)
        bar.insert(b, -1)
    return bar


box.pack_start(toolbar("Tools", ("Refresh", "Filter")), False, False, 0)

scroll = Gtk.ScrolledWindow()
scroll.set_vexpand(True)
if a.kind == "tree":
    store = Gtk.ListStore(str)
    for i in range(1, a.rows + 1):
        store.append(("Item %d" % i,))
    view = Gtk.TreeView(model=store)
    view.append_column(Gtk.TreeViewColumn("Item", Gtk.CellRendererText(), text=0))
    view.get_accessible().set_name("Items")
else:
    view = Gtk.ListBox()
    view.get_accessible().set_name("Items")
    for i in range(1, a.rows + 1):
        view.add(Gtk.Label(label="Item %d" % i, xalign=0))
scroll.add(view)
box.pack_start(scroll, True, True, 0)

after = Gtk.Button(label="After the list")
box.pack_start(after, False, False, 0)
box.pack_start(toolbar("Pager", ("Previous", "Next")), False, False, 0)
status = Gtk.Statusbar()
status.get_accessible().set_name("Status")
status.push(0, "Ready: %d rows" % a.rows)
box.pack_start(status, False, False, 0)

win.show_all()
Gtk.main()
