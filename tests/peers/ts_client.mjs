// A downstream client for `agenthost serve`: the official TypeScript SDK's Client.
//
// Usage: node ts_client.mjs -- COMMAND...   (stdio)   |   node ts_client.mjs URL (HTTP)
//
// Lists tools, prompts, resources; calls `echo` and `slow` (with progress); completes a
// prompt argument; cancels a long `slow` call once it reported progress, then calls
// `echo` again. Prints what it saw as one JSON object: the test decides, this records.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const args = process.argv.slice(2);
const transport =
  args[0] === "--"
    ? new StdioClientTransport({ command: args[1], args: args.slice(2), env: process.env, stderr: "inherit" })
    : new StreamableHTTPClientTransport(new URL(args[0]));
const client = new Client({ name: "ts-downstream", version: "1.0.0" }, { capabilities: {} });
await client.connect(transport);
const seen = { serverVersion: client.getServerVersion(), protocol: transport.protocolVersion ?? null };
// What reached the client, in order, before the first `slow` call's answer (`wire`): the
// SDK hands a notification to its handler a microtask later but settles the response at
// once, so a progress notification read in the same chunk as the answer is dropped by
// the SDK itself ("unknown token"). The wire shows what the gateway delivered.
let wire = null;
const deliver = transport.onmessage;
transport.onmessage = (message, extra) => {
  if (wire !== null) {
    if (message.method === "notifications/progress") wire.push(message.params.progress);
    else if ("result" in message || "error" in message) [seen.wire, wire] = [wire, null];
  }
  deliver?.(message, extra);
};
seen.tools = (await client.listTools()).tools.map((t) => t.name);
seen.prompts = (await client.listPrompts()).prompts.map((p) => p.name);
seen.resources = (await client.listResources()).resources.map((r) => r.uri);
seen.echo = await client.callTool({ name: "echo", arguments: { message: "from ts" } });
const progress = [];
wire = [];
seen.slow = await client.callTool(
  { name: "slow", arguments: { seconds: 0.3, steps: 3 } },
  undefined,
  { onprogress: (p) => progress.push(p.progress) },
);
seen.progress = progress;
seen.completion = (
  await client.complete({ ref: { type: "ref/prompt", name: "greet" }, argument: { name: "style", value: "p" } })
).completion.values;
const controller = new AbortController();
try {
  await client.callTool(
    { name: "slow", arguments: { seconds: 30, steps: 30 } },
    undefined,
    { signal: controller.signal, onprogress: () => controller.abort("enough") },
  );
  seen.cancelled = false;
} catch (error) {
  seen.cancelled = true;
  seen.cancelError = String(error);
}
seen.afterCancel = await client.callTool({ name: "echo", arguments: { message: "still here" } });
await client.close();
console.log(JSON.stringify(seen));
