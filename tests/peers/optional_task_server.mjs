// A 2025-11-25 stdio server (the official TypeScript SDK) with one tool whose
// execution.taskSupport is "optional": `sleep` runs as a task when the client asks for
// one (a task-augmented tools/call), and as a plain call otherwise. Why it exists:
// server-everything's only task tool is "required", and the host's `task_after` rule is
// about optional ones (issue 16).
//
// Usage: node tests/peers/optional_task_server.mjs
// Every call is appended to $AGENTHOST_PEER_LOG (one JSON per line) when set: whether it
// came as a task, and with which arguments.
import { appendFileSync } from "node:fs";
import { z } from "zod";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import {
  InMemoryTaskStore,
  InMemoryTaskMessageQueue,
} from "@modelcontextprotocol/sdk/experimental/tasks";

const note = (entry) => {
  const path = process.env.AGENTHOST_PEER_LOG;
  if (path) appendFileSync(path, JSON.stringify(entry) + "\n");
};

const server = new McpServer(
  { name: "optional-tasks", version: "1.0.0" },
  {
    capabilities: {
      tools: {},
      tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
    },
    taskStore: new InMemoryTaskStore(),
    taskMessageQueue: new InMemoryTaskMessageQueue(),
  },
);

const Args = z.object({ seconds: z.number().default(0) });
const slept = (seconds) => ({ content: [{ type: "text", text: `slept ${seconds}s` }] });

server.experimental.tasks.registerToolTask(
  "sleep",
  {
    description: "Sleep for a while, as a task if asked to.",
    inputSchema: Args,
    execution: { taskSupport: "optional" },
  },
  {
    createTask: async (args, extra) => {
      const { seconds } = Args.parse(args);
      note({ event: "sleep", task: true, seconds });
      const task = await extra.taskStore.createTask({ ttl: 60000, pollInterval: 100 });
      setTimeout(() => {
        extra.taskStore
          .storeTaskResult(task.taskId, "completed", slept(seconds))
          .catch(() => {});
      }, seconds * 1000);
      return { task };
    },
    getTask: async (args, extra) => await extra.taskStore.getTask(extra.taskId),
    getTaskResult: async (args, extra) => await extra.taskStore.getTaskResult(extra.taskId),
  },
);

await server.connect(new StdioServerTransport());
