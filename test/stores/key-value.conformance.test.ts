/** `KeyValueGuardrailStore` through an adapter that serializes every value: the base's untrusted path, against the conformance kit. */
import { validateGuardrailStore } from "arkah-agent-guardrails/testing";
import { JsonKeyValueStore } from "../support/json-key-value-store.js";

await validateGuardrailStore({
  storeName: "key-value (JSON)",
  createStore: ({ now }) => new JsonKeyValueStore({ now }),
  writeRaw: (store, write) => {
    store.writeKitRaw(write);
  },
});
