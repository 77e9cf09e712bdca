/**
 * examples/file-store, the adapter written from docs/storage-adapters.md: the whole conformance kit
 * (a fresh directory per store), OS processes racing claims and audit appends on one directory, a
 * process killed in the middle of a commit, and a guarded `createAgent` turn and its retry.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { digest, mutationKey, toolFingerprint, turnKey, type AuditEvent } from "arkah-agent-guardrails";
import {
  KEY_VALUE_COLLECTIONS,
  StoreContractError,
  verdictStorageKey,
  type MutationIdentity,
  type VerdictKey,
} from "arkah-agent-guardrails/store";
import { validateGuardrailStore } from "arkah-agent-guardrails/testing";
import { FileGuardrailStore } from "../../examples/file-store/store.js";
import { startWorker, type Worker } from "../processes/support.js";
import type { FileWorkerCommand, FileWorkerReport } from "../processes/workers/file-store-worker.js";
import { admit, guardedAgent, invokeTurn, outcomeOf, read, rename, turnInput, DocumentService } from "../support/fixtures.js";

/**
 * On tmpfs when the machine has one: the kit checks what the store answers, not what survives a
 * power loss, and a disk's fsyncs (several per commit) made it take minutes. A process killed
 * mid-commit (below) loses its memory, not the page cache, so the crash tests hold on tmpfs too.
 */
const root = mkdtempSync(join(existsSync("/dev/shm") ? "/dev/shm" : tmpdir(), "arkah-file-store-"));
let stores = 0;
/** A fresh, empty directory under the run's temporary root. */
const freshDirectory = () => join(root, `store-${String(++stores)}`);
afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

/** Each conformance store's directory, removed with the store. */
const directories = new WeakMap<FileGuardrailStore, string>();

await validateGuardrailStore<FileGuardrailStore>({
  storeName: "FileGuardrailStore (examples/file-store, a directory per test)",
  createStore: async ({ now }) => {
    const directory = freshDirectory();
    const store = await FileGuardrailStore.open({ directory, now });
    directories.set(store, directory);
    return store;
  },
  destroyStore: async (store) => {
    await store.close();
    const directory = directories.get(store);
    if (directory !== undefined) rmSync(directory, { recursive: true, force: true });
  },
});

const SCOPE = "doc-files";
const call = { id: "write-1", name: "rename_document", args: { title: "Field notes" } };

function identityFor(turnId: string): MutationIdentity {
  const ref = { scopeId: SCOPE, turnId };
  return {
    turnKey: turnKey(ref),
    scopeId: SCOPE,
    toolCallId: call.id,
    toolName: call.name,
    argsDigest: digest(call.args),
    mutationKey: mutationKey(ref, call),
    toolFingerprint: toolFingerprint({ name: call.name }),
  };
}

function eventFor(turnId: string): AuditEvent {
  return { at: new Date().toISOString(), decision: "executed", turnKey: identityFor(turnId).turnKey, scopeId: SCOPE, kind: "mutation" };
}

const workers: Worker<FileWorkerReport>[] = [];
afterEach(() => {
  for (const worker of workers.splice(0)) if (worker.child.exitCode === null && worker.child.signalCode === null) worker.child.kill("SIGKILL");
});

function start(directory: string, name: string, crashPoint?: "journaled" | "applied"): Worker<FileWorkerReport> {
  const worker = startWorker<FileWorkerReport>("file-store-worker.ts", [directory, name, ...(crashPoint === undefined ? [] : [crashPoint])]);
  workers.push(worker);
  return worker;
}

const send = (worker: Worker<FileWorkerReport>, command: FileWorkerCommand) => {
  worker.child.send(command);
};

/** The worker's next report of `type`; an `error` report fails the test with the worker's stack. */
async function expectReport<T extends FileWorkerReport["type"]>(
  worker: Worker<FileWorkerReport>,
  type: T,
): Promise<Extract<FileWorkerReport, { type: T }>> {
  const report = await worker.next();
  if (report.type === "error") throw new Error(`worker failed: ${report.message}`);
  if (report.type !== type) throw new Error(`expected ${type}, got ${JSON.stringify(report)}`);
  return report as Extract<FileWorkerReport, { type: T }>;
}

