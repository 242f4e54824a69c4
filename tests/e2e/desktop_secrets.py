#!/usr/bin/env python3
"""Secrets through a whole session on a real (headless) X desktop: the official MCP Python
client, the real `nish-mcp`, `nish-driver serve --backend linux` (logging at debug) and its
agents, Chromium on tests/pages/secrets.html and the GTK 3 app tests/apps/secrets_gtk3.py.

- Fields named in every listed language, a number input and a password input: secure, no
  value, in full, skeleton and drill-down reads; credential-looking values withheld and marked
  `redacted`; the capture black on every secure field in view.
- The GTK 3 password entry switched to visible by the model's own click: still secure, no
  value; typing into it is refused.
- A list row relabelled under the same structure: its token is stale (nothing is clicked), and
  so is every token of the snapshot once the window is read again.
- A button renamed under the same structure and taken in by a capped read that did not show
  it: its token is stale (nothing is clicked) until a read shows the new name.
- Nothing leaves a secure field, in a takeover session: the red-team's sequence against the
  GTK 3 field "CVV" (plain text to GTK, secure by its name): a click into it, then right click,
  Up, Up, Return (Select All), right click, Down, Down, Return (Copy): each step refused; then
  right click in another field, Down, Return (Paste): the other field does not read back the
  CVV. The menu bar's Edit menu opened while the focus is in the CVV: its Copy and Select All
  refused (headless and by pointer), and every key while the menu is open. Another client
  setting `_NET_ACTIVE_WINDOW` to the app's second window: Ctrl+A and Ctrl+C still refused
  (keys are judged where the X input focus is), and a paste in the second window does not
  show the CVV. Chromium's CVV input: keys, a right click and a double click refused, Tab
  sent.
- A read cut short (the page grown past 5,000 elements): the capture is refused.
- Canaries (typed text, the password, the CVV, credential-looking values, the page's secret
  values) appear in no audit record, no broker or agent log line and no error.

    desktop_secrets.py --driver .../nish-driver --shim .../nish-mcp --gtk-pid N \\
        --gtk-password TEXT --gtk-notes TEXT --gtk-cvv TEXT
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import signal
import sys
import time

import anyio

import nishhost as h
from nishhost import check, ok, say

CHROMIUM = "chromium"
GTK = "nish-secrets-gtk3"
SECURE_LABELS = ["Password", "PIN", "CVV", "One-time code", "Security code", "Card number",
                 "Passwort", "Mot de passe", "Contraseña", "Codice di sicurezza", "Senha",
                 "Wachtwoord", "Hasło", "Пароль", "密码", "パスワード", "Kod PIN", "Passphrase"]
PAGE_CANARIES = [f"canary-{k}-{40117 + i}" for i, k in enumerate(
    ["en", "pin", "cvv", "otp", "sec", "card", "de", "fr", "es", "it", "pt", "nl", "pl", "ru", "zh", "ja"])]
PAGE_CANARIES += ["4013397215836", "canary-pw-40134", "canary-ce-40135", "ghp_Q8zR2mWx9LpA4sKd7HfT3nVb6cYe1uJo5iGk", "vT7qLm2XpR9sKw4NzB6d"]
TYPED = "typed-canary-5b7e1"
PW_TYPED = "pw-typed-canary-93c2"
SET_CREDENTIAL = "ghp_SetValueCanary0123456789abcdefghij12"
INPUT_ROLES = ("entry", "spin_button", "password_text", "text")


class Errors:
    """Every error envelope and text the host saw."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def fails(self, c, tool: str, args: dict, code: str) -> dict:
        err = await h.fails(c, tool, args, code)
        self.seen.append(json.dumps(err, ensure_ascii=False))
        return err


def field(read: dict, label: str) -> dict:
    for e in read["elements"]:
        if e["label"] == label and e["role"] in INPUT_ROLES:
            return e
    raise AssertionError(f"no field {label!r} in snapshot {read['snapshot_id']}")


def row_button(read: dict, person: str) -> dict:
    """The "Open" button in the list row that shows `person` (a row: its label, then its button)."""
    els = read["elements"]
    for i, e in enumerate(els):
        if e["role"] == "label" and e["label"] == person:
            for b in els[i + 1:i + 4]:
                if b["role"] == "push_button" and b["label"] == "Open":
                    return b
    raise AssertionError(f"no row for {person!r} in snapshot {read['snapshot_id']}")


