#!/usr/bin/env python3
"""The MCP read benchmark: a full read of one window (get_window_state, max_elements 5000)
through the official MCP Python client, nish-mcp and nish-driver serve --backend linux (release
build), cold (the first read of the window by a fresh broker) and warm (the window unchanged
since the last read), beside the pyatspi walker (tests/bench/pyatspi_walk.py) on the same window
in the same run; and the bytes each row of the full read costs on the wire (the result's
structured content and its text content, as the host receives them). Run inside a test desktop's
environment with the app started; prints markdown.

    read_latency.py --driver .../nish-driver --shim .../nish-mcp --pid PID --app NAME
                    [--brokers 5] [--warm 7] [--ts-client tests/bench/ts]
                    [--walk .../examples/walk] [--summary PATH]

With `--walk` (reader-agent/examples/walk, release build), each round also runs that walker in a
fresh process for one walk of the same window (`walk --pid PID -n 1`: the reader's own walk code,
in-process, with no broker, sandbox, filter or MCP), alternately before and after the round's
broker, and prints its first walk beside the broker's first read after consent, with the ratio.

Each broker also reads the window once in each result form (`both`, `text`, `structured`, with
`max_elements` 5000) and once with the defaults (no `max_elements`: the byte budget), and the
sizes of the last broker's results are printed. `--summary PATH` writes the figures as JSON.

With `--ts-client` (a folder where `npm ci` installed tests/bench/ts), each round also starts a
fresh broker for the official MCP TypeScript client (tests/bench/ts/read_latency.mjs, run by
node), which reads the same window the same way; its figures are printed beside the Python
client's.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

import anyio
import mcp.client.stdio as sdk_stdio

sys.path.insert(0, __file__.rsplit("/", 2)[0] + "/e2e")
import nishhost as h  # noqa: E402
from nishhost import check  # noqa: E402

# The client's own parse of each line from the server (the SDK's line parser, timed inside
# the client): the last one before a call returns is its result's.
LAST_PARSE_MS = [float("nan")]
_sdk_parse_line = getattr(sdk_stdio, "_parse_line", None)
if _sdk_parse_line is not None:
    def _timed_parse_line(line):
        t0 = time.perf_counter()
        m = _sdk_parse_line(line)
        LAST_PARSE_MS[0] = (time.perf_counter() - t0) * 1000
        return m

    sdk_stdio._parse_line = _timed_parse_line


def wire_bytes(result) -> dict[str, int]:
    """The bytes of a tool result as JSON on the wire: the structured content (compact JSON, as
    the shim writes it) and the text content (a JSON string)."""
    sc = result.structured_content
    text = "".join(c.text for c in result.content if c.type == "text")
    structured = len(json.dumps(sc, separators=(",", ":"), ensure_ascii=False).encode())
    elements = len(json.dumps(sc.get("elements", []), separators=(",", ":"), ensure_ascii=False).encode())
    tree_text = len(json.dumps(sc.get("tree_text", ""), ensure_ascii=False).encode())
    return {
        "structured": structured,
        "elements": elements,
        "tree_text": tree_text,
        "text": len(json.dumps(text, ensure_ascii=False).encode()),
    }


async def read(c, pid: int, extra: dict | None = None):
    LAST_PARSE_MS[0] = float("nan")
    args = {"pid": pid, "max_elements": 5000} if extra is None else {"pid": pid, **extra}
    t0 = time.perf_counter()
    r = await c.call_tool("get_window_state", args)
    ms = (time.perf_counter() - t0) * 1000
    check(r.is_error is False, f"read failed: {h.text_of(r)}")
    return ms, r


PARSES: list[float] = []


FORMS = ("both", "text", "structured")


def sizes(r) -> dict:
    """A result's sizes as the client received it: the text content (UTF-8 bytes of the text, and
    as a JSON string on the wire) and the structured content (compact JSON)."""
    sc = r.structured_content
    text = "".join(c.text for c in r.content if c.type == "text")
    b = wire_bytes(r)
    # Rows in the result: its elements, or (the text form has none) its text's row lines.
    rows = (len(sc["elements"]) if "elements" in sc
            else sum(1 for l in text.splitlines() if re.match(r"\s*\[\d+\] ", l)))
    return {"rows": rows,
            "text_utf8": len(text.encode()), "text": b["text"], "structured": b["structured"],
            "truncated": sc.get("truncated"), "truncated_reason": sc.get("truncated_reason"),
            "continue_from": sc.get("continue_from") is not None}


async def one_broker(ns: argparse.Namespace) -> tuple[float, list[float], object, list[float], int, dict]:
    # The reader logs each walk's own time ("tree read ... ms=N") at info.
    broker = h.Broker(ns.driver, "linux", {"NISH_LOG": os.environ.get("NISH_BENCH_LOG", "info")})
    person = h.Person(broker.env)
    try:
        async with h.host(ns.shim, broker, "read-bench") as c:
            await h.start_with_consent(c, person, {"apps": [ns.app]})
            cold, r = await read(c, ns.pid)
            # The reader asks the registry for events at its first read and keeps no walk
            # until a second later (applications learn of it after some time): the warm reads
            # are those of a broker that has run for a while.
            await anyio.sleep(1.2)
            warm = []
            for _ in range(ns.warm):
                ms, r = await read(c, ns.pid)
                warm.append(ms)
                if LAST_PARSE_MS[0] == LAST_PARSE_MS[0]:
                    PARSES.append(LAST_PARSE_MS[0])
            forms = {}
            for form in FORMS:
                _, rf = await read(c, ns.pid, {"max_elements": 5000, "result_form": form})
                forms[form] = sizes(rf)
            _, rd = await read(c, ns.pid, {})
            forms["default"] = sizes(rd)
            await h.ok(c, "end_session")
        broker.log.flush()
        with open(os.path.join(broker.dir, "broker.log"), encoding="utf-8", errors="replace") as f:
            lines = [l for l in f.read().splitlines() if "tree read" in l]
        # Walks only: a read answered by the window's kept walk logs its freshness as
        # `fresh=Reused {...}` (and made no walk).
        walks = [float(m.group(1)) for l in lines if "fresh=Reused" not in l
                 for m in [re.search(r" ms=(\d+)", l)] if m]
        kept = sum(1 for l in lines if "fresh=Reused" in l)
        keep = os.environ.get("NISH_BENCH_KEEP_LOG")
        if keep:
            # The broker's whole log (its agents' too), for where a read's time goes.
            with open(os.path.join(broker.dir, "broker.log"), "rb") as src, \
                    open(f"{keep}.{ns.app}.{os.getpid()}.{time.monotonic_ns()}.log", "wb") as dst:
                dst.write(src.read())
        if os.environ.get("NISH_BENCH_LOG"):
            print("\n".join(l for l in open(os.path.join(broker.dir, "broker.log"), errors="replace").read().splitlines() if "kept" in l or "window list" in l)[-4000:])
        return cold, warm, r, walks, kept, forms
    finally:
        broker.stop()


def one_broker_ts(ns: argparse.Namespace) -> dict:
    """A fresh broker read through the TypeScript client: cold, then warm, as one_broker."""
    broker = h.Broker(ns.driver, "linux", {"NISH_LOG": os.environ.get("NISH_BENCH_LOG", "info")})
    person = h.Person(broker.env)
    try:
        with h.consent_answered(person) as answered:
            p = subprocess.run(
                ["node", os.path.join(ns.ts_client, "read_latency.mjs"), "--shim", ns.shim,
                 "--socket", broker.socket, "--pid", str(ns.pid), "--app", ns.app,
                 "--warm", str(ns.warm)],
                env=broker.env, capture_output=True, text=True, timeout=600)
        check(p.returncode == 0, f"the TypeScript client failed ({answered}): {p.stderr[-2000:]}")
        return json.loads(p.stdout.strip().splitlines()[-1])
    finally:
        broker.stop()


def pyatspi_walk(pid: int, frame: dict, repeats: int) -> tuple[int, list[float]]:
    script = os.path.join(os.path.dirname(__file__), "pyatspi_walk.py")
    p = subprocess.run(["/usr/bin/python3", script, "--pid", str(pid), "--x", str(frame["x"]),
                        "--y", str(frame["y"]), "--w", str(frame["w"]), "--h", str(frame["h"]),
                        "--repeats", str(repeats)], capture_output=True, text=True, timeout=900)
    check(p.returncode == 0, f"pyatspi walker: {p.stderr}")
    out = json.loads(p.stdout.strip().splitlines()[-1])
    return out["nodes"], out["ms"]


def plain_walk(walk: str, pid: int) -> tuple[int, float]:
    """One walk of the window by the reader's own walk code in a fresh process (no broker,
    sandbox, filter or MCP): its nodes and the walk's milliseconds."""
    p = subprocess.run([walk, "--pid", str(pid), "-n", "1"], capture_output=True, text=True,
                       timeout=120)
    check(p.returncode == 0, f"walk: {p.stderr[-2000:]}")
    line = p.stdout.strip().splitlines()[-1]
    f = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
    return int(f["nodes"]), float(f["first_ms"])


