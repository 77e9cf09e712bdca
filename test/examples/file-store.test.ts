/**
 * examples/file-store, the adapter written from docs/storage-adapters.md: the whole conformance kit
 * (a fresh directory per store), OS processes racing claims and audit appends on one directory, a
 * process killed in the middle of a commit, and a guarded `createAgent` turn and its retry.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { digest, mutationKey, turnKey, type AuditEvent, type JsonValue } from "arkah-agent-guardrails";
import { KEY_VALUE_RECORD_KEYS, StoreContractError, toolFingerprint, type MutationIdentity } from "arkah-agent-guardrails/store";
import { validateGuardrailStore } from "arkah-agent-guardrails/testing";
import { writeRawFileRecord } from "../../examples/file-store/conformance.js";
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
  // The example's shipped hook: the kit's primitives suite, and its corruption suite located by KEY_VALUE_RECORD_KEYS.
  writeRaw: writeRawFileRecord,
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

/** A claim file as the kit's corruption suite writes it: through the example's hook, at the place `KEY_VALUE_RECORD_KEYS` names. */
async function writeClaim(store: FileGuardrailStore, turnKey: string, value: "unparseable" | { readonly copyOf: string }): Promise<void> {
  const { collection } = KEY_VALUE_RECORD_KEYS.claim;
  if (value === "unparseable") {
    await writeRawFileRecord(store, { collection, key: turnKey, unparseable: true });
    return;
  }
  const other = await store.readRawRecord(collection, value.copyOf);
  if (other === undefined) throw new Error(`no claim stored under ${value.copyOf}`);
  // A well-formed file for `turnKey` holding the other turn's claim: only the base's key check catches it.
  await writeRawFileRecord(store, { collection, key: turnKey, value: other as JsonValue });
}

describe("FileGuardrailStore fails closed on records corrupted on disk", () => {
  it("a claim made unparseable, or replaced by another turn's claim, is a StoreContractError and is never reopened", async () => {
    const store = await FileGuardrailStore.open({ directory: freshDirectory() });
    try {
      const first = identityFor("corrupt-1");
      const second = identityFor("corrupt-2");
      for (const identity of [first, second]) expect((await store.claimMutation(identity)).status).toBe("acquired");

      await writeClaim(store, second.turnKey, { copyOf: first.turnKey });
      await expect(store.claimMutation(second)).rejects.toThrow(StoreContractError);
      await expect(store.getMutation(second.turnKey)).rejects.toThrow(/another key/);

      // A file that is not even a record of its key fails in the adapter, before the base sees it.
      await writeClaim(store, first.turnKey, "unparseable");
      await expect(store.claimMutation(first)).rejects.toThrow(/not JSON/);
      await expect(store.listUnresolved()).rejects.toThrow(StoreContractError);
    } finally {
      await store.close();
    }
  });
});
