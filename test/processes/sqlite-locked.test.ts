/**
 * SQLite locked by another process past the busy timeout (issue 12, item 3): a child process takes
 * the file's write lock (`BEGIN EXCLUSIVE`) just before one store operation of a guarded turn and
 * holds it longer than the store's `busyTimeoutMs`. For each operation of the turn: the failure is a
 * `SqliteStoreError` that names the operation, the file, the lock and what it left; nothing was
 * written; no write ran twice (counted where it runs); a claim cut off leaves the slot free, a
 * settlement cut off leaves the claim pending (closed); once the lock is gone the retry of the same
 * turn runs the write once, replays it, or is refused `mutation_pending`.
 */
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  SettlementError,
  type AdmissionReceipt,
  type GuardrailStore,
} from "arkah-agent-guardrails";
import {
  type ClaimOptions,
  type ClaimResult,
  type MutationIdentity,
  type MutationSettlement,
  type ReadEvidence,
  type RecordReadOptions,
} from "arkah-agent-guardrails/store";
import { SqliteGuardrailStore, SqliteStoreError } from "arkah-agent-guardrails/sqlite";
import { admit, DocumentService, ForwardingStore, guardedAgent, invokeTurn, outcomeOf, read, rename, turnInput } from "../support/fixtures.js";
import { startWorker, tempDir, type Worker } from "./support.js";
import type { LockerCommand, LockerReport } from "./workers/sqlite-locker.js";

const BUSY_TIMEOUT_MS = 50;
const RESULT = JSON.stringify({ title: "Field notes", revision: 1 });

type LockedOperation = "putReceiptIfAbsent" | "recordSuccessfulRead" | "claimMutation" | "settleMutation";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A fresh file with a store on it, and another process ready to lock it. */
async function setup() {
  const dir = tempDir("arkah-locked-");
  cleanups.push(dir.remove);
  const path = join(dir.path, "guardrails.sqlite");
  const store = SqliteGuardrailStore.open({ path, busyTimeoutMs: BUSY_TIMEOUT_MS });
  cleanups.push(() => {
    store.close();
  });
  const locker: Worker<LockerReport> = startWorker<LockerReport>("sqlite-locker.ts", [path]);
  cleanups.push(async () => {
    if (locker.child.connected) locker.child.send({ type: "exit" } satisfies LockerCommand);
    await locker.exited;
  });
  expect(await locker.next()).toEqual({ type: "ready" });
  const command = async (type: "lock" | "unlock") => {
    locker.child.send({ type } satisfies LockerCommand);
    expect(await locker.next()).toEqual({ type: type === "lock" ? "locked" : "unlocked" });
  };
  return { path, store, lock: () => command("lock"), unlock: () => command("unlock") };
}

/** The store, with the other process taking the write lock just before `which` (once). */
class LockedBefore extends ForwardingStore {
  #armed = true;
  constructor(
    inner: GuardrailStore,
    private readonly which: LockedOperation,
    private readonly lock: () => Promise<void>,
  ) {
    super(inner);
  }
  async #maybeLock(operation: LockedOperation): Promise<void> {
    if (operation !== this.which || !this.#armed) return;
    this.#armed = false;
    await this.lock();
  }
  override async putReceiptIfAbsent(receipt: AdmissionReceipt): Promise<AdmissionReceipt> {
    await this.#maybeLock("putReceiptIfAbsent");
    return super.putReceiptIfAbsent(receipt);
  }
  override async recordSuccessfulRead(evidence: ReadEvidence, options?: RecordReadOptions): Promise<void> {
    await this.#maybeLock("recordSuccessfulRead");
    return super.recordSuccessfulRead(evidence, options);
  }
  override async claimMutation(identity: MutationIdentity, options?: ClaimOptions): Promise<ClaimResult> {
    await this.#maybeLock("claimMutation");
    return super.claimMutation(identity, options);
  }
  override async settleMutation(settlement: MutationSettlement): Promise<boolean> {
    await this.#maybeLock("settleMutation");
    return super.settleMutation(settlement);
  }
}

const script = () => [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }];
const attempt = (store: GuardrailStore, service: DocumentService, input = turnInput()) =>
  invokeTurn(guardedAgent({ store, input, service, script: script() }).agent, input);
