/**
 * What only the SQLite adapter has: opening (options, paths, pragmas, migrations), durability
 * across reopening, locking, corrupted rows, exact strings, and a differential run against the
 * in-memory reference store. The contract itself is checked by sqlite.conformance.test.ts.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import {
  ConfigurationError,
  digest,
  InMemoryGuardrailStore,
  mutationKey,
  StoreContractError,
  turnKey,
  type AdmissionReceipt,
  type ApprovalDecision,
  type AuditSinkEvent,
  type ApprovalSubmission,
  type AuditEvent,
  type GuardrailStore,
  type TurnRef,
} from "arkah-agent-guardrails";
import {
  toolFingerprint,
  type ApprovalQuery,
  type MutationIdentity,
  type MutationResult,
  type VerdictKey,
  type VerdictRecord,
} from "arkah-agent-guardrails/store";
import { effectIdentity } from "../../src/keys.js";
import { MIGRATIONS, SQLITE_SCHEMA_VERSION, SqliteGuardrailStore, SqliteStoreError } from "../../src/adapters/sqlite/index.js";
import { admit, guardedAgent, invokeTurn, outcomeOf, read, rename, turnInput, DocumentService, turnStartOf } from "../support/fixtures.js";

// ---------------------------------------------------------------------------------------------
// Helpers

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0).reverse()) cleanup();
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "arkah-sqlite-"));
  cleanups.push(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

function tempPath(): string {
  return join(tempDir(), "guardrails.sqlite");
}

function open(path: string, options: { now?: () => Date; busyTimeoutMs?: number } = {}): SqliteGuardrailStore {
  const store = SqliteGuardrailStore.open({ path, ...options });
  cleanups.push(() => {
    store.close();
  });
  return store;
}

/** A second, raw connection to the same file: what an operator's hand edit (or a bad disk) does. */
function raw(path: string): Database.Database {
  const db = new Database(path);
  cleanups.push(() => {
    db.close();
  });
  return db;
}

const TURN: TurnRef = { scopeId: "doc-1", turnId: "turn-1" };
const TURN_KEY = turnKey(TURN);
const RESULT: MutationResult = { content: '{"title":"Field notes"}', status: "success" };
const RENAME_FINGERPRINT = toolFingerprint({ name: "rename_document", description: "Rename the document." });

function identity(turn: TurnRef = TURN, callId = "w1", args: Record<string, unknown> = { title: "Field notes" }): MutationIdentity {
  const call = { id: callId, name: "rename_document", args };
  return {
    turnKey: turnKey(turn),
    scopeId: turn.scopeId,
    toolCallId: call.id,
    toolName: call.name,
    argsDigest: digest(args),
    mutationKey: mutationKey(turn, call),
    toolFingerprint: RENAME_FINGERPRINT,
  };
}

function receipt(overrides: Partial<AdmissionReceipt> = {}): AdmissionReceipt {
  return {
    turnKey: TURN_KEY,
    scopeId: TURN.scopeId,
    turnId: TURN.turnId,
    policyVersion: "v1",
    moderationDigest: digest({ segments: "user" }),
    allowed: true,
    decidedAt: "2031-02-03T04:05:06.789+01:00",
    ...overrides,
  };
}

const VERDICT_KEY: VerdictKey = {
  turnKey: TURN_KEY,
  toolCallId: "w1",
  toolName: "rename_document",
  toolFingerprint: RENAME_FINGERPRINT,
  guardrail: "pii",
  argsDigest: digest({ title: "x" }),
};

function verdict(key: VerdictKey = VERDICT_KEY): VerdictRecord {
  return {
    ...key,
    verdict: {
      action: "deny",
      outcome: "complete",
      detections: [{ rule: "email", detected: true, spans: [{ start: 0, end: 4 }], score: 0.5, note: null }],
      reason: "no emails",
      code: "pii_found",
      details: { fields: ["title"], nested: { ok: false } },
    },
    recordedAt: "2031-02-03T04:05:06.789Z",
  };
}

/** The approval request the middleware would submit for rename `callId` in `turn`. */
function approvalRequest(turn: TurnRef = TURN, callId = "w1", overrides: Partial<ApprovalSubmission> = {}): ApprovalSubmission {
  const args = { title: "Field notes" };
  const key = turnKey(turn);
  return {
    approvalId: digest({
      kind: "arkah.approval",
      v: 1,
      turnKey: key,
      toolName: "rename_document",
      toolFingerprint: RENAME_FINGERPRINT,
      toolCallId: callId,
      argsDigest: digest(args),
      execution: 0,
    }),
    turnKey: key,
    scopeId: turn.scopeId,
    toolCallId: callId,
    toolName: "rename_document",
    toolFingerprint: RENAME_FINGERPRINT,
    argsDigest: digest(args),
    args: { ...args, tags: ["a", 1, null] },
    guardrails: ["approval"],
    reason: "Rename the document?",
    requestedAt: "2031-02-03T04:05:06.789+01:00",
    ...overrides,
  };
}

const APPROVAL_ID = approvalRequest().approvalId;
const EDIT: ApprovalDecision = { decision: "edit", args: { title: "Safe", tags: ["a", 1, null] } };

function auditEvent(overrides: Partial<AuditEvent> = {}): AuditEvent {
  return {
    at: "2031-02-03T04:05:06.789Z",
    decision: "executed",
    turnKey: TURN_KEY,
    scopeId: TURN.scopeId,
    toolCallId: "w1",
    toolName: "rename_document",
    kind: "mutation",
    args: { title: "Field notes", n: [1, 2.5, true, null] },
    result: "ok",
    ...overrides,
  };
}

async function acquire(store: GuardrailStore, id: MutationIdentity = identity()): Promise<string> {
  const claim = await store.claimMutation(id);
  if (claim.status !== "acquired") throw new Error(`expected acquired, got ${claim.status}`);
  return claim.token;
}

async function contractError(promise: Promise<unknown>): Promise<StoreContractError> {
  const error = await promise.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  expect(StoreContractError.isInstance(error), `expected a StoreContractError, got ${String(error)}`).toBe(true);
  return error as StoreContractError;
}

function openError(path: string): Error {
  try {
    SqliteGuardrailStore.open({ path }).close();
  } catch (error) {
    expect(error).toBeInstanceOf(Error);
    return error as Error;
  }
  throw new Error(`expected opening ${path} to fail`);
}

const untyped = (value: unknown): never => value as never;

/** Schema version 1 as it shipped: migration 1 (migrations are append-only). */
const V1_SCHEMA = MIGRATIONS.find((migration) => migration.version === 1)?.sql ?? "";
/** Schema version 2 as it shipped: migrations 1 and 2. */
const V2_SCHEMA = MIGRATIONS.filter((migration) => migration.version <= 2)
  .map((migration) => migration.sql)
  .join("\n");

// ---------------------------------------------------------------------------------------------

