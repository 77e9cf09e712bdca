/**
 * What the auth handler and the graph share in the server process: the guardrail store (the
 * handler writes admission receipts, the graph's guardrails read them) and the notes. Opened once,
 * at module load.
 *
 *   ARKAH_DATA_DIR  where the SQLite guardrail store and the notes' write log live (default:
 *                   ./.langgraph-server-data). One host only: a deployed server with several
 *                   workers or replicas needs the PostgreSQL store (docs/deploying.md).
 */
import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import { noteService } from "./notes.js";

const dataDir = resolve(process.env.ARKAH_DATA_DIR ?? ".langgraph-server-data");
mkdirSync(dataDir, { recursive: true });

/** The guardrail store: the auth handler admits turns on it, the graph's guardrails check them there. */
export const store = SqliteGuardrailStore.open({ path: join(dataDir, "guardrails.db") });

/** The notes the graph's tools read and write. */
export const notes = noteService(dataDir);