def no_canary(blob: str, canaries: list[str], where: str) -> None:
    for x in canaries:
        check(x not in blob, f"a canary ({len(x)} characters) is in {where}")


async def chromium_fields(c, errors: Errors) -> None:
    say("Chromium: fields named secret in every listed language")
    ch = await ok(c, "get_window_state", {"app": CHROMIUM, "max_elements": 5000})
    for label in SECURE_LABELS:
        e = field(ch, label)
        check("secure" in e["states"] and e.get("value") is None, f"{label!r}: {e}")
    pw = field(ch, "Account key")
    check(pw["role"] == "password_text" and pw.get("value") is None and "secure" in pw["states"], str(pw))
    for label in ("Deploy notes", "Build label"):
        e = field(ch, label)
        check(e.get("value") is None and "redacted" in e["states"] and "secure" not in e["states"], f"{label!r}: {e}")
    check(field(ch, "City").get("value") == "Lisbon", "ordinary values are read")
    check(any("AKIAIOSFODNN7EXAMPLE" in e["label"] for e in ch["elements"]), "static text is left alone")
    no_canary(json.dumps(ch, ensure_ascii=False), PAGE_CANARIES, "a full read")
    say(f"  {len(SECURE_LABELS)} named fields and the password input: secure, no value; "
        "2 credential-looking values: redacted; City and static text as they are")
    sk = await ok(c, "get_window_state", {"app": CHROMIUM, "skeleton": True})
    check(sk["snapshot_id"] == ch["snapshot_id"], "one snapshot")
    form = next(e for e in sk["elements"] if e["role"] in ("form", "document_web"))
    root = await ok(c, "get_window_state", {"root": form["element_token"], "max_elements": 5000})
    for label in SECURE_LABELS:
        check(field(root, label).get("value") is None, f"drill-down {label!r}")
    no_canary(json.dumps(sk, ensure_ascii=False) + json.dumps(root, ensure_ascii=False), PAGE_CANARIES,
              "a skeleton or drill-down read")
    r = await c.call_tool("get_window_state", {"app": CHROMIUM, "max_elements": 5000, "include_screenshot": True})
    check(r.is_error is False, f"capture: {h.text_of(r)}")
    shot = r.structured_content
    png = base64.b64decode(next(b for b in r.content if b.type == "image").data)
    black = 0
    wf = shot["window"]["frame"]
    for label in SECURE_LABELS + ["Account key"]:
        f = field(shot, label)["frame"]
        if f is None or f["y"] + f["h"] > wf["y"] + wf["h"] or f["y"] < wf["y"]:
            continue
        check(h.black_where(png, f, shot["window"]), f"{label!r} is black in the capture")
        black += 1
    check(black >= 10 and shot["screenshot"]["redacted"] >= black, f"{black} fields checked, {shot['screenshot']}")
    say(f"  capture: {black} secure fields in view, every one black (pixels checked)")


