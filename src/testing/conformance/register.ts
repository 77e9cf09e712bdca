/**
 * Registers the conformance suites with vitest. Loaded by `validateGuardrailStore` on first use,
 * so importing `arkah-agent-guardrails/testing` (for `ScriptedModel`, say) never loads vitest.
 */
import { afterAll, beforeAll, describe } from "vitest";
import type { AnyGuardrailStore, StorePart } from "../../store/capabilities.js";
import type { ConformanceSuite } from "./suites.js";
import { approvalsSuite } from "./approvals.js";
import { auditSuite } from "./audit.js";
import { claimsSuite, releaseSuite, settlementSuite } from "./claims.js";
import { corruptionSuite } from "./corruption.js";
import { cursorsSuite } from "./cursors.js";
import { effectsSuite } from "./effects.js";
import { storeTest, type GuardrailStoreTestInitializer, type StoreTest } from "./harness.js";
import { reconciliationSuite, retentionSuite, scopeSuite } from "./reconciliation.js";
import { readsSuite, receiptsSuite, verdictsSuite } from "./records.js";
import { corruptionHook } from "./key-value.js";
import { primitivesSuite } from "./primitives.js";
import { evidenceSuite, stepAuditSuite } from "./steps.js";
import { turnsSuite } from "./turns.js";
import { validationSuite } from "./validation.js";

/**
 * Each suite, and the part of the contract it tests (none: the core). Tests in a core suite that
 * also call a part say so themselves (`needs`).
 */
const SUITES: Record<ConformanceSuite, { readonly title: string; readonly register: (test: StoreTest) => void; readonly part?: StorePart }> = {
  receipts: { title: "receipts: admission receipts are insert-if-absent and immutable", register: receiptsSuite },
  reads: { title: "reads: read evidence is exact-match and idempotent", register: readsSuite },
  claims: { title: "claims: one atomic mutation slot per turn", register: claimsSuite },
  evidence: {
    title: "evidence: a claim naming read evidence needs one of it recorded for the turn, checked first",
    register: evidenceSuite,
  },
  settlement: { title: "settlement: compare-and-set from pending by the claim token", register: settlementSuite },
  release: { title: "release: a pending claim given back by its token reopens the slot", register: releaseSuite },
  verdicts: { title: "verdicts: guardrail verdicts are insert-if-absent and bound to the tool", register: verdictsSuite, part: "approvals" },
  approvals: {
    part: "approvals",
    title: "approvals: durable requests; the first decision wins; applied once; listed and expired",
    register: approvalsSuite,
  },
  audit: { title: "audit: an append-only trail in append order, filtered by turn and scope", register: auditSuite },
  "step-audit": {
    title: "step audit: a read and a settlement append their audit event in the same transaction",
    register: stepAuditSuite,
  },
  cursors: { title: "cursors: one forward-only delivery cursor per audit sink", register: cursorsSuite, part: "auditDelivery" },
  reconciliation: { title: "reconciliation: listing and resolving unresolved mutations", register: reconciliationSuite, part: "operator" },
  scope: { title: "scope: an unknown mutation blocks its scope's other turns", register: scopeSuite },
  retention: { title: "retention: prune keeps a tombstone per turn", register: retentionSuite, part: "operator" },
  turns: {
    part: "turns",
    title: "turns: turn records begin once, lease to one worker, take over an expired lease, finish and resume by compare-and-set",
    register: turnsSuite,
  },
  effects: {
    part: "effects",
    title: "effects: one claim per side effect, replayed, fenced, limited per turn and tool, reconciled, pruned to tombstones",
    register: effectsSuite,
  },
  validation: { title: "validation: malformed input is rejected and changes nothing", register: validationSuite },
  corruption: {
    title: "corruption: a stored record that does not parse or names another key fails closed on every read",
    register: corruptionSuite,
  },
  primitives: {
    title: "primitives: a key-value adapter's get, put, delete and scan, in UTF-16 code unit order, in one atomic step, steps run concurrently on one store object",
    register: primitivesSuite,
  },
};

export function registerSuites<S extends AnyGuardrailStore>(
  initializer: GuardrailStoreTestInitializer<S>,
  selected: readonly ConformanceSuite[],
): void {

  describe(`GuardrailStore conformance: ${initializer.storeName}`, () => {
    if (initializer.beforeAll !== undefined) {
      beforeAll(async () => {
        await initializer.beforeAll?.();
      }, initializer.beforeAllTimeout);
    }
    if (initializer.afterAll !== undefined) {
      afterAll(async () => {
        await initializer.afterAll?.();
      });
    }
    for (const name of selected) {
      const { title, register, part } = SUITES[name];
      // A part the store does not declare has no tests registered: no empty suite either.
      if (part !== undefined && initializer.parts !== undefined && !initializer.parts.includes(part)) continue;
      // Only the adapter can write a raw record: without its hook (or a key-value adapter's raw write) there is no corruption suite.
      if (name === "corruption" && corruptionHook(initializer) === undefined) continue;
      // The primitives are a key-value adapter's, which marks itself by its raw write.
      if (name === "primitives" && initializer.writeRaw === undefined) continue;
      const suiteNeeds = part === undefined ? [] : [part];
      // Declared parts may leave a suite with no test (reads, without hasSuccessfulRead): vitest
      // fails an empty suite, so count what would be registered first.
      const declared = initializer.parts;
      let tests = 0;
      register((_name, _body, testNeeds = []) => {
        if (declared === undefined || [...suiteNeeds, ...testNeeds].every((need) => declared.includes(need))) tests++;
      });
      if (tests === 0) continue;
      describe(title, () => {
        register(storeTest(initializer, suiteNeeds));
      });
    }
  });
}
