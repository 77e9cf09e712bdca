/**
 * KEY_VALUE_RECORD_KEYS is the one description of where the key-value base keeps each kind of record
 * (issue 40): it must name every collection the base writes, each for exactly one kind, and the
 * collection the base itself reads that kind from.
 */
import { describe, expect, it } from "vitest";
import { KEY_VALUE_COLLECTIONS, KEY_VALUE_RECORD_KEYS } from "arkah-agent-guardrails/store";
import { RECORD_KINDS } from "../../src/store/records.js";

describe("KEY_VALUE_RECORD_KEYS", () => {
  it("describes every record kind the base reads, in the collection the base reads it from", () => {
    expect(Object.keys(KEY_VALUE_RECORD_KEYS).sort()).toEqual(Object.keys(RECORD_KINDS).sort());
    for (const [name, kind] of Object.entries(RECORD_KINDS)) {
      expect(KEY_VALUE_RECORD_KEYS[name as keyof typeof RECORD_KINDS].collection, `the ${name} collection`).toBe(kind.collection);
    }
  });

  it("covers every collection of KEY_VALUE_COLLECTIONS, each holding exactly one kind of record", () => {
    const collections = Object.values(KEY_VALUE_RECORD_KEYS).map(({ collection }) => collection);
    expect([...collections].sort()).toEqual(Object.values(KEY_VALUE_COLLECTIONS).sort());
  });
});