const rejection = (promise: Promise<unknown>) =>
  promise.then(
    () => {
      throw new Error("expected a rejection");
    },
    (error: unknown) => error,
  );

function expectLocked(error: unknown, path: string, operation: LockedOperation, state: string): void {
  const failure = SqliteStoreError.find(error);
  expect(failure, String(error)).toBeDefined();
  expect(failure?.operation).toBe(operation);
  expect(failure?.code).toBe("SQLITE_BUSY");
  expect(failure?.message).toBe(
    `SqliteGuardrailStore.${operation} failed on ${JSON.stringify(path)}: another connection held the database's write lock ` +
      `for longer than busyTimeoutMs (${String(BUSY_TIMEOUT_MS)} ms): database is locked (SQLITE_BUSY); ${state}`,
  );
}

describe("SQLite locked by another process past busyTimeoutMs", () => {
  it("during admission: admitTurn rejects with SqliteStoreError, no receipt; admitted once the lock is gone", async () => {
    const { path, store, lock, unlock } = await setup();
    const input = turnInput();
    const error = await rejection(admit(new LockedBefore(store, "putReceiptIfAbsent", lock), input));
    await unlock();
    expectLocked(error, path, "putReceiptIfAbsent", "the admission receipt was not stored");
    expect(await store.listUnresolved()).toEqual([]);
    const service = new DocumentService();
    await expect(attempt(store, service, input)).rejects.toThrow(/no admission receipt/);
    await admit(store, input);
    expect(outcomeOf(await attempt(store, service, input), "w1")).toMatchObject({ status: "success", content: RESULT });
    expect(service.writes).toBe(1);
  });

  it("while recording the read: the run fails before any claim; the retry runs the write once", async () => {
    const { path, store, lock, unlock } = await setup();
    const service = new DocumentService();
    await admit(store, turnInput());
    const error = await rejection(attempt(new LockedBefore(store, "recordSuccessfulRead", lock), service));
    await unlock();
    expectLocked(error, path, "recordSuccessfulRead", "the read evidence was not recorded");
    expect(service.writes).toBe(0);
    expect(await store.listUnresolved()).toEqual([]);

    expect(outcomeOf(await attempt(store, service), "w1")).toMatchObject({ status: "success", content: RESULT });
    expect(outcomeOf(await attempt(store, service), "w1")).toMatchObject({ status: "success", content: RESULT });
    expect(service.writes).toBe(1);
  });

  it("during the claim: the run fails, nothing ran, the slot is free; the retry runs the write once, the next replays it", async () => {
    const { path, store, lock, unlock } = await setup();
    const service = new DocumentService();
    await admit(store, turnInput());
    const error = await rejection(attempt(new LockedBefore(store, "claimMutation", lock), service));
    await unlock();
    expectLocked(error, path, "claimMutation", "the claim was not acquired and nothing was written; the turn may claim again");
    expect(service.writes).toBe(0);
    expect(await store.listUnresolved()).toEqual([]);

    expect(outcomeOf(await attempt(store, service), "w1")).toMatchObject({ status: "success", content: RESULT });
    expect(outcomeOf(await attempt(store, service), "w1")).toMatchObject({ status: "success", content: RESULT });
    expect(service.writes).toBe(1);
  });

  it("during the settlement after the write: SettlementError, the claim stays pending (closed), a retry is refused", async () => {
    const { path, store, lock, unlock } = await setup();
    const service = new DocumentService();
    await admit(store, turnInput());
    const error = await rejection(attempt(new LockedBefore(store, "settleMutation", lock), service));
    await unlock();
    expect(SettlementError.find(error)?.outcome).toBe("complete");
    expectLocked(
      error,
      path,
      "settleMutation",
      "the settlement was not recorded: the claim stays pending (closed) and never runs again until an operator reconciles it",
    );
    expect(service.writes).toBe(1);
    expect((await store.listUnresolved()).map((claim) => claim.state)).toEqual(["pending"]);

    expect(outcomeOf(await attempt(store, service), "w1")).toMatchObject({ status: "error", code: "mutation_pending" });
    expect(service.writes).toBe(1);
  });
});