async def gtk_reveal_and_typing(c, errors: Errors, ns: argparse.Namespace) -> None:
    say("GTK 3: the password entry switched to visible by the model's own click")
    g = await ok(c, "get_window_state", {"app": GTK})
    pw = next(e for e in g["elements"] if e["role"] == "password_text")
    check(pw.get("value") is None and "secure" in pw["states"], str(pw))
    show = h.find(g, "check_box", "Show characters")
    r = await ok(c, "click", {"element_token": show["element_token"], "observe": {"tree": True}})
    seen = next(e for e in r["observe"]["elements"] if e["element_index"] == pw["element_index"])
    check(seen["role"] == "text", f"GTK 3 made it a plain text: {seen}")
    check("secure" in seen["states"] and seen.get("value") is None, f"still secure: {seen}")
    g2 = await ok(c, "get_window_state", {"app": GTK})
    again = next(e for e in g2["elements"] if e["element_index"] == pw["element_index"])
    check(again["role"] == "text" and "secure" in again["states"] and again.get("value") is None, str(again))
    notes = h.find(g2, "text", "Deploy notes")
    check(notes.get("value") is None and "redacted" in notes["states"], str(notes))
    no_canary(json.dumps([g, r, g2], ensure_ascii=False), [ns.gtk_password, ns.gtk_notes], "a GTK read")
    say(f"  revealed entry {again['element_token']}: role {again['role']}, states {again['states']}, no value")
    await errors.fails(c, "type_text", {"element_token": again["element_token"], "text": PW_TYPED}, "secure_field")
    await errors.fails(c, "set_value", {"element_token": again["element_token"], "value": PW_TYPED}, "secure_field")
    comment = h.find(g2, "text", "Comment")
    t = await ok(c, "type_text", {"element_token": comment["element_token"], "text": TYPED})
    check(t["readback"] == "match", f"typed into an ordinary field: {t['readback']}")
    g3 = await ok(c, "get_window_state", {"app": GTK})
    comment = h.find(g3, "text", "Comment")
    s = await ok(c, "set_value", {"element_token": comment["element_token"], "value": SET_CREDENTIAL})
    check(s["readback"] == "unverified" and s["effect"] == "dispatched", f"a credential is not read back: {s}")
    g4 = await ok(c, "get_window_state", {"app": GTK})
    comment = h.find(g4, "text", "Comment")
    check(comment.get("value") is None and "redacted" in comment["states"], str(comment))
    no_canary(json.dumps([s, g4], ensure_ascii=False), [SET_CREDENTIAL], "a result")
    say("  typing and set_value into it refused (secure_field); typed into Comment (readback match); "
        "a credential set into Comment is not read back (unverified) and reads as redacted")


async def recycled_rows(c, errors: Errors, ns: argparse.Namespace) -> None:
    say("GTK 3: a list row relabelled under the same structure")
    g = await ok(c, "get_window_state", {"app": GTK})
    alice = row_button(g, "Alice Martin")
    show = h.find(g, "check_box", "Show characters")
    os.kill(ns.gtk_pid, signal.SIGUSR1)  # the app moves every name one row down
    time.sleep(1.0)
    await errors.fails(c, "click", {"element_token": alice["element_token"]}, "stale_element_token")
    g2 = await ok(c, "get_window_state", {"app": GTK})
    check(g2["snapshot_id"] != g["snapshot_id"], "relabelled rows give a new snapshot")
    status = next(e for e in g2["elements"] if e["role"] == "label" and e["label"].startswith("Status:"))
    check(status["label"] == "Status: idle", f"nothing was clicked: {status['label']}")
    check(row_button(g2, "Alice Martin")["element_index"] != alice["element_index"], "Alice moved one row down")
    say(f"  {alice['element_token']} (Open, row of Alice Martin) is stale after the relabel; nothing was clicked")
    await errors.fails(c, "click", {"element_token": show["element_token"]}, "stale_element_token")
    say(f"  every token of {g['snapshot_id']} is stale once the window is read again ({g2['snapshot_id']})")
    now = row_button(g2, "Alice Martin")
    await ok(c, "click", {"element_token": now["element_token"]})
    g3 = await ok(c, "get_window_state", {"app": GTK})
    status = next(e for e in g3["elements"] if e["role"] == "label" and e["label"].startswith("Status:"))
    check(status["label"] == "Status: opened Alice Martin", status["label"])
    say(f"  the fresh token {now['element_token']} opens Alice Martin")


