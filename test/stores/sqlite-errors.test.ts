/**
 * What the SQLite store's failures say: each method names itself and the state it left when the
 * database fails under it, each input is refused under its own name, and the lock timeout is told
 * apart from other failures.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { digest, StoreContractError, turnKey, type GuardrailStore } from "arkah-agent-guardrails";
import { SqliteGuardrailStore, SqliteStoreError } from "../../src/adapters/sqlite/index.js";
import { isTrustedStore } from "../../src/store/validate.js";
import { startWorker, type Worker } from "../processes/support.js";
import type { LockerCommand, LockerReport } from "../processes/workers/sqlite-locker.js";

const disposers: (() => void)[] = [];
afterEach(() => {
  for (const dispose of disposers.splice(0).reverse()) dispose();
});

function fileStore(busyTimeoutMs: number): { store: SqliteGuardrailStore; file: string } {
  const dir = mkdtempSync(join(tmpdir(), "arkah-sqlite-errors-"));
  const file = join(dir, "g.sqlite");
  const store = SqliteGuardrailStore.open({ path: file, busyTimeoutMs });
  disposers.push(() => {
    store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return { store, file };
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error("expected the call to reject");
    },
    (reason: unknown) => reason,
  );
}

const KEY = turnKey({ scopeId: "doc-1", turnId: "turn-1" });
const D = digest("x");
const AT = "2031-02-03T04:05:06.789Z";
const untyped = (value: unknown): never => value as never;
const VKEY = { turnKey: KEY, toolCallId: "w1", toolName: "rename_document", toolFingerprint: D, guardrail: "pii", argsDigest: digest("args") };

/** One call of each method with valid input, and what its failure must say it left behind. */
const CALLS: [string, (store: GuardrailStore) => Promise<unknown>, string][] = [
  ["getReceipt", (s) => s.getReceipt(KEY), "nothing was written (the operation is one transaction)"],
  [
    "putReceiptIfAbsent",
    (s) =>
      s.putReceiptIfAbsent({ turnKey: KEY, scopeId: "doc-1", turnId: "turn-1", policyVersion: "v1", moderationDigest: D, allowed: true, decidedAt: AT }),
    "the admission receipt was not stored",
  ],
  ["recordSuccessfulRead", (s) => s.recordSuccessfulRead({ turnKey: KEY, evidenceDigest: D }), "the read evidence was not recorded"],
  ["hasSuccessfulRead", (s) => s.hasSuccessfulRead({ turnKey: KEY, evidenceDigest: D }), "nothing was written (the operation is one transaction)"],
  ["releaseMutation", (s) => s.releaseMutation({ turnKey: KEY, token: "t" }), "the release was not recorded: the claim stays pending (closed)"],
  [
    "recordVerdict",
    (s) => s.recordVerdict({ ...VKEY, verdict: { action: "allow", outcome: "complete", detections: [] }, recordedAt: AT }),
    "nothing was written (the operation is one transaction)",
  ],
  ["getVerdict", (s) => s.getVerdict(VKEY), "nothing was written (the operation is one transaction)"],
  [
    "requestApproval",
    (s) =>
      s.requestApproval({
        approvalId: digest("approval"), turnKey: KEY, scopeId: "doc-1", toolCallId: "w1", toolName: "rename_document", toolFingerprint: D,
        argsDigest: D, args: { title: "x" }, guardrails: ["approval"], reason: "Rename?", requestedAt: AT,
      }),
    "nothing was written (the operation is one transaction)",
  ],
  ["getApproval", (s) => s.getApproval(D), "nothing was written (the operation is one transaction)"],
  ["applyApproval", (s) => s.applyApproval({ approvalId: D, appliedAt: AT }), "nothing was written (the operation is one transaction)"],
  ["decideApproval", (s) => s.decideApproval({ approvalId: D, decision: { decision: "approve" }, decidedAt: AT }), "nothing was written (the operation is one transaction)"],
  ["listApprovals", (s) => s.listApprovals({}), "nothing was written (the operation is one transaction)"],
  ["expireApprovals", (s) => s.expireApprovals({ olderThan: AT }), "nothing was written (the operation is one transaction)"],
  ["readAudit", (s) => s.readAudit({}), "nothing was written (the operation is one transaction)"],
  ["getAuditCursor", (s) => s.getAuditCursor("default"), "nothing was written (the operation is one transaction)"],
  ["advanceAuditCursor", (s) => s.advanceAuditCursor({ sink: "default", seq: 3 }), "nothing was written (the operation is one transaction)"],
  ["listUnresolved", (s) => s.listUnresolved(), "nothing was written (the operation is one transaction)"],
  [
    "reconcileMutation",
    (s) => s.reconcileMutation({ turnKey: KEY, resolution: "no-effect", operatorRef: "INC-9" }),
    "the reconciliation was not applied; check listUnresolved",
  ],
  ["prune", (s) => s.prune({ olderThan: AT }), "nothing was written (the operation is one transaction)"],
  [
    "appendAudit",
    (s) => s.appendAudit({ at: AT, decision: "executed", turnKey: KEY, scopeId: "doc-1", toolCallId: "w1", toolName: "rename_document", kind: "mutation" }),
    "nothing was written (the operation is one transaction)",
  ],
];

