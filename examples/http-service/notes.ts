/**
 * The service's own database (a SQLite file beside the guardrail store): the notes and the write
 * service that changes them. The write service is idempotent on `mutationKey`: a write it has seen
 * returns the result it recorded then, without writing again. (The turns are the turn service's:
 * their records are in the guardrail store.)
 */
import Database from "better-sqlite3";
import { z } from "zod";

const NoteSchema = z.strictObject({ id: z.string(), owner: z.string(), body: z.string(), revision: z.number().int() });
export type Note = z.infer<typeof NoteSchema>;

const WriteSchema = z.strictObject({ result: z.string() });

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
   * The result of the write recorded under `mutationKey`, or `undefined` when there is none (the
   * write happens in the same transaction as its record, so none means it never happened): what
   * the edit tool's `confirm` answers from.
   */
  writeOf(mutationKey: string): string | undefined {
    const seen: unknown = this.#db.prepare("SELECT result FROM note_writes WHERE mutation_key = ?").get(mutationKey);
    return seen === undefined ? undefined : WriteSchema.parse(seen).result;
  }

  close(): void {
    this.#db.close();
  }
}
