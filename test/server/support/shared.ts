/**
 * What the server's graph module and the test share: where the state directory's files are, the
 * note the model edits, the call ids it uses, and the write log's reader. No side effects: the
 * test imports it without loading the graphs.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";

export const STATE_ENV = "ARKAH_SERVER_STATE";
export const NOTE_ID = "note-7";
export const NEW_BODY = "Buy oat milk";
export const SAVED = "Saved";
/** The ids the model gives its calls in every run: a retried turn proposes the same calls. */
export const READ_CALL = "read-1";
export const EDIT_CALL = "edit-1";

/** What the server's graph module tells the test over IPC (the `cancellable` graph's edit). */
export type ServerMessage = { readonly type: "edit-started" } | { readonly type: "edit-settled"; readonly how: "returned" | "threw" };
/** What the test tells the graph module: let the `cancellable` graph's waiting edit write. */
export interface TestMessage {
  readonly type: "release-edit";
}

export const storePath = (dir: string) => join(dir, "guardrails.db");
export const writesPath = (dir: string) => join(dir, "writes.jsonl");

/** The completed writes, one JSON line each, as the notes service recorded them. */
export function writesIn(dir: string): { noteId: string; body: string }[] {
  let text: string;
  try {
    text = readFileSync(writesPath(dir), "utf8");
  } catch {
    return [];
  }
  return text
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as { noteId: string; body: string });
}
