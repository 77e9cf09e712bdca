/**
 * OpenAI Chat Completions on the wire (`POST /v1/chat/completions`), as OpenAI documents it:
 * a `chat.completion` object, or with `stream: true` a server-sent stream of `chat.completion.chunk`
 * objects ending in `data: [DONE]`. A tool call streams as a first delta carrying its `index`, `id`,
 * `type` and `function.name` with empty arguments, then deltas carrying only `index` and the next
 * piece of `function.arguments`. With `stream_options.include_usage` a last chunk has no choices and
 * the usage. Errors are `{ error: { message, type, param, code } }` with the HTTP status.
 */
import type { ServerResponse } from "node:http";
import { base62, pieces, writeEvents, writeJson, type ErrorReply, type RecordedRequest, type ResolvedMessage, type Wire } from "./provider-server.js";

/** Pieces of this many characters: every argument string of the tests spans several chunks. */
const ARGUMENT_PIECE = 6;
const TEXT_PIECE = 5;

const ERROR_TYPES: Readonly<Record<number, { type: string; code: string | null }>> = {
  429: { type: "requests", code: "rate_limit_exceeded" },
  500: { type: "server_error", code: null },
  503: { type: "server_error", code: null },
};

interface Envelope {
  id: string;
  created: number;
  model: string;
}

function envelope(request: RecordedRequest): Envelope {
  const model = typeof request.body.model === "string" ? request.body.model : "gpt-4o-mini";
  return { id: `chatcmpl-${base62(29)}`, created: Math.floor(Date.now() / 1000), model };
}

function writeWhole(response: ServerResponse, reply: ResolvedMessage, request: RecordedRequest): void {
  const calls = reply.toolCalls.map((call) => ({
    id: call.id,
    type: "function",
    function: { name: call.name, arguments: JSON.stringify(call.args) },
  }));
  writeJson(response, 200, {
    ...envelope(request),
    object: "chat.completion",
    choices: [
      {
        index: 0,
        message: {
          role: "assistant",
          content: reply.content === "" ? null : reply.content,
          refusal: null,
          ...(calls.length > 0 ? { tool_calls: calls } : {}),
        },
        logprobs: null,
        finish_reason: calls.length > 0 ? "tool_calls" : "stop",
      },
    ],
    usage: { prompt_tokens: 42, completion_tokens: 7, total_tokens: 49 },
    system_fingerprint: "fp_loopback",
  });
}

function writeStream(response: ServerResponse, reply: ResolvedMessage, request: RecordedRequest): void {
  const base = { ...envelope(request), object: "chat.completion.chunk", system_fingerprint: "fp_loopback" };
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
    JSON.stringify({ ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] });
  const data: string[] = [chunk({ role: "assistant", content: "", refusal: null })];
  for (const piece of pieces(reply.content, TEXT_PIECE)) data.push(chunk({ content: piece }));
  reply.toolCalls.forEach((call, index) => {
    data.push(chunk({ tool_calls: [{ index, id: call.id, type: "function", function: { name: call.name, arguments: "" } }] }));
    for (const piece of pieces(JSON.stringify(call.args), ARGUMENT_PIECE)) {
      data.push(chunk({ tool_calls: [{ index, function: { arguments: piece } }] }));
    }
  });
  data.push(chunk({}, reply.toolCalls.length > 0 ? "tool_calls" : "stop"));
  const options = request.body.stream_options as { include_usage?: boolean } | undefined;
  if (options?.include_usage === true) {
    data.push(JSON.stringify({ ...base, choices: [], usage: { prompt_tokens: 42, completion_tokens: 7, total_tokens: 49 } }));
  }
  data.push("[DONE]");
  writeEvents(
    response,
    data.map((line) => ({ data: line })),
  );
}

function writeError(response: ServerResponse, reply: ErrorReply): void {
  const kind = ERROR_TYPES[reply.status] ?? { type: "invalid_request_error", code: null };
  writeJson(
    response,
    reply.status,
    { error: { message: reply.message, type: kind.type, param: null, code: kind.code } },
    { "x-request-id": `req_${base62(24)}`, ...reply.headers },
  );
}

/** The `role: "tool"` messages of a request, in order. */
function toolResults(body: Record<string, unknown>): { id: string; content: string }[] {
  const messages = (body.messages ?? []) as { role?: string; tool_call_id?: string; content?: unknown }[];
  return messages
    .filter((message) => message.role === "tool")
    .map((message) => ({
      id: message.tool_call_id ?? "",
      content: typeof message.content === "string" ? message.content : JSON.stringify(message.content),
    }));
}

function toolNames(body: Record<string, unknown>): string[] {
  const tools = (body.tools ?? []) as { type?: string; function?: { name?: string } }[];
  return tools.map((tool) => tool.function?.name ?? "");
}

export const openAIWire: Wire = {
  name: "openai",
  path: "/v1/chat/completions",
  // `call_` and 24 base-62 characters, as the Chat Completions API mints them.
  mintCallId: () => `call_${base62(24)}`,
  writeMessage: (response, reply, request) => {
    if (request.streamed) writeStream(response, reply, request);
    else writeWhole(response, reply, request);
  },
  writeError,
  toolResults,
  toolNames,
};

export const OPENAI_CALL_ID = /^call_[0-9A-Za-z]{24}$/;
