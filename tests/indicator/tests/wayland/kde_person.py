"""Plays the person on KDE's KWin through the desktop portal's RemoteDesktop
(`org.freedesktop.portal.RemoteDesktop` on the session bus, DBUS_SESSION_BUS_ADDRESS; the KDE
backend `xdg-desktop-portal-kde` drives KWin's fake input, which KWin offers to that backend and
to no ordinary client). KDE's portal grants an unsandboxed program a pointer and keyboard with a
notification only, no dialog.

Reads the commands of person.py (mutter's), one a line, and answers `ok` (or `error: ...`):
  move DX DY        relative pointer motion (NotifyPointerMotion: absolute motion needs a
                    screen-cast stream, which this session does not have)
  corner            to the top-left corner (a large motion up and left, clamped)
  button 1|0        left button press (1) or release (0)
  key KEYSYM 1|0    a key press or release (X keysym, decimal or 0x hex; NotifyKeyboardKeysym):
                    KWin takes it as the person's, its global shortcuts included
"""

import sys
import time

from gi.repository import Gio, GLib

BTN_LEFT = 0x110
PORTAL = "org.freedesktop.portal.Desktop"
PATH = "/org/freedesktop/portal/desktop"
RD = "org.freedesktop.portal.RemoteDesktop"
KEYBOARD, POINTER = 1, 2


class Portal:
    def __init__(self) -> None:
        self.bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
        self.sender = self.bus.get_unique_name()[1:].replace(".", "_")
        self.n = 0

    def request(self, method: str, sig: str, args: list, timeout: float = 20.0) -> dict:
        """Calls a portal method that answers by a Request's Response signal; returns its
        results (an error unless the response is 0, success)."""
        self.n += 1
        token = f"nish_person_{self.n}"
        path = f"{PATH}/request/{self.sender}/{token}"
        got: list = []
        loop = GLib.MainLoop()

        def on_response(_conn, _sender, _path, _iface, _signal, params, *_):
            got.append(params.unpack())
            loop.quit()

        sub = self.bus.signal_subscribe(PORTAL, "org.freedesktop.portal.Request", "Response", path,
                                        None, Gio.DBusSignalFlags.NONE, on_response)
        options = dict(args[-1])
        options["handle_token"] = GLib.Variant("s", token)
        args = [*args[:-1], options]
        self.bus.call_sync(PORTAL, PATH, RD, method, GLib.Variant(sig, tuple(args)), None,
                           Gio.DBusCallFlags.NONE, int(timeout * 1000), None)
        expired: list = []

        def expire() -> bool:
            expired.append(True)
            loop.quit()
            return False

        timer = GLib.timeout_add(int(timeout * 1000), expire)
        loop.run()
        if not expired:
            GLib.source_remove(timer)
        self.bus.signal_unsubscribe(sub)
        if not got:
            raise TimeoutError(f"{method}: no response from the portal")
        code, results = got[0]
        if code != 0:
            raise RuntimeError(f"{method}: the portal answered {code}")
        return results

    def notify(self, session: str, method: str, sig: str, *args) -> None:
        self.bus.call_sync(PORTAL, PATH, RD, method, GLib.Variant(sig, (session, {}, *args)), None,
                           Gio.DBusCallFlags.NONE, 5000, None)


def main() -> None:
    p = Portal()
    t0 = time.monotonic()
    session = p.request("CreateSession", "(a{sv})",
                        [{"session_handle_token": GLib.Variant("s", "nish_person")}])["session_handle"]
    p.request("SelectDevices", "(oa{sv})", [session, {"types": GLib.Variant("u", KEYBOARD | POINTER)}])
    started = p.request("Start", "(osa{sv})", [session, "", {}])
    if started.get("devices", 0) & (KEYBOARD | POINTER) != KEYBOARD | POINTER:
        raise SystemExit(f"the portal granted no pointer and keyboard: {started}")
    print(f"kde_person: the portal granted devices {started.get('devices')} in "
          f"{time.monotonic() - t0:.2f}s", file=sys.stderr, flush=True)
    print("ready", flush=True)

    def motion(dx: float, dy: float) -> None:
        p.notify(session, "NotifyPointerMotion", "(oa{sv}dd)", dx, dy)

    for line in sys.stdin:
        w = line.split()
        try:
            if not w:
                continue
            if w[0] == "move":
                motion(float(w[1]), float(w[2]))
            elif w[0] == "corner":
                motion(-20000.0, -20000.0)
            elif w[0] == "key":
                p.notify(session, "NotifyKeyboardKeysym", "(oa{sv}iu)", int(w[1], 0), 1 if w[2] == "1" else 0)
            elif w[0] == "button":
                p.notify(session, "NotifyPointerButton", "(oa{sv}iu)", BTN_LEFT, 1 if w[1] == "1" else 0)
            else:
                raise ValueError(f"unknown command {w[0]}")
            print("ok", flush=True)
        except Exception as e:  # noqa: BLE001 - reported to the test
            print(f"error: {e}", flush=True)
    p.bus.call_sync(PORTAL, session, "org.freedesktop.portal.Session", "Close", None, None,
                    Gio.DBusCallFlags.NONE, 5000, None)


if __name__ == "__main__":
    main()
