/**
 * The HTTP surface, on Hono:
 *
 * - `POST /turns` (headers `X-User`, `Idempotency-Key`; body `{ noteId, message }`) admits the
 *   user's message as a turn and runs it: 200 with the answer, or 202 with the approval requests
 *   the run waits on. The idempotency key is the user's: the turn id is `user/key`, so the same
 *   key from two users is two turns. Send the same request again after a lost answer and the turn
 *   runs again with no second write.
 * - `POST /approvals/:id` (header `X-User`; body `{ decision: "approve" }`,
 *   `{ decision: "reject", message? }` or `{ decision: "edit", args }`) resumes the paused run: 200,
 *   or 202 if it pauses again. Only the turn's own user, or an approver (`approvers`), may answer:
 *   anyone else gets 403 and nothing is decided.
 *
 * `X-User` stands for whatever authentication the service has; it becomes the turn's `principal`.
 */
import { HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { Command } from "@langchain/langgraph";
import { Hono, type Context } from "hono";
import { z } from "zod";
import {
  AdmissionError,
  admitTurn,
  ApprovalDecisionSchema,
  ApprovalError,
  canonicalJson,
  turnContext,
  turnKey,
  type ApprovalRequest,
  type TurnInput,
} from "arkah-agent-guardrails";
import type { Service } from "./agent.js";

/** A user name: no `/`, so `user/key` names one user's key. */
const UserSchema = z.string().regex(/^[\w.-]{1,64}$/, "a user name");
const TurnRequestSchema = z.strictObject({ noteId: z.string().min(1).max(200), message: z.string().min(1).max(4000) });
const HeaderSchema = z.strictObject({
  user: UserSchema,
  idempotencyKey: z.string().regex(/^[\w.:-]{8,128}$/, "8 to 128 letters, digits, '.', ':', '_' or '-'"),
});
const ApprovalHeaderSchema = z.strictObject({ user: UserSchema });
const ApprovalIdSchema = z.string().regex(/^[0-9a-f]{64}$/, "an approval id");

/** Who may answer approvals besides a turn's own user. */
export interface AppOptions {
  /** The approver role: these users may decide any turn's approvals. Default: nobody. */
  readonly approvers?: readonly string[];
}
const AppOptionsSchema = z.strictObject({ approvers: z.array(UserSchema).optional() });

/** Only the turn's principal, or an approver, may decide its approvals. */
export function mayDecide(user: string, turn: TurnInput, approvers: ReadonlySet<string>): boolean {
  return turn.principal === user || approvers.has(user);
}

/** A tool call's outcome as the client sees it: never the tool's result text. */
interface CallOutcome {
  readonly tool: string;
  readonly callId: string;
  readonly status: "success" | "error";
  readonly refusal?: string;
}

function outcomes(messages: readonly BaseMessage[]): CallOutcome[] {
  return messages.filter((message) => ToolMessage.isInstance(message)).map((message) => {
    const status = message.status === "error" ? "error" : "success";
    const base = { tool: message.name ?? "", callId: message.tool_call_id, status } as const;
    if (status === "success") return base;
    const refusal = /"guardrail":"([a-z_]+)"/.exec(message.text)?.[1];
    return refusal === undefined ? base : { ...base, refusal };
  });
}

/** The approval requests a thread waits on, from its checkpoint. */
async function pendingOn(service: Service, threadId: string) {
  const state = await service.agent.graph.getState({ configurable: { thread_id: threadId } });
  return state.tasks.flatMap((task) => task.interrupts).map((pending) => ({ id: pending.id, request: pending.value as ApprovalRequest }));
}

interface RunResult {
  readonly messages: BaseMessage[];
  readonly __interrupt__?: { value?: unknown }[];
}

function answer(c: Context, turnId: string, result: RunResult) {
  const waiting = result.__interrupt__ ?? [];
  if (waiting.length > 0) {
    return c.json({ status: "pending_approval", turnId, approvals: waiting.map((pending) => pending.value as ApprovalRequest) }, 202);
  }
  return c.json({ status: "completed", turnId, answer: result.messages.at(-1)?.text ?? "", calls: outcomes(result.messages) }, 200);
}

function invalid(c: Context, issues: readonly z.core.$ZodIssue[]) {
  return c.json({ error: "invalid_request", issues: issues.map(({ path, message }) => ({ path: path.join("."), message })) }, 400);
}

/** A failed run as a typed error: admission and approval errors by code, anything else opaque. */
function failure(c: Context, error: unknown) {
  const admission = AdmissionError.find(error);
  if (admission !== undefined) return c.json({ error: "admission", code: admission.code }, 409);
  const approval = ApprovalError.find(error);
  if (approval !== undefined) return c.json({ error: "approval", code: approval.code }, 422);
  // The class only: a message could carry a tool's result or a store's detail.
  console.warn("run failed", { error: error instanceof Error ? error.name : typeof error });
  return c.json({ error: "internal" }, 500);
}

export function createApp(service: Service, options: AppOptions = {}): Hono {
  const { agent, notes, store } = service;
  const approvers = new Set(AppOptionsSchema.parse(options).approvers ?? []);
  const app = new Hono();

  app.post("/turns", async (c) => {
    const headers = HeaderSchema.safeParse({ user: c.req.header("x-user"), idempotencyKey: c.req.header("idempotency-key") });
    const body = TurnRequestSchema.safeParse(await c.req.json().catch(() => undefined));
    if (!headers.success || !body.success) return invalid(c, [...(headers.error?.issues ?? []), ...(body.error?.issues ?? [])]);
    const turn: TurnInput = {
      scopeId: body.data.noteId,
      // The key is the user's own: another user's same key is another turn, never this one.
      turnId: `${headers.data.user}/${headers.data.idempotencyKey}`,
      policyVersion: "2026-12",
      principal: headers.data.user,
      segments: [{ label: "user", content: body.data.message }],
    };
    const key = turnKey(turn);
    const known = notes.turn(key);
    if (known !== undefined) {
      // The same key with another request is a client bug, not a retry: nothing runs.
      if (canonicalJson(known.input) !== canonicalJson(turn)) return c.json({ error: "idempotency_key_reused" }, 409);
      // A retry of a turn that waits on a person answers what it waits on, and runs nothing.
      const pending = await pendingOn(service, known.threadId);
      if (pending.length > 0) return c.json({ status: "pending_approval", turnId: turn.turnId, approvals: pending.map((p) => p.request) }, 202);
    }
    // Stand-in moderation: your provider's verdict on exactly these segments.
    const receipt = await admitTurn({ store, input: turn, moderate: ({ segments }) => !segments.some((s) => /password/i.test(s.content)) });
    if (!receipt.allowed) return c.json({ error: "turn_denied" }, 403);
    const run = notes.startRun(key, turn);
    try {
      const result = await agent.invoke(
        { messages: [new HumanMessage(body.data.message)] },
        { context: turnContext(turn), configurable: { thread_id: run.threadId } },
      );
      return answer(c, turn.turnId, result);
    } catch (error) {
      return failure(c, error);
    }
  });

  app.post("/approvals/:id", async (c) => {
    const headers = ApprovalHeaderSchema.safeParse({ user: c.req.header("x-user") });
    const decision = ApprovalDecisionSchema.safeParse(await c.req.json().catch(() => undefined));
    if (!headers.success || !decision.success) return invalid(c, [...(headers.error?.issues ?? []), ...(decision.error?.issues ?? [])]);
    const approvalId = ApprovalIdSchema.safeParse(c.req.param("id")).data;
    const record = approvalId === undefined ? undefined : await store.getApproval(approvalId);
    const turn = record === undefined ? undefined : notes.turn(record.turnKey);
    if (approvalId === undefined || record === undefined || turn === undefined) return c.json({ error: "unknown_approval" }, 404);
    // Before anything about the request is told or resumed: another user's answer decides nothing.
    if (!mayDecide(headers.data.user, turn.input, approvers)) return c.json({ error: "forbidden" }, 403);
    const waiting = (await pendingOn(service, turn.threadId)).find((pending) => pending.request.approvalId === approvalId);
    if (waiting?.id === undefined) return c.json({ error: "not_waiting", approvalStatus: record.status }, 409);
    try {
      // Keyed by the interrupt, so a run that waits on several requests takes this answer for this one.
      // A resume passes the turn in `context` again: context is per invocation, never checkpointed.
      const result = await agent.invoke(new Command({ resume: { [waiting.id]: { ...decision.data, approvalId } } }), {
        context: turnContext(turn.input),
        configurable: { thread_id: turn.threadId },
      });
      return answer(c, turn.input.turnId, result);
    } catch (error) {
      return failure(c, error);
    }
  });

  return app;
}
