/**
 * Starts `serve.ts` (LangGraph Server as `langgraph dev` starts it) in a child process under tsx,
 * on a state directory, for a test file that needs no IPC with the graph module beyond its URL.
 * `stop()` is the graceful stop (the server flushes its storage files, as `langgraph dev` does on
 * Ctrl-C); starting again on the same directory is a restart.
 */
import { fork, type ChildProcess } from "node:child_process";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { STATE_ENV } from "./shared.js";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../../..");

/** A running server process. */
export interface LaunchedServer {
  /** The server's base URL, for the SDK's `Client`. */
  readonly url: string;
  /** Stops the server gracefully and resolves once its process exited. */
  stop(): Promise<void>;
  /** What the server printed so far, for a failing test's message. */
  log(): string;
}

/** Starts the server on `stateDir`; rejects if the process exits before it listens. */
export function launchServer(stateDir: string): Promise<LaunchedServer> {
  let output = "";
  const child: ChildProcess = fork(join(here, "serve.ts"), [stateDir], {
    cwd: root,
    execArgv: ["--import", "tsx"],
    env: { ...process.env, [STATE_ENV]: stateDir, LOG_LEVEL: "warn", LANGSMITH_TRACING: "false", LANGCHAIN_TRACING_V2: "false" },
    stdio: ["ignore", "pipe", "pipe", "ipc"],
  });
  const collect = (chunk: Buffer) => {
    output += chunk.toString("utf8");
  };
  child.stdout?.on("data", collect);
  child.stderr?.on("data", collect);
  const exited = new Promise<void>((resolveExit) => child.once("exit", () => resolveExit()));

  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.send("stop");
    await exited;
  };
  return new Promise((resolveServer, reject) => {
    child.once("message", (message) => {
      resolveServer({ url: (message as { url: string }).url, stop, log: () => output });
    });
    child.once("exit", (code, signal) => {
      reject(new Error(`LangGraph Server exited (code ${String(code)}, signal ${String(signal)}) before listening\n${output}`));
    });
  });
}