describe("SqliteGuardrailStore.open: options and paths", () => {
  it.each<[string, unknown]>([
    ["no options", undefined],
    ["an empty path", { path: "" }],
    ["a non-string path", { path: 42 }],
    ["a negative busy timeout", { path: ":memory:", busyTimeoutMs: -1 }],
    ["a fractional busy timeout", { path: ":memory:", busyTimeoutMs: 1.5 }],
    ["an unknown synchronous mode", { path: ":memory:", synchronous: "off" }],
    ["a clock that is not a function", { path: ":memory:", now: "2031-01-01" }],
    ["an unknown option", { path: ":memory:", readonly: true }],
  ])("rejects %s with a ConfigurationError", (_label, options) => {
    let caught: unknown;
    try {
      SqliteGuardrailStore.open(untyped(options));
    } catch (error) {
      caught = error;
    }
    expect(ConfigurationError.isInstance(caught), String(caught)).toBe(true);
    expect(String(caught)).toMatch(/invalid SqliteGuardrailStore options/);
  });

  it("opens :memory: and a new file with synchronous normal", async () => {
    const memory = open(":memory:");
    expect((await memory.claimMutation(identity())).status).toBe("acquired");
    const file = SqliteGuardrailStore.open({ path: tempPath(), synchronous: "normal", busyTimeoutMs: 0 });
    cleanups.push(() => {
      file.close();
    });
    expect((await file.claimMutation(identity())).status).toBe("acquired");
  });

  it("names the path and says the directory is missing", () => {
    const path = join(tempDir(), "missing", "guardrails.sqlite");
    const error = openError(path);
    expect(error.message).toContain(JSON.stringify(path));
    expect(error.message).toMatch(/directory .*missing.* does not exist/);
    expect(error.cause).toBeInstanceOf(Error);
  });

  it("names the path and says the parent is not a directory", () => {
    const file = join(tempDir(), "plain-file");
    writeFileSync(file, "not a directory");
    const path = join(file, "guardrails.sqlite");
    const error = openError(path);
    expect(error.message).toContain(JSON.stringify(path));
    expect(error.message).toMatch(/is not a directory/);
    expect(error.cause).toBeDefined();
  });

  it("names the path and says it is a directory", () => {
    const path = join(tempDir(), "a-directory");
    mkdirSync(path);
    const error = openError(path);
    expect(error.message).toContain(JSON.stringify(path));
    expect(error.message).toMatch(/is a directory/);
  });

  it("names the path and passes SQLite's reason for a file that is not a database", () => {
    const path = join(tempDir(), "garbage.sqlite");
    writeFileSync(path, "this is not a database, just some text that is long enough to be read as a header ".repeat(20));
    const error = openError(path);
    expect(error.message).toContain(JSON.stringify(path));
    expect(error.message).toMatch(/not a database/);
    expect((error.cause as { code?: string }).code).toBe("SQLITE_NOTADB");
  });
});