async def renamed_behind_a_read(c, errors: Errors, ns: argparse.Namespace) -> None:
    """A button renamed under the same structure, taken in by a read that did not show it: the
    act compares the name the model was last shown, so the token is stale and nothing is
    clicked; once a read shows the new name, the model may act on it."""
    say("GTK 3: a button renamed behind a read that did not show it")
    g = await ok(c, "get_window_state", {"app": GTK})
    save = h.find(g, "push_button", "Save")
    status = next(e for e in g["elements"] if e["role"] == "label" and e["label"].startswith("Status:"))
    os.kill(ns.gtk_pid, signal.SIGHUP)  # the app renames "Save" to "Delete everything"
    time.sleep(1.0)
    capped = await ok(c, "get_window_state", {"app": GTK, "max_elements": 1})
    check(capped["snapshot_id"] == g["snapshot_id"], f"the same structure: {capped['snapshot_id']}")
    check("Delete everything" not in json.dumps(capped), "the capped read does not show the button")
    err = await errors.fails(c, "click", {"element_token": save["element_token"]}, "stale_element_token")
    # Refused by the check against the name last shown (not by a read or the input agent's
    # live check that still saw "Save").
    check("renamed since a result showed it" in err["message"], err["message"])
    g2 = await ok(c, "get_window_state", {"app": GTK})
    now = h.find(g2, "push_button", "Delete everything")
    status2 = next(e for e in g2["elements"] if e["role"] == "label" and e["label"].startswith("Status:"))
    check(status2["label"] == status["label"], f"nothing was clicked: {status2['label']}")
    check(now["element_token"] == save["element_token"], f"the same row: {now['element_token']}")
    say(f"  {save['element_token']} ('Save', now 'Delete everything', not shown by the capped read of "
        f"{capped['snapshot_id']}) is stale; nothing was clicked")
    await ok(c, "click", {"element_token": now["element_token"]})
    g3 = await ok(c, "get_window_state", {"app": GTK})
    status3 = next(e for e in g3["elements"] if e["role"] == "label" and e["label"].startswith("Status:"))
    check(status3["label"] == "Status: clicked Delete everything", status3["label"])
    say("  once a read showed the new name, the same token clicks 'Delete everything'")
    os.kill(ns.gtk_pid, signal.SIGHUP)  # back to "Save"


# ---- nothing leaves a secure field (takeover) --------------------------------------------------

GTK_TITLE = "nish secrets gtk3"
SECOND_TITLE = "nish secrets gtk3 notes"


def fg(e: dict) -> dict:
    return {"element_token": e["element_token"], "delivery_mode": "foreground"}


def short(tool: str, args: dict) -> str:
    what = args.get("key") or "+".join(args.get("keys", [])) or args.get("element_token", "")
    return f"{tool} {what}{' (foreground)' if args.get('delivery_mode') == 'foreground' else ''}"


async def refused(c, errors: Errors, tool: str, args: dict, sent: list[str]) -> None:
    """One step the driver must refuse with secure_field. A step that is not refused is
    recorded in `sent` (and the attack goes on, so that a build that lets it through shows
    where the secret ends up)."""
    r = await c.call_tool(tool, args)
    err = (r.structured_content or {}).get("error") or {}
    if r.is_error and err.get("code") == "secure_field":
        errors.seen.append(json.dumps(err, ensure_ascii=False))
        check(err.get("effect") in (None, "refused"), str(err))
        say(f"    {short(tool, args)}: refused (secure_field: {err.get('message')})")
    else:
        say(f"    {short(tool, args)}: NOT REFUSED: {h.text_of(r)[:160]}")
        sent.append(short(tool, args))
    await anyio.sleep(0.5)


async def window_id(c, title: str) -> int:
    ws = (await ok(c, "list_windows"))["windows"]
    ids = [w["window_id"] for w in ws if w["app"] == GTK and w["title"] == title]
    check(len(ids) == 1, f"one window {title!r}: {ws}")
    return ids[0]


async def read_w(c, wid: int) -> dict:
    return await ok(c, "get_window_state", {"window_id": wid, "max_elements": 5000})


async def focused_in(c, wid: int, label: str) -> dict:
    """Reads window `wid` until its field `label` has the keyboard focus (5 s)."""
    deadline = time.monotonic() + 5
    while True:
        r = await read_w(c, wid)
        if "focused" in field(r, label)["states"]:
            return r
        check(time.monotonic() < deadline, f"{label!r} never took the focus: {field(r, label)}")
        await anyio.sleep(0.1)


async def click_elsewhere(c, wid: int) -> None:
    """A click on the status label: closes a menu left open, reaches no field."""
    r = await read_w(c, wid)
    status = next(e for e in r["elements"] if e["role"] == "label" and e["label"].startswith("Status:"))
    await ok(c, "click", fg(status))
    await anyio.sleep(0.5)


