/** What the turn-service process tests and their worker processes (turn-service-worker.ts) say to each other. */
import type { RecoverySummary, TurnAnswer, TurnInput } from "arkah-agent-guardrails";

/**
 * Where a worker keeps its turns, checkpoints and writes: one PostgreSQL (its schemas), or SQLite
 * files every worker opens (WAL mode): the guardrail store, the checkpointer, the write service.
 */
export type TurnServiceStoreSpec =
  | {
      readonly kind: "postgres";
      /** The guardrail store's schema; the write service's `writes` table is in it too. */
      readonly schema: string;
      /** The PostgresSaver's schema. */
      readonly checkpoints: string;
    }
  | {
      readonly kind: "sqlite";
      /** The guardrail store's file. */
      readonly path: string;
      /** The SqliteSaver's file. */
      readonly checkpoints: string;
      /** The write service's file (its `writes` table). */
      readonly writes: string;
    };

export interface TurnServiceWorkerSpec {
  readonly store: TurnServiceStoreSpec;
  readonly name: string;
  /** Added to the system clock for this worker's store: a worker "later" than the lease. */
  readonly clockOffsetMs: number;
  readonly leaseMs: number;
  /** Block inside the read tool's body: until `release`, or forever (the parent kills the worker). */
  readonly blockRead?: "until-release" | "forever";
  /** Inside the edit tool's body, once its write committed: report `wrote` and never return (the parent kills the worker). */
  readonly blockAfterWrite?: boolean;
  /** Give the edit tool's policy a `confirm` that asks the write service by `mutationKey`. */
  readonly confirm?: boolean;
}

export type TurnServiceWorkerCommand =
  | { readonly type: "submit"; readonly turnId: string }
  | { readonly type: "recover" }
  | { readonly type: "release" }
  | { readonly type: "exit" };

export type TurnServiceWorkerReport =
  | { readonly type: "ready" }
  | { readonly type: "reading"; readonly turnId: string }
  | { readonly type: "wrote"; readonly turnId: string }
  | { readonly type: "answer"; readonly answer: TurnAnswer }
  | { readonly type: "recovered"; readonly summary: RecoverySummary }
  | { readonly type: "error"; readonly message: string };

export const TURN_SCOPE = "note-7";
export const TURN_USER = "Change my shopping note to oat milk.";
/** What the edit tool returns, and what `confirm` answers for a write the service has. */
export const WRITE_RESULT = "Saved";

export function workerTurn(turnId: string): TurnInput {
  return { scopeId: TURN_SCOPE, turnId, policyVersion: "v1", principal: "alice", segments: [{ label: "user", content: TURN_USER }] };
}
