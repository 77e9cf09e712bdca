/**
 * Side-effect claims in the PostgreSQL store. One row per effect key in `effects`.
 *
 * - A claim without `maxPerTurn` is one `INSERT ... ON CONFLICT (effect_key) DO NOTHING`: the
 *   primary key makes one winner across every process; a loser reads the row and answers from it.
 * - A claim with `maxPerTurn` is one transaction under a transaction-scoped advisory lock on the
 *   (schema, turn, tool): the count and the insert it admits are decided by one holder at a time,
 *   and each holder's count (a fresh READ COMMITTED snapshot, taken after the lock) sees every
 *   earlier holder's committed claim. An advisory lock rather than `FOR UPDATE` on a row: before
 *   the first claim of a (turn, tool) there is no row to lock, and a per-(turn, tool) row kept only
 *   to be locked would outlive the turn.
 * - Settlement and release are compare-and-sets by token on a `pending` row; a release's delete
 *   frees its place under the limit, and its audit event commits with it.
 * - Every read of a row parses its whole identity: a corrupt row fails closed (`StoreContractError`,
 *   nothing changed).
 */
import { randomUUID } from "node:crypto";
import { z } from "zod";
import {
  EffectClaimResultSchema,
  EffectIdentitySchema,
  MutationResultSchema,
  UnresolvedEffectSchema,
  type EffectClaimResult,
  type EffectIdentity,
  type EffectReconciliation,
  type EffectRelease,
  type EffectSettlement,
  type EffectStatus,
  type MutationResult,
  type PruneResult,
  type ReconcileResult,
  type UnresolvedEffect,
} from "../../contracts/index.js";
import { existingEffectAnswer } from "../../store/decisions.js";
import { effectReconciledEvent, effectReleasedEvent } from "../../store/events.js";
import { parseStoreValue } from "../../store/validate.js";
import { appendEvent, eventValues, lockKey, query, transaction, type Queryable, type Session } from "./connection.js";
import { StoreContractError } from "../../errors.js";
import { CLAIM_STATES, decodeOptionalText, decodeText, encodeText as encode, parseRow } from "./encoding.js";

/** An effect row as read back, parsed whole. */
interface EffectRow {
  readonly identity: EffectIdentity;
  readonly state: (typeof CLAIM_STATES)[number];
  readonly result: MutationResult | undefined;
  readonly claimedAt: string;
}

const EffectColumnsSchema = z.object({
  state: z.enum(CLAIM_STATES),
  result_content: z.string().nullable(),
  result_status: z.string().nullable(),
  claimed_at: z.string(),
});

function effectFromRow(row: Record<string, unknown>): EffectRow {
  const columns = parseRow(EffectColumnsSchema, row, "side-effect row");
  const identity = parseStoreValue(
    EffectIdentitySchema,
    {
      turnKey: row.turn_key,
      scopeId: decodeText(row.scope_id, "side-effect scope id"),
      toolCallId: decodeText(row.tool_call_id, "side-effect tool call id"),
      toolName: decodeText(row.tool_name, "side-effect tool name"),
      argsDigest: row.args_digest,
      effectKey: row.effect_key,
      toolFingerprint: row.tool_fingerprint,
    },
    "side-effect row",
  );
  const hasResult = columns.result_content !== null || columns.result_status !== null;
  if (hasResult !== (columns.state === "complete")) {
    throw new StoreContractError(`corrupt side-effect row ${String(row.effect_key)}: a complete effect has a result, and no other does`);
  }
  const result = hasResult
    ? parseStoreValue(
        MutationResultSchema,
        { content: decodeOptionalText(columns.result_content, "side-effect result"), status: columns.result_status },
        "stored side-effect result",
      )
    : undefined;
  return { identity, state: columns.state, result, claimedAt: columns.claimed_at };
}

/** The advisory lock of one (schema, turn, tool): every limited claim of it takes this lock first. */
export function effectGroupLock(schema: string, turnKey: string, toolName: string): string {
  return lockKey(`arkah-agent-guardrails:effects:${JSON.stringify([schema, turnKey, toolName])}`);
}

function insertValues(identity: EffectIdentity, token: string, claimedAt: string): unknown[] {
  return [
    identity.effectKey,
    identity.turnKey,
    encode(identity.scopeId),
    encode(identity.toolCallId),
    encode(identity.toolName),
    identity.argsDigest,
    identity.toolFingerprint,
    token,
    claimedAt,
    Date.parse(claimedAt),
  ];
}

