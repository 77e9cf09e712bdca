/**
 * The file store's hook for the conformance kit: its one raw write. Given as `writeRaw`, it gets
 * the kit's `primitives` suite (the store's get, put, delete and scan) and its `corruption` suite:
 * the kit locates each record it corrupts by `KEY_VALUE_RECORD_KEYS` (`arkah-agent-guardrails/store`)
 * and writes it through this.
 *
 * ```ts
 * await validateGuardrailStore<FileGuardrailStore>({
 *   storeName: "file store",
 *   createStore: ({ now }) => FileGuardrailStore.open({ directory: freshDirectory(), now }),
 *   destroyStore: (store) => store.close(),
 *   writeRaw: writeRawFileRecord,
 * });
 * ```
 */
import type { KeyValueRawWrite } from "arkah-agent-guardrails/testing";
import type { FileGuardrailStore } from "./store.js";

/** A record file's text as a commit writes it (files.ts), holding `value`; for `unparseable`, a file that is not JSON. */
export async function writeRawFileRecord(store: FileGuardrailStore, write: KeyValueRawWrite): Promise<void> {
  const text = "value" in write ? `{"key":${JSON.stringify(write.key)},"value":${JSON.stringify(write.value)}}` : "{truncated";
  await store.writeRawRecord(write.collection, write.key, text);
}
