/**
 * An in-process `GuardrailStore`: correct for one process, lost on restart. Use it for tests and
 * single-process development; use the SQLite or PostgreSQL store in production.
 *
 * Methods are `async` without awaiting so that a validation error becomes a rejection.
 */
import { randomUUID } from "node:crypto";
import {
  AdmissionReceiptSchema,
  type AdmissionReceipt,
  type ClaimOptions,
  type ClaimResult,
  type GuardrailStore,
  type MutationIdentity,
  type MutationResult,
  type MutationSettlement,
  type ReadEvidence,
} from "../contracts.js";
import {
  parseDigest,
  parseEvidence,
  parseIdentity,
  parseSettlement,
  parseStoreValue,
  requiresResolvedScope,
} from "./validate.js";

interface ClaimRecord {
  readonly identity: MutationIdentity;
  readonly token: string;
  state: "pending" | "complete" | "unknown";
  result: MutationResult | undefined;
}

export class InMemoryGuardrailStore implements GuardrailStore {
  readonly #receipts = new Map<string, AdmissionReceipt>();
  readonly #reads = new Set<string>();
  readonly #claims = new Map<string, ClaimRecord>();
  /** Turn keys with an `unknown` claim, per scope: they block the scope's other turns. */
  readonly #unknownByScope = new Map<string, Set<string>>();

  async getReceipt(turnKey: string): Promise<AdmissionReceipt | undefined> {
    const key = parseDigest(turnKey, "turn key");
    const receipt = this.#receipts.get(key);
    return receipt === undefined ? undefined : { ...receipt };
  }

  async putReceiptIfAbsent(receipt: AdmissionReceipt): Promise<AdmissionReceipt> {
    const candidate = parseStoreValue(AdmissionReceiptSchema, receipt, "admission receipt");
    const winner = this.#receipts.get(candidate.turnKey) ?? candidate;
    this.#receipts.set(candidate.turnKey, winner);
    return { ...winner };
  }

  async recordSuccessfulRead(evidence: ReadEvidence): Promise<void> {
    const { turnKey, evidenceDigest } = parseEvidence(evidence);
    this.#reads.add(`${turnKey}/${evidenceDigest}`);
  }

  async hasSuccessfulRead(evidence: ReadEvidence): Promise<boolean> {
    const { turnKey, evidenceDigest } = parseEvidence(evidence);
    return this.#reads.has(`${turnKey}/${evidenceDigest}`);
  }

  async claimMutation(identity: MutationIdentity, options?: ClaimOptions): Promise<ClaimResult> {
    const claimed = parseIdentity(identity);
    return this.#claim(claimed, requiresResolvedScope(options));
  }

  #claim(identity: MutationIdentity, requireResolvedScope: boolean): ClaimResult {
    const existing = this.#claims.get(identity.turnKey);
    if (existing !== undefined) {
      if (existing.identity.mutationKey !== identity.mutationKey) return { status: "conflict" };
      if (existing.state === "complete" && existing.result !== undefined) {
        return { status: "replay", result: { ...existing.result } };
      }
      return { status: existing.state === "unknown" ? "unknown" : "pending" };
    }
    if (requireResolvedScope) {
      const unknown = this.#unknownByScope.get(identity.scopeId);
      if (unknown !== undefined && unknown.size > 0) return { status: "scope_unresolved" };
    }
    const token = randomUUID();
    this.#claims.set(identity.turnKey, { identity, token, state: "pending", result: undefined });
    return { status: "acquired", token };
  }

  async settleMutation(settlement: MutationSettlement): Promise<boolean> {
    const parsed = parseSettlement(settlement);
    const claim = this.#claims.get(parsed.turnKey);
    if (claim?.state !== "pending" || claim.token !== parsed.token) return false;
    if (parsed.outcome === "complete") {
      claim.state = "complete";
      claim.result = parsed.result;
    } else {
      claim.state = "unknown";
      const scope = claim.identity.scopeId;
      const unknown = this.#unknownByScope.get(scope) ?? new Set<string>();
      unknown.add(parsed.turnKey);
      this.#unknownByScope.set(scope, unknown);
    }
    return true;
  }
}
