// MCP 2025-11-25 tasks that server-everything does not exercise, on the official
// TypeScript SDK's own task support (the smallest server that does them):
// - `survey`: a task tool whose CreateTaskResult carries the model-immediate-response
//   _meta ("Creating Tasks"); taskSupport "required", finishing after `seconds`;
// - `client-task-tour`: sends sampling/createMessage as a task to the client, then
//   tasks/list, tasks/get, tasks/cancel, tasks/cancel again, tasks/result, and returns
//   every answer (or error) as JSON text, for the client side of tasks/list|cancel.
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

server.registerTool(
  "client-task-tour",
  { description: "Drive the client's task endpoints.", inputSchema: {} },
  async (_args, extra) => {
    const answers = {};
    const ask = async (key, request) => {
      try {
        answers[key] = await extra.sendRequest(request, z.any());
      } catch (error) {
        answers[key] = { error: { code: error.code, message: error.message } };
      }
      return answers[key];
    };
    const created = await ask("create", {
      method: "sampling/createMessage",
      params: {
        task: { ttl: 30000 },
        messages: [{ role: "user", content: { type: "text", text: "hello" } }],
        maxTokens: 10,
      },
    });
    const taskId = created?.task?.taskId;
    await ask("list", { method: "tasks/list", params: {} });
    await ask("get", { method: "tasks/get", params: { taskId } });
    await ask("cancel", { method: "tasks/cancel", params: { taskId } });
    await ask("cancelAgain", { method: "tasks/cancel", params: { taskId } });
    await ask("result", { method: "tasks/result", params: { taskId } });
    await ask("unknown", { method: "tasks/get", params: { taskId: "no-such-task" } });
    await ask("badCursor", { method: "tasks/list", params: { cursor: "x" } });
    return { content: [{ type: "text", text: JSON.stringify(answers) }] };
  },
);

await server.connect(new StdioServerTransport());