def fmt(v: list[float]) -> str:
    return f"{min(v):.1f} / {statistics.median(v):.1f}"


async def run(ns: argparse.Namespace) -> None:
    h.VERBOSE = False
    colds: list[float] = []
    warms: list[float] = []
    last = None
    walker: list[float] = []
    walks: list[float] = []
    kept = 0
    nodes = 0
    ts_colds: list[float] = []
    ts_warms: list[float] = []
    ts_parses: list[float] = []
    plain: list[float] = []
    plain_nodes = 0
    cold_walks: list[float] = []
    forms: dict = {}
    # Brokers and walker runs interleave, so the machine's drift hits both.
    for i in range(ns.brokers):
        # The plain walk alternately before and after the broker, so neither is always the first
        # to touch the window after the other.
        if ns.walk and i % 2 == 0:
            plain_nodes, ms = plain_walk(ns.walk, ns.pid)
            plain.append(ms)
        cold, warm, last, w, k, forms = await one_broker(ns)
        if ns.walk and i % 2 == 1:
            plain_nodes, ms = plain_walk(ns.walk, ns.pid)
            plain.append(ms)
        if w:
            cold_walks.append(w[0])
        walks.extend(w)
        kept += k
        colds.append(cold)
        warms.extend(warm)
        frame = last.structured_content["window"]["frame"]
        n, ms = pyatspi_walk(ns.pid, frame, max(1, ns.warm // 2))
        nodes = n
        walker.extend(ms)
        if ns.ts_client:
            out = one_broker_ts(ns)
            check(out["rows"] == len(last.structured_content["elements"]),
                  f"the TypeScript client read {out['rows']} rows")
            ts_colds.append(out["cold"])
            ts_warms.extend(out["warm"])
            ts_parses.extend(out["parse"])
    sc = last.structured_content
    rows = len(sc["elements"])
    b = wire_bytes(last)
    print(f"{ns.app}: {rows} rows (pyatspi walker: {nodes} nodes); {ns.brokers} brokers, "
          f"{ns.warm} warm reads each; milliseconds, min / median\n")
    print("| read | min / median |")
    print("|---|---|")
    print(f"| nish-driver, MCP full read, cold (a fresh broker's first read) | {fmt(colds)} |")
    print(f"| nish-driver, MCP full read, warm (unchanged since the last read) | {fmt(warms)} |")
    if walks:
        print(f"| of the driver's reads, the reader's walks (its log, whole ms) | {fmt(walks)} |")
    if PARSES:
        print(f"| of a warm read, the MCP client's own parse of the result line | {fmt(PARSES)} |")
    if ts_colds:
        print(f"| nish-driver, MCP full read, cold, TypeScript client | {fmt(ts_colds)} |")
        print(f"| nish-driver, MCP full read, warm, TypeScript client | {fmt(ts_warms)} |")
        if ts_parses:
            print(f"| of a warm read, the TypeScript client's own parse of the result line | {fmt(ts_parses)} |")
    print(f"| pyatspi walker, one walk | {fmt(walker)} |")
    if plain:
        print(f"\nfirst read after consent against a plain walker's first walk "
              f"(reader-agent/examples/walk -n 1, a fresh process; {plain_nodes} nodes):\n")
        print("| first read | min / median | MCP / walker (median) |")
        print("|---|---|---|")
        print(f"| plain walker's first walk (fresh process) | {fmt(plain)} | |")
        print(f"| MCP get_window_state right after consent (fresh broker) | {fmt(colds)} | "
              f"{statistics.median(colds) / statistics.median(plain):.2f}x |")
        if cold_walks:
            print(f"| of it, the broker's reader's first walk (its log, whole ms) | {fmt(cold_walks)} | "
                  f"{statistics.median(cold_walks) / statistics.median(plain):.2f}x |")
    print(f"\nreads answered by the window's kept walk (no walk): {kept} of {ns.brokers * (ns.warm + 1)}\n")
    total = b["structured"] + b["text"]
    print(f"bytes per row on the wire: {total / rows:.1f} (structured {b['structured'] / rows:.1f}, "
          f"of it elements {b['elements'] / rows:.1f} and tree_text {b['tree_text'] / rows:.1f}; "
          f"text content {b['text'] / rows:.1f})")
    print(f"\nresult forms ({ns.app}, max_elements 5000, and the default read with no max_elements); "
          "bytes as the client received them: text content as a JSON string, structured content "
          "as compact JSON\n")
    print("| read | rows | truncated | text content B | structured content B | total B | text / row | structured / row | total / row |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, f in forms.items():
        rows_f = max(1, f["rows"])
        cut = f"{f['truncated_reason'] or 'yes'}" if f["truncated"] else "no"
        label = f"result_form {name}" if name in FORMS else "default (no max_elements)"
        print(f"| {label} | {f['rows']} | {cut} | {f['text']} | {f['structured']} | "
              f"{f['text'] + f['structured']} | {f['text'] / rows_f:.1f} | "
              f"{f['structured'] / rows_f:.1f} | {(f['text'] + f['structured']) / rows_f:.1f} |")
    if ns.summary:
        with open(ns.summary, "w", encoding="utf-8") as f:
            json.dump({"app": ns.app, "rows": rows, "cold": colds, "plain": plain,
                       "plain_nodes": plain_nodes, "cold_walks": cold_walks, "pyatspi": walker,
                       "pyatspi_nodes": nodes, "forms": forms}, f)
    dump = os.environ.get("NISH_BENCH_DUMP")
    if dump:
        # The last warm read's result as the host received it, for a look at where its bytes go.
        with open(f"{dump}.{ns.app}.json", "w", encoding="utf-8") as f:
            text = "".join(c.text for c in last.content if c.type == "text")
            json.dump({"structured": sc, "text": text}, f, ensure_ascii=False)
    if ns.sample:
        for e in sc["elements"][: ns.sample]:
            print(json.dumps(e, separators=(",", ":"), ensure_ascii=False))
        print("\n".join(sc["tree_text"].splitlines()[: ns.sample]))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--driver", required=True)
    p.add_argument("--shim", required=True)
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--app", required=True)
    p.add_argument("--brokers", type=int, default=5)
    p.add_argument("--warm", type=int, default=7)
    p.add_argument("--sample", type=int, default=0)
    p.add_argument("--ts-client", default="")
    p.add_argument("--walk", default="")
    p.add_argument("--summary", default="")
    anyio.run(run, p.parse_args())
    return 0


if __name__ == "__main__":
    sys.exit(main())