describe("FileGuardrailStore across OS processes", () => {
  const PROCESSES = 4;

  it(`${String(PROCESSES)} processes race claims on one turn, 10 turns: exactly one acquires each; concurrent audit appends get unique, gapless numbers`, async () => {
    const directory = freshDirectory();
    const racers = Array.from({ length: PROCESSES }, (_, index) => start(directory, `w${String(index)}`));
    await Promise.all(racers.map((worker) => expectReport(worker, "ready")));

    for (let turn = 0; turn < 10; turn++) {
      const identity = identityFor(`race-${String(turn)}`);
      for (const worker of racers) send(worker, { type: "claim", identity });
      const results = await Promise.all(racers.map(async (worker) => (await expectReport(worker, "claimed")).result));
      const statuses = results.map((result) => result.status).sort();
      expect(statuses, `turn ${String(turn)}: one winner, the others see its pending claim`).toEqual([
        "acquired",
        ...Array.from({ length: PROCESSES - 1 }, () => "pending"),
      ]);
    }

    const EACH = 15;
    for (const [index, worker] of racers.entries()) send(worker, { type: "append", event: eventFor(`append-${String(index)}`), count: EACH });
    await Promise.all(racers.map((worker) => expectReport(worker, "appended")));
    for (const worker of racers) send(worker, { type: "exit" });
    expect(await Promise.all(racers.map((worker) => worker.exited))).toEqual(racers.map(() => ({ code: 0, signal: null })));

    const store = await FileGuardrailStore.open({ directory });
    try {
      const events = await store.readAudit();
      expect(events.map((event) => event.seq)).toEqual(Array.from({ length: PROCESSES * EACH }, (_, index) => index + 1));
      // Each process's own events are in its order: every append is its own step.
      for (let index = 0; index < PROCESSES; index++) {
        const mine = events.filter((event) => event.toolCallId?.startsWith(`w${String(index)}-`) === true).map((event) => event.toolCallId);
        expect(mine).toEqual(Array.from({ length: EACH }, (_, n) => `w${String(index)}-${String(n)}`));
      }
      expect(await store.listUnresolved()).toHaveLength(10);
    } finally {
      await store.close();
    }
  }, 300_000);

  for (const point of ["journaled", "applied"] as const) {
    it(`a process killed in the middle of a commit (${point === "journaled" ? "journal durable, nothing applied" : "journal durable, one write applied"}): the next opener applies the whole step`, async () => {
      const directory = freshDirectory();
      const identity = identityFor(`crash-${point}`);
      const audit = eventFor(`crash-${point}`);
      const worker = start(directory, "victim", point);
      await expectReport(worker, "ready");
      send(worker, { type: "settle-and-hang", identity, audit });
      const stopped = await expectReport(worker, "in-commit");
      expect(stopped.point.point).toBe(point);
      expect(worker.child.kill("SIGKILL")).toBe(true);
      expect(await worker.exited).toEqual({ code: null, signal: "SIGKILL" });

      // Left behind: the journal of a committed step, and the dead process's lock.
      expect(existsSync(join(directory, "journal"))).toBe(true);
      expect(readFileSync(join(directory, "lock"), "utf8")).toContain(`${String(worker.child.pid)} `);

      const store = await FileGuardrailStore.open({ directory, lockTimeoutMs: 60_000 });
      try {
        expect(existsSync(join(directory, "journal"))).toBe(false);
        // The settlement, all of it: the claim complete, out of the unresolved index, its event numbered.
        expect(await store.getMutation(identity.turnKey)).toEqual({
          state: "complete",
          toolName: call.name,
          toolCallId: call.id,
          result: { content: "renamed", status: "success" },
        });
        expect(await store.listUnresolved()).toEqual([]);
        expect(await store.readAudit()).toEqual([{ ...audit, seq: 1 }]);
        expect(await store.claimMutation(identity)).toEqual({ status: "replay", result: { content: "renamed", status: "success" } });
        await store.appendAudit(audit);
        expect((await store.readAudit()).map((event) => event.seq)).toEqual([1, 2]);
      } finally {
        await store.close();
      }
    }, 120_000);
  }
});

