/**
 * What the kit needs to test an adapter on `KeyValueGuardrailStore` below the `GuardrailStore`
 * methods: running a step of its own through the adapter's `atomic` (or `atomicSync`), and the
 * corruption hook it derives from the adapter's one raw write, locating records by
 * `KEY_VALUE_RECORD_KEYS`.
 */
import type { JsonValue } from "../../contracts/index.js";
import type { KeyValueScanOptions, KeyValueSyncTransaction, KeyValueTransaction } from "../../store/key-value.js";
import { KEY_VALUE_RECORD_KEYS, type KeyValueRecordName } from "../../store/record-keys.js";
import type { AnyGuardrailStore } from "../../store/capabilities.js";
import type { CorruptedRecord, CorruptionApplied, CorruptionTarget, GuardrailStoreTestInitializer, KeyValueRawWrite } from "./harness.js";

/** Either transaction: a kit step yields each `get` and `scan` answer (a value or a promise) and gets the value back. */
export type KitTransaction = KeyValueTransaction | KeyValueSyncTransaction;

/** One step of the kit's: runs on synchronous and asynchronous adapters alike, as the base's steps do. */
export type KitStep<T> = (tx: KitTransaction) => Generator<unknown, T, unknown>;

/** The scan's answer. */
export type Entries = (readonly [string, unknown])[];

/** The adapter's primitives. Protected on the base so that an app cannot bypass it; the kit drives them on purpose. */
interface KeyValueAdapter {
  atomic?: <T>(step: (tx: KeyValueTransaction) => Promise<T>) => Promise<T>;
  atomicSync?: <T>(step: (tx: KeyValueSyncTransaction) => T) => T;
}

function drainSync<T>(step: Generator<unknown, T, unknown>): T {
  let next = step.next();
  while (next.done !== true) next = step.next(next.value);
  return next.value;
}

async function drainAsync<T>(step: Generator<unknown, T, unknown>): Promise<T> {
  let next = step.next();
  while (next.done !== true) next = step.next(await next.value);
  return next.value;
}

/** Runs `step` as one atomic step of the adapter `store`; rejects as `atomic` does (an `atomicSync` that throws, too). */
export async function runStep<T>(store: object, step: KitStep<T>): Promise<T> {
  const adapter = store as KeyValueAdapter;
  if (typeof adapter.atomicSync === "function") return adapter.atomicSync((tx) => drainSync(step(tx)));
  if (typeof adapter.atomic !== "function") {
    throw new Error("the primitives suite needs a store on KeyValueGuardrailStore (arkah-agent-guardrails/store): this one has no atomic");
  }
  return adapter.atomic((tx) => drainAsync(step(tx)));
}

/** `tx.get`, inside a kit step. */
export function* get(tx: KitTransaction, collection: string, key: string): Generator<unknown, unknown, unknown> {
  return yield tx.get(collection, key);
}

/** `tx.scan`, inside a kit step; an answer that is not an array fails the test. */
export function* scan(tx: KitTransaction, collection: string, options?: KeyValueScanOptions): Generator<unknown, Entries, unknown> {
  const page: unknown = yield options === undefined ? tx.scan(collection) : tx.scan(collection, options);
  if (!Array.isArray(page)) throw new Error(`the adapter's scan of "${collection}" answered ${typeof page}, not an array of [key, value] pairs`);
  return page as Entries;
}

/** The base's record kind for each record the corruption suite names. */
const RECORD_NAMES: Readonly<Record<CorruptedRecord, KeyValueRecordName>> = {
  receipt: "receipt",
  read: "reads",
  claim: "claim",
  verdict: "verdict",
  approval: "approval",
  auditCursor: "cursor",
  turn: "turn",
  effect: "effect",
};

/** Where the key-value base keeps the record the corruption suite names by (`record`, `key`). */
export function keyValueLocation(record: CorruptedRecord, key: string): { readonly collection: string; readonly key: string } {
  const { collection } = KEY_VALUE_RECORD_KEYS[RECORD_NAMES[record]];
  if (record !== "read") return { collection, key };
  // The contract names one piece of evidence `${turnKey}:${evidenceDigest}`; the base keeps the turn's evidence in one record.
  const colon = key.indexOf(":");
  return { collection, key: colon < 0 ? key : key.slice(0, colon) };
}

/** The kit's own `corruptRecord` for a key-value adapter, from its one raw write. */
export function keyValueCorruptRecord<S extends AnyGuardrailStore>(
  writeRaw: (store: S, write: KeyValueRawWrite) => Promise<void> | void,
): (store: S, target: CorruptionTarget) => Promise<CorruptionApplied> {
  return async (store, target) => {
    const at = keyValueLocation(target.record, target.key);
    if (target.mode === "invalid") {
      // Well-formed for the adapter, not a record for the base: its schema check must fail closed.
      await writeRaw(store, { ...at, value: { corrupt: true } });
      return;
    }
    const from = keyValueLocation(target.record, target.otherKey);
    const other = await runStep(store, (tx) => get(tx, from.collection, from.key));
    if (other === undefined) throw new Error(`the kit found no ${target.record} under ${JSON.stringify(from.key)} in "${from.collection}" to copy`);
    await writeRaw(store, { ...at, value: other as JsonValue });
  };
}

/** The corruption hook the kit uses: the adapter's own, else one derived from `writeRaw`, else none. */
export function corruptionHook<S extends AnyGuardrailStore>(
  initializer: GuardrailStoreTestInitializer<S>,
): ((store: S, target: CorruptionTarget) => Promise<CorruptionApplied> | CorruptionApplied) | undefined {
  if (initializer.corruptRecord !== undefined) return initializer.corruptRecord.bind(initializer);
  return initializer.writeRaw === undefined ? undefined : keyValueCorruptRecord(initializer.writeRaw.bind(initializer));
}
