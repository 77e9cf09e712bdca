/**
 * examples/http-service in the test's process, behind a real HTTP server on a free 127.0.0.1 port:
 * Hono through `@hono/node-server`, Express through its own `listen`. The same service (SQLite
 * files in a temp directory) and the offline model, counted (`model.calls`) and gateable, so a test
 * can hold a run inside its model call. Writes are counted in the service's own database.
 */
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { BaseMessage } from "@langchain/core/messages";
import type { ChatResult } from "@langchain/core/outputs";
import { serve } from "@hono/node-server";
import Database from "better-sqlite3";
import { ScriptedModel } from "arkah-agent-guardrails/testing";
import { buildService, type Service } from "../../examples/http-service/agent.js";
import { createExpressApp } from "../../examples/http-service/express.js";
import { createHonoApp } from "../../examples/http-service/hono.js";
import { noteResponder } from "../../examples/http-service/model.js";
import { tempDir } from "../processes/support.js";

export const FRAMEWORKS = ["hono", "express"] as const;
export type Framework = (typeof FRAMEWORKS)[number];

/** The example's offline model; a test may hold every call at `gate` until it opens. */
export class GatedModel extends ScriptedModel {
  gate: Promise<void> | undefined;
  /** Told each time a call waits at the gate. */
  onWait: (() => void) | undefined;

  constructor() {
    super(noteResponder);
  }

  override async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    if (this.gate !== undefined) {
      this.onWait?.();
      await this.gate;
    }
    return super._generate(messages);
  }
}

export interface Reply {
  readonly status: number;
  readonly body: Record<string, unknown>;
}

export interface RunningServer {
  readonly framework: Framework;
  readonly url: string;
  readonly service: Service;
  readonly model: GatedModel;
  readonly dataDir: string;
  /** POST `path` as `user` (an `Idempotency-Key` if given), with a JSON body. */
  post(path: string, user: string | undefined, body: unknown, key?: string): Promise<Reply>;
  get(path: string, user: string): Promise<Reply>;
  /** Every write the write service executed, read from its database by another connection. */
  writes(): { mutationKey: string; noteId: string; body: string }[];
  /** Stops the HTTP server, closes the service's files and removes them. */
  stop(): Promise<void>;
}

export async function startServer(framework: Framework, options: { approvers?: string[] } = {}): Promise<RunningServer> {
  const dir = tempDir(`arkah-http-${framework}-`);
  const model = new GatedModel();
  // No API key in this env: the model is the offline one, whatever the machine has set.
  const service = await buildService(dir.path, {}, { model, ...options });
  const server: Server =
    framework === "express"
      ? createExpressApp(service).listen(0, "127.0.0.1")
      : (serve({ fetch: createHonoApp(service).fetch, port: 0, hostname: "127.0.0.1" }) as Server);
  await new Promise<void>((listening, failed) => {
    server.once("listening", listening);
    server.once("error", failed);
  });
  const url = `http://127.0.0.1:${String((server.address() as AddressInfo).port)}`;
  const send = async (path: string, init: RequestInit): Promise<Reply> => {
    const response = await fetch(`${url}${path}`, init);
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };
  return {
    framework,
    url,
    service,
    model,
    dataDir: dir.path,
    post(path, user, body, key) {
      const headers: Record<string, string> = { "content-type": "application/json" };
      if (user !== undefined) headers["x-user"] = user;
      if (key !== undefined) headers["idempotency-key"] = key;
      return send(path, { method: "POST", headers, body: JSON.stringify(body) });
    },
    get: (path, user) => send(path, { headers: { "x-user": user } }),
    writes: () => writesIn(dir.path),
    async stop() {
      await new Promise<void>((closed) => {
        server.close(() => {
          closed();
        });
        server.closeAllConnections();
      });
      service.close();
      dir.remove();
    },
  };
}

/** The writes the example's write service executed, in order. */
export function writesIn(dataDir: string): { mutationKey: string; noteId: string; body: string }[] {
  const db = new Database(join(dataDir, "notes.sqlite"), { readonly: true });
  try {
    return db.prepare("SELECT mutation_key AS mutationKey, note_id AS noteId, body FROM note_writes ORDER BY rowid").all() as {
      mutationKey: string;
      noteId: string;
      body: string;
    }[];
  } finally {
    db.close();
  }
}
