/**
 * Anthropic Messages on the wire (`POST /v1/messages`), as Anthropic documents it: a `message`
 * object whose `content` holds `text` and `tool_use` blocks (`stop_reason: "tool_use"`), or with
 * `stream: true` the named server-sent events `message_start`, then per block
 * `content_block_start` / `content_block_delta` (`text_delta`, or `input_json_delta` with a piece
 * of the tool input's JSON in `partial_json`) / `content_block_stop`, then `message_delta` (stop
 * reason, output tokens) and `message_stop`, with `ping`s between. Errors are
 * `{ type: "error", error: { type, message } }` with the HTTP status.
 */
import type { ServerResponse } from "node:http";
import { base62, pieces, writeEvents, writeJson, type ErrorReply, type RecordedRequest, type ResolvedMessage, type Wire } from "./provider-server.js";

const ARGUMENT_PIECE = 6;
const TEXT_PIECE = 5;

const ERROR_TYPES: Readonly<Record<number, string>> = {
  400: "invalid_request_error",
  404: "not_found_error",
  429: "rate_limit_error",
  500: "api_error",
  529: "overloaded_error",
};

function model(request: RecordedRequest): string {
  return typeof request.body.model === "string" ? request.body.model : "claude-sonnet-4-5";
}

function stopReason(reply: ResolvedMessage): string {
  return reply.toolCalls.length > 0 ? "tool_use" : "end_turn";
}

function blocks(reply: ResolvedMessage): Record<string, unknown>[] {
  return [
    ...(reply.content === "" ? [] : [{ type: "text", text: reply.content }]),
    ...reply.toolCalls.map((call) => ({ type: "tool_use", id: call.id, name: call.name, input: call.args })),
  ];
}

function writeWhole(response: ServerResponse, reply: ResolvedMessage, request: RecordedRequest): void {
  writeJson(response, 200, {
    id: `msg_01${base62(22)}`,
    type: "message",
    role: "assistant",
    model: model(request),
    content: blocks(reply),
    stop_reason: stopReason(reply),
    stop_sequence: null,
    usage: { input_tokens: 42, output_tokens: 7 },
  });
}

function writeStream(response: ServerResponse, reply: ResolvedMessage, request: RecordedRequest): void {
  const events: { event: string; data: string }[] = [];
  const emit = (event: string, data: Record<string, unknown>) => events.push({ event, data: JSON.stringify({ type: event, ...data }) });
  emit("message_start", {
    message: {
      id: `msg_01${base62(22)}`,
      type: "message",
      role: "assistant",
      model: model(request),
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: 42, output_tokens: 1 },
    },
  });
  let index = 0;
  if (reply.content !== "") {
    emit("content_block_start", { index, content_block: { type: "text", text: "" } });
    emit("ping", {});
    for (const piece of pieces(reply.content, TEXT_PIECE)) emit("content_block_delta", { index, delta: { type: "text_delta", text: piece } });
    emit("content_block_stop", { index });
    index += 1;
  }
  for (const call of reply.toolCalls) {
    emit("content_block_start", { index, content_block: { type: "tool_use", id: call.id, name: call.name, input: {} } });
    for (const piece of pieces(JSON.stringify(call.args), ARGUMENT_PIECE)) {
      emit("content_block_delta", { index, delta: { type: "input_json_delta", partial_json: piece } });
    }
    emit("content_block_stop", { index });
    index += 1;
  }
  emit("message_delta", { delta: { stop_reason: stopReason(reply), stop_sequence: null }, usage: { output_tokens: 7 } });
  emit("message_stop", {});
  writeEvents(response, events);
}

function writeError(response: ServerResponse, reply: ErrorReply): void {
  writeJson(
    response,
    reply.status,
    { type: "error", error: { type: ERROR_TYPES[reply.status] ?? "api_error", message: reply.message } },
    { "request-id": `req_01${base62(22)}`, ...reply.headers },
  );
}

/** The `tool_result` blocks of the request's user messages, in order. */
function toolResults(body: Record<string, unknown>): { id: string; content: string }[] {
  const messages = (body.messages ?? []) as { role?: string; content?: unknown }[];
  return messages
    .filter((message) => message.role === "user" && Array.isArray(message.content))
    .flatMap((message) => message.content as { type?: string; tool_use_id?: string; content?: unknown }[])
    .filter((block) => block.type === "tool_result")
    .map((block) => ({ id: block.tool_use_id ?? "", content: resultText(block.content) }));
}

/** A tool_result's content: a string, or text blocks. */
function resultText(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return (content as { type?: string; text?: string }[]).map((block) => (block.type === "text" ? (block.text ?? "") : "")).join("");
  }
  return JSON.stringify(content);
}

function toolNames(body: Record<string, unknown>): string[] {
  const tools = (body.tools ?? []) as { name?: string }[];
  return tools.map((tool) => tool.name ?? "");
}

export const anthropicWire: Wire = {
  name: "anthropic",
  path: "/v1/messages",
  // `toolu_01` and 22 base-62 characters, as the Messages API mints them.
  mintCallId: () => `toolu_01${base62(22)}`,
  writeMessage: (response, reply, request) => {
    if (request.streamed) writeStream(response, reply, request);
    else writeWhole(response, reply, request);
  },
  writeError,
  toolResults,
  toolNames,
};

export const ANTHROPIC_CALL_ID = /^toolu_01[0-9A-Za-z]{22}$/;