describe("FileGuardrailStore under createAgent", () => {
  it("a read then one write; the turn retried by a new store object on the directory replays it, writing nothing", async () => {
    const directory = freshDirectory();
    const service = new DocumentService();
    const input = turnInput({ turnId: "file-turn" });
    const script = [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "Renamed." }];

    const first = await FileGuardrailStore.open({ directory });
    await admit(first, input);
    const run = guardedAgent({ store: first, input, service, script });
    const written = outcomeOf(await invokeTurn(run.agent, input), "w1");
    await first.close();
    expect(written).toMatchObject({ status: "success", code: undefined });
    expect(service.writes).toBe(1);
    expect(service.title).toBe("Field notes");

    // As a restarted process would: a new store object, a new agent, the same turn and call ids.
    const second = await FileGuardrailStore.open({ directory });
    try {
      const retry = guardedAgent({ store: second, input, service, script });
      const replayed = outcomeOf(await invokeTurn(retry.agent, input), "w1");
      expect(replayed).toEqual(written);
      expect(service.writes).toBe(1);
      const decisions = (await second.readAudit({ turnKey: turnKey(input) })).map((event) => `${event.decision}:${event.toolCallId ?? ""}`);
      expect(decisions).toEqual(["executed:r1", "executed:w1", "executed:r1", "replayed:w1"]);
    } finally {
      await second.close();
    }
  }, 60_000);
});

/**
 * What the conformance kit's fail-closed suite asks of an adapter (`corruptRecord`): the record of
 * a kind stored under a key made unparseable (`invalid`), or replaced by another key's record
 * (`wrong_key`). Written here against the file store's raw files; the kit's own suite can take it.
 */
interface Corruption {
  readonly record: "receipt" | "read" | "claim" | "verdict" | "approval" | "auditCursor" | "turn";
  readonly key: string;
  readonly mode: "invalid" | "wrong_key";
  readonly otherKey: string;
}

/** Where the key-value base keeps a record of each kind, from the kit's key for it. */
function locate(record: Corruption["record"], key: string): readonly [string, string] {
  const C = KEY_VALUE_COLLECTIONS;
  switch (record) {
    case "receipt":
      return [C.receipts, key];
    case "read":
      // The kit names a read `${turnKey}:${evidenceDigest}`; the base keeps a turn's reads in one record.
      return [C.reads, key.split(":", 1)[0] ?? key];
    case "claim":
      return [C.claims, key];
    case "verdict":
      return [C.verdicts, verdictStorageKey(JSON.parse(key) as VerdictKey)];
    case "approval":
      return [C.approvals, key];
    case "auditCursor":
      return [C.cursors, key];
    case "turn":
      return [C.turns, key];
  }
}

async function corruptRecord(store: FileGuardrailStore, target: Corruption): Promise<void> {
  const [collection, key] = locate(target.record, target.key);
  if (target.mode === "invalid") {
    await store.writeRawRecord(collection, key, JSON.stringify({ key, value: { corrupt: true } }));
    return;
  }
  const [otherCollection, otherKey] = locate(target.record, target.otherKey);
  const other = await store.readRawRecord(otherCollection, otherKey);
  if (other === undefined) throw new Error(`no ${target.record} stored under ${target.otherKey}`);
  // A well-formed file for `key` holding the other key's record: only the base's key check catches it.
  await store.writeRawRecord(collection, key, JSON.stringify({ key, value: other }));
}

describe("FileGuardrailStore fails closed on records corrupted on disk", () => {
  it("a claim made unparseable, or replaced by another turn's claim, is a StoreContractError and is never reopened", async () => {
    const store = await FileGuardrailStore.open({ directory: freshDirectory() });
    try {
      const first = identityFor("corrupt-1");
      const second = identityFor("corrupt-2");
      for (const identity of [first, second]) expect((await store.claimMutation(identity)).status).toBe("acquired");

      await corruptRecord(store, { record: "claim", key: second.turnKey, mode: "wrong_key", otherKey: first.turnKey });
      await expect(store.claimMutation(second)).rejects.toThrow(StoreContractError);
      await expect(store.getMutation(second.turnKey)).rejects.toThrow(/another key/);

      await corruptRecord(store, { record: "claim", key: first.turnKey, mode: "invalid", otherKey: second.turnKey });
      await expect(store.claimMutation(first)).rejects.toThrow(StoreContractError);
      await expect(store.listUnresolved()).rejects.toThrow(StoreContractError);

      // A file that is not even a record of its key fails in the adapter, before the base sees it.
      await store.writeRawRecord(KEY_VALUE_COLLECTIONS.claims, first.turnKey, "{truncated");
      await expect(store.claimMutation(first)).rejects.toThrow(/not JSON/);
    } finally {
      await store.close();
    }
  });
});