describe("SqliteGuardrailStore: a database failure names the method and what it left", () => {
  it.each(CALLS)("%s on a closed store rejects with a SqliteStoreError naming it, the file and the state left", async (operation, call, state) => {
    const store = SqliteGuardrailStore.open({ path: ":memory:" });
    store.close();
    const error = await rejection(call(store));
    expect(SqliteStoreError.isInstance(error)).toBe(true);
    const failure = error as SqliteStoreError;
    expect(failure.operation).toBe(operation);
    expect(failure.code).toBeUndefined();
    expect(failure.cause).toBeInstanceOf(TypeError);
    expect(failure.message).toBe(`SqliteGuardrailStore.${operation} failed on ":memory:": ${(failure.cause as Error).message}; ${state}`);
  });

  it("a lock held past busyTimeoutMs is named as such, with SQLite's code, and writes nothing", async () => {
    const { store, file } = fileStore(0);
    const other = new Database(file);
    disposers.push(() => other.close());
    other.exec("BEGIN IMMEDIATE");
    const error = await rejection(store.advanceAuditCursor({ sink: "default", seq: 3 }));
    expect(SqliteStoreError.isInstance(error)).toBe(true);
    expect((error as SqliteStoreError).code).toBe("SQLITE_BUSY");
    expect((error as Error).message).toMatch(
      /^SqliteGuardrailStore\.advanceAuditCursor failed on ".*g\.sqlite": another connection held the database's write lock for longer than busyTimeoutMs \(0 ms\): database is locked \(SQLITE_BUSY\); nothing was written/,
    );
    other.exec("ROLLBACK");
    expect(await store.getAuditCursor("default")).toBe(0);
  });

  it("busyTimeoutMs is how long a call waits for another process's lock: with 0, it fails at once", async () => {
    const { store, file } = fileStore(0);
    const locker: Worker<LockerReport> = startWorker<LockerReport>("sqlite-locker.ts", [file]);
    disposers.push(() => {
      if (locker.child.connected) locker.child.send({ type: "exit" } satisfies LockerCommand);
    });
    expect(await locker.next()).toEqual({ type: "ready" });
    // Released by the locker itself: this thread is blocked while SQLite waits. SQLite's own
    // default wait (5 s), were the option not passed, would outlast the lock and the call succeed.
    locker.child.send({ type: "lock", releaseAfterMs: 3_000 } satisfies LockerCommand);
    expect(await locker.next()).toEqual({ type: "locked" });
    const error = await rejection(store.advanceAuditCursor({ sink: "default", seq: 3 }));
    expect((error as SqliteStoreError).code).toBe("SQLITE_BUSY");
    expect(await locker.next()).toEqual({ type: "unlocked" });
    expect(await store.advanceAuditCursor({ sink: "default", seq: 3 })).toBe(true);
  });

  it("a failure that is not a lock timeout is reported as itself, with its code", async () => {
    const { store, file } = fileStore(0);
    const other = new Database(file);
    disposers.push(() => other.close());
    other.exec("DROP TABLE audit_cursors");
    const error = await rejection(store.getAuditCursor("default"));
    expect(SqliteStoreError.isInstance(error)).toBe(true);
    const message = (error as Error).message;
    expect(message).not.toMatch(/write lock/);
    expect(message).toMatch(/^SqliteGuardrailStore\.getAuditCursor failed on /);
  });
});

