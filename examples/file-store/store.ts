/**
 * `FileGuardrailStore`: a `GuardrailStore` kept in a directory of files, written as an adapter
 * author would from docs/storage-adapters.md. It implements one method, `atomic`, on
 * `KeyValueGuardrailStore` (`arkah-agent-guardrails/store`); the base does everything else.
 *
 * Several processes on one host may share the directory: each step holds the directory's lock
 * (lock.ts) from its first read to its commit, so steps are serializable across processes, and
 * commits go through a redo journal (files.ts), so a crash never leaves half a step. Every commit
 * is fsynced before the step resolves: a claim that resolved survives a crash or a power loss.
 *
 * An example, not a production store: every step takes the whole directory's lock (one writer at a
 * time, as SQLite does), and a scan lists a whole collection directory.
 */
import {
  KeyValueGuardrailStore,
  StoreContractError,
  type JsonValue,
  type KeyValueGuardrailStoreOptions,
  type KeyValueScanOptions,
  type KeyValueTransaction,
} from "arkah-agent-guardrails/store";
import { FileDirectory, type CommitHook, type Write } from "./files.js";
import { acquireLock } from "./lock.js";

export { FileStoreLockError } from "./lock.js";
export type { CommitHook, CommitPoint } from "./files.js";

/** `FileGuardrailStore.open`'s options. */
export interface FileGuardrailStoreOptions extends KeyValueGuardrailStoreOptions {
  /** The store's directory, created if missing. Local disk only: never a network file system. */
  readonly directory: string;
  /** How long a step waits for another process's step before it rejects with `FileStoreLockError`. Default 10 000. */
  readonly lockTimeoutMs?: number;
  /** Test only: called at each commit point (after the journal is durable, after each applied write). */
  readonly commitHook?: CommitHook;
}

export class FileGuardrailStore extends KeyValueGuardrailStore {
  readonly #directory: FileDirectory;
  readonly #lockTimeoutMs: number;
  readonly #commitHook: CommitHook | undefined;
  /** This object's steps, one at a time: the tail of the queue. */
  #queue: Promise<unknown> = Promise.resolve();
  #closed = false;

  private constructor(directory: FileDirectory, options: FileGuardrailStoreOptions) {
    super({ ...(options.now === undefined ? {} : { now: options.now }), ...(options.onStep === undefined ? {} : { onStep: options.onStep }) });
    this.#directory = directory;
    this.#lockTimeoutMs = options.lockTimeoutMs ?? 10_000;
    this.#commitHook = options.commitHook;
  }

  /** Opens (creating if needed) the store in `options.directory`, finishing any commit a crash interrupted. */
  static async open(options: FileGuardrailStoreOptions): Promise<FileGuardrailStore> {
    const { directory, lockTimeoutMs = 10_000 } = options;
    if (typeof directory !== "string" || directory === "") throw new TypeError("FileGuardrailStore: `directory` must be a non-empty path");
    if (!Number.isInteger(lockTimeoutMs) || lockTimeoutMs < 0) throw new TypeError("FileGuardrailStore: `lockTimeoutMs` must be an integer >= 0");
    const files = new FileDirectory(directory);
    await files.create();
    const store = new FileGuardrailStore(files, options);
    // Recovery runs at the start of every step; running one now repairs the store at open.
    await store.atomic(async () => undefined);
    return store;
  }

