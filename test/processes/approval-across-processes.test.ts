/**
 * An approval decided from another process, as real OS processes: process 1 runs a guarded turn
 * on a durable guardrail store and a durable LangGraph checkpointer until `requireApproval` pauses
 * it, and exits; process 2 is the operator's `arkah-guardrails` CLI (`approvals`, `decide`);
 * process 3 builds the agent from scratch on the same store and checkpoints and resumes the thread
 * with `new Command({ resume })`. The rename tool appends a line to an effects file each time its
 * body runs: approved, it ran exactly once (in process 3); rejected, never, and the model got
 * `approval_rejected`. The decision recorded by the CLI is the one applied, whatever the resume
 * value says.
 *
 * On SQLite files (`@langchain/langgraph-checkpoint-sqlite`) and on PostgreSQL schemas
 * (`@langchain/langgraph-checkpoint-postgres`).
 */
import { spawnSync } from "node:child_process";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ApprovalRecord } from "arkah-agent-guardrails";
import { readEffects, startWorker, tempDir } from "./support.js";
import type { ApprovalAgentReport, ApprovalAgentSpec, Durable, PausedInterrupt } from "./workers/approval-agent.js";
import { WRITE_CALL_ID, WRITE_RESULT } from "./workers/guarded-turn.js";
import { adminPool, describePostgres, dropSchema, freshSchema, requirePostgres } from "../support/postgres.js";

const ROOT = resolve(fileURLToPath(new URL("../..", import.meta.url)));

/** Starting Node and tsx, and loading langchain, per process: generous on a loaded machine. */
const SLOW = 240_000;

interface Backend {
  readonly store: Durable;
  readonly checkpoints: Durable;
  /** The CLI's store flags. */
  readonly flags: string[];
  readonly effectsFile: string;
}

/** Runs one phase of the agent in a new process to its report, and checks that it exited cleanly. */
async function agentProcess(backend: Backend, turnId: string, phase: "pause" | "resume", resume?: unknown) {
  const spec: ApprovalAgentSpec = { phase, store: backend.store, checkpoints: backend.checkpoints, effectsFile: backend.effectsFile, turnId, resume };
  const worker = startWorker<ApprovalAgentReport>("approval-agent.ts", [JSON.stringify(spec)]);
  const report = await worker.next();
  if (report.type === "error") throw new Error(`${phase} failed: ${report.message}\n${worker.stderr()}`);
  expect(await worker.exited).toEqual({ code: 0, signal: null });
  expect(report.pid).toBe(worker.child.pid);
  return report;
}

/** The operator's CLI, as its own process. */
function arkahGuardrails(argv: readonly string[]) {
  const child = spawnSync(process.execPath, ["--import", "tsx", "src/cli/index.ts", ...argv], { cwd: ROOT, encoding: "utf8" });
  if (child.error !== undefined) throw child.error;
  return { code: child.status, stdout: child.stdout, stderr: child.stderr, pid: child.pid };
}

function listApprovals(backend: Backend, ...options: string[]): ApprovalRecord[] {
  const run = arkahGuardrails([...backend.flags, "approvals", ...options, "--json"]);
  expect(run.stderr).toBe("");
  expect(run.code).toBe(0);
  return JSON.parse(run.stdout) as ApprovalRecord[];
}

/** The rename's real executions for one turn (every process appends to the same file). */
const effectsOf = (backend: Backend, turnId: string) => readEffects(backend.effectsFile).filter((effect) => effect.turnId === turnId);

/** Process 1 pauses on the approval; returns its one interrupt. */
async function pause(backend: Backend, turnId: string): Promise<{ pid: number; interrupt: PausedInterrupt }> {
  const paused = await agentProcess(backend, turnId, "pause");
  if (paused.type !== "paused") throw new Error(`expected paused, got ${paused.type}`);
  expect(paused.outcomes).toEqual([expect.objectContaining({ name: "read_document", status: "success" })]);
  expect(paused.interrupts).toHaveLength(1);
  const interrupt = paused.interrupts[0] as PausedInterrupt;
  expect(interrupt.value).toMatchObject({ tool: "rename_document", args: { title: "Field notes", expectedRevision: 0 }, reason: 'Rename to "Field notes"?' });
  expect(effectsOf(backend, turnId)).toEqual([]);
  return { pid: paused.pid, interrupt };
}

