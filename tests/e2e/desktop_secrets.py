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
- A read cut short (the page grown past 5,000 elements): the capture is refused.
- Canaries (typed text, the password, credential-looking values, the page's secret values)
  appear in no audit record, no broker or agent log line and no error.

    desktop_secrets.py --driver .../nish-driver --shim .../nish-mcp --gtk-pid N \\
        --gtk-password TEXT --gtk-notes TEXT
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
PAGE_CANARIES += ["40133", "canary-pw-40134", "canary-ce-40135", "ghp_Q8zR2mWx9LpA4sKd7HfT3nVb6cYe1uJo5iGk", "vT7qLm2XpR9sKw4NzB6d"]
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


def black_where(png: bytes, rect: dict, window: dict) -> bool:
    w, hgt, ch, px = h.read_png(png)
    x0 = max(0, rect["x"] - window["frame"]["x"] + 1)
    y0 = max(0, rect["y"] - window["frame"]["y"] + 1)
    x1 = min(w, rect["x"] - window["frame"]["x"] + rect["w"] - 1)
    y1 = min(hgt, rect["y"] - window["frame"]["y"] + rect["h"] - 1)
    check(x1 > x0 and y1 > y0, f"rectangle {rect} is outside the capture")
    return all(px[(y * w + x) * ch:(y * w + x) * ch + 3] == b"\0\0\0"
               for y in range(y0, y1) for x in range(x0, x1, 2))


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
        check(black_where(png, f, shot["window"]), f"{label!r} is black in the capture")
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
    canaries = PAGE_CANARIES + [TYPED, PW_TYPED, SET_CREDENTIAL, ns.gtk_password, "gtk-notes-canary"]
    try:
        ctl = h.Control()
        async with h.host(ns.shim, broker, "secrets-e2e", "2025-11-25", ctl) as c:
            st = await h.start_with_consent(c, person, {"apps": [CHROMIUM, GTK]})
            say(f"granted: {[a['app'] for a in st['apps']]}")
            await chromium_fields(c, errors)
            await gtk_reveal_and_typing(c, errors, ns)
            await recycled_rows(c, errors, ns)
            await renamed_behind_a_read(c, errors, ns)
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
    ns = p.parse_args()
    anyio.run(run, ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
