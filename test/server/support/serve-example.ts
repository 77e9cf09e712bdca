/**
 * Runs examples/langgraph-server on LangGraph Server as `langgraphjs dev` runs a project: its
 * `langgraph.json` read and handed to `startServer` field by field as the CLI's `spawnServer` does
 * (`graphs`, `auth`, `http`, `ui`), in this process under tsx. Two differences, both for the test:
 * the paths in the config are made absolute against the example's directory and `cwd` is the state
 * directory, so the server's storage files land there and not in the repository; and it listens on
 * 127.0.0.1 on a port the OS picks. The example's own state (`ARKAH_DATA_DIR`) is the parent's to
 * set. Reports `{ url }` over IPC; the message `"stop"` flushes and closes it.
 *
 * Usage: node --import tsx serve-example.ts <state-dir>
 */
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { startServer, StartServerSchema } from "@langchain/langgraph-api/server";

const stateDir = process.argv[2];
if (stateDir === undefined || process.send === undefined) throw new Error("usage: fork serve-example.ts <state-dir> with an IPC channel");
const send = process.send.bind(process);

const EXAMPLE_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "../../../examples/langgraph-server");

interface ProjectConfig {
  graphs: Record<string, string>;
  auth?: { path?: string; disable_studio_auth?: boolean };
  http?: { app?: string };
  ui?: Record<string, string>;
}

/** `./file.ts:export` against the example's directory. */
const absolute = (spec: string) => join(EXAMPLE_DIR, spec);
const config = JSON.parse(readFileSync(join(EXAMPLE_DIR, "langgraph.json"), "utf8")) as ProjectConfig;

const { host, cleanup } = await startServer(
  StartServerSchema.parse({
    port: 0,
    nWorkers: 1,
    host: "127.0.0.1",
    cwd: stateDir,
    graphs: Object.fromEntries(Object.entries(config.graphs).map(([id, spec]) => [id, absolute(spec)])),
    auth: config.auth === undefined ? undefined : { ...config.auth, ...(config.auth.path === undefined ? {} : { path: absolute(config.auth.path) }) },
    http: config.http === undefined ? undefined : { ...config.http, ...(config.http.app === undefined ? {} : { app: absolute(config.http.app) }) },
    ui: config.ui === undefined ? undefined : Object.fromEntries(Object.entries(config.ui).map(([id, spec]) => [id, absolute(spec)])),
  }),
);

process.on("message", (message) => {
  if (message !== "stop") return;
  void cleanup().then(
    () => process.exit(0),
    () => process.exit(1),
  );
});
send({ url: `http://${host}` });