function describeFlow(name: string, setup: () => Promise<{ backend: Backend; cleanup: () => Promise<void> }>) {
  describe(name, () => {
    let backend: Backend;
    let cleanup: (() => Promise<void>) | undefined;

    beforeAll(async () => {
      ({ backend, cleanup } = await setup());
    });
    afterAll(async () => {
      await cleanup?.();
    });

    it(
      "approved with the CLI: a fresh process resumes the thread and the rename runs exactly once",
      async () => {
        const turnId = "turn-approve";
        const { pid: pausedPid, interrupt } = await pause(backend, turnId);

        // Process 2: the operator lists what waits, sees the arguments, and approves.
        const [pending, ...others] = listApprovals(backend, "--status", "pending");
        expect(others).toEqual([]);
        expect(pending).toMatchObject({
          approvalId: interrupt.value.approvalId,
          toolName: "rename_document",
          toolCallId: WRITE_CALL_ID,
          status: "pending",
          args: { title: "Field notes", expectedRevision: 0 },
        });
        const decided = arkahGuardrails([...backend.flags, "decide", "--approval-id", interrupt.value.approvalId, "--approve", "--operator-ref", "OPS-21"]);
        expect(decided.stderr).toBe("");
        expect(decided.code).toBe(0);
        expect(decided.pid).not.toBe(pausedPid);
        expect(effectsOf(backend, turnId)).toEqual([]);

        // Process 3: built from scratch, it resumes with the stored decision, keyed by the interrupt.
        const resumed = await agentProcess(backend, turnId, "resume", {
          [interrupt.id ?? ""]: { decision: "approve", approvalId: interrupt.value.approvalId },
        });
        if (resumed.type !== "resumed") throw new Error(`expected resumed, got ${resumed.type}`);
        expect(resumed.pid).not.toBe(pausedPid);
        expect(resumed.outcomes).toEqual([
          { name: "rename_document", callId: WRITE_CALL_ID, status: "success", code: undefined, content: WRITE_RESULT },
        ]);
        expect(resumed.answer).toBe("Done.");
        // Exactly one real execution, in the resuming process.
        expect(effectsOf(backend, turnId)).toEqual([{ turnId, worker: "resume", pid: resumed.pid }]);

        expect(listApprovals(backend)).toEqual([
          expect.objectContaining({ approvalId: interrupt.value.approvalId, status: "applied", operatorRef: "OPS-21", decision: { decision: "approve" } }),
        ]);
        const again = arkahGuardrails([...backend.flags, "decide", "--approval-id", interrupt.value.approvalId, "--reject", "--operator-ref", "OPS-22"]);
        expect(again.code).toBe(4);
        expect(again.stderr).toContain("is applied (approve by OPS-21 at ");
        expect(effectsOf(backend, turnId)).toHaveLength(1);
      },
      SLOW,
    );

    it(
      "rejected with the CLI: the resumed run gives the model approval_rejected and nothing runs, whatever the resume value says",
      async () => {
        const turnId = "turn-reject";
        const { interrupt } = await pause(backend, turnId);
        const decided = arkahGuardrails([
          ...backend.flags,
          "decide",
          "--approval-id",
          interrupt.value.approvalId,
          "--reject",
          "--message",
          "Keep the old title",
          "--operator-ref",
          "OPS-23",
        ]);
        expect(decided.code).toBe(0);

        // An unkeyed "approve": the decision recorded in the store stands.
        const resumed = await agentProcess(backend, turnId, "resume", { decision: "approve" });
        if (resumed.type !== "resumed") throw new Error(`expected resumed, got ${resumed.type}`);
        expect(resumed.outcomes).toEqual([expect.objectContaining({ name: "rename_document", callId: WRITE_CALL_ID, status: "error", code: "approval_rejected" })]);
        expect(JSON.parse(resumed.outcomes[0]?.content ?? "{}")).toMatchObject({ guardrail: "approval_rejected", reviewerMessage: "Keep the old title" });
        expect(resumed.answer).toBe("Done.");
        expect(effectsOf(backend, turnId)).toEqual([]);
        expect(listApprovals(backend, "--status", "rejected")).toEqual([
          expect.objectContaining({ approvalId: interrupt.value.approvalId, operatorRef: "OPS-23", decision: { decision: "reject", message: "Keep the old title" } }),
        ]);
      },
      SLOW,
    );
  });
}

describeFlow("SQLite files: guardrail store and checkpointer", async () => {
  const dir = tempDir("arkah-approval-");
  const store = join(dir.path, "guardrails.sqlite");
  return {
    backend: {
      store: { kind: "sqlite", path: store },
      checkpoints: { kind: "sqlite", path: join(dir.path, "checkpoints.sqlite") },
      flags: ["--sqlite", store],
      effectsFile: join(dir.path, "effects.log"),
    },
    cleanup: async () => {
      dir.remove();
    },
  };
});

requirePostgres();

describePostgres("PostgreSQL schemas: guardrail store and checkpointer", (url) => {
  describeFlow("across processes", async () => {
    const schema = freshSchema("arkah_approval");
    const checkpoints = `${schema}_lg`;
    const dir = tempDir("arkah-approval-pg-");
    const admin: pg.Pool = adminPool();
    return {
      backend: {
        store: { kind: "postgres", url, schema },
        checkpoints: { kind: "postgres", url, schema: checkpoints },
        flags: ["--postgres", url, "--schema", schema],
        effectsFile: join(dir.path, "effects.log"),
      },
      cleanup: async () => {
        try {
          await dropSchema(admin, schema);
          await dropSchema(admin, checkpoints);
        } finally {
          await admin.end();
          dir.remove();
        }
      },
    };
  });
});
