/**
 * The HTTP side both servers share (Hono in hono.ts, Express in express.ts): what a request must
 * hold (zod), the turn it becomes, and the one mapping of turn-service answers to status codes.
 *
 * `X-User` stands for whatever authentication the service has; it becomes the turn's `principal`.
 * The `Idempotency-Key` is the user's own: the turn id is `user/key`, so the same key from two
 * users is two turns, and neither ever gets the other's answer. One key is one request: the same
 * user's key for another note or message is refused `input_mismatch` (409) by the turn service.
 */
import { z } from "zod";
import {
  ApprovalDecisionSchema,
  DigestSchema,
  TurnServiceError,
  type DecideAnswer,
  type DecideTurnInput,
  type TurnInput,
  type TurnView,
} from "arkah-agent-guardrails";

/** A status code and a JSON body, for whichever framework sends it. */
export interface HttpReply {
  readonly status: 200 | 202 | 400 | 403 | 404 | 409 | 422 | 500;
  readonly body: object;
}

/** A user name: no `/`, so `user/key` names one user's key. */
const UserSchema = z.string().regex(/^[\w.-]{1,64}$/, "a user name");
const KeySchema = z.string().regex(/^[\w.:-]{8,128}$/, "8 to 128 letters, digits, '.', ':', '_' or '-'");
const TurnRequestSchema = z.strictObject({
  user: UserSchema,
  idempotencyKey: KeySchema,
  body: z.strictObject({ noteId: z.string().min(1).max(200), message: z.string().min(1).max(4000) }),
});
const DecideRequestSchema = z.strictObject({ user: UserSchema, approvalId: DigestSchema, body: ApprovalDecisionSchema });
const ReadRequestSchema = z.strictObject({ user: UserSchema, turnKey: DigestSchema });

type Parsed<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly reply: HttpReply };

function parsed<T, R>(result: z.ZodSafeParseResult<T>, make: (value: T) => R): Parsed<R> {
  if (result.success) return { ok: true, value: make(result.data) };
  const issues = result.error.issues.map(({ path, message }) => ({ path: path.join("."), message }));
  return { ok: false, reply: { status: 400, body: { error: "invalid_request", issues } } };
}

/** `POST /turns`: the turn a request is, or 400. */
export function turnRequest(request: { user?: string; idempotencyKey?: string; body: unknown }): Parsed<TurnInput> {
  return parsed(TurnRequestSchema.safeParse(request), ({ user, idempotencyKey, body }) => ({
    scopeId: body.noteId,
    // The key is the user's own: another user's same key is another turn, never this one.
    turnId: `${user}/${idempotencyKey}`,
    policyVersion: "2026-12",
    principal: user,
    segments: [{ label: "user", content: body.message }],
  }));
}

/** `POST /approvals/:id`: the decision a request is (the user decides, if `mayDecide` lets them), or 400. */
export function decideRequest(request: { user?: string; approvalId?: string; body: unknown }): Parsed<DecideTurnInput> {
  return parsed(DecideRequestSchema.safeParse(request), ({ user, approvalId, body }) => ({ approvalId, principal: user, decision: body }));
}

/** `GET /turns/:turnKey`: who asks about which turn, or 400. */
export function readRequest(request: { user?: string; turnKey?: string }): Parsed<{ user: string; turnKey: string }> {
  return parsed(ReadRequestSchema.safeParse(request), (value) => value);
}

/**
 * The HTTP mapping of turn-service answers (`submit` and `decide`). Bodies are the answers as
 * they are: statuses, codes, call outcomes, never a tool's result text.
 */
export function answerReply(answer: DecideAnswer): HttpReply {
  switch (answer.status) {
    case "completed":
      return { status: 200, body: answer };
    case "awaiting_approval":
      return { status: 202, body: answer };
    case "running": // another request runs this turn now: ask again later
    case "not_pending": // another decision on a decided, applied, expired or orphaned request (the same one again answers the turn)
      return { status: 409, body: answer };
    case "refused": // moderation denied the turn, or the key was used with another request
      return { status: answer.code === "denied" ? 403 : 409, body: answer };
    case "forbidden": // not the turn's user nor an approver: nothing decided, nothing told
      return { status: 403, body: answer };
    case "not_found":
      return { status: 404, body: answer };
    case "failed": // a decision the guardrails could not apply (an edit that fails its checks) is the client's
      return { status: answer.code === "approval_failed" || answer.code === "admission_failed" ? 422 : 500, body: answer };
  }
}

/** `get`'s answer, for its own user only: anyone else's turn is as unknown as a turn that never was. */
export function viewReply(view: TurnView, user: string): HttpReply {
  if (view.status === "not_found" || view.principal !== user) return { status: 404, body: { status: "not_found" } };
  return { status: 200, body: view };
}

/** A thrown error: input the service refused (422), or anything else, by its class only (500). */
export function errorReply(error: unknown): HttpReply {
  if (TurnServiceError.isInstance(error)) return { status: 422, body: { error: error.code } };
  // The class only: a message could carry a tool's result or a store's detail.
  console.warn("turn failed", { error: error instanceof Error ? error.name : typeof error });
  return { status: 500, body: { error: "internal" } };
}
