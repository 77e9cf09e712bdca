/**
 * An in-process `GuardrailStore`: correct for one process, lost on restart. Use it for tests and
 * single-process development; use the SQLite or PostgreSQL store in production.
 *
 * It is `KeyValueGuardrailStore` on Maps: every operation is the base's, and this file is only the
 * storage. A step runs against the Maps with its writes buffered; they are applied when the step
 * resolves, and only if no other step committed meanwhile (else the step runs again on the new
 * state), so steps are serializable although they await.
 */
import { KeyValueGuardrailStore, type KeyValueScanOptions, type KeyValueTransaction } from "../store/key-value.js";
import type { JsonValue } from "../contracts.js";
import { brandTrustedStore } from "./validate.js";

/** `InMemoryGuardrailStore`'s options. */
export interface InMemoryGuardrailStoreOptions {
  /** Clock for claim, settlement and audit times. Default: the system clock. */
  readonly now?: () => Date;
}

/** A buffered delete. */
const DELETED: unique symbol = Symbol("deleted");

/** One collection: its entries in insertion order, and their keys sorted, computed when a scan needs them. */
class Collection {
  readonly entries = new Map<string, unknown>();
  #sorted: string[] | undefined = [];

  set(key: string, value: unknown): void {
    if (this.#sorted !== undefined && !this.entries.has(key)) {
      // Appending in ascending key order (audit events, claims) keeps the sorted list valid.
      const last = this.#sorted.at(-1);
      if (last === undefined || last < key) this.#sorted.push(key);
      else this.#sorted = undefined;
    }
    this.entries.set(key, value);
  }

  delete(key: string): void {
    if (this.entries.delete(key)) this.#sorted = undefined;
  }

  sortedKeys(): readonly string[] {
    this.#sorted ??= [...this.entries.keys()].sort(compareKeys);
    return this.#sorted;
  }
}

/** UTF-16 code unit order, as the transaction contract specifies. */
const compareKeys = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** The first index in `keys` (sorted) whose key is after `after`. */
function firstAfter(keys: readonly string[], after: string | undefined): number {
  if (after === undefined) return 0;
  let low = 0;
  let high = keys.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if ((keys[middle] ?? "") <= after) low = middle + 1;
    else high = middle;
  }
  return low;
}

class MemoryTransaction implements KeyValueTransaction {
  readonly #data: Map<string, Collection>;
  /** collection -> key -> the value written, or DELETED. */
  writes: Map<string, Map<string, unknown>> | undefined;

  constructor(data: Map<string, Collection>) {
    this.#data = data;
  }

  get(collection: string, key: string): Promise<unknown> {
    const written = this.writes?.get(collection)?.get(key);
    if (written !== undefined) return Promise.resolve(written === DELETED ? undefined : written);
    return Promise.resolve(this.#data.get(collection)?.entries.get(key));
  }

  put(collection: string, key: string, value: JsonValue): void {
    this.#buffer(collection).set(key, value);
  }

  delete(collection: string, key: string): void {
    this.#buffer(collection).set(key, DELETED);
  }

  #buffer(collection: string): Map<string, unknown> {
    this.writes ??= new Map();
    let buffer = this.writes.get(collection);
    if (buffer === undefined) {
      buffer = new Map();
      this.writes.set(collection, buffer);
    }
    return buffer;
  }

  scan(collection: string, options: KeyValueScanOptions = {}): Promise<(readonly [string, unknown])[]> {
    const { after, limit = Number.POSITIVE_INFINITY } = options;
    const stored = this.#data.get(collection);
    const buffer = this.writes?.get(collection);
    let keys = stored?.sortedKeys() ?? [];
    if (buffer !== undefined) keys = [...new Set([...keys, ...buffer.keys()])].sort(compareKeys);
    const entries: (readonly [string, unknown])[] = [];
    for (let index = firstAfter(keys, after); index < keys.length && entries.length < limit; index++) {
      const key = keys[index] ?? "";
      const written = buffer?.get(key);
      const value = written === undefined ? stored?.entries.get(key) : written === DELETED ? undefined : written;
      if (value !== undefined) entries.push([key, value]);
    }
    return Promise.resolve(entries);
  }

  commit(): void {
    if (this.writes === undefined) return;
    for (const [name, buffer] of this.writes) {
      let collection = this.#data.get(name);
      if (collection === undefined) {
        collection = new Collection();
        this.#data.set(name, collection);
      }
      for (const [key, value] of buffer) {
        if (value === DELETED) collection.delete(key);
        else collection.set(key, value);
      }
    }
  }
}

export class InMemoryGuardrailStore extends KeyValueGuardrailStore {
  readonly #data = new Map<string, Collection>();
  /** Bumped by every commit that wrote: a step that saw another version runs again. */
  #version = 0;

  constructor(options: InMemoryGuardrailStoreOptions = {}) {
    super(options);
    // A subclass may answer otherwise: only this class's own instances are trusted.
    if (new.target === InMemoryGuardrailStore) brandTrustedStore(this, InMemoryGuardrailStore.prototype);
  }

  /** The Maps keep the base's own values by reference: no re-parsing, unless a subclass replaced `atomic`. */
  protected override recordsAreTrusted(): boolean {
    return this.atomic === InMemoryGuardrailStore.prototype.atomic;
  }

  protected override async atomic<T>(step: (tx: KeyValueTransaction) => Promise<T>): Promise<T> {
    for (;;) {
      const version = this.#version;
      const tx = new MemoryTransaction(this.#data);
      const result = await step(tx);
      if (this.#version !== version) continue;
      if (tx.writes !== undefined) {
        tx.commit();
        this.#version++;
      }
      return result;
    }
  }
}