describe("SqliteGuardrailStore: invalid input is refused under its own name", () => {
  const LABELS: [string, (store: GuardrailStore) => Promise<unknown>][] = [
    ["turn key", (s) => s.getReceipt("nope")],
    ["admission receipt", (s) => s.putReceiptIfAbsent(untyped({}))],
    ["verdict record", (s) => s.recordVerdict(untyped({}))],
    ["verdict key", (s) => s.getVerdict(untyped({}))],
    ["approval request", (s) => s.requestApproval(untyped({}))],
    ["approval id", (s) => s.getApproval("nope")],
    ["approval decision", (s) => s.decideApproval(untyped({}))],
    ["approval application", (s) => s.applyApproval(untyped({}))],
    ["approval query", (s) => s.listApprovals(untyped({ limit: -1 }))],
    ["approval expiry", (s) => s.expireApprovals(untyped({}))],
    ["audit query", (s) => s.readAudit(untyped({ limit: -1 }))],
    ["audit sink name", (s) => s.getAuditCursor(untyped(5))],
    ["audit cursor advance", (s) => s.advanceAuditCursor(untyped({}))],
    ["reconciliation", (s) => s.reconcileMutation(untyped({}))],
    ["prune options", (s) => s.prune(untyped({}))],
  ];
  it.each(LABELS)("an invalid %s is a StoreContractError that names it", async (label, call) => {
    const store = SqliteGuardrailStore.open({ path: ":memory:" });
    disposers.push(() => store.close());
    const error = await rejection(call(store));
    expect(StoreContractError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(new RegExp(`^invalid ${label}: `));
  });
});

describe("SqliteGuardrailStore: trust and closing", () => {
  it("an opened store is a trusted store", () => {
    const store = SqliteGuardrailStore.open({ path: ":memory:" });
    disposers.push(() => store.close());
    expect(isTrustedStore(store)).toBe(true);
  });

  it("an instance of a subclass is not trusted: it may answer otherwise", () => {
    const { store, file } = fileStore(0);
    store.close();
    // The constructor is private to TypeScript, not at run time: a subclass can reach it.
    const Base = SqliteGuardrailStore as unknown as new (db: Database.Database, now: () => Date, path: string, busyTimeoutMs: number) => object;
    class Lenient extends Base {}
    const db = new Database(file);
    disposers.push(() => db.close());
    const lenient = new Lenient(db, () => new Date(), file, 0);
    expect(lenient).toBeInstanceOf(SqliteGuardrailStore);
    expect(isTrustedStore(lenient as GuardrailStore)).toBe(false);
  });

  it("close is idempotent", () => {
    const store = SqliteGuardrailStore.open({ path: ":memory:" });
    store.close();
    expect(() => store.close()).not.toThrow();
  });
});

describe("SqliteGuardrailStore: a corrupted row says what is wrong with it", () => {
  async function withAudit() {
    const { store, file } = fileStore(0);
    await store.appendAudit({ at: AT, decision: "executed", turnKey: KEY, scopeId: "doc-1", toolCallId: "w1", toolName: "rename_document", kind: "mutation" });
    const db = new Database(file);
    disposers.push(() => db.close());
    return { store, db };
  }

  it("an audit event whose JSON does not parse is refused with the parse error as its cause", async () => {
    const { store, db } = await withAudit();
    db.exec("UPDATE audit_events SET event = '{oops'");
    const error = await rejection(store.readAudit());
    expect(StoreContractError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(/^corrupt audit event 1 in the SQLite guardrail store: the JSON column does not parse/);
    expect((error as Error).cause).toBeInstanceOf(SyntaxError);
  });

  it("an audit event stored as a blob is refused as not text, with no cause", async () => {
    const { store, db } = await withAudit();
    db.exec("UPDATE audit_events SET event = X'7B7D'");
    const error = await rejection(store.readAudit());
    expect(StoreContractError.isInstance(error)).toBe(true);
    expect((error as Error).message).toBe("corrupt audit event 1 in the SQLite guardrail store: the JSON column is not text");
    expect("cause" in (error as Error)).toBe(false);
  });

  it.each(["[1]", "null", "5"])("an audit event whose JSON is %s is refused as not a JSON object", async (json) => {
    const { store, db } = await withAudit();
    db.prepare("UPDATE audit_events SET event = ?").run(json);
    const error = await rejection(store.readAudit());
    expect(StoreContractError.isInstance(error)).toBe(true);
    expect((error as Error).message).toBe("corrupt audit event 1 in the SQLite guardrail store: not a JSON object");
  });

  it.each([
    ["turnKey", digest("another turn")],
    ["guardrail", "other-guardrail"],
    ["argsDigest", digest("other args")],
  ])("a verdict whose stored %s differs from the key it is filed under is refused", async (field, value) => {
    const { store, file } = fileStore(0);
    const key = VKEY;
    await store.recordVerdict({ ...key, verdict: { action: "allow", outcome: "complete", detections: [] }, recordedAt: AT });
    const db = new Database(file);
    disposers.push(() => db.close());
    db.prepare(`UPDATE verdicts SET record = json_set(record, '$.${field}', ?)`).run(value);
    const error = await rejection(store.getVerdict(key));
    expect(StoreContractError.isInstance(error)).toBe(true);
    expect((error as Error).message).toBe(
      "corrupt verdict record in the SQLite guardrail store: the record's key is not the key it is stored under",
    );
  });

  it("a file written by a newer version is refused with that reason alone, not as a generic open failure", () => {
    const { store, file } = fileStore(0);
    store.close();
    const db = new Database(file);
    db.prepare("INSERT INTO schema_migrations (version, applied_at) VALUES (99, ?)").run(AT);
    db.close();
    expect(() => SqliteGuardrailStore.open({ path: file })).toThrow(
      new RegExp(`^the SQLite guardrail store at ${JSON.stringify(file).replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")} has schema version 99`),
    );
    expect(() => SqliteGuardrailStore.open({ path: file })).toThrow(
      /this version supports up to \d+\. Upgrade the package; never downgrade a store in use$/,
    );
  });

  it("a schema_migrations table whose version is not a schema version is refused as unreadable, not migrated", () => {
    const { store, file } = fileStore(0);
    store.close();
    const db = new Database(file);
    db.exec("DELETE FROM schema_migrations");
    db.prepare("INSERT INTO schema_migrations (version, applied_at) VALUES (-1, ?)").run(AT);
    db.close();
    expect(() => SqliteGuardrailStore.open({ path: file })).toThrow(
      `the SQLite guardrail store at ${JSON.stringify(file)} has an unreadable schema_migrations table (max version -1)`,
    );
    const after = new Database(file);
    disposers.push(() => after.close());
    expect(after.prepare("SELECT version FROM schema_migrations").pluck().all()).toEqual([-1]);
  });

  it("a file whose write lock another connection holds while it is opened is refused as an open failure naming the path", () => {
    const dir = mkdtempSync(join(tmpdir(), "arkah-sqlite-errors-"));
    disposers.push(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, "g.sqlite");
    const other = new Database(file);
    disposers.push(() => other.close());
    other.exec("CREATE TABLE unrelated (x INTEGER)");
    other.exec("BEGIN IMMEDIATE");
    other.exec("INSERT INTO unrelated VALUES (1)");
    expect(() => SqliteGuardrailStore.open({ path: file, busyTimeoutMs: 0 })).toThrow(
      `cannot open the SQLite guardrail store at ${JSON.stringify(file)}: database is locked`,
    );
    other.exec("ROLLBACK");
    const store = SqliteGuardrailStore.open({ path: file, busyTimeoutMs: 0 });
    disposers.push(() => store.close());
    expect(isTrustedStore(store)).toBe(true);
  });
});

describe("SqliteGuardrailStore: more corrupted rows, paths and options", () => {
  const IDENTITY = { turnKey: KEY, scopeId: "doc-1", toolCallId: "w1", toolName: "rename_document", argsDigest: D, mutationKey: digest("m"), toolFingerprint: D };

  function second(file: string): Database.Database {
    const db = new Database(file);
    disposers.push(() => db.close());
    return db;
  }

  it("a receipt row that does not parse is refused, naming the turn it is for", async () => {
    const { store, file } = fileStore(0);
    await store.putReceiptIfAbsent({ turnKey: KEY, scopeId: "doc-1", turnId: "turn-1", policyVersion: "v1", moderationDigest: D, allowed: true, decidedAt: AT });
    second(file).exec("UPDATE receipts SET allowed = 2");
    const error = await rejection(store.getReceipt(KEY));
    expect(StoreContractError.isInstance(error)).toBe(true);
    expect((error as Error).message.startsWith(`corrupt admission receipt for turn ${KEY} in the SQLite guardrail store: `)).toBe(true);
  });

  it("an approval row whose status column disagrees with its record is refused, naming the request", async () => {
    const { store, file } = fileStore(0);
    const id = digest("approval");
    await store.requestApproval({
      approvalId: id, turnKey: KEY, scopeId: "doc-1", toolCallId: "w1", toolName: "rename_document", toolFingerprint: D,
      argsDigest: D, args: { title: "x" }, guardrails: ["approval"], reason: "Rename?", requestedAt: AT,
    });
    second(file).exec("UPDATE approvals SET status = 'approved'");
    const error = await rejection(store.getApproval(id));
    expect(StoreContractError.isInstance(error)).toBe(true);
    expect((error as Error).message).toBe(
      `corrupt approval request ${id} in the SQLite guardrail store: the record does not match the row it is stored in`,
    );
  });

  it.each([
    ["half a result (content only)", "UPDATE claims SET result_content = 'x'"],
    ["half a result (status only)", "UPDATE claims SET result_status = 'success'"],
    ["a whole result", "UPDATE claims SET result_content = 'x', result_status = 'success'"],
  ])("a pending claim holding %s is refused and the turn cannot claim again", async (_label, edit) => {
    const { store, file } = fileStore(0);
    expect((await store.claimMutation(IDENTITY)).status).toBe("acquired");
    second(file).exec(edit);
    const error = await rejection(store.claimMutation(IDENTITY));
    expect(StoreContractError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(new RegExp(`^corrupt claim for turn ${KEY} in the SQLite guardrail store: `));
  });

  it("a pending claim holding a whole result is refused because only a complete claim has one", async () => {
    const { store, file } = fileStore(0);
    await store.claimMutation(IDENTITY);
    second(file).exec("UPDATE claims SET result_content = 'x', result_status = 'success'");
    await expect(store.claimMutation(IDENTITY)).rejects.toThrow(/a complete claim has a result, and no other claim does/);
  });

  it("a completed write is answered with its stored result when the same call comes again", async () => {
    const { store } = fileStore(0);
    const claim = await store.claimMutation(IDENTITY);
    if (claim.status !== "acquired") throw new Error("expected acquired");
    const result = { content: "renamed", status: "success" as const };
    expect(await store.settleMutation({ turnKey: KEY, token: claim.token, outcome: "complete", result })).toBe(true);
    expect(await store.claimMutation(IDENTITY)).toEqual({ status: "replay", result });
  });

  it("an audit cursor that does not parse is refused, naming its sink", async () => {
    const { store, file } = fileStore(0);
    expect(await store.advanceAuditCursor({ sink: "default", seq: 3 })).toBe(true);
    second(file).exec("UPDATE audit_cursors SET seq = 'x'");
    const error = await rejection(store.getAuditCursor("default"));
    expect(StoreContractError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(/^corrupt audit cursor of "default" in the SQLite guardrail store: /);
  });

  it("a path under a regular file is refused, saying its directory cannot be read and why", () => {
    const { file } = fileStore(0);
    const path = join(file, "sub", "g.sqlite");
    expect(() => SqliteGuardrailStore.open({ path })).toThrow(
      /^cannot open the SQLite guardrail store at .*: its directory ".*sub" cannot be read \(ENOTDIR\)$/,
    );
  });

  it.each([
    ["an empty path", { path: "" }, /path must name a database file \(or be ":memory:"\)/],
    ["a clock that is not a function", { path: ":memory:", now: 5 }, /now must be a function returning a Date/],
    ["an unknown synchronous mode", { path: ":memory:", synchronous: "off" }, /synchronous/],
  ])("%s is refused with a message that says what is wrong", (_label, options, message) => {
    expect(() => SqliteGuardrailStore.open(untyped(options))).toThrow(message);
  });

  it.each(["full", "normal"] as const)("synchronous %s is accepted", (synchronous) => {
    const store = SqliteGuardrailStore.open({ path: ":memory:", synchronous });
    disposers.push(() => store.close());
    expect(isTrustedStore(store)).toBe(true);
  });
});

describe("SqliteGuardrailStore: a file that is not a database", () => {
  it("is refused as a generic open failure naming the path and SQLite's reason", () => {
    const { store, file } = fileStore(0);
    store.close();
    rmSync(file);
    writeFileSync(file, "this is not a database file, just text that is long enough to have a header".repeat(20));
    expect(() => SqliteGuardrailStore.open({ path: file })).toThrow(/^cannot open the SQLite guardrail store at .*: file is not a database$/);
  });
});
