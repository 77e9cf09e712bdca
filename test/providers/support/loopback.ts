/**
 * Loopback plumbing for the wire tests: an HTTP server on 127.0.0.1 at a free port, and a tripwire
 * on `fetch` that refuses (and records) any request to another host, so a client that would reach
 * the network (a tokenizer download, tracing, a default base URL) fails the test instead of
 * hanging on a machine without network.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface Loopback {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  close(): Promise<void>;
}

export type Handler = (request: IncomingMessage, body: string, response: ServerResponse) => void | Promise<void>;

/** Listens on 127.0.0.1:0; rejects if the server cannot listen, so a test fails instead of skipping. */
export async function startLoopback(handler: Handler): Promise<Loopback> {
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      Promise.resolve(handler(request, Buffer.concat(chunks).toString("utf8"), response)).catch((error: unknown) => {
        if (!response.headersSent) response.writeHead(599, { "content-type": "text/plain" });
        response.end(`test server error: ${error instanceof Error ? error.message : String(error)}`);
      });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${String(port)}`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error === undefined ? resolve() : reject(error)));
      }),
  };
}

export interface NetworkGuard {
  /** Hosts something tried to reach, in order. */
  readonly refused: readonly string[];
  restore(): void;
}

/** Replaces `globalThis.fetch` with one that only reaches 127.0.0.1; `restore()` puts it back. */
export function guardNetwork(): NetworkGuard {
  const original = globalThis.fetch;
  const refused: string[] = [];
  globalThis.fetch = (input: string | URL | Request, init?: RequestInit) => {
    const url = new URL(input instanceof Request ? input.url : input);
    if (url.hostname !== "127.0.0.1") {
      refused.push(url.host);
      return Promise.reject(new Error(`network access refused in tests: ${url.host}`));
    }
    return original(input, init);
  };
  return {
    refused,
    restore: () => {
      globalThis.fetch = original;
    },
  };
}
