// A 2025-11-25 task client for `agenthost serve --http`: the official TypeScript SDK's
// Client and its task support (`client.experimental.tasks`).
//
// Usage: node ts_tasks_client.mjs URL
//
// Two sessions (a, b). Session a lists the tools, runs `tk__research` (an upstream with the
// 2026-07-28 tasks extension) and `ev__simulate-research-query` (server-everything,
// 2025-11-25 tasks) as tasks with callToolStream, lists its tasks, starts a long task and
// cancels it, asks a task of `ev__echo` (no task support), and calls `tk__research`
// plainly; session b tries a's task id. Prints what it saw as one JSON object: the test
// decides, this records.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, CreateTaskResultSchema } from "@modelcontextprotocol/sdk/types.js";

const url = new URL(process.argv[2]);
const open = async () => {
  const client = new Client({ name: "ts-tasks", version: "1.0.0" }, { capabilities: {} });
  await client.connect(new StreamableHTTPClientTransport(url));
  return client;
};
const failure = (e) => ({ code: e.code ?? null, message: String(e.message ?? e) });
const a = await open();
const b = await open();
const seen = { capabilities: a.getServerCapabilities().tasks ?? null };
seen.tools = Object.fromEntries(
  (await a.listTools()).tools.map((t) => [t.name, t.execution?.taskSupport ?? null]),
);

async function stream(name, args) {
  const messages = [];
  const params = { name, arguments: args, task: { ttl: 60000 } };
  for await (const m of a.experimental.tasks.callToolStream(params)) {
    if (m.type === "result") messages.push({ type: "result", result: m.result });
    else if (m.type === "error") messages.push({ type: "error", error: failure(m.error) });
    else messages.push({ type: m.type, taskId: m.task.taskId, status: m.task.status });
  }
  return messages;
}

seen.research = await stream("tk__research", { topic: "tides", steps: 2, delay: 0.2 });
seen.everything = await stream("ev__simulate-research-query", { topic: "tides" });
seen.listed = (await a.experimental.tasks.listTasks()).tasks.map((t) => t.status);

const long = await a.request(
  {
    method: "tools/call",
    params: { name: "tk__research", arguments: { topic: "long", steps: 100, delay: 0.2 }, task: { ttl: 60000 } },
  },
  CreateTaskResultSchema,
);
const id = long.task.taskId;
seen.long = long.task.status;
seen.idIsOurs = id.length >= 20;
for (const [what, call] of [
  ["otherGet", () => b.experimental.tasks.getTask(id)],
  ["otherCancel", () => b.experimental.tasks.cancelTask(id)],
  ["otherResult", () => b.experimental.tasks.getTaskResult(id, CallToolResultSchema)],
]) {
  try {
    seen[what] = { reached: await call() };
  } catch (e) {
    seen[what] = failure(e);
  }
}
seen.otherList = (await b.experimental.tasks.listTasks()).tasks.length;
seen.stillRunning = (await a.experimental.tasks.getTask(id)).status;
seen.cancelled = (await a.experimental.tasks.cancelTask(id)).status;
seen.afterCancel = (await a.experimental.tasks.getTask(id)).status;
try {
  seen.cancelAgain = await a.experimental.tasks.cancelTask(id);
} catch (e) {
  seen.cancelAgain = failure(e);
}
try {
  seen.cancelledResult = await a.experimental.tasks.getTaskResult(id, CallToolResultSchema);
} catch (e) {
  seen.cancelledResult = failure(e);
}
try {
  seen.forbidden = await a.request(
    { method: "tools/call", params: { name: "ev__echo", arguments: { message: "x" }, task: { ttl: 60000 } } },
    CreateTaskResultSchema,
  );
} catch (e) {
  seen.forbidden = failure(e);
}
seen.plain = await a.callTool({ name: "tk__research", arguments: { topic: "plain", steps: 1, delay: 0.1 } });
await a.close();
await b.close();
console.log(JSON.stringify(seen));
