/**
 * The smallest `KeyValueGuardrailStore` adapter that keeps nothing by reference: every value is
 * stored as JSON text and parsed on the way out, so the base's records are re-parsed and
 * key-checked on every read (the path a Redis or file adapter takes). Steps run one at a time
 * (a promise chain), the other way to be serializable than the in-memory store's re-runs.
 */
import {
  KeyValueGuardrailStore,
  StoreContractError,
  type KeyValueGuardrailStoreOptions,
  type KeyValueScanOptions,
  type KeyValueTransaction,
} from "arkah-agent-guardrails/store";
import type { KeyValueRawWrite } from "arkah-agent-guardrails/testing";

/** Stored text back to a value: text that is not JSON is corruption, never a value. */
function decode(collection: string, key: string, text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new StoreContractError(`the entry ${JSON.stringify(key)} of ${collection} is not JSON`);
  }
}

export class JsonKeyValueStore extends KeyValueGuardrailStore {
  /** collection -> key -> JSON text. */
  readonly data = new Map<string, Map<string, string>>();
  #tail: Promise<unknown> = Promise.resolve();

  constructor(options: KeyValueGuardrailStoreOptions = {}) {
    super(options);
  }

  /** Writes a raw value, as a corrupt backend (or an attacker with storage access) could. */
  writeRaw(collection: string, key: string, value: unknown): void {
    const entries = this.data.get(collection) ?? new Map<string, string>();
    entries.set(key, JSON.stringify(value));
    this.data.set(collection, entries);
  }

  /** The conformance kit's raw write: a value as `put` would store it, or text that is not JSON. */
  writeKitRaw(write: KeyValueRawWrite): void {
    const entries = this.data.get(write.collection) ?? new Map<string, string>();
    entries.set(write.key, "value" in write ? JSON.stringify(write.value) : "{truncated");
    this.data.set(write.collection, entries);
  }

  /** Reads a raw value. */
  readRaw(collection: string, key: string): unknown {
    const text = this.data.get(collection)?.get(key);
    return text === undefined ? undefined : (JSON.parse(text) as unknown);
  }

  protected override atomic<T>(step: (tx: KeyValueTransaction) => Promise<T>): Promise<T> {
    const run = this.#tail.then(async () => {
      const writes = new Map<string, Map<string, string | undefined>>();
      const read = (collection: string, key: string): string | undefined => {
        const buffered = writes.get(collection);
        return buffered?.has(key) === true ? buffered.get(key) : this.data.get(collection)?.get(key);
      };
      const buffer = (collection: string, key: string, text: string | undefined) => {
        const entries = writes.get(collection) ?? new Map<string, string | undefined>();
        entries.set(key, text);
        writes.set(collection, entries);
      };
      const tx: KeyValueTransaction = {
        get: async (collection, key) => {
          const text = read(collection, key);
          return text === undefined ? undefined : decode(collection, key, text);
        },
        put: (collection, key, value) => {
          buffer(collection, key, JSON.stringify(value));
        },
        delete: (collection, key) => {
          buffer(collection, key, undefined);
        },
        scan: async (collection, options: KeyValueScanOptions = {}) => {
          const keys = new Set([...(this.data.get(collection)?.keys() ?? []), ...(writes.get(collection)?.keys() ?? [])]);
          const sorted = [...keys].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)).filter((key) => options.after === undefined || key > options.after);
          const entries: (readonly [string, unknown])[] = [];
          for (const key of sorted) {
            if (entries.length >= (options.limit ?? Number.POSITIVE_INFINITY)) break;
            const text = read(collection, key);
            if (text !== undefined) entries.push([key, decode(collection, key, text)]);
          }
          return entries;
        },
      };
      const result = await step(tx);
      for (const [collection, entries] of writes) {
        const stored = this.data.get(collection) ?? new Map<string, string>();
        for (const [key, text] of entries) {
          if (text === undefined) stored.delete(key);
          else stored.set(key, text);
        }
        this.data.set(collection, stored);
      }
      return result;
    });
    this.#tail = run.catch(() => undefined);
    return run;
  }
}
