/**
 * `InMemoryGuardrailStore` claim + settle pairs against a bare async `Map` doing the same work:
 * an `async claim(turnKey)` that checks and sets a record with a `randomUUID()` token, and an
 * `async settle(turnKey, token, result)` that compares and updates. The difference is what the
 * store adds on top: validation and detaching of every value crossing it, and its scope rule.
 *
 * Each pair uses a distinct turn key; identities (digests) are built before the timed loop for
 * both sides, and each sample starts from an empty store / map.
 */
import { randomUUID } from "node:crypto";
import {
  digest,
  InMemoryGuardrailStore,
  mutationKey,
  turnKey,
} from "arkah-agent-guardrails";
import {
  toolFingerprint,
  type MutationIdentity,
} from "arkah-agent-guardrails/store";
import { interleave, measure, per, roundOptions, type Interleaved, type RoundOptions } from "./harness.js";

interface BareRecord {
  readonly token: string;
  state: "pending" | "complete";
  result: { content: string; status: "success" | "error" } | undefined;
}

/** The baseline: the same claim/settle logic with no validation, no copies, no scope rule. */
export class BareMapStore {
  readonly #records = new Map<string, BareRecord>();

  async claim(key: string): Promise<{ status: "acquired"; token: string } | { status: "pending" }> {
    if (this.#records.has(key)) return { status: "pending" };
    const token = randomUUID();
    this.#records.set(key, { token, state: "pending", result: undefined });
    return { status: "acquired", token };
  }

  async settle(key: string, token: string, result: BareRecord["result"]): Promise<boolean> {
    const record = this.#records.get(key);
    if (record?.state !== "pending" || record.token !== token) return false;
    record.state = "complete";
    record.result = result;
    return true;
  }
}

export interface StoreOptions extends RoundOptions {
  /** Claim+settle pairs per timed sample (distinct turn keys). */
  readonly pairs: number;
}

export interface StoreResult extends Interleaved {
  readonly baselinePairsPerSecond: number;
  readonly subjectPairsPerSecond: number;
}

const RESULT_CONTENT = JSON.stringify({ id: "doc-1", title: "Field notes", revision: 1 });

const RENAME_FINGERPRINT = toolFingerprint({ name: "rename_document" });

export function identities(count: number): MutationIdentity[] {
  const args = { documentId: "doc-1", title: "Field notes" };
  return Array.from({ length: count }, (_, i) => {
    const turn = { scopeId: `doc-${String(i % 64)}`, turnId: `turn-${String(i)}` };
    const call = { id: `call-${String(i)}`, name: "rename_document", args };
    return {
      turnKey: turnKey(turn),
      scopeId: turn.scopeId,
      toolCallId: call.id,
      toolName: call.name,
      argsDigest: digest(args),
      mutationKey: mutationKey(turn, call),
      toolFingerprint: RENAME_FINGERPRINT,
    };
  });
}

export async function benchStore(options: StoreOptions): Promise<StoreResult> {
  const ids = identities(options.pairs);

  const subject = async () => {
    const store = new InMemoryGuardrailStore();
    const measured = await measure(async () => {
      for (const identity of ids) {
        const claim = await store.claimMutation(identity);
        if (claim.status !== "acquired") throw new Error(`bench: claim ${claim.status}`);
        const settled = await store.settleMutation({
          turnKey: identity.turnKey,
          token: claim.token,
          outcome: "complete",
          result: { content: RESULT_CONTENT, status: "success" },
        });
        if (!settled) throw new Error("bench: settle rejected");
      }
    });
    return per(measured, ids.length);
  };

  const baseline = async () => {
    const store = new BareMapStore();
    const measured = await measure(async () => {
      for (const identity of ids) {
        const claim = await store.claim(identity.turnKey);
        if (claim.status !== "acquired") throw new Error(`bench: claim ${claim.status}`);
        const settled = await store.settle(identity.turnKey, claim.token, { content: RESULT_CONTENT, status: "success" });
        if (!settled) throw new Error("bench: settle rejected");
      }
    });
    return per(measured, ids.length);
  };

  const result = await interleave({ ...roundOptions(options), baseline, subject });
  return {
    ...result,
    baselinePairsPerSecond: 1e9 / result.baseline,
    subjectPairsPerSecond: 1e9 / result.subject,
  };
}
