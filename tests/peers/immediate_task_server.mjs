// A task tool whose CreateTaskResult carries the model-immediate-response _meta
// (MCP 2025-11-25 tasks, "Creating Tasks"), which server-everything's task tool does not
// send. The smallest server on the official TypeScript SDK's own task support: one tool,
// `survey`, taskSupport "required", finishing after `seconds` (default 2).
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import {
  InMemoryTaskMessageQueue,
  InMemoryTaskStore,
} from "@modelcontextprotocol/sdk/experimental/tasks";
import { z } from "zod";

const taskStore = new InMemoryTaskStore();
const server = new McpServer(
  { name: "immediate-task-peer", version: "1.0.0" },
  {
    capabilities: {
      tools: {},
      tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
    },
    taskStore,
    taskMessageQueue: new InMemoryTaskMessageQueue(),
  },
);

server.experimental.tasks.registerToolTask(
  "survey",
  {
    description: "Survey a topic (slow; runs as a task).",
    inputSchema: { topic: z.string(), seconds: z.number().default(2) },
    execution: { taskSupport: "required" },
  },
  {
    createTask: async ({ topic, seconds }, extra) => {
      const task = await extra.taskStore.createTask({ ttl: 60000, pollInterval: 200 });
      setTimeout(() => {
        extra.taskStore
          .storeTaskResult(task.taskId, "completed", {
            content: [{ type: "text", text: `Survey of ${topic}: 3 sources agree.` }],
          })
          .catch(() => {});
      }, seconds * 1000);
      return {
        task,
        _meta: {
          "io.modelcontextprotocol/model-immediate-response": `Survey of ${topic} started; it takes about ${seconds} seconds.`,
        },
      };
    },
    getTask: async (_args, extra) => await extra.taskStore.getTask(extra.taskId),
    getTaskResult: async (_args, extra) => await extra.taskStore.getTaskResult(extra.taskId),
  },
);

await server.connect(new StdioServerTransport());
