/**
 * What the PostgreSQL store's failures say, against the real server: each method names itself, the
 * server and the state it left when the database fails under it (a pool that is gone, a statement
 * timeout, a terminated connection, a server error); each input is refused under its own name and
 * writes nothing; a corrupt row of every table is refused with what is wrong with it; a newer
 * schema, a migration that fails, and each option and connection-string check say what is wrong;
 * strings `text` cannot hold, and only those, are stored escaped; the bounded retry loops end with
 * their own error after exactly 16 attempts; a failed transaction rolls back before its connection
 * is reused.
 *
 * The database is made to fail by a pool ended under the store, a second connection holding a lock
 * past a `statement_timeout` (or until its backend is terminated), and triggers, constraints or
 * column types changed in the test's own schema.
 */
import { createHash } from "node:crypto";
import { inspect } from "node:util";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import {
  ConfigurationError,
  digest,
  StoreContractError,
  type AdmissionReceipt,
  type ApprovalSubmission,
  type GuardrailStore,
} from "arkah-agent-guardrails";
import {
  toolFingerprint,
  type VerdictKey,
} from "arkah-agent-guardrails/store";
import { POSTGRES_SCHEMA_VERSION, PostgresGuardrailStore, PostgresStoreError } from "../../src/adapters/postgres/index.js";
import { rejection } from "../support/fixtures.js";
import { adminPool, blockedBackend, claimIdentity, closedPort, describePostgres, dropSchema, freshSchema, remainingBackends, requirePostgres } from "../support/postgres.js";

requirePostgres();

const AT = "2031-02-03T04:05:06.789Z";
const D = digest("x");
const RESULT = { content: '{"title":"Field notes"}', status: "success" as const };
const RENAME = toolFingerprint({ name: "rename_document" });
const untyped = (value: unknown): never => value as never;

/** A signed 64-bit advisory lock key from a name, computed here independently of the adapter. */
const lockKey = (name: string) => createHash("sha256").update(name).digest().readBigInt64BE(0).toString();

/** Everything a logger could print about an error, cause chain included. */
const printed = (error: unknown) => `${inspect(error, { depth: 8, showHidden: true })} ${JSON.stringify(error)}`;

/** The rejection of `promise` as an Error (fails the test if it resolves or rejects with a non-Error). */
async function failure(promise: Promise<unknown>): Promise<Error> {
  const error = await rejection(promise);
  expect(error).toBeInstanceOf(Error);
  return error as Error;
}

/** The PostgresStoreError an operation rejected with (fails the test if it is anything else). */
function storeError(error: unknown): PostgresStoreError {
  if (!PostgresStoreError.isInstance(error)) throw new Error(`expected a PostgresStoreError, got ${String(error)}`);
  return error;
}

function receipt(turnKeyValue: string, scopeId = "doc-1", extra: Partial<AdmissionReceipt> = {}): AdmissionReceipt {
  return { turnKey: turnKeyValue, scopeId, turnId: "turn-1", policyVersion: "v1", moderationDigest: D, allowed: true, decidedAt: AT, ...extra };
}

function approvalRequest(turnKeyValue: string, overrides: Partial<ApprovalSubmission> = {}): ApprovalSubmission {
  return {
    approvalId: digest({ approval: turnKeyValue }),
    turnKey: turnKeyValue,
    scopeId: "doc-1",
    toolCallId: "w1",
    toolName: "rename_document",
    toolFingerprint: RENAME,
    argsDigest: D,
    args: { title: "x" },
    guardrails: ["approval"],
    reason: "Rename?",
    requestedAt: AT,
    ...overrides,
  };
}

const KEY = digest("turn key");
const IDENTITY = claimIdentity({ scopeId: "doc-1", turnId: "turn-1" });
const VKEY: VerdictKey = { turnKey: KEY, toolCallId: "w1", toolName: "rename_document", toolFingerprint: RENAME, guardrail: "pii", argsDigest: D };

/** The state each operation's failure must name (FAILURE_STATE), or undefined where it names none. */
const STATE = {
  putReceiptIfAbsent: "the admission receipt was stored or not (one statement at a time); if it was, the retried turn finds it",
  recordSuccessfulRead:
    "the read evidence, with its audit event if any, was recorded or not (one statement); without it the turn must read again before it may claim",
  recordVerdict: "the verdict was recorded or not (one statement at a time); if it was not, the next call is checked again",
  appendAudit: "the audit event was appended or not (one statement); check readAudit",
  claimMutation:
    "the claim was not acquired: it is absent, or pending (closed) if the database committed it before the failure; " +
    "a pending claim never runs until an operator reconciles it",
  settleMutation:
    "the settlement may not have been recorded: the claim stays pending (closed) unless the database committed it, " +
    "and it never runs again until an operator reconciles it",
  releaseMutation:
    "the release and its audit event were applied together or not at all: the claim stays pending (closed) unless the release committed",
  reconcileMutation: "the reconciliation and its audit event were applied together or not at all; check listUnresolved",
  requestApproval: "the request and its audit event were stored together or not at all; check getApproval",
  decideApproval: "the decision and its audit event were applied together or not at all; check getApproval",
  applyApproval: "the change to applied and its audit event were made together or not at all; check getApproval",
  expireApprovals: "the expiry was applied whole, with its audit events, or not at all",
  advanceAuditCursor: "the cursor moved or did not (one statement); check getAuditCursor",
  prune: "the prune was applied whole or not at all",
} as const;

/** One call of each method with valid input, and the state its failure must name. */
const CALLS: [string, (store: GuardrailStore) => Promise<unknown>, string | undefined][] = [
  ["getReceipt", (s) => s.getReceipt(KEY), undefined],
  ["putReceiptIfAbsent", (s) => s.putReceiptIfAbsent(receipt(KEY)), STATE.putReceiptIfAbsent],
  ["recordSuccessfulRead", (s) => s.recordSuccessfulRead({ turnKey: KEY, evidenceDigest: D }), STATE.recordSuccessfulRead],
  ["hasSuccessfulRead", (s) => s.hasSuccessfulRead({ turnKey: KEY, evidenceDigest: D }), undefined],
  ["claimMutation", (s) => s.claimMutation(IDENTITY), STATE.claimMutation],
  ["settleMutation", (s) => s.settleMutation({ turnKey: KEY, token: "t", outcome: "complete", result: RESULT }), STATE.settleMutation],
  ["releaseMutation", (s) => s.releaseMutation({ turnKey: KEY, token: "t" }), STATE.releaseMutation],
  ["recordVerdict", (s) => s.recordVerdict({ ...VKEY, verdict: { action: "allow", outcome: "complete", detections: [] }, recordedAt: AT }), STATE.recordVerdict],
  ["getVerdict", (s) => s.getVerdict(VKEY), undefined],
  ["requestApproval", (s) => s.requestApproval(approvalRequest(KEY)), STATE.requestApproval],
  ["getApproval", (s) => s.getApproval(D), undefined],
  ["decideApproval", (s) => s.decideApproval({ approvalId: D, decision: { decision: "approve" }, decidedAt: AT }), STATE.decideApproval],
  ["applyApproval", (s) => s.applyApproval({ approvalId: D, appliedAt: AT }), STATE.applyApproval],
  ["listApprovals", (s) => s.listApprovals({}), undefined],
  ["expireApprovals", (s) => s.expireApprovals({ olderThan: AT }), STATE.expireApprovals],
  ["appendAudit", (s) => s.appendAudit({ at: AT, decision: "executed", turnKey: KEY, scopeId: "doc-1" }), STATE.appendAudit],
  ["readAudit", (s) => s.readAudit({}), undefined],
  ["getAuditCursor", (s) => s.getAuditCursor("default"), undefined],
  ["advanceAuditCursor", (s) => s.advanceAuditCursor({ sink: "default", seq: 3 }), STATE.advanceAuditCursor],
  ["listUnresolved", (s) => s.listUnresolved(), undefined],
  ["reconcileMutation", (s) => s.reconcileMutation({ turnKey: KEY, resolution: "no-effect", operatorRef: "INC-9" }), STATE.reconcileMutation],
  ["prune", (s) => s.prune({ olderThan: AT }), STATE.prune],
];