  /** No step starts after this; it waits for the steps already queued. */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#queue.catch(() => undefined);
  }

  /**
   * Test only (the conformance kit's corruption hook): writes `text` as the raw content of the
   * record file of (collection, key), bypassing the journal and every check.
   */
  async writeRawRecord(collection: string, key: string, text: string): Promise<void> {
    await this.#directory.writeRaw(collection, key, text);
  }

  /** Test only: the value in the record file of (collection, key), read without the lock. */
  async readRawRecord(collection: string, key: string): Promise<unknown> {
    return this.#directory.read(collection, key);
  }

  protected override atomic<T>(step: (tx: KeyValueTransaction) => Promise<T>): Promise<T> {
    if (this.#closed) return Promise.reject(new Error("FileGuardrailStore: the store is closed"));
    // One step at a time in this process (no polling of our own lock), then the lock across processes.
    const run = this.#queue.then(() => this.#locked(step));
    this.#queue = run.catch(() => undefined);
    return run;
  }

  async #locked<T>(step: (tx: KeyValueTransaction) => Promise<T>): Promise<T> {
    const lock = await acquireLock(this.#directory.lockPath, this.#lockTimeoutMs);
    try {
      // A step that committed in a process that then crashed is applied before anything is read.
      await this.#directory.recover();
      const tx = new FileTransaction(this.#directory);
      let result: T;
      try {
        result = await step(tx);
      } finally {
        tx.end();
      }
      // Resolves only once the step is durable and applied. If it throws after the journal was
      // written, the step is committed all the same (the next step applies it): the caller must
      // treat the error as ambiguous, which the middleware does (a claim stays closed).
      await this.#directory.commit(tx.writes(), this.#commitHook);
      return result;
    } finally {
      await lock.release();
    }
  }
}

/** A step's reads (from the files, under the lock) and its writes, buffered until commit. */
class FileTransaction implements KeyValueTransaction {
  readonly #directory: FileDirectory;
  /** collection -> key -> the value's JSON text, or null for a delete. Serialized at `put`, so later changes to the caller's object do not leak in. */
  readonly #buffer = new Map<string, Map<string, string | null>>();
  #ended = false;

  constructor(directory: FileDirectory) {
    this.#directory = directory;
  }

  async get(collection: string, key: string): Promise<unknown> {
    this.#assertOpen();
    const buffered = this.#buffer.get(collection)?.get(key);
    if (buffered !== undefined) return buffered === null ? undefined : (JSON.parse(buffered) as unknown);
    return this.#directory.read(collection, key);
  }

  put(collection: string, key: string, value: JsonValue): void {
    this.#write(collection, key, JSON.stringify(value));
  }

  delete(collection: string, key: string): void {
    this.#write(collection, key, null);
  }

  async scan(collection: string, options: KeyValueScanOptions = {}): Promise<(readonly [string, unknown])[]> {
    this.#assertOpen();
    const { after, limit = Number.POSITIVE_INFINITY } = options;
    const buffered = this.#buffer.get(collection);
    const keys = new Set(await this.#directory.keys(collection));
    for (const [key, text] of buffered ?? []) {
      if (text === null) keys.delete(key);
      else keys.add(key);
    }
    const selected = [...keys]
      .filter((key) => after === undefined || key > after)
      .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
      .slice(0, limit);
    const entries: (readonly [string, unknown])[] = [];
    for (const key of selected) {
      const value = await this.get(collection, key);
      // Listed a moment ago under the lock: a record cannot vanish in between unless someone edits the directory by hand.
      if (value === undefined) throw new StoreContractError(`the record ${JSON.stringify(key)} of ${collection} vanished during a step`);
      entries.push([key, value]);
    }
    return entries;
  }

  /** The step's writes, in the order of their last change. */
  writes(): Write[] {
    const writes: Write[] = [];
    for (const [collection, entries] of this.#buffer) {
      for (const [key, json] of entries) writes.push({ collection, key, json });
    }
    return writes;
  }

  /** After the step: any later use is a bug in the caller (its writes would be lost). */
  end(): void {
    this.#ended = true;
  }

  #write(collection: string, key: string, text: string | null): void {
    this.#assertOpen();
    let entries = this.#buffer.get(collection);
    if (entries === undefined) {
      entries = new Map();
      this.#buffer.set(collection, entries);
    }
    entries.set(key, text);
  }

  #assertOpen(): void {
    if (this.#ended) throw new Error("FileGuardrailStore: a transaction was used after its step ended");
  }
}
