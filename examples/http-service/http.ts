/**
 * The HTTP side both servers share (Hono in hono.ts, Express in express.ts): what a request must
 * hold (zod), the turn it becomes, and the reply to a `get` (the answers of `submit` and `decide` map to status codes by the
 * package's own `turnHttpReply`).
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
  type DecideTurnInput,
  type TurnHttpReply,
  type TurnInput,
  type TurnView,
} from "arkah-agent-guardrails";

/** A status code and a JSON body, for whichever framework sends it: the package's, or 400 for a request that fails the schemas below. */
export interface HttpReply {
  readonly status: TurnHttpReply["status"] | 400;
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
// Any approval id is the service's to look up: one that names no request (malformed ones too) is 404.
const DecideRequestSchema = z.strictObject({ user: UserSchema, approvalId: z.string().min(1).max(200), body: ApprovalDecisionSchema });
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

/** `get`'s answer, for its own user only: anyone else's turn is as unknown as a turn that never was. */
export function viewReply(view: TurnView, user: string): HttpReply {
  if (view.status === "not_found" || view.principal !== user) return { status: 404, body: { status: "not_found" } };
  return { status: 200, body: view };
}