async def cvv_context_menu(c, errors: Errors, ns: argparse.Namespace, wid: int) -> list[str]:
    """The red-team's sequence: every step up to the other field is refused, and the other
    field does not read back the CVV. Returns the steps that were not refused."""
    say("GTK 3: the red-team's copy of a field secure by its name (CVV, plain text to GTK)")
    sent: list[str] = []
    r = await read_w(c, wid)
    cvv, note = field(r, "CVV"), field(r, "Billing note")
    check("secure" in cvv["states"] and cvv.get("value") is None, f"secure by its name: {cvv}")
    check("secure" not in note["states"], str(note))
    await ok(c, "click", fg(cvv))
    await focused_in(c, wid, "CVV")
    say(f"  a single click put the caret in the CVV ({cvv['element_token']}); then the sequence:")
    for tool, args in [("right_click", fg(cvv)), ("press_key", {"key": "Up"}),
                       ("press_key", {"key": "Up"}), ("press_key", {"key": "Return"}),
                       ("right_click", fg(cvv)), ("press_key", {"key": "Down"}),
                       ("press_key", {"key": "Down"}), ("press_key", {"key": "Return"})]:
        await refused(c, errors, tool, args, sent)
    # The other field: its context menu's Paste. A click elsewhere goes; the keys go where the
    # model may send them (or are refused: the field that had the focus last was secure).
    await ok(c, "right_click", fg(note))
    await anyio.sleep(0.6)
    for k in ("Down", "Return"):
        res = await c.call_tool("press_key", {"key": k})
        code = (res.structured_content or {}).get("error", {}).get("code") if res.is_error else None
        why = f"refused ({code}: {res.structured_content['error']['message']})" if code else "sent"
        say(f"    press_key {k} (in the other field's menu): {why}")
        await anyio.sleep(0.5)
    await click_elsewhere(c, wid)
    r = await read_w(c, wid)
    value = field(r, "Billing note").get("value") or ""
    if ns.gtk_cvv in json.dumps(r, ensure_ascii=False):
        say("  LEAK: the other field reads back the CVV")
        sent.append("the CVV was pasted into the other field")
    else:
        say(f"  the other field holds {len(value)} characters, not the CVV")
    return sent


async def cvv_edit_menu(c, errors: Errors, ns: argparse.Namespace, wid: int) -> list[str]:
    """The menu bar's Edit menu opened while the focus is in the CVV: its Copy and Select All
    refused, headless and by pointer, and every key while the menu is open."""
    say("GTK 3: the menu bar's Edit menu while the focus is in the CVV")
    sent: list[str] = []
    r = await read_w(c, wid)
    await ok(c, "click", fg(field(r, "CVV")))
    r = await focused_in(c, wid, "CVV")
    # A menu item with a submenu is a `menu` to GTK's accessibility.
    edit = next(e for e in r["elements"] if e["role"] in ("menu", "menu_item") and e["label"] == "Edit")
    await ok(c, "click", {"element_token": edit["element_token"]})
    await anyio.sleep(0.6)
    r = await read_w(c, wid)
    items = {e["label"]: e for e in r["elements"] if e["role"] == "menu_item"}
    if "offscreen" in items.get("Copy", {}).get("states", ["offscreen"]):
        # The menu item's action did not open its menu: a click by pointer does (a click
        # elsewhere than the secure field goes).
        await ok(c, "click", fg(edit))
        await anyio.sleep(0.6)
        r = await read_w(c, wid)
        items = {e["label"]: e for e in r["elements"] if e["role"] == "menu_item"}
    check("offscreen" not in items["Copy"]["states"], f"the Edit menu is open: {items['Copy']}")
    focus = [e["label"] for e in r["elements"] if "focused" in e["states"]]
    say(f"  the Edit menu is open (rows showing the focus now: {focus})")
    for tool, args in [("click", {"element_token": items["Select All"]["element_token"]}),
                       ("click", {"element_token": items["Copy"]["element_token"]}),
                       ("click", fg(items["Copy"])), ("press_key", {"key": "Down"}),
                       ("press_key", {"key": "Return"}), ("press_key", {"key": "Escape"}),
                       ("hotkey", {"keys": ["shift", "Tab"]})]:
        await refused(c, errors, tool, args, sent)
    await click_elsewhere(c, wid)
    return sent


