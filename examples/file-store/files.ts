/**
 * The directory a file store keeps: one file per record, and a redo journal that makes a step's
 * writes all-or-nothing.
 *
 *   <root>/lock                          held while a step runs (lock.ts)
 *   <root>/journal                       a committed step's writes, until they are all applied
 *   <root>/journal.tmp                   a step's writes being journaled (not committed yet)
 *   <root>/data/<collection>/<key>       one record: `{"key": <key>, "value": <JSON value>}`
 *
 * Collection and key names are encoded by names.ts. Every function here runs under the lock.
 *
 * Committing a step (`commit`):
 * 1. the whole batch is written to `journal.tmp`, fsynced, renamed to `journal`, and the root
 *    directory fsynced: from here the step is committed, whatever happens to the process;
 * 2. each write is applied: the record is written to a temporary file beside it, fsynced and
 *    renamed over the record (a delete is an unlink); then each directory touched is fsynced;
 * 3. `journal` is removed (not fsynced: a journal that reappears after a crash is applied again,
 *    which changes nothing).
 * A step with a single write skips the journal: step 2 alone is all or nothing for one file.
 * A crash before the rename in 1 loses the step (its `journal.tmp` is never read); a crash after it
 * leaves `journal`, which `recover` applies again before the next step reads anything. Applying is
 * idempotent (each write sets a file to its final content or removes it), so a crash during
 * recovery is recovered the same way. A record file is only ever replaced by rename, so a reader
 * sees the old record or the new one, never part of one.
 */
import { mkdir, open, readdir, readFile, rename, unlink } from "node:fs/promises";
import { join } from "node:path";
import { StoreContractError } from "arkah-agent-guardrails/store";
import { fileName, parseFileName } from "./names.js";

/** One buffered write of a step: the JSON text of the value to store, or `null` to delete the record. */
export interface Write {
  readonly collection: string;
  readonly key: string;
  readonly json: string | null;
}

/** Where a commit stands, for the crash tests' hook: after the journal is durable, and after each applied write. */
export type CommitPoint = { readonly point: "journaled" } | { readonly point: "applied"; readonly done: number; readonly of: number };

/** Called at each commit point; a test's hook may stop the process there (SIGKILL). Never set in production. */
export type CommitHook = (point: CommitPoint) => Promise<void> | void;

/** A journaled write: directory name, file name, and the file's text (`null`: remove it). */
type JournalEntry = readonly [dir: string, file: string, text: string | null];

const code = (error: unknown): string | undefined => (error as NodeJS.ErrnoException | undefined)?.code;

export class FileDirectory {
  readonly root: string;
  readonly #data: string;
  readonly #journal: string;
  readonly #pending: string;

  constructor(root: string) {
    this.root = root;
    this.#data = join(root, "data");
    this.#journal = join(root, "journal");
    this.#pending = join(root, "journal.tmp");
  }

  get lockPath(): string {
    return join(this.root, "lock");
  }

