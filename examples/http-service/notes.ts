/**
 * The service's own database (a SQLite file beside the guardrail store): the notes, the write
 * service that changes them, and the turns the server has taken. The write service is idempotent
 * on `mutationKey`: a write it has seen returns the result it recorded then, without writing again.
 */
import Database from "better-sqlite3";
import { z } from "zod";
import { TurnInputSchema, type TurnInput } from "arkah-agent-guardrails";

const NoteSchema = z.strictObject({ id: z.string(), owner: z.string(), body: z.string(), revision: z.number().int() });
export type Note = z.infer<typeof NoteSchema>;

const WriteSchema = z.strictObject({ result: z.string() });
const TurnRowSchema = z.strictObject({ input: z.string(), thread_id: z.string(), attempts: z.number().int() });

/** A turn the server admitted, and the thread its latest run is on. */
export interface TurnRecord {
  readonly input: TurnInput;
  readonly threadId: string;
}

/** The notes a fresh database starts with. */
const SEED: readonly Note[] = [
  { id: "note-7", owner: "alice", body: "Buy milk", revision: 3 },
  { id: "note-8", owner: "alice", body: "Call the plumber", revision: 1 },
];

export class NoteService {
  readonly #db: Database.Database;

  private constructor(db: Database.Database) {
    this.#db = db;
  }

  static open(path: string): NoteService {
    const db = new Database(path);
    db.pragma("journal_mode = WAL");
    // A write is on disk before the tool reports it, as the guardrail store's settlement is.
    db.pragma("synchronous = FULL");
    db.pragma("busy_timeout = 5000");
    db.exec(`
      CREATE TABLE IF NOT EXISTS notes (id TEXT PRIMARY KEY, owner TEXT NOT NULL, body TEXT NOT NULL, revision INTEGER NOT NULL);
      CREATE TABLE IF NOT EXISTS note_writes (
        mutation_key TEXT PRIMARY KEY, note_id TEXT NOT NULL, body TEXT NOT NULL, result TEXT NOT NULL, written_at TEXT NOT NULL
      );
      CREATE TABLE IF NOT EXISTS turns (
        turn_key TEXT PRIMARY KEY, turn_id TEXT NOT NULL, input TEXT NOT NULL, thread_id TEXT NOT NULL, attempts INTEGER NOT NULL
      );
    `);
    const seed = db.prepare("INSERT OR IGNORE INTO notes (id, owner, body, revision) VALUES (@id, @owner, @body, @revision)");
    for (const note of SEED) seed.run(note);
    return new NoteService(db);
  }

  note(id: string): Note | undefined {
    const row: unknown = this.#db.prepare("SELECT id, owner, body, revision FROM notes WHERE id = ?").get(id);
    return row === undefined ? undefined : NoteSchema.parse(row);
  }

  /**
   * Replaces a note's body, once per `mutationKey`: the same key again (a LangGraph re-run of the
   * tool after a crash, say) returns the first write's result and changes nothing.
   */
  write(request: { readonly mutationKey: string; readonly noteId: string; readonly body: string }): string {
    return this.#db.transaction(() => {
      const seen: unknown = this.#db.prepare("SELECT result FROM note_writes WHERE mutation_key = ?").get(request.mutationKey);
      if (seen !== undefined) return WriteSchema.parse(seen).result;
      const note = this.note(request.noteId);
      if (note === undefined) throw new Error(`no note ${request.noteId}`);
      const revision = note.revision + 1;
      this.#db.prepare("UPDATE notes SET body = ?, revision = ? WHERE id = ?").run(request.body, revision, note.id);
      const result = JSON.stringify({ noteId: note.id, body: request.body, revision });
      this.#db
        .prepare("INSERT INTO note_writes (mutation_key, note_id, body, result, written_at) VALUES (?, ?, ?, ?, ?)")
        .run(request.mutationKey, note.id, request.body, result, new Date().toISOString());
      return result;
    })();
  }

  /**
   * Records a run of a turn and returns its thread: every run (the first, and each transport
   * retry) gets a thread of its own, so a retry starts from the user's message as the first did.
   */
  startRun(turnKey: string, input: TurnInput): TurnRecord {
    return this.#db.transaction(() => {
      const row: unknown = this.#db.prepare("SELECT input, thread_id, attempts FROM turns WHERE turn_key = ?").get(turnKey);
      const attempts = row === undefined ? 1 : TurnRowSchema.parse(row).attempts + 1;
      const threadId = `${input.turnId}#${String(attempts)}`;
      this.#db
        .prepare(
          `INSERT INTO turns (turn_key, turn_id, input, thread_id, attempts) VALUES (?, ?, ?, ?, ?)
           ON CONFLICT (turn_key) DO UPDATE SET thread_id = excluded.thread_id, attempts = excluded.attempts`,
        )
        .run(turnKey, input.turnId, JSON.stringify(input), threadId, attempts);
      return { input, threadId };
    })();
  }

  /** The turn with this key and its latest run's thread, if the server has taken it. */
  turn(turnKey: string): TurnRecord | undefined {
    const row: unknown = this.#db.prepare("SELECT input, thread_id, attempts FROM turns WHERE turn_key = ?").get(turnKey);
    if (row === undefined) return undefined;
    const parsed = TurnRowSchema.parse(row);
    return { input: TurnInputSchema.parse(JSON.parse(parsed.input)), threadId: parsed.thread_id };
  }

  close(): void {
    this.#db.close();
  }
}
