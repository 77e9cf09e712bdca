/**
 * What is specific to `PostgresGuardrailStore` beyond the conformance suite: opening and
 * migrating (concurrently, and refusing a newer schema), clear connection errors that never show
 * the password, exact round trips of strings PostgreSQL `text` cannot hold, failing closed on
 * corrupt rows, the scope rule decided under the scope's lock, audit numbers in commit order, and
 * reconciliation atomic with its audit event. Against a real server (ARKAH_PG_URL); no mocks.
 */
import { inspect } from "node:util";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ConfigurationError,
  StoreContractError,
  turnKey,
  type AdmissionReceipt,
  type ApprovalSubmission,
  digest,
} from "arkah-agent-guardrails";
import {
  toolFingerprint,
  type ClaimResult,
} from "arkah-agent-guardrails/store";
import { effectIdentity } from "../../src/keys.js";
import { MIGRATIONS, POSTGRES_SCHEMA_VERSION, PostgresGuardrailStore, PostgresStoreError } from "../../src/adapters/postgres/index.js";
import {
  adminPool,
  blockedBackend,
  claimIdentity,
  closedPort,
  dropSchema,
  freshSchema,
  describePostgres,
  requirePostgres,
} from "../support/postgres.js";
import { turnStartOf } from "../support/fixtures.js";

requirePostgres();

const PASSWORD = "sup3r-s3cret-pw";

/** The rejection of `promise`, failing the test if it resolves. */
async function rejection(promise: Promise<unknown>): Promise<Error> {
  const outcome = await promise.then(
    () => ({ resolved: true as const }),
    (error: unknown) => ({ resolved: false as const, error }),
  );
  if (outcome.resolved) throw new Error("expected a rejection");
  expect(outcome.error).toBeInstanceOf(Error);
  return outcome.error as Error;
}

/** Everything a logger could print about an error, cause chain included. */
const printed = (error: unknown) => `${inspect(error, { depth: 8, showHidden: true })} ${JSON.stringify(error)}`;

/**
 * An identity whose digests come from an index rather than from the strings: `digest` refuses lone
 * surrogates, but a store must still keep any id it is given exactly.
 */
function rawIdentity(index: number, scopeId: string, toolCallId = "w1", toolName = "rename_document") {
  return {
    turnKey: digest({ turn: index, scopeId: index }),
    scopeId,
    toolCallId,
    toolName,
    argsDigest: digest({ args: index }),
    mutationKey: digest({ mutation: index }),
    toolFingerprint: digest({ tool: index }),
  };
}

/**
 * A pool whose `query` (the statements a store sends outside a transaction) runs `after` right
 * after each statement named like `name`, before the store sees the answer: a race window forced
 * open. `hooked` is the pool to open a store on; `hookedNames` the statements it stopped after.
 */
function poolHookedAfter(url: string, name: RegExp, after: () => Promise<void>) {
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  const hookedNames: string[] = [];
  const hooked = new Proxy(pool, {
    get(target, key, receiver) {
      if (key !== "query") return Reflect.get(target, key, receiver) as unknown;
      return async (config: pg.QueryConfig) => {
        const result = await target.query(config);
        if (typeof config === "object" && name.test(config.name ?? "")) {
          hookedNames.push(config.name ?? "");
          await after();
        }
        return result;
      };
    },
  });
  return { pool, hooked, hookedNames };
}

const RESULT = { content: '{"title":"Field notes"}', status: "success" as const };
const RENAME_FINGERPRINT = toolFingerprint({ name: "rename_document" });

/** An approval request as the middleware would submit it, with awkward-but-valid values where given. */
function approvalRequest(turnKeyValue: string, scopeId: string, overrides: Partial<ApprovalSubmission> = {}): ApprovalSubmission {
  const args = { title: "Field notes" };
  return {
    approvalId: digest({
      kind: "arkah.approval",
      v: 1,
      turnKey: turnKeyValue,
      toolName: "rename_document",
      toolFingerprint: RENAME_FINGERPRINT,
      toolCallId: "w1",
      argsDigest: digest(args),
      execution: 0,
    }),
    turnKey: turnKeyValue,
    scopeId,
    toolCallId: "w1",
    toolName: "rename_document",
    toolFingerprint: RENAME_FINGERPRINT,
    argsDigest: digest(args),
    args,
    guardrails: ["approval"],
    requestedAt: "2031-02-03T04:05:06.789+05:30",
    ...overrides,
  };
}

/** Schema version 1 as it shipped: migration 1 (migrations are append-only). */
function v1Statements(s: string): readonly string[] {
  return MIGRATIONS.find((migration) => migration.version === 1)?.statements(s) ?? [];
}

/** Schema version 2 as it shipped: migrations 1 and 2. */
function v2Statements(s: string): readonly string[] {
  return MIGRATIONS.filter((migration) => migration.version <= 2).flatMap((migration) => migration.statements(s));
}