def name_active(person: h.Person, wid: int) -> None:
    """Another X client sets the root's `_NET_ACTIVE_WINDOW` (anyone may)."""
    from Xlib import Xatom

    d = person._display()
    try:
        root = d.screen().root
        root.change_property(d.intern_atom("_NET_ACTIVE_WINDOW"), Xatom.WINDOW, 32, [wid])
        d.sync()
    finally:
        d.close()


async def cvv_other_window_named_active(c, errors: Errors, ns: argparse.Namespace, person: h.Person,
                                        wid: int) -> list[str]:
    """Keys are judged on the window that holds the X input focus: another client naming the
    app's second window active does not let Ctrl+A and Ctrl+C into the CVV of the first, and a
    paste into the second window does not show the CVV."""
    say("GTK 3: another client names the app's second window active; the focus is in the CVV")
    sent: list[str] = []
    os.kill(ns.gtk_pid, signal.SIGWINCH)  # the app shows its second window
    second_x = person.wait_window(SECOND_TITLE)
    await anyio.sleep(1.0)
    second = await window_id(c, SECOND_TITLE)
    check(second == second_x, f"the list's id {second} is the X window {second_x}")
    await ok(c, "bring_to_front", {"window_id": wid})
    await anyio.sleep(0.5)
    r = await read_w(c, wid)
    await ok(c, "click", fg(field(r, "CVV")))
    await focused_in(c, wid, "CVV")
    name_active(person, second)
    await anyio.sleep(0.5)
    ws = {w["window_id"]: w for w in (await ok(c, "list_windows"))["windows"]}
    check(ws[second]["active"] is True and ws[wid]["active"] is False,
          f"the window list believes the other client: {ws[second]}, {ws[wid]}")
    say(f"  the window list calls {second} active; the X input focus is in {wid}'s CVV")
    for keys in (["ctrl", "a"], ["ctrl", "c"]):
        await refused(c, errors, "hotkey", {"keys": keys}, sent)
    r2 = await read_w(c, second)
    await ok(c, "click", fg(field(r2, "Scratch")))
    await focused_in(c, second, "Scratch")
    await ok(c, "hotkey", {"keys": ["ctrl", "v"]})
    await anyio.sleep(0.5)
    r2 = await read_w(c, second)
    if ns.gtk_cvv in json.dumps(r2, ensure_ascii=False):
        say("  LEAK: the second window's field reads back the CVV")
        sent.append("the CVV was pasted into the second window")
    else:
        say(f"  Ctrl+V in the second window's field: it holds "
            f"{len(field(r2, 'Scratch').get('value') or '')} characters, not the CVV")
    os.kill(ns.gtk_pid, signal.SIGWINCH)  # hidden again
    await anyio.sleep(0.8)
    return sent


async def chromium_cvv(c, errors: Errors) -> list[str]:
    """Chromium: the page's CVV input (text, secure by its name): keys, a right click and a
    double click refused; Tab sent, and the focus moves on."""
    say("Chromium: keys, a right click and a double click in the page's CVV input")
    sent: list[str] = []
    await ok(c, "bring_to_front", {"app": CHROMIUM})
    await anyio.sleep(0.5)
    r = await ok(c, "get_window_state", {"app": CHROMIUM, "max_elements": 5000})
    cvv = field(r, "CVV")
    await ok(c, "click", fg(cvv))
    deadline = time.monotonic() + 5
    while "focused" not in field(r, "CVV")["states"]:
        check(time.monotonic() < deadline, "the CVV input never took the focus")
        await anyio.sleep(0.1)
        r = await ok(c, "get_window_state", {"app": CHROMIUM, "max_elements": 5000})
    for tool, args in [("press_key", {"key": "Up"}), ("press_key", {"key": "Return"}),
                       ("hotkey", {"keys": ["ctrl", "a"]}), ("hotkey", {"keys": ["ctrl", "c"]}),
                       ("right_click", fg(cvv)), ("double_click", fg(cvv))]:
        await refused(c, errors, tool, args, sent)
    await ok(c, "press_key", {"key": "Tab"})
    deadline = time.monotonic() + 5
    while "focused" in field(r, "CVV")["states"]:
        check(time.monotonic() < deadline, "Tab did not move the focus on")
        await anyio.sleep(0.1)
        r = await ok(c, "get_window_state", {"app": CHROMIUM, "max_elements": 5000})
    say("  Tab sent, and the focus moved on")
    return sent


