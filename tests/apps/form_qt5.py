#!/usr/bin/python3
"""A Qt 5 form for the driver's tests: a line edit named "Name" and a status label whose text
(its accessible name) tells how many characters the line edit holds and what they are, so a
test sees typed text the way the app itself does: characters AT-SPI's text reads leave out
(Qt pads text with NUL characters when told a longer length) still count."""

import sys

from PyQt5.QtWidgets import (QApplication, QLabel, QLineEdit, QMainWindow, QSpinBox, QVBoxLayout,
                             QWidget)


def main() -> None:
    app = QApplication(sys.argv)
    app.setApplicationName("nish-qt-form")
    # A main window: its accessible is a frame (a bare top-level QWidget's is a filler).
    w = QMainWindow()
    w.setWindowTitle("nish Qt form")
    body = QWidget()
    w.setCentralWidget(body)
    layout = QVBoxLayout(body)
    name = QLineEdit()
    name.setAccessibleName("Name")
    status = QLabel("holds 0 characters: ")
    name.textChanged.connect(lambda t: status.setText(f"holds {len(t)} characters: {t}"))
    count = QSpinBox()
    count.setAccessibleName("Count")
    count.setRange(0, 100)
    count_status = QLabel("count is 0")
    count.valueChanged.connect(lambda v: count_status.setText(f"count is {v}"))
    layout.addWidget(name)
    layout.addWidget(status)
    layout.addWidget(count)
    layout.addWidget(count_status)
    w.resize(420, 220)
    w.show()
    # A second top-level window that is a bare widget: Qt's accessible for it is a filler.
    notes = QWidget()
    notes.setWindowTitle("nish Qt notes")
    notes_layout = QVBoxLayout(notes)
    note = QLineEdit()
    note.setAccessibleName("Note")
    note_status = QLabel("note holds 0 characters")
    note.textChanged.connect(lambda t: note_status.setText(f"note holds {len(t)} characters: {t}"))
    notes_layout.addWidget(note)
    notes_layout.addWidget(note_status)
    notes.resize(300, 120)
    notes.move(40, 40)
    notes.show()
    sys.exit(app.exec_())


if __name__ == "__main__":
    main()
