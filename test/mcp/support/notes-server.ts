/**
 * A real MCP server for the MCP tests, written with the SDK's `McpServer`: `read_note` and
 * `edit_note` over a notes store that records every call it executes and every write, in memory and
 * (for a server in a child process) as JSON lines in a ledger file the test reads. Input schemas
 * are zod, which the SDK publishes to clients as JSON Schema; `edit_note` fails with an MCP tool
 * error (`isError: true`) on a note that does not exist.
 */
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";

export interface LedgerEntry {
  readonly tool: "read_note" | "edit_note";
  readonly args: Readonly<Record<string, string>>;
  /** True for an edit that changed a note. */
  readonly wrote: boolean;
}

const NOTE_ID = z.string().regex(/^note-\d+$/).describe("The note's id, e.g. note-7.");

export class NotesStore {
  /** note-1 to note-8, each "Buy milk" at revision 3, so every test of a shared server has a note of its own. */
  readonly notes = new Map<string, { body: string; revision: number }>(
    [1, 2, 3, 4, 5, 6, 7, 8].map((n) => [`note-${String(n)}`, { body: "Buy milk", revision: 3 }]),
  );
  /** Every call the server executed, in order. */
  readonly calls: LedgerEntry[] = [];

  constructor(private readonly ledger?: string) {}

  get writes(): LedgerEntry[] {
    return this.calls.filter((entry) => entry.wrote);
  }

  read(noteId: string): string {
    this.record({ tool: "read_note", args: { noteId }, wrote: false });
    return JSON.stringify(this.notes.get(noteId) ?? null);
  }

  /** Writes, or returns undefined for a note that does not exist. */
  write(noteId: string, body: string): string | undefined {
    const note = this.notes.get(noteId);
    this.record({ tool: "edit_note", args: { noteId, body }, wrote: note !== undefined });
    if (note === undefined) return undefined;
    this.notes.set(noteId, { body, revision: note.revision + 1 });
    return "Saved";
  }

  private record(entry: LedgerEntry): void {
    this.calls.push(entry);
    if (this.ledger !== undefined) appendFileSync(this.ledger, `${JSON.stringify(entry)}\n`);
  }
}

/** The entries a server wrote to `path` (none if it wrote nothing). */
export function readLedger(path: string): LedgerEntry[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as LedgerEntry);
}

export function notesMcpServer(store: NotesStore): McpServer {
  const server = new McpServer({ name: "notes", version: "1.0.0" });
  server.registerTool(
    "read_note",
    { description: "Read a note.", inputSchema: { noteId: NOTE_ID }, annotations: { readOnlyHint: true } },
    ({ noteId }) => ({ content: [{ type: "text", text: store.read(noteId) }] }),
  );
  server.registerTool(
    "edit_note",
    {
      description: "Replace a note's body.",
      inputSchema: { noteId: NOTE_ID, body: z.string().max(200).describe("The new body, at most 200 characters.") },
      annotations: { destructiveHint: true, idempotentHint: false },
    },
    ({ noteId, body }) => {
      const saved = store.write(noteId, body);
      return saved === undefined
        ? { isError: true, content: [{ type: "text", text: `no note ${noteId}` }] }
        : { content: [{ type: "text", text: saved }] };
    },
  );
  return server;
}

export interface HttpMcpServer {
  /** The MCP endpoint, `http://127.0.0.1:<port>/mcp`. */
  readonly url: string;
  close(): Promise<void>;
}

/**
 * Serves the notes server over streamable HTTP on 127.0.0.1 at a free port, stateless: each POST
 * gets its own `McpServer` and transport over the one store, as the SDK's stateless example does.
 */
export async function serveHttp(store: NotesStore): Promise<HttpMcpServer> {
  const http: Server = createServer((request, response) => {
    if (request.method !== "POST" || request.url !== "/mcp") {
      response.writeHead(405, { "content-type": "application/json" });
      response.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message: "Method not allowed." }, id: null }));
      return;
    }
    const server = notesMcpServer(store);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    response.on("close", () => {
      void transport.close();
      void server.close();
    });
    server
      .connect(transport)
      .then(() => transport.handleRequest(request, response))
      .catch((error: unknown) => {
        if (!response.headersSent) response.writeHead(500, { "content-type": "application/json" });
        response.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32603, message: String(error) }, id: null }));
      });
  });
  await new Promise<void>((resolve, reject) => {
    http.once("error", reject);
    http.listen(0, "127.0.0.1", () => {
      http.off("error", reject);
      resolve();
    });
  });
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${String(port)}/mcp`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        http.closeAllConnections();
        http.close((error) => (error === undefined ? resolve() : reject(error)));
      }),
  };
}
