// The MCP read benchmark's second client: the official MCP TypeScript SDK (the client most
// desktop hosts are built on), through nish-mcp to a broker that tests/bench/read_latency.py
// started. It starts a session (the person answers the consent dialog, played by the Python
// side), reads the window once (cold), waits 1.2 s, reads it `--warm` times (warm), ends the
// session and prints one JSON line: {"cold": ms, "warm": [ms...], "rows": n, "parse": [ms...]}.
//
//   node read_latency.mjs --shim PATH --socket PATH --pid PID --app NAME [--warm 7]
//
// tests/benches/mcp_reads.rs copies this folder's files to .cache/ts-client and runs `npm ci`
// there (with NISH_BENCH_TS=1).

import { performance } from "node:perf_hooks";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

function arg(name, fallback) {
  const i = process.argv.indexOf(name);
  if (i >= 0 && i + 1 < process.argv.length) return process.argv[i + 1];
  if (fallback === undefined) throw new Error(`missing ${name}`);
  return fallback;
}

const shim = arg("--shim");
const socket = arg("--socket");
const pid = Number(arg("--pid"));
const app = arg("--app");
const warmCount = Number(arg("--warm", "7"));

const transport = new StdioClientTransport({
  command: shim,
  args: ["--socket", socket],
  env: { ...process.env, NISH_LOG: "warn" },
  stderr: "inherit",
});

// The client's own parse of each line from the server (JSON and the SDK's message schema),
// timed around the transport's line buffer: the last one before a call returns is its result's.
let lastParse = NaN;
const buf = transport._readBuffer;
if (buf && typeof buf.readMessage === "function") {
  const readMessage = buf.readMessage.bind(buf);
  buf.readMessage = () => {
    const t0 = performance.now();
    const m = readMessage();
    if (m !== null) lastParse = performance.now() - t0;
    return m;
  };
}

const client = new Client({ name: "read-bench-ts", version: "1.0" });
const timeout = { timeout: 120000 };

function check(cond, msg) {
  if (!cond) throw new Error(msg);
}

function textOf(r) {
  return (r.content || []).filter((c) => c.type === "text").map((c) => c.text).join("");
}

async function call(name, args) {
  const r = await client.callTool({ name, arguments: args }, undefined, timeout);
  check(r.isError !== true, `${name} failed: ${textOf(r)}`);
  return r;
}

async function read() {
  lastParse = NaN;
  const t0 = performance.now();
  const r = await call("get_window_state", { pid, max_elements: 5000 });
  const ms = performance.now() - t0;
  check(Array.isArray(r.structuredContent?.elements), "a read without elements");
  return [ms, r];
}

await client.connect(transport, timeout);
// As a host does: the tool list first (the client then checks each result against the tool's
// output schema, as the Python client does).
await client.listTools(undefined, timeout);
await call("start_session", { apps: [app] });
const [cold] = await read();
await new Promise((res) => setTimeout(res, 1200));
const warm = [];
const parse = [];
let rows = 0;
for (let i = 0; i < warmCount; i++) {
  const [ms, r] = await read();
  warm.push(ms);
  if (!Number.isNaN(lastParse)) parse.push(lastParse);
  rows = r.structuredContent.elements.length;
}
await call("end_session", {});
await client.close();
process.stdout.write(JSON.stringify({ cold, warm, rows, parse }) + "\n");
