/**
 * The conformance kit catches the three bugs it used to miss (issue 26), and a side-effect limit
 * counted across tools (issue 22): each is seeded into a
 * wrapper around the in-memory store, the kit's suites are run against it (collected here, not
 * registered with vitest), and the named kit tests must fail; the same suites pass against the
 * unbroken wrapper, so the failures are the seeded bugs'.
 */
import { describe, expect, it } from "vitest";
import { InMemoryGuardrailStore, StoreContractError } from "arkah-agent-guardrails";
import type {
  ApplyApprovalInput,
  ApprovalDecisionResult,
  ApprovalQuery,
  ApprovalRecord,
  ApprovalSubmission,
  AuditQuery,
  DecideApprovalInput,
  EffectClaimOptions,
  EffectClaimResult,
  EffectIdentity,
  StoredAuditEvent,
} from "arkah-agent-guardrails/store";
import type { CorruptionTarget } from "arkah-agent-guardrails/testing";
import { releaseSuite } from "../../src/testing/conformance/claims.js";
import { corruptionSuite } from "../../src/testing/conformance/corruption.js";
import { cursorsSuite } from "../../src/testing/conformance/cursors.js";
import { effectsSuite } from "../../src/testing/conformance/effects.js";
import { CLOCK_START, ManualClock, type StoreFixture, type StoreTest } from "../../src/testing/conformance/harness.js";

type Bug = "none" | "released-without-kind" | "unencoded-sink-names" | "unchecked-key" | "limit-across-tools";

/** The in-memory store with one seeded bug (or none), and a corruptRecord for its approvals. */
class SeededStore extends InMemoryGuardrailStore {
  /** Approval records a corruptRecord put under another id: what a backend that stores raw records would hold. */
  readonly rawApprovals = new Map<string, ApprovalRecord>();

  constructor(
    readonly bug: Bug,
    now: () => Date,
  ) {
    super({ now });
  }

  /** turn key -> every effect key claimed in it, whatever the tool: what the seeded limit bug counts. */
  readonly #effectsByTurn = new Map<string, Set<string>>();

