// The cheapest Streamable HTTP MCP server we could write: the far end of the HTTP benchmark.
//
// Why Node's own http module and no SDK: an HTTP benchmark of clients must measure the
// clients, so the server shared by all of them must cost little per call. This one parses
// each POST body once, answers from pre-encoded pieces, and does nothing else: no session
// table (any Mcp-Session-Id is accepted), no validation, no GET stream (405).
//
// Usage: node bench/http_server.mjs [port]   (0 or none: a free port)
// It prints "listening <port>" on stdout once ready. Endpoints (same tools as
// bench/minimal_server.py: echo, and blob for large results):
//   POST /json  every response is one application/json body
//   POST /sse   every response is a text/event-stream with one "message" event
// Notifications and responses get 202; DELETE gets 200; anything else 404/405.
import { createServer } from "node:http";

const REVISIONS = new Set(["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]);
const TOOLS = {
  tools: [
    {
      name: "echo",
      description: "Echo the message back.",
      inputSchema: {
        type: "object",
        properties: { message: { type: "string" } },
        required: ["message"],
      },
    },
    {
      name: "blob",
      description: "A text of exactly `bytes` bytes starting with the message.",
      inputSchema: {
        type: "object",
        properties: { message: { type: "string" }, bytes: { type: "integer" } },
        required: ["message", "bytes"],
      },
    },
  ],
};
const SESSION = "bench-session";
let padding = { key: "", tail: Buffer.alloc(0) };

/** The response line for one request, as a list of Buffers/strings (no copy of a blob). */
function answer(msg) {
  const head = `{"jsonrpc":"2.0","id":${JSON.stringify(msg.id)},"result":`;
  const params = msg.params ?? {};
  switch (msg.method) {
    case "tools/call": {
      const args = params.arguments ?? {};
      const text = args.message ?? "";
      if (params.name === "blob") {
        const key = `${args.bytes}:${text.length}`;
        if (padding.key !== key) {
          padding = { key, tail: Buffer.from(`${"x".repeat(args.bytes - text.length)}"}]}}`) };
        }
        const quoted = JSON.stringify(text).slice(0, -1);
        return [`${head}{"content":[{"type":"text","text":${quoted}`, padding.tail];
      }
      return [`${head}{"content":[{"type":"text","text":${JSON.stringify(text)}}]}}`];
    }
    case "tools/list":
      return [`${head}${JSON.stringify(TOOLS)}}`];
    case "ping":
      return [`${head}{}}`];
    case "initialize": {
      const requested = params.protocolVersion;
      const result = {
        protocolVersion: REVISIONS.has(requested) ? requested : "2025-11-25",
        capabilities: { tools: {} },
        serverInfo: { name: "minimal-http", version: "1.0.0" },
      };
      return [`${head}${JSON.stringify(result)}}`];
    }
    default:
      return [
        `{"jsonrpc":"2.0","id":${JSON.stringify(msg.id)},"error":{"code":-32601,"message":"Method not found"}}`,
      ];
  }
}

function size(parts) {
  return parts.reduce((n, p) => n + (typeof p === "string" ? Buffer.byteLength(p) : p.length), 0);
}

const server = createServer((req, res) => {
  const sse = req.url === "/sse";
  if (req.url !== "/json" && !sse) {
    res.writeHead(404).end();
    return;
  }
  if (req.method === "DELETE") {
    res.writeHead(200).end();
    return;
  }
  if (req.method !== "POST") {
    res.writeHead(405, { Allow: "POST, DELETE" }).end();
    return;
  }
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => {
    let msg;
    try {
      msg = JSON.parse(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks));
    } catch {
      res.writeHead(400).end();
      return;
    }
    if (msg.id === undefined || msg.method === undefined) {
      res.writeHead(202).end(); // a notification or a response
      return;
    }
    const parts = answer(msg);
    const headers = {};
    if (msg.method === "initialize") headers["mcp-session-id"] = SESSION;
    if (sse) {
      parts.unshift("event: message\ndata: ");
      parts.push("\n\n");
      headers["content-type"] = "text/event-stream";
    } else {
      headers["content-type"] = "application/json";
    }
    headers["content-length"] = size(parts);
    res.writeHead(200, headers);
    for (const part of parts.slice(0, -1)) res.write(part);
    res.end(parts[parts.length - 1]);
  });
});
server.keepAliveTimeout = 60_000;
server.listen(Number(process.argv[2] ?? 0), "127.0.0.1", () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});
process.stdin.on("end", () => process.exit(0)); // the parent closes stdin to stop us
process.stdin.resume();