  /** Creates the directory layout if missing (durably: a crash cannot lose the data directory). */
  async create(): Promise<void> {
    await mkdir(this.#data, { recursive: true });
    await syncDirectory(this.root);
  }

  /** The record stored under (collection, key), or `undefined`. A file that is not a record of that key fails closed. */
  async read(collection: string, key: string): Promise<unknown> {
    const path = join(this.#data, fileName(collection), fileName(key));
    const record = await readRecord(path);
    if (record === undefined) return undefined;
    if (record.key !== key) throw new StoreContractError(`the record file ${path} holds another key than the one it is filed under`);
    return record.value;
  }

  /** Every key of a collection, in UTF-16 code unit order, with the file each is in. */
  async keys(collection: string): Promise<string[]> {
    const dir = join(this.#data, fileName(collection));
    let names: string[];
    try {
      names = await readdir(dir);
    } catch (error) {
      if (code(error) === "ENOENT") return [];
      throw error;
    }
    const keys: string[] = [];
    for (const name of names) {
      const entry = parseFileName(name);
      if (entry.type === "key") keys.push(entry.key);
      else if (entry.type === "hashed") {
        const record = await readRecord(join(dir, name));
        // Filed under the hash of its key's escaped form, or it is not this key's file.
        if (record !== undefined && fileName(record.key) !== name) {
          throw new StoreContractError(`the record file ${join(dir, name)} holds a key whose name is not ${name}`);
        }
        if (record !== undefined) keys.push(record.key);
      }
    }
    // `<` and `>` on strings compare UTF-16 code units: the order the interface promises.
    return keys.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  }

  /**
   * Writes a raw file under (collection, key), bypassing the journal and every check: for the
   * conformance kit's corruption tests, which must see a damaged record fail closed.
   */
  async writeRaw(collection: string, key: string, text: string): Promise<void> {
    const dir = join(this.#data, fileName(collection));
    await mkdir(dir, { recursive: true });
    await writeDurably(join(dir, fileName(key)), text);
  }

  /** Applies a journal left by a step that committed but did not finish applying (a crash). */
  async recover(): Promise<boolean> {
    let text: string;
    try {
      text = await readFile(this.#journal, "utf8");
    } catch (error) {
      if (code(error) === "ENOENT") return false;
      throw error;
    }
    await this.#apply(parseJournal(text, this.#journal), undefined);
    await this.#finish();
    return true;
  }

  /** Commits a step's writes, all or nothing (see the module comment). */
  async commit(writes: readonly Write[], hook: CommitHook | undefined): Promise<void> {
    if (writes.length === 0) return;
    const entries: JournalEntry[] = writes.map(({ collection, key, json }) => [
      fileName(collection),
      fileName(key),
      json === null ? null : `{"key":${JSON.stringify(key)},"value":${json}}`,
    ]);
    // One write is all or nothing by itself (a rename or an unlink): no journal needed.
    if (entries.length === 1) {
      await this.#apply(entries, undefined);
      return;
    }
    await writeDurably(this.#pending, JSON.stringify({ v: 1, writes: entries }));
    await rename(this.#pending, this.#journal);
    await syncDirectory(this.root);
    await hook?.({ point: "journaled" });
    await this.#apply(entries, hook);
    await this.#finish();
  }

  async #apply(entries: readonly JournalEntry[], hook: CommitHook | undefined): Promise<void> {
    const touched = new Set<string>();
    let created = false;
    let done = 0;
    for (const [dirName, file, text] of entries) {
      const dir = join(this.#data, dirName);
      if (!touched.has(dir)) {
        // A directory created here must itself survive a crash: the data directory is synced below.
        if ((await mkdir(dir, { recursive: true })) !== undefined) created = true;
        touched.add(dir);
      }
      const path = join(dir, file);
      if (text === null) {
        try {
          await unlink(path);
        } catch (error) {
          if (code(error) !== "ENOENT") throw error;
        }
      } else {
        const temporary = join(dir, `t${file}`);
        await writeDurably(temporary, text);
        await rename(temporary, path);
      }
      done += 1;
      await hook?.({ point: "applied", done, of: entries.length });
    }
    for (const dir of touched) await syncDirectory(dir);
    if (created) await syncDirectory(this.#data);
  }

  /**
   * Removes the journal once every write it holds is durable. Not fsynced: if a crash loses the
   * removal, the journal is applied again, which changes nothing.
   */
  async #finish(): Promise<void> {
    await unlink(this.#journal);
  }
}

/** A record file's content, or `undefined` if there is none; anything else than a record fails closed. */
async function readRecord(path: string): Promise<{ key: string; value: unknown } | undefined> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    if (code(error) === "ENOENT") return undefined;
    throw error;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new StoreContractError(`the record file ${path} is not JSON`);
  }
  if (typeof parsed !== "object" || parsed === null || !("key" in parsed) || typeof parsed.key !== "string" || !("value" in parsed)) {
    throw new StoreContractError(`the record file ${path} is not a record`);
  }
  return { key: parsed.key, value: parsed.value };
}

/** A journal as written by `commit`; a damaged one stops the store (never guess which writes committed). */
function parseJournal(text: string, path: string): JournalEntry[] {
  const damaged = () =>
    new StoreContractError(`the journal ${path} is damaged: restore the directory from a backup; the store will not guess which writes committed`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw damaged();
  }
  if (typeof parsed !== "object" || parsed === null || !("v" in parsed) || parsed.v !== 1 || !("writes" in parsed)) throw damaged();
  const { writes } = parsed;
  if (!Array.isArray(writes)) throw damaged();
  return writes.map((entry: unknown): JournalEntry => {
    if (!Array.isArray(entry) || entry.length !== 3) throw damaged();
    const [dir, file, content] = entry as unknown[];
    // Only names this store makes: a journal can never reach outside the data directory.
    if (typeof dir !== "string" || typeof file !== "string" || parseFileName(dir).type === "other" || parseFileName(file).type === "other") {
      throw damaged();
    }
    if (content !== null && typeof content !== "string") throw damaged();
    return [dir, file, content];
  });
}

/** Writes `text` to `path` (created or truncated) and fsyncs it before returning. */
async function writeDurably(path: string, text: string): Promise<void> {
  const handle = await open(path, "w");
  try {
    await handle.writeFile(text, "utf8");
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Fsyncs a directory, so the names created, renamed or removed in it survive a crash (Linux, macOS). */
async function syncDirectory(path: string): Promise<void> {
  const handle = await open(path, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
