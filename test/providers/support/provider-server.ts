/**
 * A scripted model provider on loopback: a real HTTP server that answers a provider client's
 * requests from a per-test queue of replies, in that provider's wire format (a `Wire`: OpenAI
 * Chat Completions or Anthropic Messages), and records every request it got. Call ids are minted
 * in the provider's own format unless a reply names them, so a test can script a provider that
 * mints fresh ids on every run, or a gateway that answers a repeated request with the same ids.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { randomBytes } from "node:crypto";
import { startLoopback, type Loopback } from "./loopback.js";

export interface ScriptedCall {
  /** The provider's call id; minted in its format when absent. */
  readonly id?: string;
  readonly name: string;
  readonly args: Record<string, unknown>;
}

/** A model turn: text, tool calls, or both. */
export interface MessageReply {
  readonly content?: string;
  readonly toolCalls?: readonly ScriptedCall[];
}

/** An HTTP error the provider answers with (429, 500, 529, ...). */
export interface ErrorReply {
  readonly status: number;
  readonly message: string;
  readonly headers?: Readonly<Record<string, string>>;
}

export type Reply = MessageReply | ErrorReply;

/** What the provider got: the parsed JSON body, and whether it asked for a stream. */
export interface RecordedRequest {
  readonly path: string;
  readonly body: Record<string, unknown>;
  readonly streamed: boolean;
}

/** A reply with every call id fixed. */
export interface ResolvedMessage {
  readonly content: string;
  readonly toolCalls: readonly Required<ScriptedCall>[];
}

/** A provider's HTTP API: where it listens, its id format, and how it encodes a reply. */
export interface Wire {
  readonly name: string;
  /** The request path the client posts to, e.g. `/v1/chat/completions`. */
  readonly path: string;
  mintCallId(): string;
  /** Writes a whole reply (JSON) or a stream (SSE), as `request.stream` asks. */
  writeMessage(response: ServerResponse, reply: ResolvedMessage, request: RecordedRequest): void;
  writeError(response: ServerResponse, reply: ErrorReply): void;
  /** The tool results the client sent back in a request, in order: `{ id, content }`. */
  toolResults(body: Record<string, unknown>): { id: string; content: string }[];
  /** The tool names the client declared in a request. */
  toolNames(body: Record<string, unknown>): string[];
}

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** `length` random base-62 characters: the alphabet both providers' ids use. */
export function base62(length: number): string {
  return [...randomBytes(length)].map((byte) => BASE62[byte % 62] ?? "0").join("");
}

/** Splits `text` into pieces of at most `size` characters: how a provider streams a string. */
export function pieces(text: string, size: number): string[] {
  const out: string[] = [];
  for (let at = 0; at < text.length; at += size) out.push(text.slice(at, at + size));
  return out;
}

export function isError(reply: Reply): reply is ErrorReply {
  return "status" in reply;
}

export class ProviderServer {
  readonly requests: RecordedRequest[] = [];
  /** Each served message reply, with its ids, in order (errors are not listed). */
  readonly served: ResolvedMessage[] = [];
  /** What went wrong on the server side: an empty queue, an unknown path, a bad body. */
  readonly problems: string[] = [];
  private readonly queue: Reply[] = [];

  private loopback: Loopback | undefined;

  private constructor(readonly wire: Wire) {}

  /** Starts the server; rejects when it cannot listen. */
  static async start(wire: Wire): Promise<ProviderServer> {
    const server = new ProviderServer(wire);
    server.loopback = await startLoopback((request, body, response) => {
      server.handle(request, body, response);
    });
    return server;
  }

  get url(): string {
    if (this.loopback === undefined) throw new Error("the provider server is not listening");
    return this.loopback.url;
  }

  /** Replies still queued. */
  get remaining(): number {
    return this.queue.length;
  }

  /** Queues replies for the next requests, in order. */
  script(...replies: Reply[]): this {
    this.queue.push(...replies);
    return this;
  }

  /** Forgets the previous test's requests, replies and problems. */
  reset(): void {
    this.requests.length = 0;
    this.served.length = 0;
    this.problems.length = 0;
    this.queue.length = 0;
  }

  /** The ids of the calls in the `n`-th served message (0-based). */
  callIds(n: number): string[] {
    return (this.served[n]?.toolCalls ?? []).map((call) => call.id);
  }

  async close(): Promise<void> {
    await this.loopback?.close();
  }

  private handle(request: IncomingMessage, text: string, response: ServerResponse): void {
    const path = new URL(request.url ?? "/", this.url).pathname;
    if (request.method !== "POST" || path !== this.wire.path) {
      this.problems.push(`unexpected ${request.method ?? "?"} ${path}`);
      this.wire.writeError(response, { status: 404, message: `no route ${path}` });
      return;
    }
    const body = JSON.parse(text) as Record<string, unknown>;
    const recorded: RecordedRequest = { path, body, streamed: body.stream === true };
    this.requests.push(recorded);
    const reply = this.queue.shift();
    if (reply === undefined) {
      this.problems.push(`request ${String(this.requests.length)} with an empty script`);
      this.wire.writeError(response, { status: 500, message: "the test script has no reply for this request" });
      return;
    }
    if (isError(reply)) {
      this.wire.writeError(response, reply);
      return;
    }
    const resolved: ResolvedMessage = {
      content: reply.content ?? "",
      toolCalls: (reply.toolCalls ?? []).map((call) => ({ id: call.id ?? this.wire.mintCallId(), name: call.name, args: call.args })),
    };
    this.served.push(resolved);
    this.wire.writeMessage(response, resolved, recorded);
  }
}

/** Writes a server-sent event stream: one `data:` line per payload (and `event:` when named). */
export function writeEvents(response: ServerResponse, events: readonly { event?: string; data: string }[]): void {
  response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
  for (const { event, data } of events) response.write(`${event === undefined ? "" : `event: ${event}\n`}data: ${data}\n\n`);
  response.end();
}

export function writeJson(response: ServerResponse, status: number, body: unknown, headers: Readonly<Record<string, string>> = {}): void {
  response.writeHead(status, { "content-type": "application/json", ...headers });
  response.end(JSON.stringify(body));
}
