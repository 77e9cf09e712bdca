/**
 * Insert-if-absent records: admission receipts, read evidence and guardrail verdicts.
 */
import { expect } from "vitest";
import {
  AdmissionReceiptSchema,
  VerdictRecordSchema,
  type AdmissionReceipt,
  type GuardrailStore,
  type ReadEvidence,
  type VerdictKey,
  type VerdictRecord,
} from "../../contracts/index.js";
import { turnKey } from "../../keys.js";
import {
  ALLOW,
  CALL,
  conform,
  DENY,
  evidenceDigest,
  expectBoolean,
  fingerprintOfCall,
  receipt,
  REDESCRIBED,
  SIBLING,
  STRANGER,
  TURN,
  TURN_KEY,
  VERDICT_KEY,
  VERDICT_KEY_VARIANTS,
  verdictRecord,
} from "./fixtures.js";
import type { StoreTest } from "./harness.js";

// ---------------------------------------------------------------------------------------------
// Admission receipts

export function receiptsSuite(test: StoreTest): void {
  const put = async (store: GuardrailStore, value: AdmissionReceipt) =>
    conform(AdmissionReceiptSchema, await store.putReceiptIfAbsent(value), "putReceiptIfAbsent's answer");

  test("getReceipt answers undefined for a turn without a receipt", async ({ store }) => {
    expect(await store.getReceipt(TURN_KEY), "await store.getReceipt(TURN_KEY) toBeUndefined").toBeUndefined();
  });

  test("stores the first receipt and returns it exactly as given", async ({ store }) => {
    expect(await put(store, receipt()), "await put(store, receipt()) toEqual").toEqual(receipt());
    expect(await store.getReceipt(TURN_KEY), "await store.getReceipt(TURN_KEY) toEqual").toEqual(receipt());
  });

  for (const allowed of [true, false]) {
    test(`keeps the first receipt (allowed: ${String(allowed)}) immutable and returns it to later puts`, async ({ store }) => {
      const first = receipt(TURN, { allowed });
      await put(store, first);
      const second = receipt(TURN, {
        allowed: !allowed,
        policyVersion: "policy-2",
        moderationDigest: evidenceDigest("other segments"),
        decidedAt: "2031-02-04T00:00:00.000Z",
      });
      expect(await put(store, second), "await put(store, second) toEqual").toEqual(first);
      expect(await put(store, receipt(TURN, { allowed: !allowed })), "await put(store, receipt(TURN, { allowed: !allowed })) toEqual").toEqual(first);
      expect(await store.getReceipt(TURN_KEY), "await store.getReceipt(TURN_KEY) toEqual").toEqual(first);
    });
  }

  test("stores a receipt's principal exactly, and leaves it out of a receipt that names none", async ({ store }) => {
    const named = receipt(TURN, { principal: "user:ünïcødé 7\u0000" });
    expect(await put(store, named), "await put(store, named) toEqual").toEqual(named);
    expect(await store.getReceipt(TURN_KEY), "await store.getReceipt(TURN_KEY) toEqual").toEqual(named);
    await put(store, receipt(SIBLING));
    expect(await store.getReceipt(turnKey(SIBLING)), "await store.getReceipt(turnKey(SIBLING)) not.toHaveProperty").not.toHaveProperty("principal");
  });

  test("the first receipt's principal is immutable: a later put for another principal, or none, gets the first back", async ({ store }) => {
    const first = receipt(TURN, { principal: "user-1" });
    await put(store, first);
    expect(await put(store, receipt(TURN, { principal: "user-2" })), "await put(store, receipt(TURN, { principal: \"user-2\" })) toEqual").toEqual(first);
    expect(await put(store, receipt(TURN)), "await put(store, receipt(TURN)) toEqual").toEqual(first);
    const unnamed = receipt(SIBLING);
    await put(store, unnamed);
    expect(await put(store, receipt(SIBLING, { principal: "user-1" })), "await put(store, receipt(SIBLING, { principal: \"user-1\" })) toEqual").toEqual(unnamed);
    expect(await store.getReceipt(turnKey(SIBLING)), "await store.getReceipt(turnKey(SIBLING)) not.toHaveProperty").not.toHaveProperty("principal");
  });

  test("keeps receipts of different turns apart", async ({ store }) => {
    const denied = receipt(TURN, { allowed: false });
    const sibling = receipt(SIBLING);
    const stranger = receipt(STRANGER, { policyVersion: "policy-9" });
    await put(store, denied);
    expect(await put(store, sibling), "await put(store, sibling) toEqual").toEqual(sibling);
    expect(await put(store, stranger), "await put(store, stranger) toEqual").toEqual(stranger);
    expect(await store.getReceipt(TURN_KEY), "await store.getReceipt(TURN_KEY) toEqual").toEqual(denied);
    expect(await store.getReceipt(turnKey(SIBLING)), "await store.getReceipt(turnKey(SIBLING)) toEqual").toEqual(sibling);
    expect(await store.getReceipt(turnKey(STRANGER)), "await store.getReceipt(turnKey(STRANGER)) toEqual").toEqual(stranger);
  });

  test("gives 16 concurrent first puts one winner, returned to each of them", async ({ store }) => {
    const candidates = Array.from({ length: 16 }, (_, index) =>
      receipt(TURN, { policyVersion: `policy-${String(index)}`, allowed: index % 2 === 0 }),
    );
    const winners = await Promise.all(candidates.map((candidate) => put(store, candidate)));
    const stored = await store.getReceipt(TURN_KEY);
    expect(candidates, "candidates toContainEqual").toContainEqual(stored);
    for (const winner of winners) expect(winner, "winner toEqual").toEqual(stored);
  });

  test("detaches what it returns: changing a returned receipt changes nothing stored", async ({ store }) => {
    const returned = await put(store, receipt());
    returned.allowed = false;
    returned.policyVersion = "changed";
    const read = await store.getReceipt(TURN_KEY);
    if (read !== undefined) read.allowed = false;
    const loser = await put(store, receipt(TURN, { policyVersion: "policy-2" }));
    loser.allowed = false;
    expect(await store.getReceipt(TURN_KEY), "await store.getReceipt(TURN_KEY) toEqual").toEqual(receipt());
  });

  test("detaches what it stores: changing the caller's receipt afterwards changes nothing", async ({ store }) => {
    const input = receipt(TURN, { allowed: false });
    await put(store, input);
    input.allowed = true;
    input.policyVersion = "changed";
    expect(await store.getReceipt(TURN_KEY), "await store.getReceipt(TURN_KEY) toEqual").toEqual(receipt(TURN, { allowed: false }));
  });
}

