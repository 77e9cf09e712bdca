/**
 * The notes service: who owns which note, and their bodies, which are the seed overwritten by a
 * write log in the data directory (one JSON line per write executed). Nothing happens on import.
 */
import { appendFileSync, readFileSync } from "node:fs";
import { join } from "node:path";

/** One write the service executed, as its log records it. */
export interface NoteWrite {
  /** The note written. */
  readonly noteId: string;
  /** Its new body. */
  readonly body: string;
}

/** Who owns which note: `authorize` lets a turn edit only its principal's notes. */
const OWNERS: Readonly<Record<string, string>> = { "note-7": "alice", "note-9": "mallory" };
const SEED: Readonly<Record<string, string>> = { "note-7": "Buy milk", "note-9": "Water the plants" };

/** Every write executed on the data directory `dir`, oldest first. */
export function writesIn(dir: string): NoteWrite[] {
  let text: string;
  try {
    text = readFileSync(join(dir, "writes.jsonl"), "utf8");
  } catch {
    return [];
  }
  return text
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as NoteWrite);
}

/** The notes on the data directory `dir`. */
export function noteService(dir: string) {
  return {
    owner: (noteId: string): string | undefined => OWNERS[noteId],
    body: (noteId: string): string | undefined => writesIn(dir).findLast((write) => write.noteId === noteId)?.body ?? SEED[noteId],
    write(noteId: string, body: string): string {
      appendFileSync(join(dir, "writes.jsonl"), `${JSON.stringify({ noteId, body })}\n`);
      return `Saved ${noteId}`;
    },
  };
}
