/**
 * examples/file-store, the adapter written from docs/storage-adapters.md: the whole conformance kit
 * (a fresh directory per store), OS processes racing claims and audit appends on one directory, a
 * process killed in the middle of a commit, and a guarded `createAgent` turn and its retry.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { digest, mutationKey, toolFingerprint, turnKey, type AuditEvent, type MutationIdentity } from "arkah-agent-guardrails";
import { validateGuardrailStore } from "arkah-agent-guardrails/testing";
import { FileGuardrailStore } from "../../examples/file-store/store.js";
import { startWorker, type Worker } from "../processes/support.js";
import type { FileWorkerCommand, FileWorkerReport } from "../processes/workers/file-store-worker.js";
import { admit, guardedAgent, invokeTurn, outcomeOf, read, rename, turnInput, DocumentService } from "../support/fixtures.js";

const root = mkdtempSync(join(tmpdir(), "arkah-file-store-"));
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