// ---------------------------------------------------------------------------------------------
// Read evidence

export function readsSuite(given: StoreTest): void {
  // Observed through hasSuccessfulRead, optional in the contract: the evidence suite checks the
  // same evidence through claims, on every store.
  const test: StoreTest = (name, body, needs = []) => {
    given(name, body, ["hasSuccessfulRead", ...needs]);
  };
  const EVIDENCE: ReadEvidence = { turnKey: TURN_KEY, evidenceDigest: evidenceDigest("read-1") };

  const has = async (store: GuardrailStore, evidence: ReadEvidence, expected: boolean, what: string) => {
    expectBoolean(await store.hasSuccessfulRead(evidence), expected, what);
  };

  test("has no evidence before any is recorded (a literal false)", async ({ store }) => {
    await has(store, EVIDENCE, false, "unrecorded evidence");
  });

  test("confirms recorded evidence with a literal true", async ({ store }) => {
    await expect(store.recordSuccessfulRead(EVIDENCE), "store.recordSuccessfulRead(EVIDENCE) resolves").resolves.toBeUndefined();
    await has(store, EVIDENCE, true, "recorded evidence");
    await has(store, { ...EVIDENCE }, true, "an equal copy of recorded evidence");
  });

  test("has no false positives: another turn key or another digest is not the same evidence", async ({ store }) => {
    const other = { turnKey: turnKey(SIBLING), evidenceDigest: evidenceDigest("read-2") };
    await store.recordSuccessfulRead(EVIDENCE);
    await store.recordSuccessfulRead(other);
    await has(store, { turnKey: turnKey(SIBLING), evidenceDigest: EVIDENCE.evidenceDigest }, false, "digest of turn 1 under turn 2");
    await has(store, { turnKey: TURN_KEY, evidenceDigest: other.evidenceDigest }, false, "digest of turn 2 under turn 1");
    await has(store, { turnKey: turnKey(STRANGER), evidenceDigest: EVIDENCE.evidenceDigest }, false, "same turn id, other scope");
    await has(store, { turnKey: EVIDENCE.evidenceDigest, evidenceDigest: TURN_KEY }, false, "the two digests swapped");
    await has(store, { turnKey: TURN_KEY, evidenceDigest: evidenceDigest("read-3") }, false, "a digest never recorded");
    await has(store, EVIDENCE, true, "turn 1's own evidence");
    await has(store, other, true, "turn 2's own evidence");
  });

  test("records idempotently, sequentially and concurrently", async ({ store }) => {
    await store.recordSuccessfulRead(EVIDENCE);
    await expect(store.recordSuccessfulRead({ ...EVIDENCE }), "store.recordSuccessfulRead({ ...EVIDENCE }) resolves").resolves.toBeUndefined();
    const again = await Promise.all(Array.from({ length: 16 }, () => store.recordSuccessfulRead({ ...EVIDENCE })));
    expect(again, "again toEqual").toEqual(Array.from({ length: 16 }, () => undefined));
    await has(store, EVIDENCE, true, "evidence recorded many times");
  });

  test("keeps several pieces of evidence per turn", async ({ store }) => {
    const digests = ["a", "b", "c"].map(evidenceDigest);
    for (const digest of digests) await store.recordSuccessfulRead({ turnKey: TURN_KEY, evidenceDigest: digest });
    for (const digest of digests) await has(store, { turnKey: TURN_KEY, evidenceDigest: digest }, true, `evidence ${digest}`);
  });

  test("detaches what it stores: changing the caller's evidence afterwards changes nothing", async ({ store }) => {
    const input = { ...EVIDENCE };
    await store.recordSuccessfulRead(input);
    input.evidenceDigest = evidenceDigest("changed");
    await has(store, EVIDENCE, true, "the evidence as recorded");
    await has(store, input, false, "the caller's changed object");
  });
}