async def truncated_capture(c, errors: Errors) -> None:
    say("Chromium: a read cut short refuses the capture")
    ch = await ok(c, "get_window_state", {"app": CHROMIUM, "max_elements": 5000})
    grow = h.find(ch, "push_button", "Add many rows")
    clicked = await ok(c, "click", {"element_token": grow["element_token"]})
    deadline = time.monotonic() + 30
    while True:
        got = await c.call_tool("get_window_state", {"app": CHROMIUM, "max_elements": 5000})
        r = got.structured_content
        if got.is_error:
            # A page that just grew may keep the app busy past one read's budget.
            check(r["error"]["code"] == "app_not_responding", h.text_of(got))
        elif r["truncated"] and r["element_count"] > 500:
            break
        check(time.monotonic() < deadline, f"the page never grew past one read: {clicked['effect']}")
        await anyio.sleep(0.3)
    await errors.fails(c, "get_window_state", {"app": CHROMIUM, "include_screenshot": True}, "secure_field")
    say(f"  read truncated ({r['truncated_reason']}, {r['element_count']} rows walked): capture refused")


async def run(ns: argparse.Namespace) -> None:
    broker = h.Broker(ns.driver, "linux", env={"NISH_LOG": "debug"})
    person = h.Person(broker.env)
    errors = Errors()
    canaries = PAGE_CANARIES + [TYPED, PW_TYPED, SET_CREDENTIAL, ns.gtk_password, "gtk-notes-canary",
                                ns.gtk_cvv]
    try:
        ctl = h.Control()
        async with h.host(ns.shim, broker, "secrets-e2e", "2025-11-25", ctl) as c:
            st = await h.start_with_consent(c, person, {"apps": [CHROMIUM, GTK]})
            say(f"granted: {[a['app'] for a in st['apps']]}")
            await chromium_fields(c, errors)
            await gtk_reveal_and_typing(c, errors, ns)
            await recycled_rows(c, errors, ns)
            await renamed_behind_a_read(c, errors, ns)
            await ok(c, "end_session")
            st = await h.start_with_consent(c, person, {"input": "takeover", "apps": [CHROMIUM, GTK]},
                                            ("takeover",))
            check(st["takeover"]["on"] is True, f"takeover: {st['takeover']}")
            say("a takeover session: nothing leaves a secure field")
            wid = await window_id(c, GTK_TITLE)
            await ok(c, "bring_to_front", {"window_id": wid})
            await anyio.sleep(0.5)
            sent = await cvv_context_menu(c, errors, ns, wid)
            sent += await cvv_edit_menu(c, errors, ns, wid)
            sent += await cvv_other_window_named_active(c, errors, ns, person, wid)
            sent += await chromium_cvv(c, errors)
            check(not sent, f"steps at a secure field that were not refused: {sent}")
            say("  every step at a secure field was refused, and no other field shows the CVV")
            await truncated_capture(c, errors)
            await ok(c, "end_session")
        with open(broker.audit, encoding="utf-8") as f:
            audit = f.read()
        broker.log.flush()
        with open(os.path.join(broker.dir, "broker.log"), encoding="utf-8", errors="replace") as f:
            log = f.read()
        check("DEBUG" in log, "the broker and its agents logged at debug")
        check(len(audit.splitlines()) > 10, "the audit has the session")
        no_canary(audit, canaries, "the audit")
        no_canary(log, canaries, "the broker's or an agent's log")
        no_canary("\n".join(errors.seen), canaries, "an error")
        say(f"canaries: {len(canaries)} absent from {len(audit.splitlines())} audit records, "
            f"{len(log.splitlines())} log lines (debug) and {len(errors.seen)} errors")
    except BaseException:
        say("broker log:\n" + broker.log_text())
        raise
    finally:
        broker.stop()
    say("ALL CHECKS PASSED")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--driver", required=True)
    p.add_argument("--shim", required=True)
    p.add_argument("--gtk-pid", type=int, required=True)
    p.add_argument("--gtk-password", required=True)
    p.add_argument("--gtk-notes", required=True)
    p.add_argument("--gtk-cvv", required=True)
    ns = p.parse_args()
    anyio.run(run, ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