describePostgres("PostgresGuardrailStore: what its failures say", (url) => {
  const target = new URL(url);
  const PASSWORD = decodeURIComponent(target.password);
  /** How the store names the server in its messages: host:port/database (user "u"). */
  const WHERE = `${target.hostname}:${target.port === "" ? "5432" : target.port}${target.pathname} (user "${decodeURIComponent(target.username)}")`;

  let admin: pg.Pool;
  const schemas: string[] = [];
  const stores: PostgresGuardrailStore[] = [];
  const pools: pg.Pool[] = [];

  /** A pool of the test's own (ended after the file). */
  function pool(config: pg.PoolConfig = {}): pg.Pool {
    const created = new pg.Pool({ connectionString: url, max: 2, ...config });
    created.on("error", () => undefined);
    pools.push(created);
    return created;
  }

  function schemaName(prefix = "arkah_pge"): string {
    const schema = freshSchema(prefix);
    schemas.push(schema);
    return schema;
  }

  /** A store on a schema (fresh by default), on a pool of its own unless one is given. */
  async function openStore(options: { schema?: string; pool?: pg.Pool } = {}) {
    const schema = options.schema ?? schemaName();
    const store = await PostgresGuardrailStore.open({ pool: options.pool ?? pool() }, { schema });
    stores.push(store);
    return { store, schema, s: `"${schema}"` };
  }

  /** A claim that was acquired (and settled complete when `settled`). */
  async function claimed(store: PostgresGuardrailStore, scopeId: string, settled = false) {
    const identity = claimIdentity({ scopeId, turnId: "t1" });
    const claim = await store.claimMutation(identity);
    if (claim.status !== "acquired") throw new Error(claim.status);
    if (settled) await store.settleMutation({ turnKey: identity.turnKey, token: claim.token, outcome: "complete", result: RESULT });
    return { identity, token: claim.token };
  }

  /** Row counts of every table of the store, to show nothing was written. */
  async function counts(s: string) {
    const tables = ["receipts", "read_evidence", "scopes", "claims", "verdicts", "approvals", "audit", "audit_cursors"];
    const { rows } = await admin.query<Record<string, string>>(
      `SELECT ${tables.map((table) => `(SELECT count(*) FROM ${s}.${table}) AS ${table}`).join(", ")}`,
    );
    return rows[0];
  }

  /** Another connection holding `key`'s transaction-scoped advisory lock until `release`. */
  async function holdAdvisory(name: string) {
    const client = await admin.connect();
    await client.query("BEGIN");
    await client.query("SELECT pg_advisory_xact_lock($1::bigint)", [lockKey(name)]);
    return async () => {
      await client.query("ROLLBACK");
      client.release();
    };
  }

  beforeAll(() => {
    admin = adminPool();
  });

  afterAll(async () => {
    for (const store of stores) await store.close();
    for (const each of pools) if (!each.ending) await each.end();
    for (const schema of schemas) await dropSchema(admin, schema);
    await admin.end();
  });

  // -------------------------------------------------------------------------------------------
  describe("a database failure names the method, the server and what it left", () => {
    let ended: PostgresGuardrailStore;
    let closed: PostgresGuardrailStore;

    beforeAll(async () => {
      const gone = pool();
      ended = (await openStore({ pool: gone })).store;
      await gone.end();
      closed = (await openStore()).store;
      await closed.close();
    });

    it.each(CALLS)("%s under an ended pool: a PostgresStoreError naming it, the server, the driver's reason and the state", async (operation, call, state) => {
      const error = await failure(call(ended));
      const failed = storeError(error);
      expect(failed.operation).toBe(operation);
      // The driver's error has no code: none is shown or set.
      expect(failed.code).toBeUndefined();
      expect(failed.cause).toBeInstanceOf(Error);
      expect((failed.cause as Error).message).toBe("Cannot use a pool after calling end on the pool");
      expect(failed.message).toBe(
        `PostgresGuardrailStore.${operation} failed against ${WHERE}: Cannot use a pool after calling end on the pool` +
          (state === undefined ? "" : `; ${state}`),
      );
    });

    it.each(CALLS)("%s on a closed store: a PostgresStoreError naming it, with no cause", async (operation, call) => {
      const error = await failure(call(closed));
      expect(storeError(error).operation).toBe(operation);
      expect(storeError(error).code).toBeUndefined();
      expect(error.cause).toBeUndefined();
      expect(error.message).toBe(`PostgresGuardrailStore.${operation}: the store is closed`);
    });

    it("advancing a cursor to 0 moves nothing and asks no database, even a closed store's", async () => {
      expect(await closed.advanceAuditCursor({ sink: "default", seq: 0 })).toBe(false);
      const { store, s } = await openStore();
      expect(await store.advanceAuditCursor({ sink: "default", seq: 0 })).toBe(false);
      expect((await admin.query(`SELECT * FROM ${s}.audit_cursors`)).rows).toEqual([]);
    });

    it.each([
      ["undefined", undefined, "undefined", undefined],
      ["null", null, "null", undefined],
      ["a string", "socket hang up", "socket hang up", undefined],
      // Not a SQLSTATE: the error has no code; the cause keeps the number, as it keeps errno.
      ["an object with a numeric code", { code: 42 }, "[object Object]", 42],
    ])("a driver that rejects with %s (not an Error): a PostgresStoreError with its text, no code, a plain Error as cause", async (_, rejected, text, causeCode) => {
      let armed = false;
      const odd = new Proxy(pool(), {
        get(target, key, receiver) {
          if (key !== "query" || !armed) return Reflect.get(target, key, receiver) as unknown;
          // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- the point: a driver that rejects with a non-Error
          return () => Promise.reject(rejected);
        },
      });
      const { store } = await openStore({ pool: odd });
      armed = true;
      const error = await failure(store.getReceipt(KEY));
      expect(storeError(error).code).toBeUndefined();
      expect(error.message).toBe(`PostgresGuardrailStore.getReceipt failed against ${WHERE}: ${text}`);
      expect(error.cause).toBeInstanceOf(Error);
      expect({ message: (error.cause as Error).message, code: (error.cause as { code?: unknown }).code }).toEqual({ message: text, code: causeCode });
    });

    it("find digs the PostgresStoreError out of an error that wraps it, as LangChain's MiddlewareError does", async () => {
      const error = storeError(await failure(ended.listUnresolved()));
      const wrapped = new Error("middleware failed", { cause: error });
      expect(PostgresStoreError.find(wrapped)).toBe(error);
      expect(PostgresStoreError.find(new Error("other", { cause: new Error("deeper") }))).toBeUndefined();
      expect(PostgresStoreError.isInstance(wrapped)).toBe(false);
    });

    it("a server error is reported with its SQLSTATE, and the password is redacted from the message and the cause wherever it appears", async () => {
      const { store, s } = await openStore();
      const text = `leaked ${PASSWORD} via postgres://alice:hunter2@db.example/x, password='quoted one' and PASSWORD = bare2&keep`;
      const quoted = (value: string) => `'${value.replaceAll("'", "''")}'`;
      await admin.query(`CREATE FUNCTION ${s}.refuse() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN RAISE EXCEPTION USING MESSAGE = ${quoted(text)}, ERRCODE = 'P0001',
          DETAIL = ${quoted(`detail ${PASSWORD}`)}, HINT = ${quoted(`hint ${PASSWORD}`)}; END $fn$`);
      await admin.query(`CREATE TRIGGER refuse BEFORE INSERT ON ${s}.receipts FOR EACH ROW EXECUTE FUNCTION ${s}.refuse()`);
      const error = await failure(store.putReceiptIfAbsent(receipt(KEY)));
      expect(PostgresStoreError.isInstance(error)).toBe(true);
      expect(storeError(error).code).toBe("P0001");
      const redacted = "leaked *** via postgres://alice:***@db.example/x, password=*** and PASSWORD = ***&keep";
      expect(error.message).toBe(
        `PostgresGuardrailStore.putReceiptIfAbsent failed against ${WHERE}: ${redacted} (P0001); ${STATE.putReceiptIfAbsent}`,
      );
      // The cause is a plain copy that still says what and where it failed, without the password.
      const cause = error.cause as Record<string, unknown>;
      expect(cause.constructor).toBe(Error);
      expect({ message: cause.message, code: cause.code, severity: cause.severity, detail: cause.detail, hint: cause.hint }).toEqual({
        message: redacted,
        code: "P0001",
        severity: "ERROR",
        detail: "detail ***",
        hint: "hint ***",
      });
      expect(cause.where).toContain("PL/pgSQL function");
      expect(cause.stack).toContain(redacted);
      expect(printed(error)).not.toContain(PASSWORD);
      expect(await store.getReceipt(KEY)).toBeUndefined();
    });

    it.each(["complete", "unknown"] as const)(
      "a %s settlement the server refuses: its SQLSTATE and state, the claim stays pending and the scope open",
      async (outcome) => {
        const { store, s } = await openStore();
        const { identity, token } = await claimed(store, "doc-refused");
        await admin.query(`CREATE FUNCTION ${s}.refuse() RETURNS trigger LANGUAGE plpgsql AS $fn$
          BEGIN RAISE EXCEPTION 'settlement refused by trigger' USING ERRCODE = '23514'; END $fn$`);
        await admin.query(`CREATE TRIGGER refuse BEFORE UPDATE ON ${s}.claims FOR EACH ROW EXECUTE FUNCTION ${s}.refuse()`);
        const settlement =
          outcome === "complete"
            ? { turnKey: identity.turnKey, token, outcome, result: RESULT }
            : { turnKey: identity.turnKey, token, outcome };
        const error = await failure(store.settleMutation(settlement));
        expect(storeError(error).code).toBe("23514");
        expect(error.message).toBe(
          `PostgresGuardrailStore.settleMutation failed against ${WHERE}: settlement refused by trigger (23514); ${STATE.settleMutation}`,
        );
        expect(await store.claimMutation(identity)).toEqual({ status: "pending" });
        expect((await store.claimMutation(claimIdentity({ scopeId: "doc-refused", turnId: "t2" }))).status).toBe("acquired");
        expect(await store.readAudit()).toEqual([]);
      },
    );

    it("a connection terminated under an advance: 57P01, its state, and the cursor did not move", async () => {
      const schema = schemaName();
      const application = `${schema}_store`;
      const { store, s } = await openStore({ schema, pool: pool({ application_name: application }) });
      expect(await store.advanceAuditCursor({ sink: "default", seq: 1 })).toBe(true);
      const holder = await admin.connect();
      let error: Error;
      try {
        await holder.query("BEGIN");
        await holder.query(`SELECT 1 FROM ${s}.audit_cursors WHERE sink = 'default' FOR UPDATE`);
        const advancing = failure(store.advanceAuditCursor({ sink: "default", seq: 5 }));
        const pid = await blockedBackend(admin, application);
        await admin.query("SELECT pg_terminate_backend($1)", [pid]);
        error = await advancing;
      } finally {
        await holder.query("ROLLBACK");
        holder.release();
      }
      expect(PostgresStoreError.isInstance(error)).toBe(true);
      expect(storeError(error).code).toBe("57P01");
      expect(error.message).toMatch(
        new RegExp(`^PostgresGuardrailStore\\.advanceAuditCursor failed against .*: terminating connection due to administrator command \\(57P01\\); `),
      );
      expect(error.message.endsWith(`; ${STATE.advanceAuditCursor}`)).toBe(true);
      expect(await store.getAuditCursor("default")).toBe(1);
      expect(await store.advanceAuditCursor({ sink: "default", seq: 5 })).toBe(true);
    });
  });

  // -------------------------------------------------------------------------------------------
  describe("a statement timeout (57014) behind each lock the store takes by name", () => {
    const TIMEOUT_MS = 1_000;

    /** A store on a migrated schema whose pool cancels any statement after TIMEOUT_MS. */
    async function timedStore() {
      const { schema, s } = await openStore();
      const { store } = await openStore({ schema, pool: pool({ statement_timeout: TIMEOUT_MS }) });
      return { store, schema, s };
    }

    function expectTimedOut(error: Error, operation: string, state: string | undefined): void {
      expect(PostgresStoreError.isInstance(error)).toBe(true);
      expect(storeError(error).operation).toBe(operation);
      expect(storeError(error).code).toBe("57014");
      expect(error.message).toBe(
        `PostgresGuardrailStore.${operation} failed against ${WHERE}: canceling statement due to statement timeout (57014)` +
          (state === undefined ? "" : `; ${state}`),
      );
    }

    it("prune waits on its schema's prune lock", async () => {
      const { store, schema } = await timedStore();
      await claimed(store, "doc-prune", true);
      const release = await holdAdvisory(`arkah-agent-guardrails:prune:${schema}`);
      try {
        expectTimedOut(await failure(store.prune({ olderThan: "2099-01-01T00:00:00Z" })), "prune", STATE.prune);
      } finally {
        await release();
      }
      expect(await store.prune({ olderThan: "2099-01-01T00:00:00Z" })).toEqual({ turns: 1, effects: 0 });
    });

    it("expireApprovals waits on its schema's expiry lock; the request stays pending", async () => {
      const { store, schema } = await timedStore();
      const request = approvalRequest(KEY);
      await store.requestApproval(request);
      const release = await holdAdvisory(`arkah-agent-guardrails:expire-approvals:${schema}`);
      try {
        expectTimedOut(await failure(store.expireApprovals({ olderThan: "2099-01-01T00:00:00Z" })), "expireApprovals", STATE.expireApprovals);
      } finally {
        await release();
      }
      expect((await store.getApproval(request.approvalId))?.status).toBe("pending");
      expect(await store.expireApprovals({ olderThan: "2099-01-01T00:00:00Z" })).toEqual({ expired: 1 });
    });

    it("appendAudit waits on its schema's audit lock; nothing is appended", async () => {
      const { store, schema } = await timedStore();
      const release = await holdAdvisory(`arkah-agent-guardrails:audit:${schema}`);
      const event = { at: AT, decision: "executed" as const, turnKey: KEY, scopeId: "doc-1" };
      try {
        expectTimedOut(await failure(store.appendAudit(event)), "appendAudit", STATE.appendAudit);
      } finally {
        await release();
      }
      expect(await store.readAudit()).toEqual([]);
      await store.appendAudit(event);
      expect(await store.readAudit()).toHaveLength(1);
    });

    it("open waits on its schema's migration lock: a migration failure naming the schema, with 57014 in a sanitized cause; the pool is left usable", async () => {
      const schema = schemaName();
      const timed = pool({ statement_timeout: TIMEOUT_MS, max: 1 });
      const release = await holdAdvisory(`arkah-agent-guardrails:migrate:${schema}`);
      let error: Error;
      try {
        error = await failure(PostgresGuardrailStore.open({ pool: timed }, { schema }));
      } finally {
        await release();
      }
      expect(ConfigurationError.isInstance(error)).toBe(false);
      expect(error.message).toBe(
        `PostgresGuardrailStore: could not migrate schema "${schema}" at ${WHERE}: canceling statement due to statement timeout`,
      );
      expect((error.cause as { code?: unknown }).code).toBe("57014");
      expect((error.cause as { severity?: unknown }).severity).toBe("ERROR");
      // Rolled back and released: the one connection serves the next open.
      expect((await timed.query<{ one: number }>("SELECT 1 AS one")).rows).toEqual([{ one: 1 }]);
      stores.push(await PostgresGuardrailStore.open({ pool: timed }, { schema }));
    });
  });

  // -------------------------------------------------------------------------------------------
  describe("invalid input is refused under its own name and writes nothing", () => {
    let store: PostgresGuardrailStore;
    let s: string;

    beforeAll(async () => {
      ({ store, s } = await openStore());
    });

    const LABELS: [string, (store: GuardrailStore) => Promise<unknown>][] = [
      ["turn key", (t) => t.getReceipt("nope")],
      ["admission receipt", (t) => t.putReceiptIfAbsent(untyped({}))],
      ["verdict record", (t) => t.recordVerdict(untyped({}))],
      ["verdict key", (t) => t.getVerdict(untyped({}))],
      ["approval request", (t) => t.requestApproval(untyped({}))],
      ["approval id", (t) => t.getApproval("nope")],
      ["approval decision", (t) => t.decideApproval(untyped({}))],
      ["approval application", (t) => t.applyApproval(untyped({}))],
      ["approval query", (t) => t.listApprovals(untyped({ limit: -1 }))],
      ["approval expiry", (t) => t.expireApprovals(untyped({}))],
      ["audit query", (t) => t.readAudit(untyped({ limit: -1 }))],
      ["audit sink name", (t) => t.getAuditCursor(untyped(5))],
      ["audit cursor advance", (t) => t.advanceAuditCursor(untyped({}))],
      ["reconciliation", (t) => t.reconcileMutation(untyped({}))],
      ["prune options", (t) => t.prune(untyped({}))],
    ];

    it.each(LABELS)("an invalid %s is a StoreContractError that names it", async (label, call) => {
      const error = await failure(call(store));
      expect(StoreContractError.isInstance(error)).toBe(true);
      expect(error.message).toMatch(new RegExp(`^invalid ${label}: `));
      expect(await counts(s)).toEqual({
        receipts: "0", read_evidence: "0", scopes: "0", claims: "0", verdicts: "0", approvals: "0", audit: "0", audit_cursors: "0",
      });
    });
  });

  // -------------------------------------------------------------------------------------------
  describe("a corrupt row of every table fails closed, saying what is wrong", () => {
    async function refused(promise: Promise<unknown>, message: string | RegExp): Promise<void> {
      const error = await failure(promise);
      expect(StoreContractError.isInstance(error), error.message).toBe(true);
      if (typeof message === "string") expect(error.message).toBe(message);
      else expect(error.message).toMatch(message);
    }

    const BROKEN = "E'\\x01{oops'";

    it.each([
      ["scope_id", "receipt scope id"],
      ["turn_id", "receipt turn id"],
      ["policy_version", "receipt policy version"],
      ["principal", "receipt principal"],
    ])("a receipt whose %s is an escaped string that does not decode", async (column, what) => {
      const { store, s } = await openStore();
      await store.putReceiptIfAbsent(receipt(KEY, "doc-1", { principal: "user-7" }));
      await admin.query(`UPDATE ${s}.receipts SET ${column} = ${BROKEN}`);
      await refused(store.getReceipt(KEY), `corrupt ${what}: an escaped string that does not decode`);
    });

    it("an escaped string whose JSON is not a string does not decode either; one that is decodes", async () => {
      const { store, s } = await openStore();
      await store.putReceiptIfAbsent(receipt(KEY));
      await admin.query(`UPDATE ${s}.receipts SET scope_id = E'\\x015'`);
      await refused(store.getReceipt(KEY), "corrupt receipt scope id: an escaped string that does not decode");
      await admin.query(`UPDATE ${s}.receipts SET scope_id = E'\\x01"doc-9"'`);
      expect((await store.getReceipt(KEY))?.scopeId).toBe("doc-9");
    });

    it("a receipt time that is not a timestamp is an invalid stored admission receipt", async () => {
      const { store, s } = await openStore();
      await store.putReceiptIfAbsent(receipt(KEY));
      await admin.query(`UPDATE ${s}.receipts SET decided_at = 'later'`);
      await refused(store.getReceipt(KEY), /^invalid stored admission receipt: /);
      await refused(store.putReceiptIfAbsent(receipt(KEY)), /^invalid stored admission receipt: /);
    });

    it("a text column of another type is refused as not text, naming its type", async () => {
      const { store, schema, s } = await openStore();
      await store.putReceiptIfAbsent(receipt(KEY));
      await admin.query(`ALTER TABLE ${s}.receipts ALTER COLUMN turn_id TYPE integer USING 7`);
      // A fresh pool: the first one's prepared statements were planned for the old column type.
      const { store: fresh } = await openStore({ schema });
      await refused(fresh.getReceipt(KEY), "corrupt receipt turn id: expected text, got number");
    });

    it.each([
      ["a mutation key that is not a digest", "mutation_key = 'x'", /^corrupt claim row: /],
      ["an unknown result status", "result_status = 'maybe'", /^invalid stored mutation result: /],
      ["a complete claim without its result", "result_content = NULL", /^invalid stored mutation result: /],
      ["a result that does not decode", `result_content = ${BROKEN}`, "corrupt claim result: an escaped string that does not decode"],
    ])("a claim with %s is refused when the turn claims again", async (_label, set, message) => {
      const { store, s } = await openStore();
      const { identity } = await claimed(store, "doc-claim", true);
      await admin.query(`UPDATE ${s}.claims SET ${set}`);
      await refused(store.claimMutation(identity), message);
    });

    it("a claim in a state the store does not know is refused by the claim path and by reconciliation", async () => {
      const { store, s } = await openStore();
      const { identity } = await claimed(store, "doc-state");
      await admin.query(`ALTER TABLE ${s}.claims DROP CONSTRAINT claims_state_check`);
      await admin.query(`UPDATE ${s}.claims SET state = 'weird'`);
      await refused(store.claimMutation(identity), /^corrupt claim row: /);
      await refused(store.reconcileMutation({ turnKey: identity.turnKey, resolution: "no-effect", operatorRef: "op" }), /^corrupt claim state: /);
      expect(await store.readAudit()).toEqual([]);
    });

    it.each([
      ["tool_name", "claim tool name"],
      ["tool_call_id", "claim tool call id"],
    ])("a completed claim whose %s does not decode is refused when another call conflicts with it", async (column, what) => {
      const { store, s } = await openStore();
      const { identity } = await claimed(store, "doc-conflict", true);
      await admin.query(`UPDATE ${s}.claims SET ${column} = ${BROKEN}`);
      await refused(store.claimMutation({ ...identity, mutationKey: digest("another call") }), `corrupt ${what}: an escaped string that does not decode`);
    });

    it.each([
      ["scope_id", "corrupt claim scope id: an escaped string that does not decode"],
      ["tool_call_id", "corrupt claim tool call id: an escaped string that does not decode"],
      ["tool_name", "corrupt claim tool name: an escaped string that does not decode"],
      ["claimed_at", /^invalid unresolved mutation: /],
    ] as const)("an unresolved claim whose %s is corrupt is refused by listUnresolved", async (column, message) => {
      const { store, s } = await openStore();
      await claimed(store, "doc-unresolved");
      await admin.query(`UPDATE ${s}.claims SET ${column} = ${column === "claimed_at" ? "'yesterday'" : BROKEN}`);
      await refused(store.listUnresolved(), message);
    });

    it("a scope row with a negative unknown count is refused by a claim decided under its lock, which writes nothing", async () => {
      const { store, s } = await openStore();
      await claimed(store, "doc-scope");
      await admin.query(`ALTER TABLE ${s}.scopes DROP CONSTRAINT scopes_unknown_count_check`);
      await admin.query(`UPDATE ${s}.scopes SET unknown_count = -1`);
      const other = claimIdentity({ scopeId: "doc-scope", turnId: "t2" });
      await refused(store.claimMutation(other), /^corrupt scope row: /);
      expect((await admin.query(`SELECT 1 FROM ${s}.claims WHERE turn_key = $1`, [other.turnKey])).rowCount).toBe(0);
    });

    it.each(["turnKey", "toolCallId", "toolName", "toolFingerprint", "guardrail", "argsDigest"] as const)(
      "a verdict whose stored %s is not the key it is filed under is refused",
      async (field) => {
        const { store, s } = await openStore();
        const record = { ...VKEY, verdict: { action: "deny" as const, outcome: "complete" as const, detections: [] }, recordedAt: AT };
        await store.recordVerdict(record);
        const other = field === "toolCallId" || field === "toolName" || field === "guardrail" ? "other" : digest("other");
        await admin.query(`UPDATE ${s}.verdicts SET record = (record::jsonb || jsonb_build_object($1::text, $2::text))::text`, [field, other]);
        await refused(store.getVerdict(VKEY), "corrupt verdict record: stored under another key");
        await refused(store.recordVerdict(record), "corrupt verdict record: stored under another key");
      },
    );

    it("a verdict that is not JSON, or not a verdict record, is refused as such", async () => {
      const { store, s } = await openStore();
      await store.recordVerdict({ ...VKEY, verdict: { action: "allow", outcome: "complete", detections: [] }, recordedAt: AT });
      await admin.query(`UPDATE ${s}.verdicts SET record = '{oops'`);
      await refused(store.getVerdict(VKEY), "corrupt verdict record: not JSON");
      await admin.query(`UPDATE ${s}.verdicts SET record = '{"verdict":1}'`);
      await refused(store.getVerdict(VKEY), /^invalid stored verdict record: /);
    });

    it("an approval request filed under another turn is refused, naming the request", async () => {
      const { store, s } = await openStore();
      const request = approvalRequest(KEY);
      await store.requestApproval(request);
      await admin.query(`UPDATE ${s}.approvals SET turn_key = $1`, [digest("another turn")]);
      await refused(store.getApproval(request.approvalId), `corrupt approval request ${request.approvalId}: the record does not match its row`);
    });

    it("an approval request that is not JSON, or not an approval record, is refused as such", async () => {
      const { store, s } = await openStore();
      const request = approvalRequest(KEY);
      await store.requestApproval(request);
      await admin.query(`UPDATE ${s}.approvals SET record = '{oops'`);
      await refused(store.getApproval(request.approvalId), "corrupt approval request: not JSON");
      await admin.query(`UPDATE ${s}.approvals SET record = '{"status":"pending"}'`);
      await refused(store.listApprovals(), /^invalid stored approval request: /);
    });

    it.each([
      ["[1]", "corrupt audit event: not an object"],
      ["null", "corrupt audit event: not an object"],
      ["5", "corrupt audit event: not an object"],
      ["{oops", "corrupt audit event: not JSON"],
      ['{"at":"never","decision":"executed"}', /^invalid stored audit event: /],
    ] as const)("an audit event stored as %s is refused", async (json, message) => {
      const { store, s } = await openStore();
      await store.appendAudit({ at: AT, decision: "executed", turnKey: KEY, scopeId: "doc-1" });
      await admin.query(`UPDATE ${s}.audit SET event = $1`, [json]);
      await refused(store.readAudit(), message);
      await refused(store.readAudit({ scopeId: "doc-1" }), message);
      await refused(store.readAudit({ turnKey: KEY }), message);
    });

    it.each([
      ["verdicts", "record", (store: PostgresGuardrailStore) => store.getVerdict(VKEY), "corrupt verdict record: expected JSON text"],
      ["approvals", "record", (store: PostgresGuardrailStore) => store.listApprovals(), "corrupt approval request: expected JSON text"],
      ["audit", "event", (store: PostgresGuardrailStore) => store.readAudit(), "corrupt audit event: expected JSON text"],
    ] as const)("a %s document column turned into jsonb is refused as not JSON text", async (table, column, read, message) => {
      const { store, schema, s } = await openStore();
      await store.recordVerdict({ ...VKEY, verdict: { action: "allow", outcome: "complete", detections: [] }, recordedAt: AT });
      await store.requestApproval(approvalRequest(KEY));
      await admin.query(`ALTER TABLE ${s}.${table} ALTER COLUMN ${column} TYPE jsonb USING ${column}::jsonb`);
      const { store: fresh } = await openStore({ schema });
      await refused(read(fresh), message);
    });

    it("an audit cursor below 0 is an invalid stored audit cursor", async () => {
      const { store, s } = await openStore();
      await store.advanceAuditCursor({ sink: "default", seq: 2 });
      await admin.query(`ALTER TABLE ${s}.audit_cursors DROP CONSTRAINT audit_cursors_seq_check`);
      await admin.query(`UPDATE ${s}.audit_cursors SET seq = -1`);
      await refused(store.getAuditCursor("default"), /^invalid stored audit cursor: /);
    });
  });

  // -------------------------------------------------------------------------------------------
  describe("a failed transaction rolls back before its connection is reused", () => {
    it("a release of a claim whose row is corrupt is refused, and the claim stays pending on the same connection", async () => {
      const { store, s } = await openStore({ pool: pool({ max: 1 }) });
      const { identity, token } = await claimed(store, "doc-release");
      await admin.query(`UPDATE ${s}.claims SET args_digest = 'x'`);
      const error = await failure(store.releaseMutation({ turnKey: identity.turnKey, token }));
      expect(StoreContractError.isInstance(error)).toBe(true);
      expect(error.message).toMatch(/^invalid claim row: /);
      // One connection: had the delete not been rolled back, this claim would run in its transaction.
      const other = claimIdentity({ scopeId: "doc-release-other", turnId: "t2" });
      expect((await store.claimMutation(other)).status).toBe("acquired");
      // The corrupt claim itself answers nothing (fail closed), and is still there, pending.
      expect(StoreContractError.isInstance(await failure(store.claimMutation(identity)))).toBe(true);
      expect((await admin.query(`SELECT state FROM ${s}.claims WHERE turn_key = $1`, [identity.turnKey])).rows).toEqual([{ state: "pending" }]);
      expect(await store.readAudit()).toEqual([]);
    });

    it("a reconciliation of a claim whose row is corrupt is refused, and the claim stays unknown, its scope blocked", async () => {
      const { store, s } = await openStore({ pool: pool({ max: 1 }) });
      const { identity, token } = await claimed(store, "doc-reconcile");
      expect(await store.settleMutation({ turnKey: identity.turnKey, token, outcome: "unknown" })).toBe(true);
      await admin.query(`UPDATE ${s}.claims SET args_digest = 'x'`);
      const error = await failure(
        store.reconcileMutation({ turnKey: identity.turnKey, resolution: "completed", result: RESULT, operatorRef: "op" }),
      );
      expect(StoreContractError.isInstance(error)).toBe(true);
      expect(error.message).toMatch(/^invalid claim row: /);
      expect((await store.claimMutation(claimIdentity({ scopeId: "doc-reconcile", turnId: "t2" }))).status).toBe("scope_unresolved");
      expect((await admin.query(`SELECT state, result_content FROM ${s}.claims`)).rows).toEqual([{ state: "unknown", result_content: null }]);
      expect((await admin.query(`SELECT unknown_count FROM ${s}.scopes`)).rows).toEqual([{ unknown_count: 1 }]);
      expect(await store.readAudit()).toEqual([]);
    });
  });

  // -------------------------------------------------------------------------------------------
  describe("the bounded retry loops end with their own error after exactly 16 attempts", () => {
    /** Makes every insert into `table` a silent no-op, counted in the sequence `attempts`. */
    async function skipInserts(s: string, table: string): Promise<() => Promise<number>> {
      await admin.query(`CREATE SEQUENCE ${s}.attempts`);
      await admin.query(`CREATE FUNCTION ${s}.skip() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN PERFORM nextval('${s.replaceAll("'", "''")}.attempts'); RETURN NULL; END $fn$`);
      await admin.query(`CREATE TRIGGER skip BEFORE INSERT ON ${s}.${table} FOR EACH ROW EXECUTE FUNCTION ${s}.skip()`);
      return async () => Number((await admin.query<{ n: string }>(`SELECT last_value AS n FROM ${s}.attempts`)).rows[0]?.n);
    }

    function expectGaveUp(error: Error, operation: string, reason: string, state: string | undefined): void {
      expect(PostgresStoreError.isInstance(error)).toBe(true);
      expect(storeError(error).code).toBeUndefined();
      expect(error.message).toBe(`PostgresGuardrailStore.${operation} failed against ${WHERE}: ${reason}${state === undefined ? "" : `; ${state}`}`);
    }

    it("putReceiptIfAbsent", async () => {
      const { store, s } = await openStore();
      const attempts = await skipInserts(s, "receipts");
      const error = await failure(store.putReceiptIfAbsent(receipt(KEY)));
      expectGaveUp(error, "putReceiptIfAbsent", "the receipt was neither inserted nor found after 16 attempts", STATE.putReceiptIfAbsent);
      expect(await attempts()).toBe(16);
    });

    it("recordVerdict", async () => {
      const { store, s } = await openStore();
      const attempts = await skipInserts(s, "verdicts");
      const error = await failure(store.recordVerdict({ ...VKEY, verdict: { action: "allow", outcome: "complete", detections: [] }, recordedAt: AT }));
      expectGaveUp(error, "recordVerdict", "the verdict record was neither inserted nor found after 16 attempts", STATE.recordVerdict);
      expect(await attempts()).toBe(16);
    });

    it("requestApproval, which appends no event", async () => {
      const { store, s } = await openStore();
      const attempts = await skipInserts(s, "approvals");
      const error = await failure(store.requestApproval(approvalRequest(KEY)));
      expectGaveUp(error, "requestApproval", "the approval request was neither inserted nor found after 16 attempts", STATE.requestApproval);
      expect(await attempts()).toBe(16);
      expect(await store.readAudit()).toEqual([]);
    });

    it("claimMutation: the one-statement attempt, then 16 under the scope's lock", async () => {
      const { store, s } = await openStore();
      const attempts = await skipInserts(s, "claims");
      const error = await failure(store.claimMutation(IDENTITY));
      expectGaveUp(error, "claimMutation", "the claim did not settle on an answer after 16 attempts under concurrent changes", STATE.claimMutation);
      expect(await attempts()).toBe(17);
    });
  });

  // -------------------------------------------------------------------------------------------
  describe("a schema newer than the code, and a migration that fails", () => {
    it("a newer schema is a ConfigurationError saying so exactly; the pool the store created is ended, one passed in is not", async () => {
      const { schema, s } = await openStore();
      await admin.query(`INSERT INTO ${s}.schema_migrations (version, description, applied_at) VALUES (99, 'from the future', 'x')`);
      const message =
        `PostgresGuardrailStore: schema "${schema}" at ${WHERE} is at version 99, newer than this version of ` +
        `arkah-agent-guardrails supports (${String(POSTGRES_SCHEMA_VERSION)}): upgrade the package on this worker, or use another schema`;

      const application = `${schema}_owned`;
      const owned = new URL(url);
      owned.searchParams.set("application_name", application);
      const error = await failure(PostgresGuardrailStore.open({ connectionString: owned.toString() }, { schema }));
      expect(ConfigurationError.isInstance(error)).toBe(true);
      expect(error.message).toBe(message);
      expect(await remainingBackends(admin, application)).toBe(0);

      const passed = pool({ max: 1 });
      const again = await failure(PostgresGuardrailStore.open({ pool: passed }, { schema }));
      expect(again.message).toBe(message);
      expect(passed.ending).toBe(false);
      expect((await passed.query<{ one: number }>("SELECT 1 AS one")).rows).toEqual([{ one: 1 }]);
    });

    it("a migration statement that fails: a plain Error naming the schema and server, a sanitized cause, nothing migrated, the pool usable", async () => {
      const schema = schemaName();
      const s = `"${schema}"`;
      await admin.query(`CREATE SCHEMA ${s}`);
      await admin.query(`CREATE TABLE ${s}.schema_migrations (version integer PRIMARY KEY, description text NOT NULL, applied_at text NOT NULL)`);
      await admin.query(`CREATE FUNCTION ${s}.refuse() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN RAISE EXCEPTION 'no migrations here, %', '${PASSWORD}' USING DETAIL = 'the password is ${PASSWORD}', ERRCODE = '42501'; END $fn$`);
      await admin.query(`CREATE TRIGGER refuse BEFORE INSERT ON ${s}.schema_migrations FOR EACH ROW EXECUTE FUNCTION ${s}.refuse()`);
      const passed = pool({ max: 1 });
      const error = await failure(PostgresGuardrailStore.open({ pool: passed }, { schema }));
      expect(ConfigurationError.isInstance(error)).toBe(false);
      expect(error.message).toBe(`PostgresGuardrailStore: could not migrate schema "${schema}" at ${WHERE}: no migrations here, ***`);
      const cause = error.cause as Record<string, unknown>;
      expect(cause).toBeInstanceOf(Error);
      expect(cause.constructor).toBe(Error);
      expect({ message: cause.message, code: cause.code, severity: cause.severity, detail: cause.detail }).toEqual({
        message: "no migrations here, ***",
        code: "42501",
        severity: "ERROR",
        detail: "the password is ***",
      });
      expect(printed(error)).not.toContain(PASSWORD);
      // The whole migration rolled back.
      expect((await admin.query<{ t: string | null }>("SELECT to_regclass($1) AS t", [`${s}.receipts`])).rows).toEqual([{ t: null }]);
      expect((await passed.query<{ one: number }>("SELECT 1 AS one")).rows).toEqual([{ one: 1 }]);
    });
  });

  // -------------------------------------------------------------------------------------------
  describe("options and connection strings", () => {
    const CONNECTION = 'invalid PostgresGuardrailStore connection: pass { connectionString: "postgres://..." } or { pool: new pg.Pool(...) }: ';
    const OPTIONS = "invalid PostgresGuardrailStore options: ";

    async function refusedConfiguration(connection: unknown, options: unknown = {}): Promise<string> {
      const error = await failure(PostgresGuardrailStore.open(untyped(connection), untyped(options)));
      expect(ConfigurationError.isInstance(error), error.message).toBe(true);
      return error.message;
    }

    it.each([
      ["bad-name", "must be an identifier: a letter or _, then letters, digits or _, at most 63"],
      ["1abc", "must be an identifier: a letter or _, then letters, digits or _, at most 63"],
      ["a".repeat(64), "must be an identifier: a letter or _, then letters, digits or _, at most 63"],
      ["pg_guard", "names starting with pg_ are reserved by PostgreSQL"],
      ["PG_Guard", "names starting with pg_ are reserved by PostgreSQL"],
    ])("schema %j is refused: %s", async (schema, reason) => {
      const message = await refusedConfiguration({ connectionString: url }, { schema });
      expect(message.startsWith(OPTIONS)).toBe(true);
      expect(message).toContain(reason);
      expect(message).toContain("schema");
    });

    it("a missing or a wrong password is said in words, naming the fix, at open and in an operation", async () => {
      // pg falls back to PGPASSWORD and ~/.pgpass: neither may supply one here.
      vi.stubEnv("PGPASSWORD", undefined);
      vi.stubEnv("PGPASSFILE", "/nonexistent/arkah-no-pgpass");
      try {
        const none = new URL(url);
        none.password = "";
        const missing = await failure(PostgresGuardrailStore.open({ connectionString: none.href }, { schema: schemaName("arkah_nopw") }));
        expect(missing.message).toBe(
          `PostgresGuardrailStore: cannot connect to PostgreSQL at ${WHERE}: no password was given and the server asks for one: ` +
            "put it in the connection string (postgres://user:password@host:port/database), PGPASSWORD or ~/.pgpass",
        );

        const wrong = new URL(url);
        wrong.password = "not-the-Pa55word";
        const refused = await failure(PostgresGuardrailStore.open({ connectionString: wrong.href }, { schema: schemaName("arkah_badpw") }));
        expect(refused.message).toBe(
          `PostgresGuardrailStore: cannot connect to PostgreSQL at ${WHERE}: password authentication failed: the server refused ` +
            "the password; correct it in the connection string, PGPASSWORD or ~/.pgpass (28P01)",
        );
        expect(printed(refused)).not.toContain("Pa55word");

      } finally {
        vi.unstubAllEnvs();
      }
    });

    it("a schema name of 63 characters, the most PostgreSQL keeps, is accepted", async () => {
      const schema = schemaName("arkah_long").padEnd(63, "_");
      schemas.push(schema);
      const { store } = await openStore({ schema });
      expect(store.schema).toBe(schema);
      expect((await admin.query("SELECT 1 FROM pg_namespace WHERE nspname = $1", [schema])).rowCount).toBe(1);
    });

    it("a clock that is not a function is refused with what it must be", async () => {
      const message = await refusedConfiguration({ connectionString: url }, { now: "tomorrow" });
      expect(message.startsWith(OPTIONS)).toBe(true);
      expect(message).toContain("must be a function returning a Date");
    });

    it("an empty connection string is refused as empty", async () => {
      const message = await refusedConfiguration({ connectionString: "" });
      expect(message.startsWith(CONNECTION)).toBe(true);
      expect(message).toContain("must not be empty");
    });

    const poolLike = { connect() {}, query() {}, on() {}, options: {} };
    it.each([
      ["null", null],
      ["a string", "pool"],
      ["without connect", { ...poolLike, connect: undefined }],
      ["without query", { ...poolLike, query: undefined }],
      ["without on", { ...poolLike, on: undefined }],
      ["without options", { ...poolLike, options: undefined }],
      ["with null options", { ...poolLike, options: null }],
    ])("a pool %s is refused as not a pg.Pool", async (_label, value) => {
      const message = await refusedConfiguration({ pool: value });
      expect(message).toBe(`${CONNECTION}✖ must be a pg.Pool (with connect, query, on and options)\n  → at pool`);
    });

    it("a connection naming neither a string nor a pool, or both, is refused saying which key is wrong", async () => {
      expect(await refusedConfiguration({})).toBe(`${CONNECTION}✖ Invalid input: expected string, received undefined\n  → at connectionString`);
      const both = await refusedConfiguration({ connectionString: url, pool: pool() });
      expect(both).toBe(`${CONNECTION}✖ Unrecognized key: "connectionString"`);
    });

    it("a connection string echoed by the validation (as an unknown key) has its password redacted", async () => {
      const message = await refusedConfiguration({ connectionString: url, "postgres://u:leak-me@h/d": 1 });
      expect(message.startsWith(CONNECTION)).toBe(true);
      expect(message).toContain("postgres://u:***@h/d");
      expect(message).not.toContain("leak-me");
    });

    it("a string that is not a URL is refused, with its password redacted", async () => {
      const message = await refusedConfiguration({ connectionString: "host=localhost password=hunter2 dbname=x" });
      expect(message).toBe(
        'invalid PostgreSQL connection string "host=localhost password=*** dbname=x": not a URL; expected postgres://user:password@host:port/database',
      );
    });

    it("a URL of another protocol is refused naming the protocol, never the string", async () => {
      const message = await refusedConfiguration({ connectionString: "mysql://u:hunter2@localhost/db" });
      expect(message).toBe('invalid PostgreSQL connection string: protocol "mysql:"; expected postgres://user:password@host:port/database');
    });

    it("postgresql:// is accepted as well as postgres://", async () => {
      const schema = schemaName();
      const store = await PostgresGuardrailStore.open({ connectionString: url.replace(/^postgres:/, "postgresql:") }, { schema });
      stores.push(store);
      expect(await store.getAuditCursor("default")).toBe(0);
    });

    it.each([
      ["a socket directory", "/nonexistent-arkah-socket-dir"],
      ["a socket: URL", "socket:/nonexistent-arkah-socket-dir?db=guard"],
    ])("%s is accepted and connected to: the failure names the socket, not a configuration error", async (_label, connectionString) => {
      const parsed = new pg.Client({ connectionString });
      const error = await failure(PostgresGuardrailStore.open({ connectionString }));
      expect(ConfigurationError.isInstance(error)).toBe(false);
      expect(error.message).toBe(
        `PostgresGuardrailStore: cannot connect to PostgreSQL at /nonexistent-arkah-socket-dir:5432/${parsed.database ?? ""} (user "${parsed.user ?? ""}"): ` +
          "connect ENOENT /nonexistent-arkah-socket-dir/.s.PGSQL.5432",
      );
      expect((error.cause as { code?: unknown }).code).toBe("ENOENT");
    });

    it("an IPv6 host is shown in brackets", async () => {
      const port = await closedPort();
      const error = await failure(PostgresGuardrailStore.open({ connectionString: `postgres://u:hunter2@[::1]:${String(port)}/db` }));
      expect(error.message.startsWith(`PostgresGuardrailStore: cannot connect to PostgreSQL at [::1]:${String(port)}/db (user "u"): `)).toBe(true);
      expect(printed(error)).not.toContain("hunter2");
    });

    it("a host that does not resolve: the cause keeps the host name the lookup failed for", async () => {
      const error = await failure(PostgresGuardrailStore.open({ connectionString: "postgres://u:hunter2@no-such-host.invalid:5432/db" }));
      expect(error.message.startsWith('PostgresGuardrailStore: cannot connect to PostgreSQL at no-such-host.invalid:5432/db (user "u"): getaddrinfo ')).toBe(true);
      const cause = error.cause as Record<string, unknown>;
      expect(["ENOTFOUND", "EAI_AGAIN"]).toContain(cause.code);
      expect(cause).toMatchObject({ syscall: "getaddrinfo", hostname: "no-such-host.invalid" });
      expect(printed(error)).not.toContain("hunter2");
    });

    it("an unreachable server: the cause is a sanitized copy with the system error's fields", async () => {
      const port = await closedPort();
      const unreachable = pool({ host: "127.0.0.1", port, user: "u", database: "db", connectionString: undefined });
      const error = await failure(PostgresGuardrailStore.open({ pool: unreachable }));
      expect(error.message).toBe(
        `PostgresGuardrailStore: cannot connect to PostgreSQL at 127.0.0.1:${String(port)}/db (user "u"): connect ECONNREFUSED 127.0.0.1:${String(port)}`,
      );
      const cause = error.cause as Record<string, unknown>;
      expect(cause.constructor).toBe(Error);
      expect(cause).toMatchObject({ code: "ECONNREFUSED", syscall: "connect", address: "127.0.0.1", port });
      expect(typeof cause.errno).toBe("number");
      expect(Object.keys(cause).sort()).toEqual(["address", "code", "errno", "port", "syscall"]);
    });
  });

  // -------------------------------------------------------------------------------------------
  describe("defaults and the pool", () => {
    it("without a schema the store uses arkah_guardrails", async () => {
      const existed = (await admin.query("SELECT 1 FROM pg_namespace WHERE nspname = 'arkah_guardrails'")).rowCount === 1;
      const store = await PostgresGuardrailStore.open({ pool: pool() });
      try {
        expect(store.schema).toBe("arkah_guardrails");
        expect((await admin.query("SELECT 1 FROM pg_namespace WHERE nspname = 'arkah_guardrails'")).rowCount).toBe(1);
      } finally {
        await store.close();
        // Only a schema this test created is dropped: ARKAH_PG_URL may point at a real one.
        if (!existed) await dropSchema(admin, "arkah_guardrails");
      }
    });

    it("without a clock the store stamps claims with the system time", async () => {
      const { store } = await openStore();
      const before = Date.now();
      await claimed(store, "doc-clock");
      const after = Date.now();
      const claimedAt = Date.parse((await store.listUnresolved())[0]?.claimedAt ?? "");
      expect(claimedAt).toBeGreaterThanOrEqual(before);
      expect(claimedAt).toBeLessThanOrEqual(after);
    });

    it("two schemas on one connection keep their prepared statements apart", async () => {
      const shared = pool({ max: 1 });
      const { store: first } = await openStore({ pool: shared });
      const { store: second } = await openStore({ pool: shared });
      await first.putReceiptIfAbsent(receipt(KEY, "doc-first"));
      expect(await second.getReceipt(KEY)).toBeUndefined();
      await second.putReceiptIfAbsent(receipt(KEY, "doc-second"));
      expect((await first.getReceipt(KEY))?.scopeId).toBe("doc-first");
      expect((await second.getReceipt(KEY))?.scopeId).toBe("doc-second");
    });

    /** A store that creates its own pool, whose connections carry an application name to count them by. */
    async function openOwned() {
      const schema = schemaName();
      const application = `${schema}_owned`;
      const owned = new URL(url);
      owned.searchParams.set("application_name", application);
      return { store: await PostgresGuardrailStore.open({ connectionString: owned.toString() }, { schema }), application };
    }

    it("closing a store that created its pool ends that pool's connections; closing again is harmless", async () => {
      const { store, application } = await openOwned();
      expect(await store.getReceipt(KEY)).toBeUndefined();
      const { rows } = await admin.query<{ n: string }>("SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = $1", [application]);
      expect(rows).toEqual([{ n: "1" }]);
      await store.close();
      await store.close();
      expect(await remainingBackends(admin, application)).toBe(0);
    });

    it("a store that created its pool survives its idle connection being terminated, and serves the next call", async () => {
      const { store, application } = await openOwned();
      stores.push(store);
      expect(await store.getReceipt(KEY)).toBeUndefined();
      // Count the 'error' events pools emit (observing the real driver; it changes nothing): the
      // terminated idle client's error reaches the pool, which, without a listener, would throw it
      // out of the socket's handler and crash the process.
      const proto = pg.Pool.prototype as unknown as { emit: (this: object, event: string | symbol, ...args: unknown[]) => boolean };
      const original = proto.emit;
      let errors = 0;
      proto.emit = function (this: object, event: string | symbol, ...args: unknown[]) {
        if (event === "error") errors += 1;
        return original.call(this, event, ...args);
      };
      try {
        const { rows } = await admin.query<{ done: boolean }>(
          "SELECT pg_terminate_backend(pid) AS done FROM pg_stat_activity WHERE application_name = $1",
          [application],
        );
        expect(rows).toEqual([{ done: true }]);
        for (let poll = 0; poll < 400 && errors === 0; poll++) await new Promise((resolve) => setTimeout(resolve, 25));
        expect(errors).toBe(1);
      } finally {
        proto.emit = original;
      }
      // The pool dropped the dead client: the next call gets a fresh connection.
      expect(await store.putReceiptIfAbsent(receipt(KEY))).toEqual(receipt(KEY));
      expect((await store.getReceipt(KEY))?.turnKey).toBe(KEY);
    });
  });

  // -------------------------------------------------------------------------------------------
  describe("strings PostgreSQL text cannot hold are stored escaped, and only those", () => {
    const escaped = (value: string) => `\u0001${JSON.stringify(value)}`;
    const CASES: [string, string, boolean][] = [
      ["plain", "doc plain", false],
      ["the marker inside", "doc\u0001inside", false],
      ["a surrogate pair", "doc 🦜 pair", false],
      ["the marker first", "\u0001doc", true],
      ["a NUL", "doc\u0000nul", true],
      ["a lone high surrogate at the end", "doc\ud83e", true],
      ["a high surrogate before a non-surrogate", "doc\ud83ex", true],
      ["a lone low surrogate first", "\udc00doc", true],
      ["a low surrogate after a non-surrogate", "doc\udc00", true],
      ["a reversed pair", "doc\udc00\ud83e", true],
    ];

    it("in a receipt's scope id: stored as itself unless text cannot hold it, and read back exactly", async () => {
      const { store, s } = await openStore();
      for (const [index, [, scopeId]] of CASES.entries()) await store.putReceiptIfAbsent(receipt(digest({ index }), scopeId));
      const { rows } = await admin.query<{ turn_key: string; scope_id: string }>(`SELECT turn_key, scope_id FROM ${s}.receipts`);
      const stored = new Map(rows.map((row) => [row.turn_key, row.scope_id]));
      for (const [index, [label, scopeId, escapes]] of CASES.entries()) {
        expect(stored.get(digest({ index })), label).toBe(escapes ? escaped(scopeId) : scopeId);
        expect((await store.getReceipt(digest({ index })))?.scopeId, label).toBe(scopeId);
      }
    });

    it("in audit filters and cursor names: the escaped form is what is matched", async () => {
      const { store, s } = await openStore();
      const scopeId = "doc\u0000nul";
      await store.appendAudit({ at: AT, decision: "executed", turnKey: KEY, scopeId });
      await store.appendAudit({ at: AT, decision: "executed", turnKey: KEY, scopeId: "docnul" });
      expect((await admin.query(`SELECT scope_id FROM ${s}.audit ORDER BY seq`)).rows).toEqual([{ scope_id: escaped(scopeId) }, { scope_id: "docnul" }]);
      expect((await store.readAudit({ scopeId })).map((event) => event.scopeId)).toEqual([scopeId]);
      expect((await store.readAudit({ turnKey: KEY, scopeId })).map((event) => event.scopeId)).toEqual([scopeId]);
      expect(await store.advanceAuditCursor({ sink: "\ud800sink", seq: 2 })).toBe(true);
      expect((await admin.query(`SELECT sink FROM ${s}.audit_cursors`)).rows).toEqual([{ sink: escaped("\ud800sink") }]);
      expect(await store.getAuditCursor("\ud800sink")).toBe(2);
      expect(await store.getAuditCursor("\ufffdsink")).toBe(0);
    });
  });
});