describePostgres("PostgresGuardrailStore", (url) => {
  let admin: pg.Pool;
  const schemas: string[] = [];
  const stores: PostgresGuardrailStore[] = [];

  /** A store on a fresh schema, closed and dropped after the file. */
  async function openStore(options: { now?: () => Date } = {}) {
    const schema = freshSchema("arkah_pgt");
    schemas.push(schema);
    const store = await PostgresGuardrailStore.open({ connectionString: url }, { schema, ...options });
    stores.push(store);
    return { store, schema };
  }

  beforeAll(() => {
    admin = adminPool();
  });

  afterAll(async () => {
    await Promise.all(stores.map((store) => store.close()));
    for (const schema of schemas) await dropSchema(admin, schema);
    await admin.end();
  });

  // -------------------------------------------------------------------------------------------
  describe("open and migrations", () => {
    it("migrates a fresh schema exactly once when 8 workers open it at the same time", async () => {
      const schema = freshSchema("arkah_pgt");
      schemas.push(schema);
      const opened = await Promise.all(
        Array.from({ length: 8 }, () => PostgresGuardrailStore.open({ connectionString: url }, { schema })),
      );
      stores.push(...opened);
      const { rows } = await admin.query<{ version: number }>(`SELECT version FROM "${schema}".schema_migrations ORDER BY version`);
      expect(rows).toEqual(MIGRATIONS.map((migration) => ({ version: migration.version })));
      expect(POSTGRES_SCHEMA_VERSION).toBe(Math.max(...MIGRATIONS.map((migration) => migration.version)));
      expect(POSTGRES_SCHEMA_VERSION).toBeGreaterThanOrEqual(6);
      // Every store works against the one schema.
      const turn = { scopeId: "doc-open", turnId: "t-open" };
      const answers = await Promise.all(opened.map((store) => store.claimMutation(claimIdentity(turn))));
      expect(answers.filter((answer) => answer.status === "acquired")).toHaveLength(1);
    });

    it("reopening a migrated schema keeps its data and migrates nothing", async () => {
      const { store, schema } = await openStore();
      const turn = { scopeId: "doc-reopen", turnId: "t1" };
      const claim = await store.claimMutation(claimIdentity(turn));
      expect(claim.status).toBe("acquired");
      const again = await PostgresGuardrailStore.open({ connectionString: url }, { schema });
      stores.push(again);
      expect(await again.claimMutation(claimIdentity(turn))).toEqual({ status: "pending" });
      const { rows } = await admin.query(`SELECT version FROM "${schema}".schema_migrations`);
      expect(rows).toHaveLength(MIGRATIONS.length);
    });

    it("upgrades a version 1 schema once when 8 workers open it at the same time; claims and the trail stay", async () => {
      const schema = freshSchema("arkah_pgt");
      schemas.push(schema);
      const s = `"${schema}"`;
      await admin.query(`CREATE SCHEMA ${s}`);
      for (const statement of v1Statements(s)) await admin.query(statement);
      await admin.query(
        `CREATE TABLE ${s}.schema_migrations (version integer PRIMARY KEY, description text NOT NULL, applied_at text NOT NULL)`,
      );
      await admin.query(`INSERT INTO ${s}.schema_migrations VALUES (1, 'version 1', '2031-01-01T00:00:00.000Z')`);
      const identity = claimIdentity({ scopeId: "doc-v1", turnId: "t1" });
      await admin.query(
        `INSERT INTO ${s}.claims (turn_key, scope_id, tool_call_id, tool_name, args_digest, mutation_key, token, state, claimed_at, claimed_ms)
         VALUES ($1, $2, $3, $4, $5, $6, 'old-token', 'pending', '2031-01-01T00:00:00.000Z', 1924992000000)`,
        [identity.turnKey, identity.scopeId, identity.toolCallId, identity.toolName, identity.argsDigest, identity.mutationKey],
      );
      await admin.query(`INSERT INTO ${s}.scopes (scope_id) VALUES ('doc-v1')`);
      await admin.query(`INSERT INTO ${s}.verdicts VALUES ($1, 'w1', 'pii', $2, '{}')`, [identity.turnKey, identity.argsDigest]);
      await admin.query(`INSERT INTO ${s}.approvals VALUES ($1, 'w1', 'approval', $2, '{}')`, [identity.turnKey, identity.argsDigest]);
      const event = { at: "2031-01-01T00:00:00.000Z", decision: "executed", turnKey: identity.turnKey, scopeId: "doc-v1" };
      await admin.query(
        `INSERT INTO ${s}.audit (seq, at, at_ms, decision, turn_key, scope_id, event) VALUES (nextval('${s}.audit_seq'), $1, 0, 'executed', $2, 'doc-v1', $3)`,
        [event.at, identity.turnKey, JSON.stringify(event)],
      );

      const opened = await Promise.all(
        Array.from({ length: 8 }, () => PostgresGuardrailStore.open({ connectionString: url }, { schema })),
      );
      stores.push(...opened);
      const [store] = opened;
      if (store === undefined) throw new Error("no store");
      const { rows } = await admin.query<{ version: number }>(`SELECT version FROM ${s}.schema_migrations ORDER BY version`);
      expect(rows).toEqual(MIGRATIONS.map((migration) => ({ version: migration.version })));
      expect(await store.claimMutation(identity)).toEqual({ status: "pending" });
      expect(await store.releaseMutation({ turnKey: identity.turnKey, token: "old-token" })).toBe(true);
      expect((await admin.query(`SELECT 1 FROM ${s}.verdicts`)).rowCount).toBe(0);
      expect(await store.listApprovals()).toEqual([]);
      const request = approvalRequest(identity.turnKey, "doc-v1");
      await store.requestApproval(request);
      expect((await store.readAudit()).map((each) => [each.seq, each.decision, each.approvalId])).toEqual([
        [1, "executed", undefined],
        [2, "released", undefined],
        [3, "approval", request.approvalId],
      ]);
      const column = await admin.query(`SELECT approval_id FROM ${s}.audit ORDER BY seq`);
      expect(column.rows).toEqual([{ approval_id: null }, { approval_id: null }, { approval_id: request.approvalId }]);
    });

    it("upgrades a version 4 schema: its claims stay, and side effects start empty and work", async () => {
      const schema = freshSchema("arkah_pgt");
      schemas.push(schema);
      const s = `"${schema}"`;
      await admin.query(`CREATE SCHEMA ${s}`);
      await admin.query(
        `CREATE TABLE ${s}.schema_migrations (version integer PRIMARY KEY, description text NOT NULL, applied_at text NOT NULL)`,
      );
      for (const migration of MIGRATIONS.filter((each) => each.version <= 4)) {
        for (const statement of migration.statements(s)) await admin.query(statement);
        await admin.query(`INSERT INTO ${s}.schema_migrations VALUES ($1, $2, '2031-01-01T00:00:00.000Z')`, [migration.version, migration.description]);
      }
      const identity = claimIdentity({ scopeId: "doc-v4", turnId: "t1" });
      await admin.query(
        `INSERT INTO ${s}.claims (turn_key, scope_id, tool_call_id, tool_name, args_digest, mutation_key, tool_fingerprint, token, state, claimed_at, claimed_ms)
         VALUES ($1, $2, $3, $4, $5, $6, $7, 'old-token', 'pending', '2031-01-01T00:00:00.000Z', 1924992000000)`,
        [identity.turnKey, identity.scopeId, identity.toolCallId, identity.toolName, identity.argsDigest, identity.mutationKey, identity.toolFingerprint],
      );
      const store = await PostgresGuardrailStore.open({ connectionString: url }, { schema });
      stores.push(store);
      const { rows } = await admin.query<{ version: number }>(`SELECT version FROM ${s}.schema_migrations ORDER BY version`);
      expect(rows, "migrated to the newest").toEqual(MIGRATIONS.map((migration) => ({ version: migration.version })));
      expect(await store.claimMutation(identity), "the version 4 claim is kept").toEqual({ status: "pending" });
      expect(await store.listUnresolvedEffects(), "no side effects before the upgrade").toEqual([]);
      const effect = effectIdentity(
        { scopeId: "doc-v4", turnKey: identity.turnKey },
        { id: "m1", name: "send_mail", argsDigest: digest({ to: "a" }), toolFingerprint: RENAME_FINGERPRINT },
      );
      const claimed = await store.claimEffect(effect, { maxPerTurn: 1 });
      expect(claimed.status, "a side effect claims after the upgrade").toBe("acquired");
      if (claimed.status !== "acquired") return;
      const result = { content: "sent", status: "success" as const };
      expect(await store.settleEffect({ effectKey: effect.effectKey, token: claimed.token, outcome: "complete", result }), "and settles").toBe(true);
      expect(await store.claimEffect(effect), "and replays").toEqual({ status: "replay", result });
      expect(await store.getMutation(identity.turnKey), "the mutation claim is untouched").toMatchObject({ state: "pending" });
    });

    it("upgrades a version 4 schema to 6: the approvals CHECK admits orphaned, rows and request order stay", async () => {
      const schema = freshSchema("arkah_pgt");
      schemas.push(schema);
      const s = `"${schema}"`;
      await admin.query(`CREATE SCHEMA ${s}`);
      for (const statement of MIGRATIONS.filter((migration) => migration.version <= 4).flatMap((migration) => migration.statements(s))) {
        await admin.query(statement);
      }
      await admin.query(
        `CREATE TABLE ${s}.schema_migrations (version integer PRIMARY KEY, description text NOT NULL, applied_at text NOT NULL)`,
      );
      await admin.query(`INSERT INTO ${s}.schema_migrations VALUES (1, 'v1', 'x'), (2, 'v2', 'x'), (3, 'v3', 'x'), (4, 'v4', 'x')`);
      const turnKeyValue = claimIdentity({ scopeId: "doc-v4", turnId: "t1" }).turnKey;
      const decidedAt = "2031-02-03T05:00:00.000Z";
      const approved = { ...approvalRequest(turnKeyValue, "doc-v4"), status: "approved", decision: { decision: "approve" }, operatorRef: "alice", decidedAt };
      const other = approvalRequest(claimIdentity({ scopeId: "doc-v4", turnId: "t2" }).turnKey, "doc-v4");
      const pending = { ...other, status: "pending" };
      for (const row of [approved, pending]) {
        await admin.query(`INSERT INTO ${s}.approvals (approval_id, turn_key, status, requested_ms, record) VALUES ($1, $2, $3, $4, $5)`, [
          row.approvalId, row.turnKey, row.status, Date.parse(row.requestedAt), JSON.stringify(row),
        ]);
      }
      // Version 4 refuses the new status.
      await expect(admin.query(`UPDATE ${s}.approvals SET status = 'orphaned' WHERE approval_id = $1`, [approved.approvalId])).rejects.toThrow(/check constraint/);

      const store = await PostgresGuardrailStore.open({ connectionString: url }, { schema });
      stores.push(store);
      const { rows } = await admin.query<{ version: number }>(`SELECT version FROM ${s}.schema_migrations ORDER BY version`);
      expect(rows).toEqual(MIGRATIONS.map((migration) => ({ version: migration.version })));
      expect(await store.listApprovals()).toEqual([approved, pending]);
      expect(await store.orphanApprovals({ decidedBefore: "2031-02-03T05:00:00.001Z" })).toEqual({ orphaned: 1 });
      expect(await store.getApproval(approved.approvalId)).toMatchObject({ status: "orphaned", decision: { decision: "approve" }, operatorRef: "alice" });
      expect(await store.applyApproval({ approvalId: approved.approvalId, appliedAt: "2031-02-03T06:00:00.000Z" })).toBe(false);
      await expect(admin.query(`UPDATE ${s}.approvals SET status = 'bogus' WHERE approval_id = $1`, [other.approvalId])).rejects.toThrow(/check constraint/);
      const indexes = await admin.query<{ name: string }>("SELECT indexname AS name FROM pg_indexes WHERE schemaname = $1", [schema]);
      expect(indexes.rows.map((row) => row.name)).toEqual(expect.arrayContaining(["approvals_listed", "approvals_pending", "approvals_turn", "approvals_decided"]));
    });

    it("upgrades a version 6 schema to 7: its turns keep a NULL request key and still answer; new turns hold theirs", async () => {
      const schema = freshSchema("arkah_pgt");
      schemas.push(schema);
      const s = `"${schema}"`;
      await admin.query(`CREATE SCHEMA ${s}`);
      await admin.query(
        `CREATE TABLE ${s}.schema_migrations (version integer PRIMARY KEY, description text NOT NULL, applied_at text NOT NULL)`,
      );
      for (const migration of MIGRATIONS.filter((each) => each.version <= 6)) {
        for (const statement of migration.statements(s)) await admin.query(statement);
        await admin.query(`INSERT INTO ${s}.schema_migrations VALUES ($1, $2, '2031-01-01T00:00:00.000Z')`, [migration.version, migration.description]);
      }
      // Two turns as version 6 stored them: records without a request key.
      const old = [turnStartOf("doc-1", "turn-old"), turnStartOf("doc-2", "turn-old")].map(({ requestKey: _none, ...start }) => ({
        ...start,
        state: "completed",
        outcome: { status: "completed" },
        createdAt: "2031-01-01T00:00:00.000Z",
        updatedAt: "2031-01-01T00:00:00.000Z",
      }));
      for (const record of old) {
        await admin.query(`INSERT INTO ${s}.turns (turn_key, state, updated_ms, record) VALUES ($1, 'completed', $2, $3)`, [
          record.turnKey, Date.parse(record.updatedAt), JSON.stringify(record),
        ]);
      }

      const store = await PostgresGuardrailStore.open({ connectionString: url }, { schema });
      stores.push(store);
      const { rows } = await admin.query<{ version: number }>(`SELECT version FROM ${s}.schema_migrations ORDER BY version`);
      expect(rows, "migrated to the newest").toEqual(MIGRATIONS.map((migration) => ({ version: migration.version })));
      const keys = await admin.query<{ request_key: string | null }>(`SELECT request_key FROM ${s}.turns`);
      expect(keys.rows, "old turns hold no request key").toEqual([{ request_key: null }, { request_key: null }]);
      const [first] = old;
      if (first === undefined) throw new Error("no old turn");
      expect(await store.beginTurn({ turn: turnStartOf("doc-1", "turn-old"), leaseMs: 1000 }), "an old turn still answers").toEqual({ status: "finished", record: first });
      const fresh = turnStartOf("doc-1", "turn-new");
      expect((await store.beginTurn({ turn: fresh, leaseMs: 1000 })).status, "a new turn starts").toBe("started");
      const held = await admin.query<{ request_key: string | null }>(`SELECT request_key FROM ${s}.turns WHERE turn_key = $1`, [fresh.turnKey]);
      expect(held.rows, "and holds its request key").toEqual([{ request_key: fresh.requestKey }]);
      expect(await store.beginTurn({ turn: turnStartOf("doc-2", "turn-new"), leaseMs: 1000 }), "its request in another scope").toEqual({ status: "input_mismatch" });
      const index = await admin.query<{ def: string }>("SELECT indexdef AS def FROM pg_indexes WHERE schemaname = $1 AND indexname = 'turns_request_key'", [schema]);
      expect(index.rows[0]?.def, "a unique index").toMatch(/^CREATE UNIQUE INDEX/);
    });

    it("upgrades a version 2 schema once when 8 workers open it at the same time; claims gain no fingerprint, verdicts start empty", async () => {
      const schema = freshSchema("arkah_pgt");
      schemas.push(schema);
      const s = `"${schema}"`;
      await admin.query(`CREATE SCHEMA ${s}`);
      for (const statement of v2Statements(s)) await admin.query(statement);
      await admin.query(
        `CREATE TABLE ${s}.schema_migrations (version integer PRIMARY KEY, description text NOT NULL, applied_at text NOT NULL)`,
      );
      await admin.query(
        `INSERT INTO ${s}.schema_migrations VALUES (1, 'version 1', '2031-01-01T00:00:00.000Z'), (2, 'version 2', '2031-01-02T00:00:00.000Z')`,
      );
      const { toolFingerprint: _pending, ...pending } = claimIdentity({ scopeId: "doc-v2", turnId: "t1" });
      const receiptV2: AdmissionReceipt = {
        turnKey: pending.turnKey,
        scopeId: "doc-v2",
        turnId: "t1",
        policyVersion: "v1",
        moderationDigest: digest("segments"),
        allowed: true,
        decidedAt: "2031-01-01T00:00:00.000+01:00",
      };
      await admin.query(`INSERT INTO ${s}.receipts VALUES ($1, $2, $3, $4, $5, $6, $7)`, Object.values(receiptV2));
      const { toolFingerprint: _complete, ...completed } = claimIdentity({ scopeId: "doc-v2b", turnId: "t2" });
      for (const [claim, token, state, content, status, settled] of [
        [pending, "old-token", "pending", null, null, null],
        [completed, "done-token", "complete", RESULT.content, RESULT.status, 1924992000001],
      ] as const) {
        await admin.query(
          `INSERT INTO ${s}.claims (turn_key, scope_id, tool_call_id, tool_name, args_digest, mutation_key, token, state,
             result_content, result_status, claimed_at, claimed_ms, settled_ms)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, '2031-01-01T00:00:00.000Z', 1924992000000, $11)`,
          [claim.turnKey, claim.scopeId, claim.toolCallId, claim.toolName, claim.argsDigest, claim.mutationKey, token, state, content, status, settled],
        );
        await admin.query(`INSERT INTO ${s}.scopes (scope_id) VALUES ($1)`, [claim.scopeId]);
      }
      const keyV2 = { turnKey: pending.turnKey, toolCallId: "w1", toolName: "rename_document", guardrail: "pii", argsDigest: pending.argsDigest };
      const verdict = { action: "deny" as const, outcome: "complete" as const, detections: [] };
      await admin.query(`INSERT INTO ${s}.verdicts VALUES ($1, $2, $3, $4, $5, $6)`, [
        ...Object.values(keyV2),
        JSON.stringify({ ...keyV2, verdict, recordedAt: "2031-01-01T00:00:00Z" }),
      ]);
      const { toolFingerprint: _request, ...requestV2 } = approvalRequest(pending.turnKey, "doc-v2", { approvalId: digest("v2 request") });
      await admin.query(`INSERT INTO ${s}.approvals (approval_id, turn_key, status, requested_ms, record) VALUES ($1, $2, 'pending', 0, $3)`, [
        requestV2.approvalId,
        requestV2.turnKey,
        JSON.stringify({ ...requestV2, status: "pending" }),
      ]);
      const event = { at: "2031-01-01T00:00:00.000Z", decision: "executed", turnKey: pending.turnKey, scopeId: "doc-v2" };
      await admin.query(
        `INSERT INTO ${s}.audit (seq, at, at_ms, decision, turn_key, scope_id, event) VALUES (nextval('${s}.audit_seq'), $1, 0, 'executed', $2, 'doc-v2', $3)`,
        [event.at, pending.turnKey, JSON.stringify(event)],
      );

      const opened = await Promise.all(
        Array.from({ length: 8 }, () => PostgresGuardrailStore.open({ connectionString: url }, { schema })),
      );
      stores.push(...opened);
      const [store] = opened;
      if (store === undefined) throw new Error("no store");
      const { rows } = await admin.query<{ version: number }>(`SELECT version FROM ${s}.schema_migrations ORDER BY version`);
      expect(rows).toEqual(MIGRATIONS.map((migration) => ({ version: migration.version })));
      // Receipts: an older one names no principal; a new one keeps its principal.
      expect(await store.getReceipt(receiptV2.turnKey)).toEqual(receiptV2);
      expect(await store.getReceipt(receiptV2.turnKey)).not.toHaveProperty("principal");
      const named = { ...receiptV2, turnKey: digest("another turn"), turnId: "t9", principal: "user-7" };
      expect(await store.putReceiptIfAbsent(named)).toEqual(named);
      expect(await store.getReceipt(named.turnKey)).toEqual(named);
      // Claims: listed without a fingerprint, and matched by mutation key.
      expect((await store.listUnresolved()).map(({ claimedAt: _at, ...rest }) => rest)).toEqual([{ ...pending, state: "pending" }]);
      expect(await store.claimMutation(claimIdentity({ scopeId: "doc-v2", turnId: "t1" }))).toEqual({ status: "pending" });
      expect(await store.claimMutation(claimIdentity({ scopeId: "doc-v2b", turnId: "t2" }))).toEqual({ status: "replay", result: RESULT });
      expect(await store.releaseMutation({ turnKey: pending.turnKey, token: "old-token" })).toBe(true);
      const released = (await store.readAudit()).at(-1);
      expect(released).toMatchObject({ decision: "released", mutationKey: pending.mutationKey });
      expect(released).not.toHaveProperty("toolFingerprint");
      const fresh = claimIdentity({ scopeId: "doc-v2", turnId: "t1" });
      expect((await store.claimMutation(fresh)).status).toBe("acquired");
      expect((await store.listUnresolved())[0]?.toolFingerprint).toBe(fresh.toolFingerprint);
      // Verdicts: the table was recreated with the fingerprint in its key.
      expect((await admin.query(`SELECT 1 FROM ${s}.verdicts`)).rowCount).toBe(0);
      const key = { ...keyV2, toolFingerprint: fresh.toolFingerprint };
      const record = { ...key, verdict, recordedAt: "2031-01-01T00:00:00Z" };
      expect(await store.recordVerdict(record)).toEqual(record);
      expect(await store.getVerdict(key)).toEqual(record);
      // Approval requests: the old one is kept as it was and can be decided; its events carry no fingerprint.
      expect(await store.getApproval(requestV2.approvalId)).toEqual({ ...requestV2, status: "pending" });
      expect(await store.decideApproval({ approvalId: requestV2.approvalId, decision: { decision: "approve" }, decidedAt: "2031-01-02T00:00:00Z" }))
        .toMatchObject({ decided: true });
      expect((await store.readAudit()).at(-1)).not.toHaveProperty("toolFingerprint");
      expect((await store.readAudit()).map((each) => each.seq)).toEqual([1, 2, 3]);
      // The audit trail: events from before the upgrade are found by turn and by scope.
      expect((await store.readAudit({ scopeId: "doc-v2" })).map((each) => each.seq)).toEqual([1, 2, 3]);
      expect((await store.readAudit({ turnKey: pending.turnKey, scopeId: "doc-v2" })).map((each) => each.seq)).toEqual([1, 2, 3]);
      expect(await store.readAudit({ scopeId: "doc-v2b" })).toEqual([]);
      // Audit cursors start at 0.
      expect(await store.getAuditCursor("default")).toBe(0);
      expect(await store.advanceAuditCursor({ sink: "default", seq: 2 })).toBe(true);
      expect(await Promise.all(opened.map((each) => each.getAuditCursor("default")))).toEqual(opened.map(() => 2));
    });

    it("refuses a database migrated by a newer version, saying so", async () => {
      const { schema } = await openStore();
      await admin.query(
        `INSERT INTO "${schema}".schema_migrations (version, description, applied_at) VALUES (99, 'from the future', 'x')`,
      );
      const error = await rejection(PostgresGuardrailStore.open({ connectionString: url }, { schema }));
      expect(ConfigurationError.isInstance(error)).toBe(true);
      expect(error.message).toContain("version 99");
      expect(error.message).toContain("newer");
      expect(error.message).toContain(`(${String(POSTGRES_SCHEMA_VERSION)})`);
    });

    it("validates and quotes the schema name", async () => {
      for (const schema of ["bad-name", "pg_catalog", '"; DROP TABLE x; --', "", "1abc", "a".repeat(64)]) {
        const error = await rejection(PostgresGuardrailStore.open({ connectionString: url }, { schema }));
        expect(ConfigurationError.isInstance(error), schema).toBe(true);
        expect(error.message).toContain("schema");
      }
      // Mixed case is kept as written, because it is quoted.
      const schema = `Mixed_${freshSchema("Case")}`;
      schemas.push(schema);
      const store = await PostgresGuardrailStore.open({ connectionString: url }, { schema });
      stores.push(store);
      const { rows } = await admin.query("SELECT 1 FROM pg_namespace WHERE nspname = $1", [schema]);
      expect(rows).toHaveLength(1);
    });

    it("validates the connection and options with clear errors", async () => {
      const cases: [unknown, unknown][] = [
        [{}, {}],
        [{ connectionString: "" }, {}],
        [{ pool: {} }, {}],
        [{ connectionString: url, extra: 1 }, {}],
        [{ connectionString: url }, { now: "tomorrow" }],
        [{ connectionString: url }, { unknownOption: true }],
      ];
      for (const [connection, options] of cases) {
        const error = await rejection(
          PostgresGuardrailStore.open(connection as { connectionString: string }, options as { schema?: string }),
        );
        expect(ConfigurationError.isInstance(error), JSON.stringify([connection, options])).toBe(true);
      }
    });

    it("an unreachable server: the error names the host and port and the cause, never the password", async () => {
      const port = await closedPort();
      const error = await rejection(
        PostgresGuardrailStore.open({ connectionString: `postgres://guardrails:${PASSWORD}@127.0.0.1:${String(port)}/db` }),
      );
      expect(error.message).toContain(`127.0.0.1:${String(port)}`);
      expect(error.message).toContain("ECONNREFUSED");
      expect(error.message).toContain('user "guardrails"');
      expect((error.cause as { code?: string } | undefined)?.code).toBe("ECONNREFUSED");
      expect(printed(error)).not.toContain(PASSWORD);
    });

    it("a database that does not exist: the server's reason, the host and port, never the password", async () => {
      // A server with password authentication needs the real password to get as far as the database.
      const target = new URL(url);
      if (target.password === "") target.password = PASSWORD;
      target.pathname = "/no_such_database_here";
      const error = await rejection(PostgresGuardrailStore.open({ connectionString: target.toString() }));
      expect(error.message).toContain(`${target.hostname}:${target.port}`);
      expect(error.message).toContain("does not exist");
      expect(printed(error)).not.toContain(decodeURIComponent(target.password));
    });

    it("a malformed URL: a ConfigurationError showing where it points, never the password", async () => {
      const bad = await rejection(
        PostgresGuardrailStore.open({ connectionString: `postgres://guardrails:${PASSWORD}@bad host:5432/db` }),
      );
      expect(ConfigurationError.isInstance(bad)).toBe(true);
      expect(bad.message).toContain("bad host:5432");
      expect(printed(bad)).not.toContain(PASSWORD);

      const keyValue = await rejection(
        PostgresGuardrailStore.open({ connectionString: `host=localhost password=${PASSWORD} dbname=x` }),
      );
      expect(ConfigurationError.isInstance(keyValue)).toBe(true);
      expect(printed(keyValue)).not.toContain(PASSWORD);

      const http = await rejection(PostgresGuardrailStore.open({ connectionString: `http://u:${PASSWORD}@localhost/` }));
      expect(http.message).toContain('protocol "http:"');
      expect(printed(http)).not.toContain(PASSWORD);
    });

    it("close() ends only a pool it created; a closed store rejects clearly", async () => {
      const schema = freshSchema("arkah_pgt");
      schemas.push(schema);
      const pool = new pg.Pool({ connectionString: url, max: 2 });
      const store = await PostgresGuardrailStore.open({ pool }, { schema });
      await store.close();
      await store.close(); // idempotent
      expect((await pool.query<{ one: number }>("SELECT 1 AS one")).rows).toEqual([{ one: 1 }]);
      const error = await rejection(store.listUnresolved());
      expect(PostgresStoreError.isInstance(error)).toBe(true);
      expect(error.message).toContain("closed");
      await pool.end();

      const owned = await PostgresGuardrailStore.open({ connectionString: url }, { schema });
      await owned.close();
      const after = await rejection(owned.getReceipt(turnKey({ scopeId: "a", turnId: "b" })));
      expect(PostgresStoreError.isInstance(after)).toBe(true);
    });
  });

  // -------------------------------------------------------------------------------------------
  describe("strings PostgreSQL text cannot hold round-trip exactly", () => {
    const awkward = [
      "nul\u0000inside",
      "lone high \ud800 surrogate",
      "lone low \udc00 surrogate",
      "\u0001starts with the escape marker",
      "emoji 🦜 and accents é",
      '"quoted" \\ backslash',
    ];

    it("in receipts, claims, results and verdict keys", async () => {
      const { store } = await openStore();
      for (const [index, text] of awkward.entries()) {
        const turn = { scopeId: `scope ${text}`, turnId: `turn ${text}` };
        const identity = rawIdentity(index, turn.scopeId, `call ${text}`, `tool ${text}`);
        const receipt: AdmissionReceipt = {
          turnKey: identity.turnKey,
          scopeId: turn.scopeId,
          turnId: turn.turnId,
          policyVersion: `policy ${text}`,
          moderationDigest: digest({ index }),
          allowed: true,
          decidedAt: "2031-02-03T04:05:06.123456789+05:30",
          principal: `user ${text}`,
        };
        expect(await store.putReceiptIfAbsent(receipt)).toEqual(receipt);
        expect(await store.getReceipt(receipt.turnKey)).toEqual(receipt);

        const claim = await store.claimMutation(identity);
        if (claim.status !== "acquired") throw new Error(`expected acquired, got ${claim.status}`);
        expect((await store.listUnresolved()).find((entry) => entry.turnKey === identity.turnKey)).toMatchObject(identity);
        const result = { content: `result ${text}`, status: "error" as const };
        expect(await store.settleMutation({ turnKey: identity.turnKey, token: claim.token, outcome: "complete", result })).toBe(true);
        expect(await store.claimMutation(identity)).toEqual({ status: "replay", result });
        expect(await store.claimMutation({ ...identity, mutationKey: digest({ rival: index }) })).toEqual({
          status: "conflict",
          completed: { toolName: identity.toolName, toolCallId: identity.toolCallId, result },
        });

        const key = {
          turnKey: identity.turnKey,
          toolCallId: identity.toolCallId,
          toolName: identity.toolName,
          toolFingerprint: identity.toolFingerprint,
          guardrail: `g ${text}`,
          argsDigest: identity.argsDigest,
        };
        const verdict = {
          ...key,
          verdict: { action: "observe" as const, outcome: "complete" as const, detections: [{ rule: text, detected: true, note: text }] },
          recordedAt: "2031-02-03T04:05:06.000Z",
        };
        expect(await store.recordVerdict(verdict)).toEqual(verdict);
        expect(await store.getVerdict(key)).toEqual(verdict);
        expect(await store.getVerdict({ ...key, guardrail: "g other" })).toBeUndefined();
        expect(await store.getVerdict({ ...key, toolName: "tool other" })).toBeUndefined();
        expect(await store.getVerdict({ ...key, toolFingerprint: digest({ tool: "other" }) })).toBeUndefined();

        // Audit filters and cursors keep these strings exact too.
        await store.appendAudit({ at: "2031-02-03T04:05:06.000Z", decision: "executed", turnKey: identity.turnKey, scopeId: turn.scopeId });
        expect((await store.readAudit({ scopeId: turn.scopeId })).map((event) => event.scopeId)).toEqual([turn.scopeId]);
        expect(await store.advanceAuditCursor({ sink: `sink ${text}`, seq: index + 1 })).toBe(true);
        expect(await store.getAuditCursor(`sink ${text}`)).toBe(index + 1);

        const request = approvalRequest(identity.turnKey, turn.scopeId, {
          approvalId: digest({ approval: index }),
          toolCallId: identity.toolCallId,
          toolName: identity.toolName,
          args: { [text]: text, nested: [text] },
          guardrails: [`g ${text}`],
          reason: `reason ${text}`,
        });
        expect(await store.requestApproval(request)).toEqual({ ...request, status: "pending" });
        const decision = { decision: "reject" as const, message: `no ${text}` };
        const decided = await store.decideApproval({ approvalId: request.approvalId, decision, operatorRef: `op ${text}`, decidedAt: "2031-02-03T05:00:00Z" });
        expect(decided).toEqual({
          decided: true,
          record: { ...request, status: "rejected", decision, operatorRef: `op ${text}`, decidedAt: "2031-02-03T05:00:00Z" },
        });
        expect(await store.getApproval(request.approvalId)).toEqual(decided.record);
        const steps = (await store.readAudit()).filter((event) => event.approvalId === request.approvalId);
        expect(steps.map((event) => [event.scopeId, event.toolCallId, event.toolName, event.operatorRef])).toEqual([
          [turn.scopeId, identity.toolCallId, identity.toolName, undefined],
          [turn.scopeId, identity.toolCallId, identity.toolName, `op ${text}`],
        ]);
      }
    });

    it("keeps distinct strings distinct: an unknown claim in scope \\ud800 does not block scope \\ud801", async () => {
      const { store } = await openStore();
      const first = rawIdentity(1, "\ud800");
      const claim = await store.claimMutation(first);
      if (claim.status !== "acquired") throw new Error(claim.status);
      expect(await store.settleMutation({ turnKey: first.turnKey, token: claim.token, outcome: "unknown" })).toBe(true);
      expect((await store.claimMutation(rawIdentity(2, "\ud800"))).status).toBe("scope_unresolved");
      expect((await store.claimMutation(rawIdentity(3, "\ud801"))).status).toBe("acquired");
      expect((await store.claimMutation(rawIdentity(4, "\ufffd"))).status).toBe("acquired");
    });

    it("a settlement token with a NUL never matches", async () => {
      const { store } = await openStore();
      const identity = claimIdentity({ scopeId: "doc-token", turnId: "t1" });
      const claim = await store.claimMutation(identity);
      if (claim.status !== "acquired") throw new Error(claim.status);
      const forged = `${claim.token}\u0000`;
      expect(await store.settleMutation({ turnKey: identity.turnKey, token: forged, outcome: "unknown" })).toBe(false);
      expect(await store.claimMutation(identity)).toEqual({ status: "pending" });
    });
  });

  // -------------------------------------------------------------------------------------------
  describe("a corrupt row fails closed with StoreContractError", () => {
    async function settledTurn(store: PostgresGuardrailStore, scopeId: string) {
      const identity = claimIdentity({ scopeId, turnId: "t1" });
      const claim = await store.claimMutation(identity);
      if (claim.status !== "acquired") throw new Error(claim.status);
      await store.settleMutation({ turnKey: identity.turnKey, token: claim.token, outcome: "complete", result: RESULT });
      return identity;
    }

    const corruptions: [string, string, (store: PostgresGuardrailStore, turn: string) => Promise<unknown>][] = [
      ["a mutation key that is not a digest", "UPDATE {s}.claims SET mutation_key = 'not-a-digest'", (store, scope) =>
        store.claimMutation(claimIdentity({ scopeId: scope, turnId: "t1" }))],
      ["an unknown result status", "UPDATE {s}.claims SET result_status = 'maybe'", (store, scope) =>
        store.claimMutation(claimIdentity({ scopeId: scope, turnId: "t1" }))],
      ["a complete claim without its result", "UPDATE {s}.claims SET result_content = NULL", (store, scope) =>
        store.claimMutation(claimIdentity({ scopeId: scope, turnId: "t1" }))],
      ["a claim time that is not a timestamp", "UPDATE {s}.claims SET state = 'pending', claimed_at = 'yesterday'", (store) =>
        store.listUnresolved()],
      ["an escaped string that does not decode", "UPDATE {s}.claims SET state = 'unknown', scope_id = E'\\x01{oops'", (store) =>
        store.listUnresolved()],
      ["a receipt time that is not a timestamp", "INSERT INTO {s}.receipts SELECT turn_key, 'doc', 't1', 'v1', mutation_key, true, 'later' FROM {s}.claims", (store, scope) =>
        store.getReceipt(turnKey({ scopeId: scope, turnId: "t1" }))],
    ];

    it.each(corruptions)("%s", async (_name, sql, read) => {
      const { store, schema } = await openStore();
      await settledTurn(store, "doc-corrupt");
      await admin.query(sql.replaceAll("{s}", `"${schema}"`));
      const error = await rejection(read(store, "doc-corrupt"));
      expect(StoreContractError.isInstance(error), error.message).toBe(true);
    });

    it("a verdict that is not JSON, or is stored under another key, or an audit event that does not parse", async () => {
      const { store, schema } = await openStore();
      const identity = await settledTurn(store, "doc-corrupt-records");
      const key = {
        turnKey: identity.turnKey,
        toolCallId: "w1",
        toolName: "rename_document",
        toolFingerprint: identity.toolFingerprint,
        guardrail: "pii",
        argsDigest: identity.argsDigest,
      };
      const record = { ...key, verdict: { action: "deny" as const, outcome: "complete" as const, detections: [] }, recordedAt: "2031-01-01T00:00:00Z" };
      await store.recordVerdict(record);
      await admin.query(`UPDATE "${schema}".verdicts SET record = '{not json'`);
      expect(StoreContractError.isInstance(await rejection(store.getVerdict(key)))).toBe(true);
      await admin.query(`UPDATE "${schema}".verdicts SET record = $1`, [JSON.stringify({ ...record, guardrail: "other" })]);
      expect(StoreContractError.isInstance(await rejection(store.getVerdict(key)))).toBe(true);
      expect(StoreContractError.isInstance(await rejection(store.recordVerdict(record)))).toBe(true);
      await admin.query(`UPDATE "${schema}".verdicts SET record = $1`, [JSON.stringify({ ...record, toolName: "delete_document" })]);
      expect(StoreContractError.isInstance(await rejection(store.getVerdict(key)))).toBe(true);
      await admin.query(`UPDATE "${schema}".verdicts SET record = $1`, [JSON.stringify({ ...record, toolFingerprint: digest("other") })]);
      expect(StoreContractError.isInstance(await rejection(store.getVerdict(key)))).toBe(true);

      await store.appendAudit({ at: "2031-01-01T00:00:00Z", decision: "executed", turnKey: identity.turnKey, scopeId: "doc" });
      await admin.query(`UPDATE "${schema}".audit SET event = '{"at":"never","decision":"executed"}'`);
      expect(StoreContractError.isInstance(await rejection(store.readAudit()))).toBe(true);
    });

    const approvalCorruptions: [string, string][] = [
      ["JSON that does not parse", "UPDATE {s}.approvals SET record = '{not json'"],
      ["a record stored under another id", `UPDATE {s}.approvals SET record = replace(record, approval_id, '${"0".repeat(64)}')`],
      ["a status column that disagrees with the record", "UPDATE {s}.approvals SET status = 'rejected'"],
      ["a decided status without a decision", `UPDATE {s}.approvals SET status = 'approved', record = replace(record, '"status":"pending"', '"status":"approved"')`],
      ["a record with an unknown field", `UPDATE {s}.approvals SET record = replace(record, '{"approvalId"', '{"extra":1,"approvalId"')`],
    ];

    it.each(approvalCorruptions)("an approval request with %s: every method that reads it rejects, nothing changes", async (_name, sql) => {
      const { store, schema } = await openStore();
      const request = approvalRequest(digest({ turn: "corrupt" }), "doc-corrupt-approval");
      await store.requestApproval(request);
      await admin.query(sql.replaceAll("{s}", `"${schema}"`));
      const before = (await admin.query(`SELECT * FROM "${schema}".approvals`)).rows;
      const trail = await store.readAudit();
      const reads: (() => Promise<unknown>)[] = [
        () => store.getApproval(request.approvalId),
        () => store.requestApproval(request),
        () => store.decideApproval({ approvalId: request.approvalId, decision: { decision: "approve" }, decidedAt: "2031-02-03T05:00:00Z" }),
        () => store.applyApproval({ approvalId: request.approvalId, appliedAt: "2031-02-03T05:00:00Z" }),
        () => store.listApprovals(),
      ];
      for (const read of reads) expect(StoreContractError.isInstance(await rejection(read()))).toBe(true);
      // Expiry reads only rows filed as pending: it rejects the row, or (filed as decided) skips it.
      const expiry: unknown = await store.expireApprovals({ olderThan: "2099-01-01T00:00:00Z" }).catch((error: unknown) => error);
      expect(StoreContractError.isInstance(expiry) || JSON.stringify(expiry) === '{"expired":0}', String(expiry)).toBe(true);
      expect((await admin.query(`SELECT * FROM "${schema}".approvals`)).rows).toEqual(before);
      expect(await store.readAudit()).toEqual(trail);
    });
  });

  // -------------------------------------------------------------------------------------------
  describe("the scope rule is decided under the scope's lock", () => {
    /**
     * An operator connection holds the scope's row lock. Queued behind it: first an `unknown`
     * settlement of T0, then a claim of T1 in the same scope. When the lock is released the
     * settlement applies first, and the claim, which started before that commit, must still see
     * it: `scope_unresolved`. A claim deciding on its statement's snapshot would acquire.
     */
    it("a claim queued behind an unknown settlement of its scope answers scope_unresolved", async () => {
      const schema = freshSchema("arkah_pgt");
      schemas.push(schema);
      const pools = [0, 1].map((index) => new pg.Pool({ connectionString: url, max: 2, application_name: `${schema}_${String(index)}` }));
      const [settler, claimer] = await Promise.all(pools.map((pool) => PostgresGuardrailStore.open({ pool }, { schema })));
      if (settler === undefined || claimer === undefined) throw new Error("stores");
      try {
        const t0 = claimIdentity({ scopeId: "doc-lock", turnId: "t0" });
        const claim = await settler.claimMutation(t0);
        if (claim.status !== "acquired") throw new Error(claim.status);

        const holder = await admin.connect();
        let settled: Promise<boolean>;
        let claimed: Promise<ClaimResult>;
        try {
          await holder.query("BEGIN");
          await holder.query(`SELECT 1 FROM "${schema}".scopes WHERE scope_id = 'doc-lock' FOR UPDATE`);
          settled = settler.settleMutation({ turnKey: t0.turnKey, token: claim.token, outcome: "unknown" });
          await blockedBackend(admin, `${schema}_0`);
          claimed = claimer.claimMutation(claimIdentity({ scopeId: "doc-lock", turnId: "t1" }));
          await blockedBackend(admin, `${schema}_1`);
          await holder.query("COMMIT");
        } finally {
          holder.release();
        }
        expect(await settled).toBe(true);
        expect(await claimed).toEqual({ status: "scope_unresolved" });
        expect(await claimer.claimMutation(claimIdentity({ scopeId: "doc-lock", turnId: "t1" }))).toEqual({ status: "scope_unresolved" });
        // The other order: a claim queued first acquires, and the settlement after it still applies.
        const t2 = claimIdentity({ scopeId: "doc-lock-2", turnId: "t2" });
        const second = await settler.claimMutation(t2);
        if (second.status !== "acquired") throw new Error(second.status);
        const holder2 = await admin.connect();
        let claimedFirst: Promise<ClaimResult>;
        let settledAfter: Promise<boolean>;
        try {
          await holder2.query("BEGIN");
          await holder2.query(`SELECT 1 FROM "${schema}".scopes WHERE scope_id = 'doc-lock-2' FOR UPDATE`);
          claimedFirst = claimer.claimMutation(claimIdentity({ scopeId: "doc-lock-2", turnId: "t3" }));
          await blockedBackend(admin, `${schema}_1`);
          settledAfter = settler.settleMutation({ turnKey: t2.turnKey, token: second.token, outcome: "unknown" });
          await blockedBackend(admin, `${schema}_0`);
          await holder2.query("COMMIT");
        } finally {
          holder2.release();
        }
        expect((await claimedFirst).status).toBe("acquired");
        expect(await settledAfter).toBe(true);
        expect((await claimer.claimMutation(claimIdentity({ scopeId: "doc-lock-2", turnId: "t4" }))).status).toBe("scope_unresolved");
      } finally {
        await Promise.all([settler.close(), claimer.close()]);
        await Promise.all(pools.map((pool) => pool.end()));
      }
    });

    /**
     * The fast path's one statement finds the scope blocked; before the claim decides under the
     * scope's lock, an operator reconciles the `unknown` claim that blocked it. The locked path
     * reads the committed state, so the claim is acquired there (lines no other test reaches: the
     * window is forced by a pool that runs the reconciliation right after the fast statement).
     */
    it.each([
      ["without read evidence", undefined],
      ["with read evidence", [digest({ kind: "test.read", n: 7 })]],
    ] as const)("a scope resolved between the fast claim and the locked one: acquired under the lock (%s)", async (_label, readEvidence) => {
      const schema = freshSchema("arkah_pgt");
      schemas.push(schema);
      const plain = await PostgresGuardrailStore.open({ connectionString: url }, { schema });
      stores.push(plain);
      const t0 = claimIdentity({ scopeId: "doc-window", turnId: "t0" });
      const t1 = claimIdentity({ scopeId: "doc-window", turnId: "t1" });
      const first = await plain.claimMutation(t0);
      if (first.status !== "acquired") throw new Error(first.status);
      expect(await plain.settleMutation({ turnKey: t0.turnKey, token: first.token, outcome: "unknown" })).toBe(true);
      for (const evidenceDigest of readEvidence ?? []) await plain.recordSuccessfulRead({ turnKey: t1.turnKey, evidenceDigest });

      const { pool, hooked, hookedNames: fastStatements } = poolHookedAfter(url, /_claim_scoped(_read)?$/, async () => {
        await plain.reconcileMutation({ turnKey: t0.turnKey, resolution: "no-effect", operatorRef: "INC-window" });
      });
      const store = await PostgresGuardrailStore.open({ pool: hooked }, { schema });
      try {
        const answer = await store.claimMutation(t1, readEvidence === undefined ? undefined : { readEvidence: [...readEvidence] });
        expect(fastStatements).toHaveLength(1);
        expect(answer.status).toBe("acquired");
        expect(await store.listUnresolved()).toMatchObject([{ turnKey: t1.turnKey, state: "pending" }]);
        if (answer.status === "acquired") {
          expect(await store.settleMutation({ turnKey: t1.turnKey, token: answer.token, outcome: "complete", result: { content: "ok", status: "success" } })).toBe(true);
        }
        expect(await store.claimMutation(t1)).toEqual({ status: "replay", result: { content: "ok", status: "success" } });
      } finally {
        await store.close();
        await pool.end();
      }
    });

    /**
     * The same window, later: the fast path found the scope blocked and no claim of the turn; before
     * the locked path runs, the blocker is reconciled and another worker claims this very turn (a
     * client's retry racing its first attempt). The locked path finds that claim: `pending`.
     */
    it.each([
      ["without read evidence", undefined],
      ["with read evidence", [digest({ kind: "test.read", n: 8 })]],
    ] as const)("the turn claimed by another worker between the fast path and the locked one: pending under the lock (%s)", async (_label, readEvidence) => {
      const schema = freshSchema("arkah_pgt");
      schemas.push(schema);
      const other = await PostgresGuardrailStore.open({ connectionString: url }, { schema });
      stores.push(other);
      const t0 = claimIdentity({ scopeId: "doc-raced", turnId: "t0" });
      const t1 = claimIdentity({ scopeId: "doc-raced", turnId: "t1" });
      const options = readEvidence === undefined ? undefined : { readEvidence: [...readEvidence] };
      const first = await other.claimMutation(t0);
      if (first.status !== "acquired") throw new Error(first.status);
      await other.settleMutation({ turnKey: t0.turnKey, token: first.token, outcome: "unknown" });
      for (const evidenceDigest of readEvidence ?? []) await other.recordSuccessfulRead({ turnKey: t1.turnKey, evidenceDigest });

      const { pool, hooked, hookedNames: fastReads } = poolHookedAfter(url, /_read_claim(_with_evidence)?$/, async () => {
        await other.reconcileMutation({ turnKey: t0.turnKey, resolution: "no-effect", operatorRef: "INC-raced" });
        expect((await other.claimMutation(t1, options)).status).toBe("acquired");
      });
      const store = await PostgresGuardrailStore.open({ pool: hooked }, { schema });
      try {
        expect(await store.claimMutation(t1, options)).toEqual({ status: "pending" });
        expect(fastReads).toHaveLength(1);
        expect(await store.listUnresolved()).toMatchObject([{ turnKey: t1.turnKey, state: "pending" }]);
      } finally {
        await store.close();
        await pool.end();
      }
    });

    it("a connection used for many transactions keeps one error listener of the store's, not one per use", async () => {
      const schema = freshSchema("arkah_pgt");
      schemas.push(schema);
      const pool = new pg.Pool({ connectionString: url, max: 1 });
      const listeners: number[] = [];
      pool.on("release", (_error: unknown, client: pg.PoolClient) => listeners.push(client.listenerCount("error")));
      const store = await PostgresGuardrailStore.open({ pool }, { schema });
      try {
        for (let turn = 0; turn < 12; turn++) {
          const identity = claimIdentity({ scopeId: "doc-listeners", turnId: `t${String(turn)}` });
          const claim = await store.claimMutation(identity);
          if (claim.status !== "acquired") throw new Error(claim.status);
          // An unknown settlement runs in a transaction on a checked-out connection.
          expect(await store.settleMutation({ turnKey: identity.turnKey, token: claim.token, outcome: "unknown" })).toBe(true);
          await store.reconcileMutation({ turnKey: identity.turnKey, resolution: "no-effect", operatorRef: "INC-listeners" });
        }
        expect(listeners.length).toBeGreaterThanOrEqual(24);
        expect(new Set(listeners).size).toBe(1);
      } finally {
        await store.close();
        await pool.end();
      }
    });

    /**
     * A store on a pool of one connection whose next checkout (once armed) is tampered with, and
     * an unknown claim to reconcile: reconcileMutation runs in a transaction on that checkout.
     */
    async function tamperedCheckout(tamper: (client: pg.PoolClient, query: pg.PoolClient["query"]) => void) {
      const schema = freshSchema("arkah_pgt");
      schemas.push(schema);
      const pool = new pg.Pool({ connectionString: url, max: 1 });
      const releases: (Error | undefined)[] = [];
      pool.on("release", (error: Error | undefined) => releases.push(error));
      let armed = false;
      const tampered = new Proxy(pool, {
        get(target, key, receiver) {
          if (key !== "connect") return Reflect.get(target, key, receiver) as unknown;
          // pool.query checks out through connect(callback): only the promise form is tampered with.
          return async (...args: unknown[]) => {
            if (args.length > 0) return Reflect.apply(target.connect, target, args) as unknown;
            const client = await target.connect();
            if (armed) {
              armed = false;
              tamper(client, client.query.bind<pg.PoolClient["query"]>(client));
            }
            return client;
          };
        },
      });
      const store = await PostgresGuardrailStore.open({ pool: tampered }, { schema });
      const identity = claimIdentity({ scopeId: "doc-tampered", turnId: "t0" });
      const claim = await store.claimMutation(identity);
      if (claim.status !== "acquired") throw new Error(claim.status);
      await store.settleMutation({ turnKey: identity.turnKey, token: claim.token, outcome: "unknown" });
      const backend = async () => (await pool.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]?.pid;
      const before = await backend();
      releases.length = 0;
      armed = true;
      const close = async () => {
        await store.close();
        await pool.end();
      };
      return { store, schema, identity, releases, before, backend, close };
    }

    it("a connection that emits an error while checked out is handed back broken, so the pool replaces it", async () => {
      const injected = new Error("connection lost (injected)");
      const { store, identity, releases, before, backend, close } = await tamperedCheckout((client, query) => {
        client.query = ((...args: Parameters<typeof query>) => {
          if (args[0] === "BEGIN") {
            client.query = query;
            client.emit("error", injected);
          }
          return query(...args);
        }) as typeof query;
      });
      try {
        expect(await store.reconcileMutation({ turnKey: identity.turnKey, resolution: "no-effect", operatorRef: "INC-lost" })).toEqual({
          reconciled: true,
          state: "unknown",
        });
        expect(releases).toEqual([injected]);
        expect(await backend()).not.toBe(before);
      } finally {
        await close();
      }
    });

    it("a connection whose rollback fails is discarded, so no later statement runs inside its abandoned transaction", async () => {
      const { store, schema, identity, releases, before, backend, close } = await tamperedCheckout((client, query) => {
        let begun = false;
        client.query = ((...args: Parameters<typeof query>) => {
          if (args[0] === "BEGIN") begun = true;
          else if (args[0] === "ROLLBACK") {
            client.query = query;
            // Lost, not run: the connection is still inside the transaction BEGIN opened.
            return Promise.reject(new Error("rollback lost (injected)"));
          } else if (begun) {
            begun = false;
            return Promise.reject(new Error("statement failed (injected)"));
          }
          return query(...args);
        }) as typeof query;
      });
      try {
        const error = await rejection(store.reconcileMutation({ turnKey: identity.turnKey, resolution: "no-effect", operatorRef: "INC-lost" }));
        expect(PostgresStoreError.isInstance(error)).toBe(true);
        expect(error.message).toContain("statement failed (injected)");
        expect(releases).toHaveLength(1);
        expect(releases[0]?.message).toBe("rollback lost (injected)");
        expect(await backend()).not.toBe(before);
        // A write on the next checkout commits: reused, the connection would have kept it uncommitted.
        const next = claimIdentity({ scopeId: "doc-after", turnId: "t1" });
        expect((await store.claimMutation(next)).status).toBe("acquired");
        const { rows } = await admin.query<{ n: string }>(`SELECT count(*) AS n FROM "${schema}".claims WHERE turn_key = $1`, [next.turnKey]);
        expect(rows).toEqual([{ n: "1" }]);
      } finally {
        await close();
      }
    });

    it("a turn's store calls are the database round trips docs/storage-adapters.md promises (one statement each on the common path)", async () => {
      const schema = freshSchema("arkah_pgt");
      schemas.push(schema);
      const pool = new pg.Pool({ connectionString: url, max: 2 });
      // Every statement sent on any of the pool's connections (pool.query runs on one too; BEGIN and COMMIT count).
      let trips = 0;
      pool.on("connect", (client) => {
        const query = client.query.bind<pg.PoolClient["query"]>(client);
        client.query = ((...args: Parameters<typeof query>) => {
          trips++;
          return query(...args);
        }) as typeof query;
      });
      const store = await PostgresGuardrailStore.open({ pool }, { schema });
      try {
        const identity = claimIdentity({ scopeId: "doc-trips", turnId: "t1" });
        const receipt: AdmissionReceipt = {
          turnKey: identity.turnKey,
          scopeId: "doc-trips",
          turnId: "t1",
          policyVersion: "v1",
          moderationDigest: digest({ moderation: "ok" }),
          allowed: true,
          decidedAt: "2031-01-01T00:00:00.000Z",
        };
        const evidence = { turnKey: identity.turnKey, evidenceDigest: digest({ read: 1 }) };
        const key = {
          turnKey: identity.turnKey,
          toolCallId: identity.toolCallId,
          toolName: identity.toolName,
          toolFingerprint: identity.toolFingerprint,
          guardrail: "pii",
          argsDigest: identity.argsDigest,
        };
        const verdict = { ...key, verdict: { action: "allow" as const, outcome: "complete" as const, detections: [] }, recordedAt: "2031-01-01T00:00:00.000Z" };
        const event = { at: "2031-01-01T00:00:00.000Z", decision: "executed" as const, turnKey: identity.turnKey, scopeId: "doc-trips" };
        const counts: Record<string, number> = {};
        const step = async (name: string, call: () => Promise<unknown>) => {
          const before = trips;
          await call();
          counts[name] = trips - before;
        };
        await step("getReceipt", () => store.getReceipt(identity.turnKey));
        await step("putReceiptIfAbsent", () => store.putReceiptIfAbsent(receipt));
        await step("putReceiptIfAbsent (stored)", () => store.putReceiptIfAbsent(receipt));
        await step("recordSuccessfulRead", () => store.recordSuccessfulRead(evidence));
        await step("recordSuccessfulRead (audited)", () => store.recordSuccessfulRead(evidence, { audit: event }));
        await step("recordVerdict", () => store.recordVerdict(verdict));
        let token = "";
        await step("claimMutation", async () => {
          const claim = await store.claimMutation(identity, { readEvidence: [evidence.evidenceDigest] });
          if (claim.status !== "acquired") throw new Error(claim.status);
          token = claim.token;
        });
        await step("settleMutation", () => store.settleMutation({ turnKey: identity.turnKey, token, outcome: "complete", result: RESULT }));
        await step("claimMutation (replay)", async () => {
          expect(await store.claimMutation(identity)).toEqual({ status: "replay", result: RESULT });
        });
        await step("claimMutation (replay, with read evidence)", async () => {
          expect(await store.claimMutation(identity, { readEvidence: [evidence.evidenceDigest] })).toEqual({ status: "replay", result: RESULT });
        });
        await step("appendAudit", () => store.appendAudit(event));
        expect(counts).toEqual({
          getReceipt: 1,
          putReceiptIfAbsent: 1,
          // Not inserted: the stored one is read back.
          "putReceiptIfAbsent (stored)": 2,
          recordSuccessfulRead: 1,
          "recordSuccessfulRead (audited)": 1,
          recordVerdict: 1,
          claimMutation: 1,
          settleMutation: 1,
          // A retried turn: the insert finds the turn claimed, then the claim is read (no transaction).
          "claimMutation (replay)": 2,
          "claimMutation (replay, with read evidence)": 2,
          appendAudit: 1,
        });
      } finally {
        await store.close();
        await pool.end();
      }
    });

    it("a migrated schema has the indexes its statements walk, and not the one version 2 replaced", async () => {
      const { schema } = await openStore();
      const { rows } = await admin.query<{ name: string }>(
        "SELECT indexname AS name FROM pg_indexes WHERE schemaname = $1 AND indexname NOT LIKE '%_pkey' AND indexname NOT LIKE '%_key' ORDER BY 1",
        [schema],
      );
      // Without one, a statement still answers, by scanning its table: only a test like this sees it.
      expect(rows.map((row) => row.name)).toEqual(
        expect.arrayContaining([
          "approvals_listed",
          "approvals_pending",
          "approvals_turn",
          "audit_approval",
          "audit_scope_seq",
          "audit_turn_seq",
          "claims_complete",
          "claims_unresolved",
          "effects_complete",
          "effects_turn_tool",
          "effects_unresolved",
        ]),
      );
      expect(rows.map((row) => row.name)).not.toContain("audit_turn");
    });

    it("requireResolvedScope: false claims past an unknown claim in the scope", async () => {
      const { store } = await openStore();
      const t0 = claimIdentity({ scopeId: "doc-opt-out", turnId: "t0" });
      const claim = await store.claimMutation(t0);
      if (claim.status !== "acquired") throw new Error(claim.status);
      await store.settleMutation({ turnKey: t0.turnKey, token: claim.token, outcome: "unknown" });
      const t1 = claimIdentity({ scopeId: "doc-opt-out", turnId: "t1" });
      expect((await store.claimMutation(t1)).status).toBe("scope_unresolved");
      expect((await store.claimMutation(t1, { requireResolvedScope: false })).status).toBe("acquired");
      expect(await store.claimMutation(t0, { requireResolvedScope: false })).toEqual({ status: "unknown" });
    });

    it("20 turns claimed by 8 connections at once: exactly one acquires each", async () => {
      const schema = freshSchema("arkah_pgt");
      schemas.push(schema);
      const workers = await Promise.all(
        Array.from({ length: 8 }, () => PostgresGuardrailStore.open({ connectionString: url }, { schema })),
      );
      stores.push(...workers);
      for (let turn = 0; turn < 20; turn++) {
        const identity = claimIdentity({ scopeId: `doc-${String(turn % 3)}`, turnId: `t${String(turn)}` });
        const answers = await Promise.all(workers.map((store) => store.claimMutation(identity)));
        const acquired = answers.filter((answer) => answer.status === "acquired");
        expect(acquired).toHaveLength(1);
        expect(answers.filter((answer) => answer.status !== "acquired")).toEqual(Array(7).fill({ status: "pending" }));
      }
    });
  });

  // -------------------------------------------------------------------------------------------
  describe("a turn's atomic steps", () => {
    const READ = digest({ kind: "test.read", n: 1 });

    /**
     * A store on its own pool whose statements are logged per connection: every `query` a client of
     * that pool runs (the pool's own one-statement queries included), by prepared-statement name
     * without the schema tag, or by text (BEGIN, COMMIT). Observes the real driver; changes nothing.
     */
    async function loggedStore() {
      const schema = freshSchema("arkah_pgt");
      schemas.push(schema);
      const pool = new pg.Pool({ connectionString: url, max: 4 });
      const ids = new WeakMap<object, number>();
      let connections = 0;
      pool.on("connect", (client) => ids.set(client, ++connections));
      const log: [number, string][] = [];
      const proto = pg.Client.prototype as unknown as { query: (this: object, ...args: unknown[]) => unknown };
      const original = proto.query;
      proto.query = function (this: object, ...args: unknown[]) {
        const id = ids.get(this);
        if (id !== undefined) {
          const config = args[0];
          const what = typeof config === "string" ? config : ((config as { name?: string }).name ?? "");
          log.push([id, what.replace(/^arkah_[0-9a-f]{12}_/, "")]);
        }
        return original.apply(this, args);
      };
      const store = await PostgresGuardrailStore.open({ pool }, { schema });
      return {
        store,
        log,
        /** What `run` issued, statement by statement. */
        async issued<T>(run: () => Promise<T>): Promise<{ result: T; statements: [number, string][] }> {
          const from = log.length;
          const result = await run();
          return { result, statements: log.slice(from) };
        },
        async close() {
          proto.query = original;
          await store.close();
          await pool.end();
        },
      };
    }

    it("a fresh claim naming evidence is one statement: the evidence check and the insert together", async () => {
      const logged = await loggedStore();
      try {
        const identity = claimIdentity({ scopeId: "doc-steps", turnId: "t1" });
        await logged.store.recordSuccessfulRead({ turnKey: identity.turnKey, evidenceDigest: READ });
        const acquired = await logged.issued(() => logged.store.claimMutation(identity, { readEvidence: [READ] }));
        expect(acquired.result.status).toBe("acquired");
        expect(acquired.statements.map(([, what]) => what)).toEqual(["claim_scoped_read"]);
        // No evidence: the same one statement answers, and writes nothing (not even the scope's row).
        const other = claimIdentity({ scopeId: "doc-steps-other", turnId: "t2" });
        const refused = await logged.issued(() => logged.store.claimMutation(other, { readEvidence: [READ] }));
        expect(refused.result).toEqual({ status: "read_required" });
        expect(refused.statements.map(([, what]) => what)).toEqual(["claim_scoped_read"]);
        const unscoped = await logged.issued(() =>
          logged.store.claimMutation(other, { readEvidence: [READ], requireResolvedScope: false }),
        );
        expect(unscoped.result).toEqual({ status: "read_required" });
        expect(unscoped.statements.map(([, what]) => what)).toEqual(["claim_unscoped_read"]);
        const { rows } = await admin.query(`SELECT scope_id FROM "${logged.store.schema}".scopes ORDER BY scope_id`);
        expect(rows).toEqual([{ scope_id: "doc-steps" }]);
      } finally {
        await logged.close();
      }
    });

    it("a claim decided under the scope's lock checks the evidence first, inside that transaction", async () => {
      const logged = await loggedStore();
      try {
        const blocker = claimIdentity({ scopeId: "doc-locked", turnId: "t0" });
        const claim = await logged.store.claimMutation(blocker);
        if (claim.status !== "acquired") throw new Error(claim.status);
        await logged.store.settleMutation({ turnKey: blocker.turnKey, token: claim.token, outcome: "unknown" });
        const identity = claimIdentity({ scopeId: "doc-locked", turnId: "t1" });
        await logged.store.recordSuccessfulRead({ turnKey: identity.turnKey, evidenceDigest: READ });
        const { result, statements } = await logged.issued(() => logged.store.claimMutation(identity, { readEvidence: [READ] }));
        expect(result).toEqual({ status: "scope_unresolved" });
        const begin = statements.findIndex(([, what]) => what === "BEGIN");
        expect(begin).toBeGreaterThanOrEqual(0);
        const client = statements[begin]?.[0];
        const transaction = statements.slice(begin).filter(([id]) => id === client).map(([, what]) => what);
        expect(transaction).toEqual(["BEGIN", "has_any_read", "lock_scope", "read_claim", "COMMIT"]);
        // Before it: the one-statement attempt, and the evidence read with the claim in one snapshot.
        expect(statements.slice(0, begin).map(([, what]) => what)).toEqual(["claim_scoped_read", "read_claim_with_evidence"]);
      } finally {
        await logged.close();
      }
    });

    it("a read or a settlement whose audit event cannot be written changes nothing", async () => {
      const { store, schema } = await openStore();
      const identity = claimIdentity({ scopeId: "doc-step-audit", turnId: "t1" });
      const claim = await store.claimMutation(identity);
      if (claim.status !== "acquired") throw new Error(claim.status);
      const event = {
        at: "2031-02-03T04:05:06.789Z",
        decision: "executed" as const,
        turnKey: identity.turnKey,
        scopeId: identity.scopeId,
      };
      await admin.query(`ALTER TABLE "${schema}".audit ADD CONSTRAINT no_executed CHECK (decision <> 'executed')`);
      const evidence = { turnKey: identity.turnKey, evidenceDigest: READ };
      const readError = await rejection(store.recordSuccessfulRead(evidence, { audit: event }));
      expect(PostgresStoreError.isInstance(readError)).toBe(true);
      expect(await store.hasSuccessfulRead(evidence)).toBe(false);
      for (const settlement of [
        { turnKey: identity.turnKey, token: claim.token, outcome: "complete" as const, result: RESULT, audit: event },
        { turnKey: identity.turnKey, token: claim.token, outcome: "unknown" as const, audit: event },
      ]) {
        const error = await rejection(store.settleMutation(settlement));
        expect(PostgresStoreError.isInstance(error)).toBe(true);
        expect(error.message).toContain("settleMutation");
      }
      expect(await store.claimMutation(identity)).toEqual({ status: "pending" });
      // The scope is not blocked: the unknown settlement rolled back with its event.
      expect((await store.claimMutation(claimIdentity({ scopeId: "doc-step-audit", turnId: "t2" }))).status).toBe("acquired");
      expect(await store.readAudit()).toEqual([]);

      await admin.query(`ALTER TABLE "${schema}".audit DROP CONSTRAINT no_executed`);
      await store.recordSuccessfulRead(evidence, { audit: event });
      expect(await store.settleMutation({ turnKey: identity.turnKey, token: claim.token, outcome: "complete", result: RESULT, audit: event })).toBe(
        true,
      );
      expect(await store.hasSuccessfulRead(evidence)).toBe(true);
      expect((await store.readAudit()).map((stored) => stored.decision)).toEqual(["executed", "executed"]);
    });

    it("a shipped store is trusted; a wrapper around it is not", async () => {
      const { store } = await openStore();
      const { isTrustedStore } = await import("../../src/store/validate.js");
      expect(isTrustedStore(store)).toBe(true);
      expect(isTrustedStore(Object.create(store) as object)).toBe(false);
      expect(isTrustedStore(new Proxy(store, {}))).toBe(false);
    });
  });

  describe("audit numbering and reconciliation", () => {
    it("numbers audit events in commit order: an append waiting on another transaction gets the later number", async () => {
      const { store, schema } = await openStore();
      const key = (
        await import("node:crypto")
      ).createHash("sha256").update(`arkah-agent-guardrails:audit:${schema}`).digest().readBigInt64BE(0).toString();
      const holder = await admin.connect();
      let appended: Promise<void>;
      let taken: string;
      try {
        await holder.query("BEGIN");
        await holder.query("SELECT pg_advisory_xact_lock($1::bigint)", [key]);
        const blocked = new pg.Pool({ connectionString: url, max: 1, application_name: `${schema}_audit` });
        const appender = await PostgresGuardrailStore.open({ pool: blocked }, { schema });
        appended = appender.appendAudit({ at: "2031-01-01T00:00:00Z", decision: "executed", turnKey: "a".repeat(64), scopeId: "doc" });
        await blockedBackend(admin, `${schema}_audit`);
        // A number drawn while the append waits: the append must come after it.
        taken = (await admin.query<{ v: string }>(`SELECT nextval('"${schema}".audit_seq') AS v`)).rows[0]?.v ?? "";
        await holder.query("COMMIT");
        await appended;
        await appender.close();
        await blocked.end();
      } finally {
        holder.release();
      }
      const events = await store.readAudit();
      expect(events).toHaveLength(1);
      expect(events[0]?.seq).toBeGreaterThan(Number(taken));
    });

    it("a reconciliation whose audit event cannot be written changes nothing", async () => {
      const { store, schema } = await openStore();
      const identity = claimIdentity({ scopeId: "doc-reconcile", turnId: "t1" });
      const claim = await store.claimMutation(identity);
      if (claim.status !== "acquired") throw new Error(claim.status);
      await store.settleMutation({ turnKey: identity.turnKey, token: claim.token, outcome: "unknown" });
      await admin.query(`ALTER TABLE "${schema}".audit ADD CONSTRAINT no_reconciled CHECK (decision <> 'reconciled')`);
      const error = await rejection(
        store.reconcileMutation({ turnKey: identity.turnKey, resolution: "completed", result: RESULT, operatorRef: "op-1" }),
      );
      expect(PostgresStoreError.isInstance(error)).toBe(true);
      expect(error.message).toContain("reconcileMutation");
      expect(await store.claimMutation(identity)).toEqual({ status: "unknown" });
      expect((await store.claimMutation(claimIdentity({ scopeId: "doc-reconcile", turnId: "t2" }))).status).toBe("scope_unresolved");
      expect(await store.readAudit()).toEqual([]);

      await admin.query(`ALTER TABLE "${schema}".audit DROP CONSTRAINT no_reconciled`);
      expect(
        await store.reconcileMutation({ turnKey: identity.turnKey, resolution: "completed", result: RESULT, operatorRef: "op-1" }),
      ).toEqual({ reconciled: true, state: "unknown" });
      expect(await store.claimMutation(identity)).toEqual({ status: "replay", result: RESULT });
      expect((await store.claimMutation(claimIdentity({ scopeId: "doc-reconcile", turnId: "t2" }))).status).toBe("acquired");
      expect((await store.readAudit()).map((event) => [event.decision, event.action, event.operatorRef])).toEqual([
        ["reconciled", "completed", "op-1"],
      ]);
    });

    /**
     * A reconciliation whose claim changes in the window between reading the claim's scope and
     * locking that scope (only a race reaches it): `between` runs right after that read, the first
     * `times` times it is made.
     */
    async function reconcileAcrossWindow(between: (plain: PostgresGuardrailStore, turnKey: string) => Promise<void>, times = 1) {
      const { store: plain, schema } = await openStore();
      const identity = rawIdentity(7, "doc-window");
      const claim = await plain.claimMutation(identity);
      if (claim.status !== "acquired") throw new Error(claim.status);
      await plain.settleMutation({ turnKey: identity.turnKey, token: claim.token, outcome: "unknown" });
      const pool = new pg.Pool({ connectionString: url, max: 2 });
      let windows = 0;
      pool.on("connect", (client) => {
        const query = client.query.bind<pg.PoolClient["query"]>(client);
        client.query = (async (config: string | pg.QueryConfig, values?: unknown[]) => {
          const result = await query(config, values);
          if (typeof config === "object" && config.name?.endsWith("_read_scope") === true && windows++ < times) {
            await between(plain, identity.turnKey);
          }
          return result;
        }) as typeof query;
      });
      const store = await PostgresGuardrailStore.open({ pool }, { schema });
      try {
        const result = await store
          .reconcileMutation({ turnKey: identity.turnKey, resolution: "no-effect", operatorRef: "INC-window" })
          .catch((error: unknown) => error);
        return { result, plain, identity, windows };
      } finally {
        await store.close();
        await pool.end();
      }
    }

    it("a claim reconciled by someone else in the window between reading its scope and locking it: not_found, nothing changed twice", async () => {
      const { result, plain } = await reconcileAcrossWindow(async (other, key) => {
        expect(await other.reconcileMutation({ turnKey: key, resolution: "no-effect", operatorRef: "INC-first" })).toEqual({ reconciled: true, state: "unknown" });
      });
      expect(result).toEqual({ reconciled: false, reason: "not_found" });
      expect((await plain.readAudit()).map((event) => [event.decision, event.operatorRef])).toEqual([["reconciled", "INC-first"]]);
      expect((await plain.claimMutation(rawIdentity(8, "doc-window"))).status).toBe("acquired");
    });

    it("a claim reconciled and claimed again under another scope in that window: the reconciliation follows it and releases that scope", async () => {
      const { result, plain, identity } = await reconcileAcrossWindow(async (other, key) => {
        await other.reconcileMutation({ turnKey: key, resolution: "no-effect", operatorRef: "INC-first" });
        const moved = { ...rawIdentity(7, "doc-elsewhere"), turnKey: key };
        const again = await other.claimMutation(moved);
        if (again.status !== "acquired") throw new Error(again.status);
        await other.settleMutation({ turnKey: key, token: again.token, outcome: "unknown" });
      });
      expect(result).toEqual({ reconciled: true, state: "unknown" });
      expect(await plain.listUnresolved()).toEqual([]);
      // The scope it moved to is open again, and the one it left was never blocked twice.
      expect((await plain.claimMutation(rawIdentity(9, "doc-elsewhere"))).status).toBe("acquired");
      expect((await plain.claimMutation(rawIdentity(8, "doc-window"))).status).toBe("acquired");
      expect((await plain.readAudit()).filter((event) => event.decision === "reconciled").map((event) => [event.scopeId, event.operatorRef])).toEqual([
        [identity.scopeId, "INC-first"],
        ["doc-elsewhere", "INC-window"],
      ]);
    });

    it("a claim moved to another scope in that window on every attempt: after 16 attempts a PostgresStoreError, the claim still unresolved", async () => {
      let moves = 0;
      const { result, plain, identity, windows } = await reconcileAcrossWindow(async (other, key) => {
        await other.reconcileMutation({ turnKey: key, resolution: "no-effect", operatorRef: "INC-mover" });
        const moved = { ...rawIdentity(7, `doc-moved-${String(++moves)}`), turnKey: key };
        const again = await other.claimMutation(moved);
        if (again.status !== "acquired") throw new Error(again.status);
        await other.settleMutation({ turnKey: key, token: again.token, outcome: "unknown" });
      }, Infinity);
      expect(windows).toBe(16);
      expect(PostgresStoreError.isInstance(result)).toBe(true);
      expect((result as Error).message).toContain(
        "the reconciliation did not settle on an answer after 16 attempts under concurrent changes; the reconciliation and its audit event were applied together or not at all",
      );
      expect(await plain.listUnresolved()).toMatchObject([{ turnKey: identity.turnKey, scopeId: "doc-moved-16", state: "unknown" }]);
    });

    it("an approval step whose audit event cannot be written changes nothing", async () => {
      const { store, schema } = await openStore();
      const request = approvalRequest(digest({ turn: "atomic" }), "doc-atomic");
      const other = approvalRequest(digest({ turn: "atomic-2" }), "doc-atomic");
      await store.requestApproval(request);
      await admin.query(`ALTER TABLE "${schema}".audit ADD CONSTRAINT no_approval_steps CHECK (approval_id IS NULL) NOT VALID`);
      const decide = () =>
        store.decideApproval({ approvalId: request.approvalId, decision: { decision: "approve" }, decidedAt: "2031-02-03T05:00:00Z" });
      for (const [operation, attempt] of [
        ["requestApproval", () => store.requestApproval(other)],
        ["decideApproval", decide],
        ["expireApprovals", () => store.expireApprovals({ olderThan: "2099-01-01T00:00:00Z" })],
      ] as const) {
        const error = await rejection(attempt());
        expect(PostgresStoreError.isInstance(error), operation).toBe(true);
        expect(error.message).toContain(operation);
      }
      expect(await store.getApproval(other.approvalId)).toBeUndefined();
      expect(await store.getApproval(request.approvalId)).toEqual({ ...request, status: "pending" });
      expect((await store.readAudit()).map((event) => event.action)).toEqual(["requested"]);

      await admin.query(`ALTER TABLE "${schema}".audit DROP CONSTRAINT no_approval_steps`);
      expect((await decide()).decided).toBe(true);
      await admin.query(`ALTER TABLE "${schema}".audit ADD CONSTRAINT no_approval_steps CHECK (approval_id IS NULL) NOT VALID`);
      const error = await rejection(store.applyApproval({ approvalId: request.approvalId, appliedAt: "2031-02-03T06:00:00Z" }));
      expect(error.message).toContain("applyApproval");
      expect((await store.getApproval(request.approvalId))?.status).toBe("approved");
    });

    it("8 connections deciding one request at once: one decision wins, the others are refused with it", async () => {
      const schema = freshSchema("arkah_pgt");
      schemas.push(schema);
      const workers = await Promise.all(
        Array.from({ length: 8 }, () => PostgresGuardrailStore.open({ connectionString: url }, { schema })),
      );
      stores.push(...workers);
      const request = approvalRequest(digest({ turn: "race" }), "doc-race");
      // Every worker submits the request too: one insert, one requested event.
      await Promise.all(workers.map((store) => store.requestApproval(request)));
      const results = await Promise.all(
        workers.map((store, index) =>
          store.decideApproval({
            approvalId: request.approvalId,
            decision: index % 2 === 0 ? { decision: "approve" } : { decision: "reject", message: `no ${String(index)}` },
            operatorRef: `reviewer-${String(index)}`,
            decidedAt: "2031-02-03T05:00:00Z",
          }),
        ),
      );
      const winners = results.flatMap((result) => (result.decided ? [result.record] : []));
      expect(winners).toHaveLength(1);
      expect(results.filter((result) => !result.decided)).toEqual(
        Array.from({ length: 7 }, () => ({ decided: false, reason: "already_decided", record: winners[0] })),
      );
      expect(await workers[0]?.getApproval(request.approvalId)).toEqual(winners[0]);
      const actions = ((await workers[0]?.readAudit()) ?? []).map((event) => event.action);
      expect(actions.filter((action) => action === "requested")).toHaveLength(1);
      expect(actions.filter((action) => action === "decision_refused")).toHaveLength(7);
      expect(actions).toHaveLength(9);
    });

    it("a release whose audit event cannot be written changes nothing: the claim stays pending", async () => {
      const { store, schema } = await openStore();
      const identity = claimIdentity({ scopeId: "doc-release", turnId: "t1" });
      const claim = await store.claimMutation(identity);
      if (claim.status !== "acquired") throw new Error(claim.status);
      await admin.query(`ALTER TABLE "${schema}".audit ADD CONSTRAINT no_released CHECK (decision <> 'released')`);
      const error = await rejection(store.releaseMutation({ turnKey: identity.turnKey, token: claim.token }));
      expect(PostgresStoreError.isInstance(error)).toBe(true);
      expect(error.message).toContain("releaseMutation");
      expect(error.message).toContain("stays pending");
      expect(await store.claimMutation(identity)).toEqual({ status: "pending" });
      expect(await store.readAudit()).toEqual([]);

      await admin.query(`ALTER TABLE "${schema}".audit DROP CONSTRAINT no_released`);
      expect(await store.releaseMutation({ turnKey: identity.turnKey, token: claim.token })).toBe(true);
      expect((await store.claimMutation(identity)).status).toBe("acquired");
      expect((await store.readAudit()).map((event) => [event.decision, event.toolCallId])).toEqual([["released", "w1"]]);
    });

    it("8 connections releasing and claiming one turn at once: one release applies, the slot has one owner", async () => {
      const schema = freshSchema("arkah_pgt");
      schemas.push(schema);
      const workers = await Promise.all(
        Array.from({ length: 8 }, () => PostgresGuardrailStore.open({ connectionString: url }, { schema })),
      );
      stores.push(...workers);
      const identity = claimIdentity({ scopeId: "doc-release-race", turnId: "t1" });
      const first = await workers[0]?.claimMutation(identity);
      if (first?.status !== "acquired") throw new Error(String(first?.status));
      const answers = await Promise.all(
        workers.map((store, index) =>
          index % 2 === 0
            ? store.releaseMutation({ turnKey: identity.turnKey, token: first.token })
            : store.claimMutation(identity),
        ),
      );
      expect(answers.filter((answer) => answer === true)).toHaveLength(1);
      const claims = answers.filter((answer): answer is ClaimResult => typeof answer === "object");
      expect(claims.filter((answer) => answer.status === "acquired").length).toBeLessThanOrEqual(1);
      // Whoever holds the slot now, it is held once: the same call is pending, or acquired by this last claim.
      const after = await workers[1]?.claimMutation(identity);
      expect(["pending", "acquired"]).toContain(after?.status);
      expect((await workers[0]?.listUnresolved())?.filter((entry) => entry.turnKey === identity.turnKey)).toHaveLength(1);
    });

    it("four prunes at once all succeed, and together prune each settled turn once", async () => {
      const { store } = await openStore({ now: () => new Date("2031-01-01T00:00:00.000Z") });
      for (let turn = 0; turn < 30; turn++) {
        const identity = claimIdentity({ scopeId: `doc-prune-${String(turn % 3)}`, turnId: `t${String(turn)}` });
        const claim = await store.claimMutation(identity);
        if (claim.status !== "acquired") throw new Error(claim.status);
        await store.settleMutation({ turnKey: identity.turnKey, token: claim.token, outcome: "complete", result: RESULT });
      }
      const pruned = await Promise.all(Array.from({ length: 4 }, () => store.prune({ olderThan: "2031-01-02T00:00:00.000Z" })));
      expect(pruned.reduce((sum, result) => sum + result.turns, 0)).toBe(30);
      expect(await store.prune({ olderThan: "2031-01-02T00:00:00.000Z" })).toEqual({ turns: 0, effects: 0 });
    });

    it("uses the injected clock for every time it assigns", async () => {
      let time = Date.parse("2031-05-06T07:08:09.000Z");
      const { store } = await openStore({ now: () => new Date(time) });
      const identity = claimIdentity({ scopeId: "doc-clock", turnId: "t1" });
      const claim = await store.claimMutation(identity);
      if (claim.status !== "acquired") throw new Error(claim.status);
      expect((await store.listUnresolved())[0]?.claimedAt).toBe("2031-05-06T07:08:09.000Z");
      time += 60_000;
      await store.settleMutation({ turnKey: identity.turnKey, token: claim.token, outcome: "complete", result: RESULT });
      // Settled at 07:09:09: not older than 07:09:09, older than 07:09:09.001.
      expect(await store.prune({ olderThan: "2031-05-06T07:09:09.000Z" })).toEqual({ turns: 0, effects: 0 });
      expect(await store.prune({ olderThan: "2031-05-06T07:09:09.001Z" })).toEqual({ turns: 1, effects: 0 });
      expect(await store.claimMutation(identity)).toEqual({ status: "conflict" });
    });
  });
});
