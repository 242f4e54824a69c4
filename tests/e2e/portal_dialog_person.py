"""The person at the desktop portal's own "Remote desktop" dialog (app xdg-desktop-portal-gnome),
on the Wayland test desktop: they look at it (AT-SPI is this script's eyes only: it reads which
control has the focus and whether the switch is on) and answer it with their keyboard, played
through mutter's RemoteDesktop API by person.py (a session of their own, not the driver's).

  portal_dialog_person.py PERSON_PY allow|deny|dump [--timeout S]

allow: turns "Allow remote interaction" on (Tab to it, space) and presses Share (Tab to it,
space); deny: presses Escape. Prints one line of what it did; exits 1 with a reason when the
dialog did not come or did not take the keys. dump: prints the dialog's controls and states.
"""

import subprocess
import sys
import time

import gi

gi.require_version("Atspi", "2.0")
from gi.repository import Atspi  # noqa: E402

TAB, SPACE, ESCAPE, SHIFT = 0xff09, 0x20, 0xff1b, 0xffe1


def dialog(timeout: float):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        desktop = Atspi.get_desktop(0)
        for i in range(desktop.get_child_count()):
            app = desktop.get_child_at_index(i)
            if app is not None and app.get_name() == "xdg-desktop-portal-gnome" and app.get_child_count() > 0:
                return app.get_child_at_index(0)
        time.sleep(0.1)
    return None


def walk(node, depth=0, out=None):
    out = [] if out is None else out
    if node is None or depth > 30:
        return out
    out.append((depth, node))
    for i in range(node.get_child_count()):
        walk(node.get_child_at_index(i), depth + 1, out)
    return out


def states(node) -> set:
    s = node.get_state_set()
    return {Atspi.StateType(i).value_nick for i in range(Atspi.StateType.LAST_DEFINED) if s.contains(Atspi.StateType(i))}


def focused(frame):
    for _, n in walk(frame):
        if "focused" in states(n):
            return n
    return None


class Keys:
    def __init__(self, person_py: str) -> None:
        self.proc = subprocess.Popen(["/usr/bin/python3", person_py], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "ready"

    def say(self, cmd: str) -> None:
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline().strip()
        if line != "ok":
            raise SystemExit(f"person: {cmd}: {line}")

    def press(self, keysym: int) -> None:
        self.say(f"key {keysym} 1")
        self.say(f"key {keysym} 0")
        time.sleep(0.15)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def tab_to(keys: Keys, frame, pred, what: str):
    # Tab, then Shift+Tab.
    for step in ["tab"] * 8 + ["backtab"] * 8:
        # GTK 4 may leave a stale focused state on the control the focus left: any control
        # with the state that is the one wanted counts.
        for _, n in walk(frame):
            if "focused" in states(n) and pred(n):
                return n
        if step == "tab":
            keys.press(TAB)
        elif step == "backtab":
            keys.say(f"key {SHIFT} 1")
            keys.press(TAB)
            keys.say(f"key {SHIFT} 0")
        print(f"  {step}: focus on {describe(focused(frame))}", file=sys.stderr, flush=True)
    dump(frame)
    raise SystemExit(f"the Tab key never reached {what} (focus on {describe(focused(frame))})")


def dump(frame) -> None:
    for depth, n in walk(frame):
        print(f"{'  ' * depth}{n.get_role_name()} {n.get_name()!r} {sorted(states(n))}", file=sys.stderr, flush=True)


def describe(n) -> str:
    return "nothing" if n is None else f"{n.get_role_name()} {n.get_name()!r}"


def main() -> int:
    person_py, what = sys.argv[1], sys.argv[2]
    timeout = float(sys.argv[sys.argv.index("--timeout") + 1]) if "--timeout" in sys.argv else 30.0
    frame = dialog(timeout)
    if frame is None:
        print("no portal dialog came", flush=True)
        return 1
    if what == "dump":
        dump(frame)
        return 0
    # The person's keyboard goes where the focus is: wait for the dialog to take it.
    deadline = time.monotonic() + 10
    while "active" not in states(frame):
        if time.monotonic() > deadline:
            print(f"the portal dialog never took the focus: {sorted(states(frame))}", flush=True)
            dump(frame)
            return 1
        time.sleep(0.1)
    keys = Keys(person_py)
    try:
        if what == "deny":
            keys.press(ESCAPE)
            print("the person pressed Escape on the portal dialog", flush=True)
            return 0
        switch = tab_to(keys, frame, lambda n: n.get_role_name() in ("toggle button", "switch", "check box"),
                        "the remote-interaction switch")
        if "checked" not in states(switch):
            keys.press(SPACE)
        deadline = time.monotonic() + 3
        while "checked" not in states(switch):
            if time.monotonic() > deadline:
                print("the remote-interaction switch did not turn on", flush=True)
                return 1
            time.sleep(0.05)
        share = tab_to(keys, frame, lambda n: n.get_role_name() in ("push button", "button") and "Share" in (n.get_name() or ""),
                       "the Share button")
        # Space: a GTK button acts on its release, so no key of the person's is still down
        # when the takeover begins (Return acts on the press, and its release would come after).
        keys.press(SPACE)
        print(f"the person turned on {describe(switch)} and pressed {describe(share)} with the keyboard",
              flush=True)
        return 0
    finally:
        keys.close()


if __name__ == "__main__":
    sys.exit(main())