// ---------------------------------------------------------------------------------------------
// Guardrail verdicts: insert-if-absent, keyed by all six key fields

interface KeyedRecords<R extends VerdictKey> {
  readonly what: string;
  readonly record: (store: GuardrailStore, record: R) => Promise<R>;
  readonly get: (store: GuardrailStore, key: VerdictKey) => Promise<R | undefined>;
  /** The test's main record, for `key`. */
  readonly first: (key?: VerdictKey) => R;
  /** A different record for the same key. */
  readonly second: (key?: VerdictKey) => R;
  /** Distinct records for `VERDICT_KEY`, one per `index`. */
  readonly numbered: (index: number) => R;
  /** Every shape a record may take, each with `key`. */
  readonly shapes: (key: VerdictKey) => readonly (readonly [string, R])[];
  /** Changes nested data in place, to prove nothing is shared. */
  readonly scribble: (record: R) => void;
}

function keyedRecordsSuite<R extends VerdictKey>(test: StoreTest, records: KeyedRecords<R>): void {
  const { what, record, get, first, second } = records;
  const keyOf = (value: R): VerdictKey => ({
    turnKey: value.turnKey,
    toolCallId: value.toolCallId,
    toolName: value.toolName,
    toolFingerprint: value.toolFingerprint,
    guardrail: value.guardrail,
    argsDigest: value.argsDigest,
  });

  test(`answers undefined for a key without a ${what}`, async ({ store }) => {
    expect(await get(store, VERDICT_KEY), "await get(store, VERDICT_KEY) toBeUndefined").toBeUndefined();
  });

  test(`stores the first ${what} and returns it exactly as given`, async ({ store }) => {
    expect(await record(store, first()), "await record(store, first()) toEqual").toEqual(first());
    expect(await get(store, VERDICT_KEY), "await get(store, VERDICT_KEY) toEqual").toEqual(first());
  });

  for (const [label, shape] of records.shapes(VERDICT_KEY)) {
    test(`round-trips a ${what} with ${label}`, async ({ store }) => {
      expect(await record(store, shape), "await record(store, shape) toEqual").toEqual(shape);
      expect(await get(store, keyOf(shape)), "await get(store, keyOf(shape)) toEqual").toEqual(shape);
    });
  }

  test(`keeps the first ${what} for a key immutable and returns it to later records`, async ({ store }) => {
    await record(store, first());
    expect(await record(store, second()), "await record(store, second()) toEqual").toEqual(first());
    expect(await get(store, VERDICT_KEY), "await get(store, VERDICT_KEY) toEqual").toEqual(first());
  });

  for (const [label, key] of VERDICT_KEY_VARIANTS) {
    test(`keys a ${what} by all six fields: ${label} is a different ${what}`, async ({ store }) => {
      await record(store, first());
      expect(await get(store, key), "await get(store, key) toBeUndefined").toBeUndefined();
      expect(await record(store, second(key)), "await record(store, second(key)) toEqual").toEqual(second(key));
      expect(await get(store, key), "await get(store, key) toEqual").toEqual(second(key));
      expect(await get(store, VERDICT_KEY), "await get(store, VERDICT_KEY) toEqual").toEqual(first());
    });
  }

  test(`gives 16 concurrent first ${what}s for one key one winner, returned to each`, async ({ store }) => {
    const candidates = Array.from({ length: 16 }, (_, index) => records.numbered(index));
    const winners = await Promise.all(candidates.map((candidate) => record(store, candidate)));
    const stored = await get(store, VERDICT_KEY);
    expect(candidates, "candidates toContainEqual").toContainEqual(stored);
    for (const winner of winners) expect(winner, "winner toEqual").toEqual(stored);
  });

  test(`detaches what it returns: changing a returned ${what} changes nothing stored`, async ({ store }) => {
    records.scribble(await record(store, first()));
    const read = await get(store, VERDICT_KEY);
    if (read !== undefined) records.scribble(read);
    records.scribble(await record(store, second()));
    expect(await get(store, VERDICT_KEY), "await get(store, VERDICT_KEY) toEqual").toEqual(first());
  });

  test(`detaches what it stores: changing the caller's ${what} afterwards changes nothing`, async ({ store }) => {
    const input = first();
    await record(store, input);
    records.scribble(input);
    expect(await get(store, VERDICT_KEY), "await get(store, VERDICT_KEY) toEqual").toEqual(first());
  });
}

