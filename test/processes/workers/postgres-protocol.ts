/**
 * What the PostgreSQL process tests and their worker (postgres-worker.ts) say to each other, and
 * the turn they run. A module of its own, so a test can import it without starting a worker.
 */

/** What one process saw for the turn's mutation call. */
export interface MutationOutcome {
  readonly turnId: string;
  /** `executed`: this process ran the write; `replayed`: a stored result came back without running. */
  readonly kind: "executed" | "replayed" | "refused";
  /** The refusal code when refused. */
  readonly code: string | undefined;
  readonly status: "success" | "error";
  readonly content: string;
}

export type PostgresWorkerCommand =
  | { readonly type: "turn"; readonly turnId: string; readonly hang?: "before-write" | "after-write" }
  | { readonly type: "exit" };

export type PostgresWorkerReport =
  | { readonly type: "ready" }
  | { readonly type: "done"; readonly outcome: MutationOutcome }
  | { readonly type: "wrote"; readonly turnId: string }
  | { readonly type: "claimed"; readonly turnId: string }
  | { readonly type: "error"; readonly message: string };

export const WRITE_CALL_ID = "write-1";
export const SCOPE_ID = "doc-postgres-processes";
