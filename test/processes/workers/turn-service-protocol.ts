/** What the turn-service test and its worker processes (turn-service-worker.ts) say to each other. */
import type { RecoverySummary, TurnAnswer, TurnInput } from "arkah-agent-guardrails";

export interface TurnServiceWorkerSpec {
  readonly schema: string;
  readonly checkpoints: string;
  readonly name: string;
  /** Added to the system clock for this worker's store: a worker "later" than the lease. */
  readonly clockOffsetMs: number;
  readonly leaseMs: number;
  /** Block inside the read tool's body: until `release`, or forever (the parent kills the worker). */
  readonly blockRead?: "until-release" | "forever";
}

export type TurnServiceWorkerCommand =
  | { readonly type: "submit"; readonly turnId: string }
  | { readonly type: "recover" }
  | { readonly type: "release" }
  | { readonly type: "exit" };

export type TurnServiceWorkerReport =
  | { readonly type: "ready" }
  | { readonly type: "reading"; readonly turnId: string }
  | { readonly type: "answer"; readonly answer: TurnAnswer }
  | { readonly type: "recovered"; readonly summary: RecoverySummary }
  | { readonly type: "error"; readonly message: string };

export const TURN_SCOPE = "note-7";
export const TURN_USER = "Change my shopping note to oat milk.";

export function workerTurn(turnId: string): TurnInput {
  return { scopeId: TURN_SCOPE, turnId, policyVersion: "v1", principal: "alice", segments: [{ label: "user", content: TURN_USER }] };
}