export function verdictsSuite(test: StoreTest): void {
  test("a verdict recorded for one tool never answers for another tool with the same call id, guardrail and arguments", async ({ store }) => {
    const other = { ...VERDICT_KEY, toolName: "delete_document" };
    await store.recordVerdict(verdictRecord(VERDICT_KEY, ALLOW));
    expect(await store.getVerdict(other), "await store.getVerdict(other) toBeUndefined").toBeUndefined();
    // The other tool's own check is recorded apart, and each tool reads back its own.
    expect(await store.recordVerdict(verdictRecord(other, DENY)), "await store.recordVerdict(verdictRecord(other, DENY)) toEqual").toEqual(verdictRecord(other, DENY));
    expect((await store.getVerdict(other))?.verdict, "(await store.getVerdict(other))?.verdict toEqual").toEqual(DENY);
    expect((await store.getVerdict(VERDICT_KEY))?.verdict, "(await store.getVerdict(VERDICT_KEY))?.verdict toEqual").toEqual(ALLOW);
    expect((await store.getVerdict({ ...VERDICT_KEY, toolName: CALL.name.toUpperCase() })), "(await store.getVerdict({ ...VERDICT_KEY, toolName: CALL.name.toUpperCase() })) toBeUndefined").toBeUndefined();
  });

  test("a verdict recorded under one tool fingerprint never answers another: the same tool, described otherwise", async ({ store }) => {
    const redescribed = { ...VERDICT_KEY, toolFingerprint: fingerprintOfCall(REDESCRIBED) };
    await store.recordVerdict(verdictRecord(VERDICT_KEY, ALLOW));
    expect(await store.getVerdict(redescribed), "await store.getVerdict(redescribed) toBeUndefined").toBeUndefined();
    expect(await store.recordVerdict(verdictRecord(redescribed, DENY)), "await store.recordVerdict(verdictRecord(redescribed, DENY)) toEqual").toEqual(verdictRecord(redescribed, DENY));
    expect((await store.getVerdict(redescribed))?.verdict, "(await store.getVerdict(redescribed))?.verdict toEqual").toEqual(DENY);
    expect((await store.getVerdict(VERDICT_KEY))?.verdict, "(await store.getVerdict(VERDICT_KEY))?.verdict toEqual").toEqual(ALLOW);
  });

  keyedRecordsSuite<VerdictRecord>(test, {
    what: "verdict",
    record: async (store, value) => conform(VerdictRecordSchema, await store.recordVerdict(value), "recordVerdict's answer"),
    get: async (store, key) => {
      const found = await store.getVerdict(key);
      return found === undefined ? undefined : conform(VerdictRecordSchema, found, "getVerdict's answer");
    },
    first: (key) => verdictRecord(key, DENY),
    second: (key) => verdictRecord(key, ALLOW, "2031-02-04T00:00:00.000Z"),
    numbered: (index) => verdictRecord(VERDICT_KEY, { ...DENY, reason: `candidate ${String(index)}` }),
    shapes: (key) => [
      ["a denial with every optional field", verdictRecord(key, DENY)],
      ["an allow and no detections", verdictRecord(key, ALLOW)],
      ["an observation", verdictRecord(key, { action: "observe", outcome: "complete", detections: [{ rule: "r", detected: true }] })],
      ["an approval request", verdictRecord(key, { action: "approve", outcome: "complete", detections: [], reason: "Large edit." })],
      ["a partial outcome", verdictRecord(key, { action: "deny", outcome: "partial", detections: [] })],
    ],
    scribble: (value) => {
      value.verdict.action = "allow";
      value.verdict.reason = "changed";
      const detection = value.verdict.detections[0];
      if (detection !== undefined) {
        detection.detected = !detection.detected;
        detection.extra = "changed";
      }
      value.verdict.detections.push({ rule: "added", detected: true });
      if (value.verdict.details !== undefined) value.verdict.details.fields = ["changed"];
      value.recordedAt = "2000-01-01T00:00:00.000Z";
    },
  });
}
