/**
 * Starts examples/langgraph-server (`serve-example.ts`) in a child process under tsx, on a fresh
 * state directory (the server's files and the example's `ARKAH_DATA_DIR`: its guardrail store and
 * write log), and gives the test SDK clients for the example's users and the store to inspect.
 */
import { fork, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@langchain/langgraph-sdk";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import { writesIn, type NoteWrite } from "../../../examples/langgraph-server/notes.js";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../../..");

/** The example server, running. */
export interface ExampleServer {
  /** Its base URL. */
  readonly url: string;
  /** An SDK client sending `Authorization: Bearer <token>` (no header without a token), plus any headers given. */
  client(token?: string, headers?: Record<string, string>): Client;
  /** The guardrail store the server's auth handler and graph use (the same SQLite file). */
  readonly store: SqliteGuardrailStore;
  /** Every write the notes service executed, oldest first. */
  writes(): NoteWrite[];
  /** Stops the server and removes its state. */
  stop(): Promise<void>;
}

/** Starts the example; rejects (the suite fails) if the process exits before it listens. */
export async function startExampleServer(): Promise<ExampleServer> {
  const stateDir = mkdtempSync(join(tmpdir(), "arkah-lgadmission-"));
  let log = "";
  const server: ChildProcess = fork(join(here, "serve-example.ts"), [stateDir], {
    cwd: root,
    execArgv: ["--import", "tsx"],
    env: { ...process.env, ARKAH_DATA_DIR: stateDir, LOG_LEVEL: "warn", LANGSMITH_TRACING: "false", LANGCHAIN_TRACING_V2: "false" },
    stdio: ["ignore", "pipe", "pipe", "ipc"],
  });
  const collect = (chunk: Buffer) => {
    log += chunk.toString("utf8");
  };
  server.stdout?.on("data", collect);
  server.stderr?.on("data", collect);
  const url = await new Promise<string>((resolveUrl, reject) => {
    server.once("message", (message) => {
      resolveUrl((message as { url: string }).url);
    });
    server.once("exit", (code, signal) => {
      reject(new Error(`LangGraph Server exited (code ${String(code)}, signal ${String(signal)}) before listening\n${log}`));
    });
  });
  const store = SqliteGuardrailStore.open({ path: join(stateDir, "guardrails.db") });
  return {
    url,
    store,
    client: (token, headers = {}) =>
      new Client({ apiUrl: url, defaultHeaders: { ...headers, ...(token === undefined ? {} : { authorization: `Bearer ${token}` }) } }),
    writes: () => writesIn(stateDir),
    async stop() {
      store.close();
      if (server.exitCode === null && server.signalCode === null) {
        const exited = new Promise((resolveExit) => server.once("exit", resolveExit));
        server.send("stop");
        await exited;
      }
      rmSync(stateDir, { recursive: true, force: true });
    },
  };
}
