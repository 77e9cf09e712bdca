/**
 * An in-process `GuardrailStore`: correct for one process, lost on restart. Use it for tests and
 * single-process development; use the SQLite or PostgreSQL store in production.
 *
 * It is `KeyValueGuardrailStore` on Maps: every operation is the base's, and this file is only the
 * storage. Steps run synchronously (`atomicSync`), so no two interleave; a step's writes are
 * buffered and applied only when it returns.
 */
import { KeyValueGuardrailStore, type KeyValueScanOptions, type KeyValueSyncTransaction } from "../store/key-value.js";
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
    const size = this.entries.size;
    this.entries.set(key, value);
    const sorted = this.#sorted;
    if (sorted === undefined || this.entries.size === size) return;
    // A new key: appending in ascending key order (audit events) keeps the sorted list valid.
    const last = sorted.length === 0 ? undefined : sorted[sorted.length - 1];
    if (last === undefined || last < key) sorted.push(key);
    else this.#sorted = undefined;
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

class MemoryTransaction implements KeyValueSyncTransaction {
  readonly #data: Map<string, Collection>;
  /** Buffered writes, flat: collection, key, value (or DELETED), in write order. A step writes a few. */
  readonly writes: unknown[] = [];

  constructor(data: Map<string, Collection>) {
    this.#data = data;
  }

  get(collection: string, key: string): unknown {
    const writes = this.writes;
    for (let index = writes.length - 3; index >= 0; index -= 3) {
      if (writes[index + 1] === key && writes[index] === collection) {
        const written = writes[index + 2];
        return written === DELETED ? undefined : written;
      }
    }
    return this.#data.get(collection)?.entries.get(key);
  }

  put(collection: string, key: string, value: JsonValue): void {
    this.writes.push(collection, key, value);
  }

  delete(collection: string, key: string): void {
    this.writes.push(collection, key, DELETED);
  }

  scan(collection: string, options: KeyValueScanOptions = {}): (readonly [string, unknown])[] {
    const { after, limit = Number.POSITIVE_INFINITY } = options;
    const stored = this.#data.get(collection);
    const buffered = new Map<string, unknown>();
    for (let index = 0; index < this.writes.length; index += 3) {
      if (this.writes[index] === collection) buffered.set(this.writes[index + 1] as string, this.writes[index + 2]);
    }
    let keys = stored?.sortedKeys() ?? [];
    if (buffered.size > 0) keys = [...new Set([...keys, ...buffered.keys()])].sort(compareKeys);
    const entries: (readonly [string, unknown])[] = [];
    for (let index = firstAfter(keys, after); index < keys.length && entries.length < limit; index++) {
      const key = keys[index] ?? "";
      const value = buffered.has(key) ? buffered.get(key) : stored?.entries.get(key);
      if (value !== undefined && value !== DELETED) entries.push([key, value]);
    }
    return entries;
  }

  commit(): void {
    const writes = this.writes;
    for (let index = 0; index < writes.length; index += 3) {
      const name = writes[index] as string;
      const key = writes[index + 1] as string;
      const value = writes[index + 2];
      let collection = this.#data.get(name);
      if (collection === undefined) {
        collection = new Collection();
        this.#data.set(name, collection);
      }
      if (value === DELETED) collection.delete(key);
      else collection.set(key, value);
    }
  }
}

export class InMemoryGuardrailStore extends KeyValueGuardrailStore {
  readonly #data = new Map<string, Collection>();

  constructor(options: InMemoryGuardrailStoreOptions = {}) {
    super(options);
    // A subclass may answer otherwise: only this class's own instances are trusted.
    if (new.target === InMemoryGuardrailStore) brandTrustedStore(this, InMemoryGuardrailStore.prototype);
  }

  /** The Maps keep the base's own values by reference: no re-parsing, unless a subclass replaced the storage. */
  protected override recordsAreTrusted(): boolean {
    return this.atomicSync === InMemoryGuardrailStore.prototype.atomicSync;
  }

  /** Synchronous, so no other step runs meanwhile; the writes are applied only if `step` returns. */
  protected override atomicSync<T>(step: (tx: KeyValueSyncTransaction) => T): T {
    const tx = new MemoryTransaction(this.#data);
    const result = step(tx);
    tx.commit();
    return result;
  }
}