describe("SqliteGuardrailStore: pragmas and migrations", () => {
  it("puts the file in WAL mode and records every schema version once", () => {
    const path = tempPath();
    open(path).close();
    open(path).close();
    const db = raw(path);
    expect(db.pragma("journal_mode", { simple: true })).toBe("wal");
    expect(db.prepare("SELECT version FROM schema_migrations ORDER BY version").pluck().all()).toEqual(MIGRATIONS.map((m) => m.version));
    expect(SQLITE_SCHEMA_VERSION).toBe(Math.max(...MIGRATIONS.map((m) => m.version)));
    expect(SQLITE_SCHEMA_VERSION).toBeGreaterThanOrEqual(6);
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").pluck().all();
    expect(tables).toEqual(
      expect.arrayContaining(["approvals", "audit_events", "claims", "effects", "read_evidence", "receipts", "schema_migrations", "turns", "verdicts"]),
    );
  });

  it("refuses a file written by a newer version, naming both versions, and leaves it untouched", async () => {
    const path = tempPath();
    const store = open(path);
    await store.putReceiptIfAbsent(receipt());
    store.close();
    const newer = SQLITE_SCHEMA_VERSION + 1;
    raw(path).prepare("INSERT INTO schema_migrations (version, applied_at) VALUES (?, '2040-01-01T00:00:00Z')").run(newer);

    const error = openError(path);
    expect(error.message).toContain(JSON.stringify(path));
    expect(error.message).toContain(`schema version ${String(newer)}`);
    expect(error.message).toContain(`supports up to ${String(SQLITE_SCHEMA_VERSION)}`);
    expect(raw(path).prepare("SELECT count(*) FROM receipts").pluck().get()).toBe(1);
  });

  it("upgrades a version 1 file: receipts, claims and the audit trail stay; verdicts and approvals start empty", async () => {
    const path = tempPath();
    const db = raw(path);
    db.pragma("journal_mode = WAL");
    // Version 1 exactly as it shipped, with a row in every table.
    db.exec(`${V1_SCHEMA}
      CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL);
      INSERT INTO schema_migrations VALUES (1, '2031-01-01T00:00:00.000Z');`);
    const identityV1 = identity();
    db.prepare("INSERT INTO receipts VALUES (?, ?, ?, ?, ?, ?, ?)").run(
      TURN_KEY, TURN.scopeId, TURN.turnId, "v1", digest({ segments: "user" }), 1, "2031-02-03T04:05:06.789+01:00",
    );
    db.prepare(
      "INSERT INTO claims (turn_key, scope_id, tool_call_id, tool_name, args_digest, mutation_key, token, state, claimed_at, claimed_at_ms) " +
        "VALUES (?, ?, ?, ?, ?, ?, 'old-token', 'pending', '2031-02-03T04:05:06.789Z', 1927857906789)",
    ).run(identityV1.turnKey, identityV1.scopeId, identityV1.toolCallId, identityV1.toolName, identityV1.argsDigest, identityV1.mutationKey);
    db.prepare("INSERT INTO verdicts VALUES (?, 'w1', 'pii', ?, '{}')").run(TURN_KEY, digest({ title: "x" }));
    db.prepare("INSERT INTO approvals VALUES (?, 'w1', 'approval', ?, '{}')").run(TURN_KEY, digest({ title: "x" }));
    db.prepare("INSERT INTO audit_events (at_ms, turn_key, decision, event) VALUES (0, ?, 'executed', ?)").run(
      TURN_KEY,
      JSON.stringify(auditEvent()),
    );

    const store = open(path);
    expect(db.prepare("SELECT version FROM schema_migrations ORDER BY version").pluck().all()).toEqual(MIGRATIONS.map((m) => m.version));
    expect(await store.getReceipt(TURN_KEY)).toEqual(receipt({ policyVersion: "v1" }));
    expect(await store.claimMutation(identity())).toEqual({ status: "pending" });
    expect(await store.releaseMutation({ turnKey: TURN_KEY, token: "old-token" })).toBe(true);
    expect(db.prepare("SELECT count(*) FROM verdicts").pluck().get()).toBe(0);
    expect(await store.listApprovals()).toEqual([]);
    await store.recordVerdict(verdict());
    expect(await store.getVerdict(VERDICT_KEY)).toEqual(verdict());
    await store.requestApproval(approvalRequest());
    expect((await store.readAudit()).map((event) => [event.seq, event.decision, event.action])).toEqual([
      [1, "executed", undefined],
      [2, "released", undefined],
      [3, "approval", "requested"],
    ]);
    expect(db.prepare("SELECT approval_id FROM audit_events ORDER BY seq").pluck().all()).toEqual([null, null, APPROVAL_ID]);
  });

  it("upgrades a version 2 file: claims keep their state and gain no fingerprint; verdicts start empty; approval requests stay", async () => {
    const path = tempPath();
    const db = raw(path);
    db.pragma("journal_mode = WAL");
    // Version 2 exactly as it shipped (migrations 1 and 2), with a row in every table.
    db.exec(`${V2_SCHEMA}
      CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL);
      INSERT INTO schema_migrations VALUES (1, '2031-01-01T00:00:00.000Z'), (2, '2031-01-02T00:00:00.000Z');`);
    db.prepare("INSERT INTO receipts VALUES (?, ?, ?, ?, ?, ?, ?)").run(
      TURN_KEY, TURN.scopeId, TURN.turnId, "v1", digest({ segments: "user" }), 1, "2031-02-03T04:05:06.789+01:00",
    );
    const { toolFingerprint: _none, ...pendingV2 } = identity();
    const { toolFingerprint: _also, ...completeV2 } = identity({ scopeId: "doc-2", turnId: "turn-2" });
    const insertClaim = db.prepare(
      "INSERT INTO claims (turn_key, scope_id, tool_call_id, tool_name, args_digest, mutation_key, token, state, " +
        "result_content, result_status, claimed_at, claimed_at_ms, settled_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    );
    for (const [claim, token, state, content, status] of [
      [pendingV2, "old-token", "pending", null, null],
      [completeV2, "done-token", "complete", RESULT.content, RESULT.status],
    ] as const) {
      insertClaim.run(
        claim.turnKey, claim.scopeId, claim.toolCallId, claim.toolName, claim.argsDigest, claim.mutationKey, token, state,
        content, status, "2031-02-03T04:05:06.789Z", 1927857906789, state === "complete" ? 1927857906790 : null,
      );
    }
    const { toolFingerprint: _key, ...keyV2 } = VERDICT_KEY;
    db.prepare("INSERT INTO verdicts VALUES (?, ?, ?, ?, ?, ?)").run(
      keyV2.turnKey, keyV2.toolCallId, keyV2.toolName, keyV2.guardrail, keyV2.argsDigest,
      JSON.stringify({ ...keyV2, verdict: verdict().verdict, recordedAt: verdict().recordedAt }),
    );
    const { toolFingerprint: _request, ...requestV2 } = approvalRequest(TURN, "w9");
    db.prepare("INSERT INTO approvals VALUES (?, ?, 'pending', ?, ?)").run(
      requestV2.approvalId, requestV2.turnKey, Date.parse(requestV2.requestedAt), JSON.stringify({ ...requestV2, status: "pending" }),
    );
    db.prepare("INSERT INTO audit_events (at_ms, turn_key, decision, approval_id, event) VALUES (0, ?, 'approval', ?, ?)").run(
      TURN_KEY,
      requestV2.approvalId,
      JSON.stringify({ at: "2031-02-03T04:05:06.789Z", decision: "approval", action: "requested", turnKey: TURN_KEY, scopeId: TURN.scopeId, approvalId: requestV2.approvalId }),
    );
    // Events in scopes whose JSON needs escapes: a lone surrogate, a control character, a quote.
    const oddScopes = ["doc-\ud800", "doc-\u0007", 'doc-"q"'];
    for (const scopeId of oddScopes) {
      db.prepare("INSERT INTO audit_events (at_ms, turn_key, decision, event) VALUES (0, ?, 'executed', ?)").run(
        TURN_KEY,
        JSON.stringify({ at: "2031-02-03T04:05:06.789Z", decision: "executed", turnKey: TURN_KEY, scopeId }),
      );
    }

    const store = open(path);
    expect(db.prepare("SELECT version FROM schema_migrations ORDER BY version").pluck().all()).toEqual(MIGRATIONS.map((m) => m.version));
    // Receipts: an older one names no principal; a new one keeps its principal.
    expect(await store.getReceipt(TURN_KEY)).toEqual(receipt({ policyVersion: "v1" }));
    expect(await store.getReceipt(TURN_KEY)).not.toHaveProperty("principal");
    const named = receipt({ turnKey: turnKey({ scopeId: "doc-3", turnId: "t3" }), scopeId: "doc-3", turnId: "t3", principal: "user-7" });
    expect(await store.putReceiptIfAbsent(named)).toEqual(named);
    expect(await store.getReceipt(named.turnKey)).toEqual(named);
    // Claims: listed without a fingerprint, and matched by mutation key whatever the new one says.
    expect((await store.listUnresolved()).map(({ claimedAt: _at, ...rest }) => rest)).toEqual([{ ...pendingV2, state: "pending" }]);
    expect(await store.claimMutation(identity())).toEqual({ status: "pending" });
    expect(await store.claimMutation(identity({ scopeId: "doc-2", turnId: "turn-2" }))).toEqual({ status: "replay", result: RESULT });
    expect(await store.releaseMutation({ turnKey: TURN_KEY, token: "old-token" })).toBe(true);
    const released = (await store.readAudit()).at(-1);
    expect(released).toMatchObject({ decision: "released", mutationKey: pendingV2.mutationKey });
    expect(released).not.toHaveProperty("toolFingerprint");
    // A new claim of the turn records its fingerprint.
    await acquire(store);
    expect((await store.listUnresolved())[0]?.toolFingerprint).toBe(RENAME_FINGERPRINT);
    // Verdicts: the old one can answer no key any more; new ones round-trip.
    expect(db.prepare("SELECT count(*) FROM verdicts").pluck().get()).toBe(0);
    expect(await store.getVerdict(VERDICT_KEY)).toBeUndefined();
    await store.recordVerdict(verdict());
    expect(await store.getVerdict(VERDICT_KEY)).toEqual(verdict());
    // Approval requests: the old one is kept as it was, readable and decidable; its events carry no fingerprint.
    expect(await store.getApproval(requestV2.approvalId)).toEqual({ ...requestV2, status: "pending" });
    const decided = await store.decideApproval({ approvalId: requestV2.approvalId, decision: { decision: "reject" }, decidedAt: "2031-02-03T05:00:00Z" });
    expect(decided).toMatchObject({ decided: true, record: { status: "rejected" } });
    expect((await store.readAudit()).at(-1)).not.toHaveProperty("toolFingerprint");
    await store.requestApproval(approvalRequest());
    expect((await store.readAudit()).at(-1)).toMatchObject({ action: "requested", toolFingerprint: RENAME_FINGERPRINT });
    expect((await store.readAudit()).map((event) => event.seq)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    // The audit trail: events from before the upgrade are found by turn and by scope, exactly.
    expect((await store.readAudit({ scopeId: TURN.scopeId })).map((event) => event.seq)).toEqual([1, 5, 6, 7]);
    for (const [index, scopeId] of oddScopes.entries()) {
      expect((await store.readAudit({ scopeId })).map((event) => event.seq), JSON.stringify(scopeId)).toEqual([index + 2]);
    }
    expect(await store.readAudit({ scopeId: "doc-\ud801" })).toEqual([]);
    expect((await store.readAudit({ turnKey: TURN_KEY })).map((event) => event.seq)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    // Audit cursors start at 0.
    expect(await store.getAuditCursor("default")).toBe(0);
    expect(await store.advanceAuditCursor({ sink: "default", seq: 4 })).toBe(true);
    expect(await store.getAuditCursor("default")).toBe(4);
  });

  it("upgrades a version 4 file: its claims and turns stay, and side effects start empty and work", async () => {
    const path = tempPath();
    const db = raw(path);
    db.pragma("journal_mode = WAL");
    // Version 4 exactly as it shipped (migrations 1 to 4, with their after steps).
    db.exec("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)");
    for (const migration of MIGRATIONS.filter((each) => each.version <= 4)) {
      db.exec(migration.sql);
      migration.after?.(db);
      db.prepare("INSERT INTO schema_migrations VALUES (?, '2031-01-01T00:00:00.000Z')").run(migration.version);
    }
    const old = identity();
    db.prepare(
      "INSERT INTO claims (turn_key, scope_id, tool_call_id, tool_name, args_digest, mutation_key, tool_fingerprint, token, state, claimed_at, claimed_at_ms) " +
        "VALUES (?, ?, ?, ?, ?, ?, ?, 'old-token', 'pending', '2031-02-03T04:05:06.789Z', 1927857906789)",
    ).run(old.turnKey, old.scopeId, old.toolCallId, old.toolName, old.argsDigest, old.mutationKey, old.toolFingerprint);

    const store = open(path);
    expect(db.prepare("SELECT version FROM schema_migrations ORDER BY version").pluck().all(), "migrated to the newest once").toEqual(MIGRATIONS.map((m) => m.version));
    expect(await store.claimMutation(identity()), "the version 4 claim is kept").toEqual({ status: "pending" });
    expect(await store.listUnresolvedEffects(), "no side effects before the upgrade").toEqual([]);
    const effect = effectIdentity({ scopeId: TURN.scopeId, turnKey: TURN_KEY }, { id: "m1", name: "send_mail", argsDigest: digest({ to: "a" }), toolFingerprint: RENAME_FINGERPRINT });
    const claimed = await store.claimEffect(effect, { maxPerTurn: 1 });
    expect(claimed.status, "a side effect claims after the upgrade").toBe("acquired");
    if (claimed.status !== "acquired") return;
    expect(await store.settleEffect({ effectKey: effect.effectKey, token: claimed.token, outcome: "complete", result: RESULT }), "and settles").toBe(true);
    expect(await store.claimEffect(effect), "and replays").toEqual({ status: "replay", result: RESULT });
    expect(await store.getMutation(TURN_KEY), "the mutation claim is untouched").toMatchObject({ state: "pending" });
  });

  it("upgrades a version 4 file to 6: approvals rebuilt with the orphaned status, rows, request order and indexes kept", async () => {
    const path = tempPath();
    const db = raw(path);
    db.pragma("journal_mode = WAL");
    db.exec(MIGRATIONS.filter((migration) => migration.version <= 4).map((migration) => migration.sql).join("\n"));
    db.exec("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)");
    for (const version of [1, 2, 3, 4]) db.prepare("INSERT INTO schema_migrations VALUES (?, '2031-01-01T00:00:00.000Z')").run(version);
    // Three requests at one instant, inserted against id order: rowid is the listing's tie-break.
    const requests = ["w1", "w2", "w3"].map((callId) => approvalRequest(TURN, callId)).sort((a, b) => (a.approvalId < b.approvalId ? 1 : -1));
    const [approved, rejected, pending] = requests as [ApprovalSubmission, ApprovalSubmission, ApprovalSubmission];
    const decidedAt = "2031-02-03T05:00:00.000Z";
    const rows = [
      { ...approved, status: "approved", decision: { decision: "approve" }, operatorRef: "alice", decidedAt },
      { ...rejected, status: "rejected", decision: { decision: "reject", message: "no" }, decidedAt },
      { ...pending, status: "pending" },
    ];
    for (const row of rows) {
      db.prepare("INSERT INTO approvals (approval_id, turn_key, status, requested_at_ms, record) VALUES (?, ?, ?, ?, ?)").run(
        row.approvalId, row.turnKey, row.status, Date.parse(row.requestedAt), JSON.stringify(row),
      );
    }
    // Version 4 refuses the new status.
    expect(() => db.prepare("UPDATE approvals SET status = 'orphaned' WHERE approval_id = ?").run(approved.approvalId)).toThrow(/CHECK/);

    const store = open(path);
    expect(db.prepare("SELECT version FROM schema_migrations ORDER BY version").pluck().all()).toEqual(MIGRATIONS.map((m) => m.version));
    expect(await store.listApprovals()).toEqual(rows);
    const indexes = db.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'approvals' AND sql IS NOT NULL ORDER BY name").pluck().all();
    expect(indexes).toEqual(["approvals_by_time", "approvals_by_turn", "approvals_decided", "approvals_pending_by_time"]);
    expect(db.prepare("SELECT count(*) FROM sqlite_master WHERE name = 'approvals_v6'").pluck().get()).toBe(0);
    // The migrated approved request can be orphaned; the others are left as they were.
    expect(await store.orphanApprovals({ decidedBefore: "2031-02-03T05:00:00.001Z" })).toEqual({ orphaned: 1 });
    expect(await store.getApproval(approved.approvalId)).toMatchObject({ status: "orphaned", decision: { decision: "approve" }, operatorRef: "alice" });
    expect((await store.listApprovals()).map((record) => record.status)).toEqual(["orphaned", "rejected", "pending"]);
    expect(await store.applyApproval({ approvalId: approved.approvalId, appliedAt: "2031-02-03T06:00:00.000Z" })).toBe(false);
    // The CHECK still refuses a status nobody knows.
    expect(() => db.prepare("UPDATE approvals SET status = 'bogus' WHERE approval_id = ?").run(pending.approvalId)).toThrow(/CHECK/);
    expect(db.pragma("integrity_check", { simple: true })).toBe("ok");
    store.close();
  });

  it("upgrades a version 6 file to 7: its turns keep a NULL request key and still answer; new turns hold theirs", async () => {
    const path = tempPath();
    const db = raw(path);
    db.pragma("journal_mode = WAL");
    db.exec("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)");
    for (const migration of MIGRATIONS.filter((each) => each.version <= 6)) {
      db.exec(migration.sql);
      migration.after?.(db);
      db.prepare("INSERT INTO schema_migrations VALUES (?, '2031-01-01T00:00:00.000Z')").run(migration.version);
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
      db.prepare("INSERT INTO turns (turn_key, state, updated_at_ms, record) VALUES (?, 'completed', ?, ?)").run(record.turnKey, Date.parse(record.updatedAt), JSON.stringify(record));
    }

    const store = open(path);
    expect(db.prepare("SELECT version FROM schema_migrations ORDER BY version").pluck().all(), "migrated to the newest once").toEqual(MIGRATIONS.map((m) => m.version));
    expect(db.prepare("SELECT request_key FROM turns ORDER BY turn_key").pluck().all(), "old turns hold no request key").toEqual([null, null]);
    const [first] = old;
    if (first === undefined) throw new Error("no old turn");
    expect(await store.beginTurn({ turn: turnStartOf("doc-1", "turn-old"), leaseMs: 1000 }), "an old turn still answers").toEqual({ status: "finished", record: first });
    const fresh = turnStartOf("doc-1", "turn-new");
    expect((await store.beginTurn({ turn: fresh, leaseMs: 1000 })).status, "a new turn starts").toBe("started");
    expect(db.prepare("SELECT request_key FROM turns WHERE turn_key = ?").pluck().get(fresh.turnKey), "and holds its request key").toBe(fresh.requestKey);
    expect(await store.beginTurn({ turn: turnStartOf("doc-2", "turn-new"), leaseMs: 1000 }), "its request in another scope").toEqual({ status: "input_mismatch" });
    const index = db.prepare("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'turns_by_request'").pluck().get();
    expect(index, "a unique index").toMatch(/^CREATE UNIQUE INDEX/);
    expect(db.pragma("integrity_check", { simple: true })).toBe("ok");
    store.close();
  });

  it("upgrades a version 2 file whose audit trail holds an unreadable event: it stays unreadable and in no scope", async () => {
    const path = tempPath();
    const db = raw(path);
    db.pragma("journal_mode = WAL");
    db.exec(`${V2_SCHEMA}
      CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL);
      INSERT INTO schema_migrations VALUES (1, '2031-01-01T00:00:00.000Z'), (2, '2031-01-02T00:00:00.000Z');`);
    const append = db.prepare("INSERT INTO audit_events (at_ms, turn_key, decision, event) VALUES (0, ?, 'executed', ?)");
    append.run(TURN_KEY, JSON.stringify(auditEvent()));
    append.run(TURN_KEY, '{"scopeId": "doc-1", \\u');
    append.run(TURN_KEY, '{"scopeId": 7}');
    const store = open(path);
    expect(db.prepare("SELECT scope_id FROM audit_events ORDER BY seq").pluck().all()).toEqual([TURN.scopeId, null, null]);
    expect((await store.readAudit({ scopeId: TURN.scopeId })).map((event) => event.seq)).toEqual([1]);
    await contractError(store.readAudit());
  });

  it("refuses another application's database without changing it", () => {
    const path = tempPath();
    const db = raw(path);
    db.exec("CREATE TABLE claims (anything TEXT)");
    const error = openError(path);
    expect(error.message).toContain(JSON.stringify(path));
    expect(error.message).toMatch(/claims already exists/);
    // The migration ran in one transaction: nothing of it is left behind.
    expect(db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").pluck().all()).toEqual(["claims"]);
  });

  it("waits for another connection's write lock, and rejects once busyTimeoutMs is spent, changing nothing", async () => {
    const path = tempPath();
    const store = open(path, { busyTimeoutMs: 0 });
    await store.putReceiptIfAbsent(receipt());
    const db = raw(path);
    db.exec("BEGIN IMMEDIATE");
    const error: unknown = await store.claimMutation(identity()).catch((reason: unknown) => reason);
    expect((error as { code?: string }).code).toBe("SQLITE_BUSY");
    // Typed, and says which operation, on which file, what happened and what it left.
    expect(SqliteStoreError.isInstance(error)).toBe(true);
    expect(SqliteStoreError.find(new Error("wrapped", { cause: error }))?.operation).toBe("claimMutation");
    expect((error as Error).message).toBe(
      `SqliteGuardrailStore.claimMutation failed on ${JSON.stringify(path)}: another connection held the database's write lock ` +
        "for longer than busyTimeoutMs (0 ms): database is locked (SQLITE_BUSY); the claim was not acquired and nothing was written; " +
        "the turn may claim again",
    );
    // WAL: readers are not blocked by the writer.
    expect(await store.getReceipt(TURN_KEY)).toEqual(receipt());
    db.exec("ROLLBACK");
    expect((await store.claimMutation(identity())).status).toBe("acquired");
  });

  it("rejects every call after close; close is idempotent", async () => {
    const store = SqliteGuardrailStore.open({ path: tempPath() });
    store.close();
    store.close();
    await expect(store.getReceipt(TURN_KEY)).rejects.toThrow(/not open/);
    await expect(store.claimMutation(identity())).rejects.toThrow(/not open/);
    const error: unknown = await store.settleMutation({ turnKey: TURN_KEY, token: "t", outcome: "unknown" }).catch((reason: unknown) => reason);
    expect(SqliteStoreError.find(error)?.operation).toBe("settleMutation");
    expect((error as Error).message).toMatch(/^SqliteGuardrailStore\.settleMutation failed on .*not open.*the claim stays pending \(closed\)/);
  });
});

describe("SqliteGuardrailStore: a turn's atomic steps are each one transaction", () => {
  const READ = digest({ kind: "test.read", n: 1 });

  it("checks the claim's evidence under the write lock: a claim naming evidence waits for another writer, even to answer read_required", async () => {
    const path = tempPath();
    const store = open(path, { busyTimeoutMs: 0 });
    const db = raw(path);
    db.exec("BEGIN IMMEDIATE");
    // Another writer holds the lock: the evidence check is inside the claim's BEGIN IMMEDIATE, so
    // even an answer that writes nothing waits for it (a plain read would not: WAL).
    const error: unknown = await store.claimMutation(identity(), { readEvidence: [READ] }).catch((reason: unknown) => reason);
    expect((error as { code?: string }).code).toBe("SQLITE_BUSY");
    expect(await store.hasSuccessfulRead({ turnKey: TURN_KEY, evidenceDigest: READ })).toBe(false);
    // The other writer records the evidence in its transaction; once it commits, the claim sees it.
    db.prepare("INSERT INTO read_evidence (turn_key, evidence_digest) VALUES (?, ?)").run(TURN_KEY, READ);
    db.exec("COMMIT");
    expect((await store.claimMutation(identity(), { readEvidence: [READ] })).status).toBe("acquired");
  });

  it("a read or a settlement whose audit event cannot be written changes nothing: the two commit together", async () => {
    const path = tempPath();
    const store = open(path);
    const claimed = await store.claimMutation(identity());
    if (claimed.status !== "acquired") throw new Error(`expected the claim to be acquired, got ${claimed.status}`);
    const { token } = claimed;
    const db = raw(path);
    db.exec("CREATE TRIGGER refuse_events BEFORE INSERT ON audit_events BEGIN SELECT RAISE(ABORT, 'no events'); END");
    const evidence = { turnKey: TURN_KEY, evidenceDigest: READ };
    await expect(store.recordSuccessfulRead(evidence, { audit: auditEvent() })).rejects.toThrow(/no events/);
    expect(await store.hasSuccessfulRead(evidence)).toBe(false);
    await expect(
      store.settleMutation({ turnKey: TURN_KEY, token, outcome: "complete", result: RESULT, audit: auditEvent() }),
    ).rejects.toThrow(/no events/);
    await expect(store.settleMutation({ turnKey: TURN_KEY, token, outcome: "unknown", audit: auditEvent() })).rejects.toThrow(/no events/);
    expect(await store.claimMutation(identity())).toEqual({ status: "pending" });
    // Without events the same steps go through.
    await store.recordSuccessfulRead(evidence);
    expect(await store.settleMutation({ turnKey: TURN_KEY, token, outcome: "complete", result: RESULT })).toBe(true);
    db.exec("DROP TRIGGER refuse_events");
    expect(await store.readAudit()).toEqual([]);
  });
});

describe("SqliteGuardrailStore: durability and sharing", () => {
  it("keeps every record across close and reopen, and continues the audit numbering", async () => {
    const path = tempPath();
    const first = open(path);
    await first.putReceiptIfAbsent(receipt());
    await first.recordSuccessfulRead({ turnKey: TURN_KEY, evidenceDigest: digest("read") });
    const token = await acquire(first);
    await first.settleMutation({ turnKey: TURN_KEY, token, outcome: "complete", result: RESULT });
    const pendingTurn = { scopeId: "doc-1", turnId: "turn-2" };
    await acquire(first, identity(pendingTurn));
    await first.recordVerdict(verdict());
    await first.requestApproval(approvalRequest());
    await first.decideApproval({ approvalId: APPROVAL_ID, decision: EDIT, operatorRef: "op-1", decidedAt: "2031-02-03T04:05:07Z" });
    await first.requestApproval(approvalRequest(pendingTurn));
    await first.appendAudit(auditEvent());
    first.close();

    const second = open(path);
    expect(await second.getReceipt(TURN_KEY)).toEqual(receipt());
    expect(await second.hasSuccessfulRead({ turnKey: TURN_KEY, evidenceDigest: digest("read") })).toBe(true);
    expect(await second.claimMutation(identity())).toEqual({ status: "replay", result: RESULT });
    expect(await second.claimMutation(identity(pendingTurn))).toEqual({ status: "pending" });
    expect(await second.getVerdict(VERDICT_KEY)).toEqual(verdict());
    expect(await second.getApproval(APPROVAL_ID)).toEqual({
      ...approvalRequest(),
      status: "edited",
      decision: EDIT,
      operatorRef: "op-1",
      decidedAt: "2031-02-03T04:05:07Z",
    });
    expect(await second.listApprovals({ status: "pending" })).toEqual([{ ...approvalRequest(pendingTurn), status: "pending" }]);
    expect(await second.decideApproval({ approvalId: APPROVAL_ID, decision: { decision: "approve" }, decidedAt: "2031-02-03T04:05:08Z" }))
      .toMatchObject({ decided: false, reason: "already_decided" });
    await second.appendAudit(auditEvent({ decision: "replayed" }));
    const trail = await second.readAudit();
    expect(trail.map((event) => [event.seq, event.decision, event.action])).toEqual([
      [1, "approval", "requested"],
      [2, "approval", "edit"],
      [3, "approval", "requested"],
      [4, "executed", undefined],
      [5, "approval", "decision_refused"],
      [6, "replayed", undefined],
    ]);
    expect(trail[3]).toEqual({ ...auditEvent(), seq: 4 });
    expect(await second.listUnresolved()).toEqual([
      expect.objectContaining({ turnKey: turnKey(pendingTurn), state: "pending" }),
    ]);
  });

  it("two connections to one file see one ledger: one claim wins, the other's settle is refused", async () => {
    const path = tempPath();
    const a = open(path);
    const b = open(path);
    const [first, second] = await Promise.all([a.claimMutation(identity()), b.claimMutation(identity())]);
    expect([first.status, second.status].sort()).toEqual(["acquired", "pending"]);
    const token = first.status === "acquired" ? first.token : second.status === "acquired" ? second.token : "";
    expect(await b.settleMutation({ turnKey: TURN_KEY, token: `${token}-forged`, outcome: "complete", result: RESULT })).toBe(false);
    expect(await b.settleMutation({ turnKey: TURN_KEY, token, outcome: "complete", result: RESULT })).toBe(true);
    expect(await a.claimMutation(identity())).toEqual({ status: "replay", result: RESULT });
  });

  it("guards a real createAgent turn; a second connection (a restarted worker) replays it", async () => {
    const path = tempPath();
    const input = turnInput();
    const service = new DocumentService();
    const script = [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }];

    const first = open(path);
    await admit(first, input);
    const run1 = guardedAgent({ script, store: first, input, service });
    const written = outcomeOf(await invokeTurn(run1.agent, input), "w1");
    expect(written).toMatchObject({ status: "success", code: undefined });
    expect(service.writes).toBe(1);
    first.close();

    const second = open(path);
    const run2 = guardedAgent({ script, store: second, input, service });
    const replayed = outcomeOf(await invokeTurn(run2.agent, input), "w1");
    expect(replayed).toEqual(written);
    expect(service.writes).toBe(1);
  });

  it("two connections' middleware with one sink name deliver each audit event once, and the cursor survives reopening", async () => {
    const path = tempPath();
    const service = new DocumentService();
    const sunk: AuditSinkEvent[] = [];
    const audit = { sinkName: "siem", sink: (event: AuditSinkEvent) => void sunk.push(event) };
    const [one, two] = [open(path), open(path)];
    const turns = ["t1", "t2", "t3"].map((turnId) => turnInput({ turnId }));
    for (const [index, input] of turns.entries()) {
      const store = index % 2 === 0 ? one : two;
      await admit(store, input);
      const script = [{ toolCalls: [read(`r${String(index)}`)] }, { content: "done" }];
      const run = guardedAgent({ script, store, input, service, guardrails: { audit } });
      await invokeTurn(run.agent, input);
    }
    expect(sunk).toEqual(await one.readAudit());
    expect(sunk.map((event) => event.seq)).toEqual([1, 2, 3]);
    one.close();
    two.close();
    expect(await open(path).getAuditCursor("siem")).toBe(3);
  });
});

describe("SqliteGuardrailStore: a corrupted row fails closed with StoreContractError", () => {
  async function withClaim(state: "pending" | "complete") {
    const path = tempPath();
    const store = open(path);
    const token = await acquire(store);
    if (state === "complete") await store.settleMutation({ turnKey: TURN_KEY, token, outcome: "complete", result: RESULT });
    return { store, db: raw(path) };
  }

  it.each<[string, "pending" | "complete", string]>([
    ["a mutation key that is not a digest", "pending", "UPDATE claims SET mutation_key = 'zz'"],
    ["an empty scope id", "pending", "UPDATE claims SET scope_id = ''"],
    ["an empty tool call id", "pending", "UPDATE claims SET tool_call_id = ''"],
    ["an empty token", "pending", "UPDATE claims SET token = ''"],
    ["a tool fingerprint that is not a digest", "pending", "UPDATE claims SET tool_fingerprint = 'rename_document'"],
    ["a pending claim with a result", "pending", "UPDATE claims SET result_content = 'x', result_status = 'success'"],
    ["a result status the contract does not know", "complete", "UPDATE claims SET result_status = 'weird'"],
    ["a complete claim without its result", "complete", "UPDATE claims SET result_content = NULL, result_status = NULL"],
    ["a claim time that is not a timestamp", "pending", "UPDATE claims SET claimed_at = 'yesterday'"],
  ])("a claim with %s: claimMutation rejects and nothing is acquired", async (_label, state, edit) => {
    const { store, db } = await withClaim(state);
    db.exec(edit);
    const error = await contractError(store.claimMutation(identity()));
    expect(error.message).toMatch(/corrupt claim/);
    await contractError(store.claimMutation(identity(TURN, "other-call")));
    await contractError(store.reconcileMutation({ turnKey: TURN_KEY, resolution: "no-effect", operatorRef: "INC-9" }));
    await contractError(store.releaseMutation({ turnKey: TURN_KEY, token: "any-token" }));
    expect(db.prepare("SELECT count(*) FROM claims").pluck().get()).toBe(1);
    expect(db.prepare("SELECT count(*) FROM audit_events").pluck().get()).toBe(0);
  });

  it("listUnresolved rejects a corrupt unresolved claim instead of skipping it", async () => {
    const { store, db } = await withClaim("pending");
    db.exec("UPDATE claims SET args_digest = 'ABC'");
    await contractError(store.listUnresolved());
  });

  it.each([
    ["allowed is not 0 or 1", "UPDATE receipts SET allowed = 2"],
    ["a bad moderation digest", "UPDATE receipts SET moderation_digest = 'x'"],
    ["a bad decision time", "UPDATE receipts SET decided_at = 'now'"],
  ])("a receipt where %s: getReceipt and putReceiptIfAbsent reject", async (_label, edit) => {
    const path = tempPath();
    const store = open(path);
    await store.putReceiptIfAbsent(receipt());
    raw(path).exec(edit);
    await contractError(store.getReceipt(TURN_KEY));
    await contractError(store.putReceiptIfAbsent(receipt({ policyVersion: "v2" })));
  });

  it.each([
    ["JSON that does not parse", `UPDATE verdicts SET record = '{"turnKey":'`],
    ["JSON that is not a record", `UPDATE verdicts SET record = '[1,2,3]'`],
    ["a record stored under another call id", `UPDATE verdicts SET record = json_set(record, '$.toolCallId', 'w2')`],
    ["a record stored under another tool", `UPDATE verdicts SET record = json_set(record, '$.toolName', 'delete_document')`],
    ["a record stored under another tool fingerprint", `UPDATE verdicts SET record = json_set(record, '$.toolFingerprint', '${"0".repeat(64)}')`],
    ["a record without its tool fingerprint", `UPDATE verdicts SET record = json_remove(record, '$.toolFingerprint')`],
    ["a record with an unknown field", `UPDATE verdicts SET record = json_set(record, '$.extra', 1)`],
  ])("a verdict with %s is rejected on read and on insert", async (_label, edit) => {
    const path = tempPath();
    const store = open(path);
    await store.recordVerdict(verdict());
    raw(path).exec(edit);
    await contractError(store.getVerdict(VERDICT_KEY));
    await contractError(store.recordVerdict(verdict()));
  });

  it.each([
    ["JSON that does not parse", `UPDATE approvals SET record = '{"approvalId":'`],
    ["JSON that is not a record", `UPDATE approvals SET record = '[1,2,3]'`],
    ["a record stored under another id", `UPDATE approvals SET record = json_set(record, '$.approvalId', '${"0".repeat(64)}')`],
    ["a record stored under another turn", `UPDATE approvals SET record = json_set(record, '$.turnKey', '${"0".repeat(64)}')`],
    ["a status column that disagrees with the record", `UPDATE approvals SET status = 'approved'`],
    ["a decided status without a decision", `UPDATE approvals SET status = 'approved', record = json_set(record, '$.status', 'approved')`],
    ["a record with an unknown field", `UPDATE approvals SET record = json_set(record, '$.extra', 1)`],
    ["a record without its arguments", `UPDATE approvals SET record = json_remove(record, '$.args')`],
    ["a tool fingerprint that is not a digest", `UPDATE approvals SET record = json_set(record, '$.toolFingerprint', 'rename_document')`],
  ])("an approval request with %s is rejected by every method that reads it, and nothing changes", async (_label, edit) => {
    const path = tempPath();
    const store = open(path);
    await store.requestApproval(approvalRequest());
    const db = raw(path);
    db.exec(edit);
    const row = db.prepare("SELECT * FROM approvals").get();
    const trail = await store.readAudit();
    await contractError(store.getApproval(APPROVAL_ID));
    await contractError(store.requestApproval(approvalRequest()));
    await contractError(store.decideApproval({ approvalId: APPROVAL_ID, decision: { decision: "approve" }, decidedAt: "2031-02-03T05:00:00Z" }));
    await contractError(store.applyApproval({ approvalId: APPROVAL_ID, appliedAt: "2031-02-03T05:00:00Z" }));
    await contractError(store.listApprovals());
    // Expiry reads only rows filed as pending: it rejects the row, or (filed as decided) skips it.
    const expiry: unknown = await store.expireApprovals({ olderThan: "2099-01-01T00:00:00Z" }).catch((error: unknown) => error);
    expect(StoreContractError.isInstance(expiry) || JSON.stringify(expiry) === '{"expired":0}', String(expiry)).toBe(true);
    expect(db.prepare("SELECT * FROM approvals").get()).toEqual(row);
    expect(await store.readAudit()).toEqual(trail);
  });

  it.each([
    ["JSON that does not parse", "UPDATE audit_events SET event = '{'"],
    ["JSON that is not an object", "UPDATE audit_events SET event = '[]'"],
    ["an event missing its decision", "UPDATE audit_events SET event = json_remove(event, '$.decision')"],
    ["a non-text event", "UPDATE audit_events SET event = 12"],
  ])("an audit event with %s makes readAudit reject", async (_label, edit) => {
    const path = tempPath();
    const store = open(path);
    await store.appendAudit(auditEvent());
    raw(path).exec(edit);
    const error = await contractError(store.readAudit());
    expect(error.message).toMatch(/audit event 1/);
  });
});

describe("SqliteGuardrailStore: strings round-trip exactly", () => {
  // SQLite text is UTF-8: a lone UTF-16 surrogate cannot be stored as text without changing it.
  const A = "doc-\ud800";
  const B = "doc-\udc00";

  /** `digest` refuses lone surrogates, so the turn key is derived from an escaped scope id. */
  const claimIn = (scopeId: string, turnId: string): MutationIdentity => ({
    ...identity({ scopeId: JSON.stringify(scopeId), turnId }),
    scopeId,
  });

  it("keeps scopes that differ only in a lone surrogate apart", async () => {
    const store = open(tempPath());
    const first = claimIn(A, "t1");
    const token = await acquire(store, first);
    await store.settleMutation({ turnKey: first.turnKey, token, outcome: "unknown" });
    expect((await store.claimMutation(claimIn(B, "t2"))).status).toBe("acquired");
    expect((await store.claimMutation(claimIn(A, "t3"))).status).toBe("scope_unresolved");
    const unresolved = await store.listUnresolved();
    expect(unresolved.map((entry) => entry.scopeId)).toEqual([A, B]);
  });

  it("replays a result with lone surrogates and NUL characters exactly", async () => {
    const store = open(tempPath());
    const result: MutationResult = { content: "a\ud800b\u0000c\udfff😀", status: "error" };
    const token = await acquire(store);
    await store.settleMutation({ turnKey: TURN_KEY, token, outcome: "complete", result });
    expect(await store.claimMutation(identity())).toEqual({ status: "replay", result });
  });

  it("keeps a receipt's principal exact, and principals that differ only in a lone surrogate apart", async () => {
    const store = open(tempPath());
    const first = receipt({ principal: `user ${A}` });
    expect(await store.putReceiptIfAbsent(first)).toEqual(first);
    expect(await store.getReceipt(TURN_KEY)).toEqual(first);
    expect(await store.putReceiptIfAbsent(receipt({ principal: `user ${B}` }))).toEqual(first);
  });

  it("tells another call what was done with the ids and result exactly, lone surrogates included", async () => {
    const store = open(tempPath());
    const done: MutationIdentity = { ...identity(), toolCallId: `call ${A}`, toolName: `tool ${B}` };
    const result: MutationResult = { content: `a${B}\u0000`, status: "success" };
    const token = await acquire(store, done);
    await store.settleMutation({ turnKey: TURN_KEY, token, outcome: "complete", result });
    expect(await store.claimMutation(identity(TURN, "w2"))).toEqual({
      status: "conflict",
      completed: { toolName: done.toolName, toolCallId: done.toolCallId, result },
    });
  });

  it("keeps approval requests with lone surrogates exact, in the record and in its audit events", async () => {
    const store = open(tempPath());
    const request = approvalRequest(TURN, "w1", {
      scopeId: A,
      toolCallId: `call ${B}`,
      toolName: `tool ${A}`,
      args: { [A]: B, nested: [A, "\u0000"] },
      guardrails: [A, B],
      reason: `why ${B}\u0000`,
    });
    expect(await store.requestApproval(request)).toEqual({ ...request, status: "pending" });
    expect(await store.getApproval(request.approvalId)).toEqual({ ...request, status: "pending" });
    const decision = { decision: "edit" as const, args: { title: `${A}${B}` } };
    await store.decideApproval({ approvalId: request.approvalId, decision, operatorRef: `op ${A}`, decidedAt: "2031-02-03T05:00:00Z" });
    expect(await store.listApprovals()).toEqual([
      { ...request, status: "edited", decision, operatorRef: `op ${A}`, decidedAt: "2031-02-03T05:00:00Z" },
    ]);
    expect((await store.readAudit()).map((event) => [event.scopeId, event.toolCallId, event.toolName, event.operatorRef])).toEqual([
      [A, `call ${B}`, `tool ${A}`, undefined],
      [A, `call ${B}`, `tool ${A}`, `op ${A}`],
    ]);
    // The scope filter keeps A and B apart.
    expect(await store.readAudit({ scopeId: A })).toHaveLength(2);
    expect(await store.readAudit({ scopeId: B })).toEqual([]);
    expect(await store.readAudit({ scopeId: "doc-\ufffd" })).toEqual([]);
  });

  it("keeps audit cursors of sinks that differ only in a lone surrogate apart", async () => {
    const store = open(tempPath());
    expect(await store.advanceAuditCursor({ sink: `sink ${A}`, seq: 3 })).toBe(true);
    expect(await store.getAuditCursor(`sink ${B}`)).toBe(0);
    expect(await store.advanceAuditCursor({ sink: `sink ${B}`, seq: 2 })).toBe(true);
    expect(await store.getAuditCursor(`sink ${A}`)).toBe(3);
    expect(await store.getAuditCursor(`sink ${B}`)).toBe(2);
  });

  it("keeps verdict keys that differ only in a lone surrogate apart, and settles only with the exact token", async () => {
    const store = open(tempPath());
    const keyA = { ...VERDICT_KEY, guardrail: A };
    const keyB = { ...VERDICT_KEY, guardrail: B };
    const toolA = { ...VERDICT_KEY, toolName: A };
    await store.recordVerdict(verdict(toolA));
    expect(await store.getVerdict({ ...VERDICT_KEY, toolName: B })).toBeUndefined();
    expect(await store.getVerdict(toolA)).toEqual(verdict(toolA));
    await store.recordVerdict(verdict(keyA));
    expect(await store.getVerdict(keyB)).toBeUndefined();
    expect(await store.recordVerdict(verdict(keyB))).toEqual(verdict(keyB));
    expect(await store.getVerdict(keyA)).toEqual(verdict(keyA));
    const token = await acquire(store);
    expect(await store.settleMutation({ turnKey: TURN_KEY, token: `${token}\ud800`, outcome: "unknown" })).toBe(false);
    expect(await store.claimMutation(identity())).toEqual({ status: "pending" });
  });
});

// ---------------------------------------------------------------------------------------------
// Differential: the same random operations against the in-memory reference and SQLite.

/** mulberry32: a small seeded PRNG, so a failing sequence is reproducible from its seed. */
function prng(seed: number) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const pick = <T>(values: readonly T[]): T => values[Math.floor(next() * values.length)] as T;
  return { next, pick };
}

type Outcome = { ok: unknown } | { error: string };

/** The answer with the store's own tokens replaced, so the two stores can be compared. */
function normalize(value: unknown): unknown {
  if (typeof value !== "object" || value === null) return value;
  if ("status" in value && value.status === "acquired") return { status: "acquired", token: "<token>" };
  return value;
}

async function outcome(run: () => Promise<unknown>): Promise<Outcome> {
  try {
    return { ok: normalize(await run()) };
  } catch (error) {
    return { error: StoreContractError.isInstance(error) ? "StoreContractError" : String(error) };
  }
}

describe("SqliteGuardrailStore answers exactly as InMemoryGuardrailStore", () => {
  const SEEDS = Array.from({ length: 24 }, (_, index) => index + 1);
  const OPERATIONS = 250;

  it.each(SEEDS)("random sequence, seed %i", async (seed) => {
    const { next, pick } = prng(seed);
    let ms = Date.UTC(2031, 1, 3, 4, 5, 6, 789);
    const now = () => new Date(ms);
    const iso = (offsetMs = 0) => new Date(ms + offsetMs).toISOString();
    // The same instant written with an offset: `since` and `olderThan` compare instants, not text.
    const withOffset = (offsetMs = 0) => {
      const shifted = new Date(ms + offsetMs + 3_600_000).toISOString().replace("Z", "+01:00");
      return shifted;
    };
    const memory = new InMemoryGuardrailStore({ now });
    const sqlite = open(seed % 4 === 0 ? tempPath() : ":memory:", { now });
    const stores = [memory, sqlite] as const;
    const tokens = [new Map<string, string>(), new Map<string, string>()] as const;

    const turns: TurnRef[] = ["doc-1", "doc-2"].flatMap((scopeId) => ["t1", "t2", "t3"].map((turnId) => ({ scopeId, turnId })));
    const calls = [
      ["w1", { title: "A" }],
      ["w2", { title: "B" }],
    ] as const;
    const results: MutationResult[] = [RESULT, { content: "failed", status: "error" }, { content: "", status: "success" }];
    const decisions = ["executed", "replayed", "refused", "verdict", "reconciled"] as const;
    const key = (): VerdictKey => ({
      turnKey: turnKey(pick(turns)),
      toolCallId: pick(["w1", "w2"]),
      toolName: pick(["rename_document", "delete_document"]),
      toolFingerprint: pick([RENAME_FINGERPRINT, toolFingerprint({ name: "rename_document" })]),
      guardrail: pick(["pii", "policy"]),
      argsDigest: digest(pick(["a", "b"])),
    });

    const log: string[] = [];
    for (let step = 0; step < OPERATIONS; step++) {
      const turn = pick(turns);
      const tk = turnKey(turn);
      const [callId, args] = pick(calls);
      const roll = next();
      let name: string;
      let op: (store: GuardrailStore, index: 0 | 1) => Promise<unknown>;
      if (roll < 0.08) {
        const advance = pick([0, 0, 1, 999, 60_000, 86_400_000]);
        ms += advance;
        log.push(`clock +${String(advance)}`);
        continue;
      } else if (roll < 0.14) {
        const candidate = receipt({
          turnKey: tk,
          scopeId: turn.scopeId,
          turnId: turn.turnId,
          allowed: next() < 0.5,
          policyVersion: pick(["v1", "v2"]),
          decidedAt: pick([iso(), withOffset()]),
        });
        name = `putReceiptIfAbsent ${turn.turnId}@${turn.scopeId}`;
        op = (store) => store.putReceiptIfAbsent(candidate);
      } else if (roll < 0.17) {
        name = "getReceipt";
        op = (store) => store.getReceipt(tk);
      } else if (roll < 0.22) {
        const evidence = { turnKey: tk, evidenceDigest: digest(pick(["r1", "r2"])) };
        const record = next() < 0.5;
        name = record ? "recordSuccessfulRead" : "hasSuccessfulRead";
        op = (store) => (record ? store.recordSuccessfulRead(evidence) : store.hasSuccessfulRead(evidence));
      } else if (roll < 0.42) {
        const options = pick([undefined, {}, { requireResolvedScope: true }, { requireResolvedScope: false }]);
        name = `claimMutation ${turn.turnId}@${turn.scopeId} ${callId} ${JSON.stringify(options)}`;
        op = async (store, index) => {
          const claim = await store.claimMutation(identity(turn, callId, args), options);
          if (claim.status === "acquired") tokens[index].set(tk, claim.token);
          return claim;
        };
      } else if (roll < 0.56) {
        const forged = next() < 0.2;
        const result = next() < 0.7 ? pick(results) : undefined;
        name = `settleMutation ${turn.turnId}@${turn.scopeId} ${forged ? "forged" : "own"} ${result === undefined ? "unknown" : "complete"}`;
        op = (store, index) => {
          const token = forged ? "forged-token" : (tokens[index].get(tk) ?? "no-token");
          return store.settleMutation(
            result === undefined
              ? { turnKey: tk, token, outcome: "unknown" }
              : { turnKey: tk, token, outcome: "complete", result },
          );
        };
      } else if (roll < 0.6) {
        const forged = next() < 0.2;
        name = `releaseMutation ${turn.turnId}@${turn.scopeId} ${forged ? "forged" : "own"}`;
        op = (store, index) =>
          store.releaseMutation({ turnKey: tk, token: forged ? "forged-token" : (tokens[index].get(tk) ?? "no-token") });
      } else if (roll < 0.66) {
        const k = key();
        const write = next() < 0.5;
        const record = next() < 0.5 ? verdict(k) : { ...verdict(k), verdict: { action: "observe" as const, outcome: "partial" as const, detections: [] } };
        name = write ? "recordVerdict" : "getVerdict";
        op = (store) => (write ? store.recordVerdict(record) : store.getVerdict(k));
      } else if (roll < 0.74) {
        const request = approvalRequest(turn, callId, { requestedAt: pick([iso(), withOffset(-1), iso(-60_000)]) });
        const id = request.approvalId;
        const which = next();
        if (which < 0.3) {
          name = `requestApproval ${turn.turnId}@${turn.scopeId} ${callId}`;
          op = (store) => store.requestApproval(request);
        } else if (which < 0.4) {
          name = "getApproval";
          op = (store) => store.getApproval(id);
        } else if (which < 0.65) {
          const decision = pick<ApprovalDecision>([{ decision: "approve" }, { decision: "reject", message: "no" }, EDIT]);
          const operatorRef = pick([undefined, "op-1"]);
          const decidedAt = iso();
          name = `decideApproval ${turn.turnId}@${turn.scopeId} ${callId} ${decision.decision}`;
          op = (store) =>
            store.decideApproval({ approvalId: id, decision, ...(operatorRef === undefined ? {} : { operatorRef }), decidedAt });
        } else if (which < 0.75) {
          const appliedAt = iso();
          name = `applyApproval ${turn.turnId}@${turn.scopeId} ${callId}`;
          op = (store) => store.applyApproval({ approvalId: id, appliedAt });
        } else if (which < 0.9) {
          const query = pick<ApprovalQuery | undefined>([
            undefined,
            {},
            { status: "pending" },
            { status: "approved" },
            { turnKey: tk },
            { limit: 2 },
            { status: "edited", turnKey: tk, limit: 1 },
          ]);
          name = `listApprovals ${JSON.stringify(query)}`;
          op = (store) => store.listApprovals(query);
        } else {
          const olderThan = pick([iso(), iso(-60_000), withOffset(0), iso(86_400_000)]);
          name = `expireApprovals ${olderThan}`;
          op = (store) => store.expireApprovals({ olderThan });
        }
      } else if (roll < 0.78) {
        const event = auditEvent({ at: pick([iso(), withOffset(-1), iso(-60_000)]), decision: pick(decisions), turnKey: tk, scopeId: turn.scopeId });
        name = "appendAudit";
        op = (store) => store.appendAudit(event);
      } else if (roll < 0.83) {
        const query = pick([
          undefined,
          {},
          { since: iso(-1) },
          { since: withOffset(0) },
          { afterSeq: Math.floor(next() * 10) },
          { limit: 1 + Math.floor(next() * 5) },
          { since: iso(-120_000), afterSeq: 2, limit: 3 },
        ]);
        name = `readAudit ${JSON.stringify(query)}`;
        op = (store) => store.readAudit(query);
      } else if (roll < 0.88) {
        name = "listUnresolved";
        op = (store) => store.listUnresolved();
      } else if (roll < 0.95) {
        const result = next() < 0.5 ? pick(results) : undefined;
        name = `reconcileMutation ${turn.turnId}@${turn.scopeId} ${result === undefined ? "no-effect" : "completed"}`;
        op = (store) =>
          store.reconcileMutation(
            result === undefined
              ? { turnKey: tk, resolution: "no-effect", operatorRef: "INC-2" }
              : { turnKey: tk, resolution: "completed", result, operatorRef: "INC-1" },
          );
      } else {
        const olderThan = pick([iso(), iso(-60_000), iso(1), withOffset(-86_400_000), iso(86_400_000)]);
        name = `prune ${olderThan}`;
        op = (store) => store.prune({ olderThan });
      }
      const expected = await outcome(() => op(stores[0], 0));
      const actual = await outcome(() => op(stores[1], 1));
      log.push(name);
      if (JSON.stringify(actual) !== JSON.stringify(expected)) {
        // toEqual first, for a readable diff; the log says how the stores got here.
        expect({ step, actual, history: log.slice(-30) }).toEqual({ step, actual: expected, history: log.slice(-30) });
      }
      expect(actual).toEqual(expected);
    }
    // And the final states agree in full.
    expect(await sqlite.listUnresolved()).toEqual(await memory.listUnresolved());
    expect(await sqlite.listApprovals()).toEqual(await memory.listApprovals());
    expect(await sqlite.readAudit()).toEqual(await memory.readAudit());
  });
});
