/**
 * Runs LangGraph Server in this process as `langgraph dev` does (its entrypoint calls the same
 * `startServer` under tsx): the in-memory server, its storage files in the state directory, on
 * 127.0.0.1 and a port the OS picks, serving `graph.ts`. Reports `{ url }` over IPC; the message
 * `"stop"` flushes and closes it.
 *
 * Usage: node --import tsx serve.ts <state-dir>
 */
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { startServer } from "@langchain/langgraph-api/server";

const stateDir = process.argv[2];
if (stateDir === undefined || process.send === undefined) throw new Error("usage: fork serve.ts <state-dir> with an IPC channel");
const send = process.send.bind(process);

const graphFile = join(dirname(fileURLToPath(import.meta.url)), "graph.ts");
const { host, cleanup } = await startServer({
  host: "127.0.0.1",
  port: 0,
  nWorkers: 1,
  cwd: stateDir,
  graphs: {
    agent: `${graphFile}:agent`,
    approving: `${graphFile}:approving`,
    cancellable: `${graphFile}:cancellable`,
    inbox: `${graphFile}:inbox`,
    fresh: `${graphFile}:fresh`,
    hitl: `${graphFile}:hitl`,
    custom: `${graphFile}:custom`,
  },
});

process.on("message", (message) => {
  if (message !== "stop") return;
  void cleanup().then(
    () => process.exit(0),
    () => process.exit(1),
  );
});
send({ url: `http://${host}` });
