// The official TypeScript SDK client (@modelcontextprotocol/sdk, pinned in package.json)
// under the benchmark's driver contract: the same spec and result keys as bench/workers.py.
//
// Why a Node script of its own: the TypeScript client is the one users would pick instead
// of a Python client, so the benchmark drives it the way bench/workers.py drives the
// Python clients: connect, list the tools once, warm up, then timed calls, each with a
// distinct message whose echo is checked (a reply delivered to the wrong caller fails the
// run). CPU time is process.cpuUsage() of this process alone (the server is a child).
//
// Usage: node bench/ts_client.mjs '<json spec>'; the last stdout line is the JSON result.
// spec.server: the stdio server's argv; or spec.url: a Streamable HTTP endpoint.

import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const spec = JSON.parse(process.argv[2]);
const deadline = setTimeout(() => {
  process.stderr.write(`ts_client: deadline of ${spec.deadline} s passed\n`);
  process.exit(3);
}, (spec.deadline ?? 240) * 1000);
deadline.unref();

// The largest message accepted: above the largest result benchmarked, as for every client
// (bench/clients.py MAX_MESSAGE; the SDK's stdio default is 10 MiB).
const MAX_MESSAGE = 64 * 1024 * 1024;

function transportFor(s) {
  if (s.url) return new StreamableHTTPClientTransport(new URL(s.url));
  const [command, ...args] = s.server;
  return new StdioClientTransport({ command, args, stderr: "inherit", maxBufferSize: MAX_MESSAGE });
}

async function open(s) {
  const client = new Client({ name: "bench-ts", version: "0" });
  await client.connect(transportFor(s));
  await client.listTools();
  return client;
}

function textOf(result) {
  return result.content[0].text;
}

let counter = 0;

/** One checked call: a message nobody else gets, and its echo must come back. */
async function echo(client) {
  const message = `m${++counter}`;
  const text = textOf(await client.callTool({ name: "echo", arguments: { message } }));
  if (text !== message) throw new Error(`echo of ${message} returned ${JSON.stringify(text)}`);
}

function cpuSeconds() {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
}

function statusKiB(field) {
  const line = readFileSync("/proc/self/status", "ascii")
    .split("\n")
    .find((l) => l.startsWith(field));
  return line ? Number.parseInt(line.split(/\s+/)[1], 10) : 0;
}

function resetPeak() {
  try {
    writeFileSync(`/proc/${process.pid}/clear_refs`, "5");
  } catch {
    // not Linux: the peak then covers the whole process
  }
}

/** Voluntary context switches of this process; CPU seconds and switches of its children
 * (the stdio server), from /proc: the same counts as bench/measure.py's Wakeups. */
function wakeups() {
  const out = { client: process.resourceUsage().voluntaryContextSwitches, serverCpu: 0, server: 0 };
  let pids = [];
  try {
    for (const task of readdirSync("/proc/self/task")) {
      pids = pids.concat(readFileSync(`/proc/self/task/${task}/children`, "ascii").split(/\s+/));
    }
  } catch {
    return out;
  }
  for (const pid of pids.filter(Boolean)) {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, "ascii").split(")").pop().trim().split(/\s+/);
      out.serverCpu += (Number(fields[11]) + Number(fields[12])) / 100;
      const line = readFileSync(`/proc/${pid}/status`, "ascii")
        .split("\n")
        .find((l) => l.startsWith("voluntary_ctxt_switches:"));
      if (line) out.server += Number.parseInt(line.split(/\s+/)[1], 10);
    } catch {
      // the child is gone
    }
  }
  return out;
}

function percentile(values, q) {
  const ordered = [...values].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((ordered.length * q) / 100));
  return ordered[Math.min(ordered.length, rank) - 1];
}

async function throughput(s) {
  const client = await open(s);
  for (let i = 0; i < s.warmup; i++) await echo(client);
  const latencies = [];
  let cpu0 = cpuSeconds();
  let wall0 = performance.now();
  for (let i = 0; i < s.seq; i++) {
    const start = performance.now();
    await echo(client);
    latencies.push((performance.now() - start) / 1e3);
  }
  const seqWall = (performance.now() - wall0) / 1e3;
  const seqCpu = cpuSeconds() - cpu0;
  const out = {
    seq_calls_s: s.seq / seqWall,
    seq_p50_us: percentile(latencies, 50) * 1e6,
    seq_p99_us: percentile(latencies, 99) * 1e6,
    seq_cpu_us: (seqCpu / s.seq) * 1e6,
  };
  if (s.conc) {
    let remaining = s.conc;
    const caller = async () => {
      while (remaining > 0) {
        remaining -= 1;
        await echo(client);
      }
    };
    const before = wakeups();
    cpu0 = cpuSeconds();
    wall0 = performance.now();
    await Promise.all(Array.from({ length: s.inflight }, caller));
    const wall = (performance.now() - wall0) / 1e3;
    out.conc_calls_s = s.conc / wall;
    out.conc_cpu_us = ((cpuSeconds() - cpu0) / s.conc) * 1e6;
    const after = wakeups();
    out.conc_client_wakeups = (after.client - before.client) / s.conc;
    out.conc_server_wakeups = (after.server - before.server) / s.conc;
    out.conc_server_cpu_us = ((after.serverCpu - before.serverCpu) / s.conc) * 1e6;
  }
  await client.close();
  return out;
}

async function payload(s) {
  const client = await open(s);
  const size = s.result_bytes || s.arg_bytes;
  const call = async (i, n) => {
    const message = `m${i}:`;
    const params = s.result_bytes
      ? { name: "blob", arguments: { message, bytes: n } }
      : { name: "echo", arguments: { message: message + "x".repeat(n - message.length) } };
    const text = textOf(await client.callTool(params, undefined, { timeout: 600000 }));
    if (text.length !== n || !text.startsWith(message)) {
      throw new Error(`call ${i}: ${text.length} bytes starting ${JSON.stringify(text.slice(0, 20))}`);
    }
  };
  await call(0, 1024); // warm the path with a small call first
  const times = [];
  const base = statusKiB("VmRSS:") * 1024;
  resetPeak();
  const cpu0 = cpuSeconds();
  const budgetEnd = performance.now() + (s.budget ?? Number.POSITIVE_INFINITY) * 1e3;
  for (let i = 1; i <= s.repeats; i++) {
    const start = performance.now();
    await call(i, size);
    times.push((performance.now() - start) / 1e3);
    if (performance.now() > budgetEnd) break; // a slow client gets fewer calls, not a timeout
  }
  const cpu = (cpuSeconds() - cpu0) / times.length;
  const peak = statusKiB("VmHWM:") * 1024;
  await client.close();
  times.sort((a, b) => a - b);
  return { time_s: times[Math.floor(times.length / 2)], cpu_s: cpu, rss_base: base, rss_peak: peak };
}

async function close(s) {
  const client = await open(s);
  await echo(client);
  const start = performance.now();
  await client.close();
  return { close_s: (performance.now() - start) / 1e3 };
}

const tasks = { throughput, payload, close };
const task = tasks[spec.task];
if (!task) {
  process.stderr.write(`ts_client: no task ${spec.task}\n`);
  process.exit(2);
}
const result = await task(spec);
process.stdout.write(`${JSON.stringify(result)}\n`);
process.exit(0);