export async function claimEffect(
  session: Session,
  identity: EffectIdentity,
  maxPerTurn: number | undefined,
): Promise<EffectClaimResult> {
  const { pool, sql } = session;
  for (let attempt = 0; attempt < 16; attempt++) {
    const answer =
      maxPerTurn === undefined
        ? await claimOnce(session, pool, identity)
        : await transaction(pool, async (client) => {
            await client.query("SELECT pg_advisory_xact_lock($1::bigint)", [effectGroupLock(session.schema, identity.turnKey, identity.toolName)]);
            const existing = await query(client, sql.getEffect, [identity.effectKey]);
            if (existing.rows[0] !== undefined) return existingEffectAnswer(effectFromRow(existing.rows[0]));
            const counted = await query(client, sql.countEffects, [identity.turnKey, encode(identity.toolName)]);
            const { n } = parseRow(z.object({ n: z.int().min(0) }), counted.rows[0], "side-effect count");
            if (n >= maxPerTurn) {
              // A claim of this same effect without a limit takes no group lock, and each statement
              // reads its own snapshot: one committed between the read above and the count is
              // counted. Its row answers (pending, replay), not the limit.
              const again = await query(client, sql.getEffect, [identity.effectKey]);
              const row = again.rows[0];
              return row === undefined ? ({ status: "limit_reached" } as const) : existingEffectAnswer(effectFromRow(row));
            }
            return claimOnce(session, client, identity);
          });
    // undefined: the row that beat this insert was released before it could be read. Again.
    if (answer !== undefined) return parseStoreValue(EffectClaimResultSchema, answer, "effect claim result");
  }
  throw new Error("the effect claim did not settle on an answer after 16 attempts under concurrent changes");
}

/** Inserts the claim if absent; else answers from the row that is there. */
async function claimOnce(session: Session, client: Queryable, identity: EffectIdentity): Promise<EffectClaimResult | undefined> {
  const token = randomUUID();
  const inserted = await query(client, session.sql.insertEffect, insertValues(identity, token, session.timestamp()));
  if (inserted.rowCount === 1) return { status: "acquired", token };
  const existing = await query(client, session.sql.getEffect, [identity.effectKey]);
  const row = existing.rows[0];
  return row === undefined ? undefined : existingEffectAnswer(effectFromRow(row));
}

export async function settleEffect(session: Session, settlement: EffectSettlement): Promise<boolean> {
  const { pool, sql } = session;
  const settledAt = session.timestamp();
  const values = [
    settlement.effectKey,
    encode(settlement.token),
    settlement.outcome,
    settlement.outcome === "complete" ? encode(settlement.result.content) : null,
    settlement.outcome === "complete" ? settlement.result.status : null,
    settledAt,
    Date.parse(settledAt),
  ];
  // One statement, with or without the event: it is appended exactly when the update applied.
  const { rowCount } =
    settlement.audit === undefined
      ? await query(pool, sql.settleEffect, values)
      : await query(pool, sql.settleEffectAudited, [...values, session.auditLock, ...eventValues(settlement.audit)]);
  return rowCount === 1;
}

export async function releaseEffect(session: Session, input: EffectRelease): Promise<boolean> {
  return transaction(session.pool, async (client) => {
    const { rows } = await query(client, session.sql.releaseEffect, [input.effectKey, encode(input.token)]);
    const row = rows[0];
    if (row === undefined) return false;
    // Parsed before the commit: a corrupt row rolls the delete back.
    const { identity } = effectFromRow(row);
    await appendEvent(session, effectReleasedEvent(identity, session.timestamp()), client);
    return true;
  });
}

export async function getEffect(session: Session, effectKey: string): Promise<EffectStatus | undefined> {
  const { rows } = await query(session.pool, session.sql.getEffect, [effectKey]);
  const row = rows[0];
  if (row === undefined) return undefined;
  const effect = effectFromRow(row);
  const { toolName, toolCallId } = effect.identity;
  return effect.state === "complete" && effect.result !== undefined
    ? { state: effect.state, toolName, toolCallId, result: effect.result }
    : { state: effect.state, toolName, toolCallId };
}

export async function listUnresolvedEffects(session: Session): Promise<UnresolvedEffect[]> {
  const { rows } = await query(session.pool, session.sql.listUnresolvedEffects, []);
  return rows.map((row) => {
    const effect = effectFromRow(row);
    return parseStoreValue(UnresolvedEffectSchema, { ...effect.identity, state: effect.state, claimedAt: effect.claimedAt }, "unresolved side effect");
  });
}

export async function reconcileEffect(session: Session, reconciliation: EffectReconciliation): Promise<ReconcileResult> {
  const { sql } = session;
  return transaction(session.pool, async (client): Promise<ReconcileResult> => {
    const { rows } = await query(client, sql.lockEffect, [reconciliation.effectKey]);
    const row = rows[0];
    if (row === undefined) return { reconciled: false, reason: "not_found" };
    const effect = effectFromRow(row);
    if (effect.state !== "pending" && effect.state !== "unknown") return { reconciled: false, reason: "not_unresolved" };
    const at = session.timestamp();
    if (reconciliation.resolution === "completed") {
      const { content, status } = reconciliation.result;
      await query(client, sql.reconcileEffectComplete, [reconciliation.effectKey, encode(content), status, at, Date.parse(at)]);
    } else {
      await query(client, sql.deleteEffect, [reconciliation.effectKey]);
    }
    await appendEvent(session, effectReconciledEvent(effect.identity, reconciliation, at), client);
    return { reconciled: true, state: effect.state };
  });
}

/** Prunes completed effects settled before `cutoffMs` to tombstones, in the caller's transaction. */
export async function pruneEffects(session: Session, client: Queryable, cutoffMs: number | null): Promise<NonNullable<PruneResult["effects"]>> {
  const { rows } = await query(client, session.sql.pruneEffects, [cutoffMs]);
  return parseRow(z.object({ effects: z.int().min(0) }), rows[0], "pruned side-effect count").effects;
}
