/**
 * A process sharing an examples/file-store directory, for test/examples/file-store.test.ts.
 *
 *   node --import tsx file-store-worker.ts <directory> <name> [crash point]
 *
 * Messages: parent -> worker `claim` (claims an identity, answers its result), `append` (appends
 * `count` audit events one after another), `settle-and-hang` (arms the commit hook at `crash point`:
 * `journaled` or `applied`, then settles its pending claim with an audit event; at that point of the
 * settlement's commit it reports `in-commit` and waits to be killed), `exit`.
 */
import type { AuditEvent } from "arkah-agent-guardrails";
import type { ClaimResult, MutationIdentity } from "arkah-agent-guardrails/store";
import { FileGuardrailStore, type CommitPoint } from "../../../examples/file-store/store.js";

export type FileWorkerCommand =
  | { readonly type: "claim"; readonly identity: MutationIdentity }
  | { readonly type: "append"; readonly event: AuditEvent; readonly count: number }
  | { readonly type: "settle-and-hang"; readonly identity: MutationIdentity; readonly audit: AuditEvent }
  | { readonly type: "exit" };
export type FileWorkerReport =
  | { readonly type: "ready"; readonly pid: number }
  | { readonly type: "claimed"; readonly result: ClaimResult }
  | { readonly type: "appended" }
  | { readonly type: "in-commit"; readonly point: CommitPoint }
  | { readonly type: "error"; readonly message: string };

const [directory, name, crashPoint] = process.argv.slice(2);
if (directory === undefined || name === undefined) throw new Error("usage: file-store-worker.ts <directory> <name> [journaled|applied]");

const send = (report: FileWorkerReport) => {
  process.send?.(report);
};

let armed = false;
const store = await FileGuardrailStore.open({
  directory,
  lockTimeoutMs: 120_000,
  commitHook: async (point) => {
    if (!armed || point.point !== crashPoint) return;
    send({ type: "in-commit", point });
    // Killed here by the parent: the commit never continues.
    await new Promise(() => undefined);
  },
});

async function handle(command: FileWorkerCommand): Promise<void> {
  switch (command.type) {
    case "claim":
      send({ type: "claimed", result: await store.claimMutation(command.identity) });
      return;
    case "append":
      for (let index = 0; index < command.count; index++) {
        await store.appendAudit({ ...command.event, toolCallId: `${name}-${String(index)}` });
      }
      send({ type: "appended" });
      return;
    case "settle-and-hang": {
      const claim = await store.claimMutation(command.identity);
      if (claim.status !== "acquired") throw new Error(`expected to acquire, got ${claim.status}`);
      armed = true;
      await store.settleMutation({
        turnKey: command.identity.turnKey,
        token: claim.token,
        outcome: "complete",
        result: { content: "renamed", status: "success" },
        audit: command.audit,
      });
      throw new Error("the settlement finished: the commit hook did not stop it");
    }
    case "exit":
      await store.close();
      process.disconnect();
      return;
  }
}

process.on("message", (command: FileWorkerCommand) => {
  handle(command).catch((error: unknown) => {
    send({ type: "error", message: error instanceof Error ? (error.stack ?? error.message) : String(error) });
  });
});

send({ type: "ready", pid: process.pid });