  override async claimEffect(identity: EffectIdentity, options?: EffectClaimOptions): Promise<EffectClaimResult> {
    if (this.bug === "limit-across-tools" && options?.maxPerTurn !== undefined && (await this.getEffect(identity.effectKey)) === undefined) {
      // The seeded bug: the turn's effects are counted across all its tools.
      if ((this.#effectsByTurn.get(identity.turnKey)?.size ?? 0) >= options.maxPerTurn) return { status: "limit_reached" };
    }
    const result = await super.claimEffect(identity, options);
    if (result.status === "acquired") this.#effectsByTurn.set(identity.turnKey, (this.#effectsByTurn.get(identity.turnKey) ?? new Set()).add(identity.effectKey));
    return result;
  }

  override async readAudit(query?: AuditQuery): Promise<StoredAuditEvent[]> {
    const events = await super.readAudit(query);
    if (this.bug !== "released-without-kind") return events;
    return events.map((event) => {
      if (event.decision !== "released") return event;
      const { kind: _kind, ...rest } = event;
      return rest;
    });
  }

  /** UTF-8 storage without encoding: a lone surrogate becomes U+FFFD, so two names can be one. */
  #sink(name: string): string {
    return this.bug === "unencoded-sink-names" && typeof name === "string" ? Buffer.from(name, "utf8").toString("utf8") : name;
  }

  override getAuditCursor(sink: string): Promise<number> {
    return super.getAuditCursor(this.#sink(sink));
  }

  override advanceAuditCursor(input: { sink: string; seq: number }): Promise<boolean> {
    return super.advanceAuditCursor({ ...input, sink: this.#sink(input.sink) });
  }

  /** What a store that checks the key does with a record stored under another one. */
  #refuse(approvalId: string): void {
    if (this.rawApprovals.has(approvalId)) throw new StoreContractError(`approval ${approvalId}: the stored record names another id`);
  }

  override async getApproval(approvalId: string): Promise<ApprovalRecord | undefined> {
    const raw = this.rawApprovals.get(approvalId);
    // The seeded bug: the record is returned without checking it is the one for this id.
    if (raw !== undefined && this.bug === "unchecked-key") return structuredClone(raw);
    this.#refuse(approvalId);
    return super.getApproval(approvalId);
  }

  override async requestApproval(request: ApprovalSubmission): Promise<ApprovalRecord> {
    this.#refuse(request.approvalId);
    return super.requestApproval(request);
  }

  override async decideApproval(input: DecideApprovalInput): Promise<ApprovalDecisionResult> {
    this.#refuse(input.approvalId);
    return super.decideApproval(input);
  }

  override async applyApproval(input: ApplyApprovalInput): Promise<boolean> {
    this.#refuse(input.approvalId);
    return super.applyApproval(input);
  }

  override async listApprovals(query?: ApprovalQuery): Promise<ApprovalRecord[]> {
    for (const id of this.rawApprovals.keys()) this.#refuse(id);
    return super.listApprovals(query);
  }
}

function corruptRecord(store: SeededStore, target: CorruptionTarget): Promise<"unsupported" | undefined> {
  return (async () => {
    if (target.record !== "approval" || target.mode !== "wrong_key") return "unsupported";
    const other = await InMemoryGuardrailStore.prototype.getApproval.call(store, target.otherKey);
    if (other === undefined) throw new Error("no record under the other key");
    store.rawApprovals.set(target.key, other);
    return undefined;
  })();
}

interface Collected {
  readonly name: string;
  readonly body: (fixture: StoreFixture) => Promise<void>;
}

/** Runs every test `register` declares against a fresh store with `bug`; the names of those that fail. */
async function failures(register: (test: StoreTest) => void, bug: Bug, only: RegExp): Promise<string[]> {
  const collected: Collected[] = [];
  register((name, body) => {
    if (only.test(name)) collected.push({ name, body });
  });
  expect(collected.length, `the kit has tests matching ${String(only)}`).toBeGreaterThan(0);
  const failed: string[] = [];
  for (const { name, body } of collected) {
    const clock = new ManualClock(CLOCK_START);
    const store = new SeededStore(bug, clock.now);
    const corrupt = async (target: CorruptionTarget) => (await corruptRecord(store, target)) !== "unsupported";
    try {
      await body({ store, clock, corrupt });
    } catch {
      failed.push(name);
    }
  }
  return failed;
}

describe("the kit fails a store with each bug it used to miss, and passes the same store without it", () => {
  it("a released event without kind", async () => {
    const only = /released event/;
    expect(await failures(releaseSuite, "none", only), "the unbroken store passes").toEqual([]);
    expect(await failures(releaseSuite, "released-without-kind", only), "the released-event check fails").toEqual([
      "appends one released event with the claim's identity, at the store's time",
    ]);
  });

  it("audit sink names stored unencoded: two names differing only in a lone surrogate collide", async () => {
    const only = /lone surrogate/;
    expect(await failures(cursorsSuite, "none", only), "the unbroken store passes").toEqual([]);
    expect(await failures(cursorsSuite, "unencoded-sink-names", only), "the exact-name check fails").toEqual([
      "sink names are stored exactly: two names differing only in a lone surrogate have their own cursors",
    ]);
  });

  it("a record not checked against the key it was read by", async () => {
    const only = /approval stored wrong_key/;
    expect(await failures(corruptionSuite, "none", only), "the unbroken store fails closed").toEqual([]);
    expect(await failures(corruptionSuite, "unchecked-key", only), "the fail-closed check fails").toEqual(["an approval stored wrong_key: every read fails closed"]);
  });

  it("a side-effect limit counted across the turn's tools, not per (turn, tool)", async () => {
    const only = /maxPerTurn counts one tool/;
    expect(await failures(effectsSuite, "none", only), "the unbroken store passes").toEqual([]);
    expect(await failures(effectsSuite, "limit-across-tools", only), "the per-tool limit check fails").toEqual([
      "maxPerTurn counts one tool in one turn: not other tools, not other turns",
    ]);
  });
});
