/**
 * LangChain's approval format (`approvalFormat: "langchain"`): the interrupt carries the payload of
 * LangChain's own `humanInTheLoopMiddleware` (`HITLRequest`) and the resume value is its answer
 * (`HITLResponse`), so a client that answers LangChain's middleware answers ours (Agent Inbox reads
 * the Python middleware's snake_case fields and does not: docs/deploying.md).
 * The guardrails raise one interrupt per call: one action request, and exactly one decision. The
 * answer is mapped onto the same decisions, judged by the same rules (src/guardrails/approvals.ts).
 * Both carry `approvalId` beside LangChain's fields (this package's addition, which LangChain and
 * the UIs ignore): the payload names the stored request it asks about, and an answer may name it.
 */
import type { HITLRequest, HITLResponse } from "langchain";
import { z } from "zod";
import { DigestSchema, JsonValueSchema, type ApprovalDecision, type JsonValue } from "../contracts/index.js";
import type { ApprovalRequest, JsonSchema } from "./port.js";

/** The approval interrupt's payload and resume value: this package's own, or LangChain's `humanInTheLoopMiddleware`'s. */
export type ApprovalFormat = "arkah" | "langchain";

/** The values `approvalFormat` accepts. */
export const ApprovalFormatSchema = z.enum(["arkah", "langchain"]);

/** LangChain's `HITLRequest`, naming the stored request it asks about (`GuardrailStore.getApproval`). */
export type HitlApprovalRequest = HITLRequest & { readonly approvalId: string };

/** LangChain's `HITLResponse`, naming the request it answers. */
export type HitlApprovalResponse = HITLResponse & { readonly approvalId: string };

/**
 * The interrupt payload in LangChain's format: the call as its one action request, every decision
 * allowed, and the stored request's `approvalId`.
 */
export function hitlRequest(asked: ApprovalRequest, schema: JsonSchema | undefined, problem: string | undefined): HitlApprovalRequest {
  const described = [asked.reason, problem === undefined ? undefined : `The last answer was not accepted: ${problem}`].filter(
    (part): part is string => part !== undefined,
  );
  return {
    actionRequests: [
      { name: asked.tool, args: asked.args, ...(described.length === 0 ? {} : { description: described.join("\n\n") }) },
    ],
    reviewConfigs: [
      {
        actionName: asked.tool,
        allowedDecisions: ["approve", "edit", "reject"],
        ...(typeof schema === "object" ? { argsSchema: { ...schema } } : {}),
      },
    ],
    approvalId: asked.approvalId,
  };
}

/**
 * A paused run's interrupt in LangChain's format, as a reader of the pause takes it: one action
 * request, and the `approvalId` of the request it asks about (the rest is LangChain's, not read).
 */
export const HitlApprovalRequestSchema = z.looseObject({
  actionRequests: z.tuple([z.looseObject({ name: z.string(), args: z.record(z.string(), JsonValueSchema) })]),
  reviewConfigs: z.array(z.unknown()),
  approvalId: DigestSchema,
});

/** A decision as LangChain's answer to the request `approvalId` for a call to `toolName`: what {@link fromHitl} reads back. */
export function hitlResponse(decision: ApprovalDecision, toolName: string, approvalId: string): HitlApprovalResponse {
  switch (decision.decision) {
    case "approve":
      return { decisions: [{ type: "approve" }], approvalId };
    case "reject":
      return { decisions: [{ type: "reject", ...(decision.message === undefined ? {} : { message: decision.message }) }], approvalId };
    case "edit":
      return { decisions: [{ type: "edit", editedAction: { name: toolName, args: decision.args } }], approvalId };
  }
}

const HitlDecisionSchema = z.discriminatedUnion("type", [
  z.strictObject({ type: z.literal("approve") }),
  z.strictObject({
    type: z.literal("edit"),
    editedAction: z.strictObject({ name: z.string(), args: z.record(z.string(), JsonValueSchema) }),
  }),
  z.strictObject({ type: z.literal("reject"), message: z.string().optional() }),
]);

/**
 * LangChain's `HITLResponse` for one call. `approvalId` is this package's addition: a host that
 * knows it can name the request, as with the package's own format (LangChain ignores it).
 */
export const HitlResponseSchema = z.strictObject({
  decisions: z.array(HitlDecisionSchema).length(1, "one decision: the guardrails ask about one call per interrupt"),
  approvalId: DigestSchema.optional(),
});

/** A LangChain answer as the package's decision, or why it is not one. */
export type HitlAnswer =
  | {
      readonly answer:
        | { readonly decision: "approve"; readonly approvalId?: string | undefined }
        | { readonly decision: "reject"; readonly message?: string | undefined; readonly approvalId?: string | undefined }
        | { readonly decision: "edit"; readonly args: Record<string, JsonValue>; readonly approvalId?: string | undefined };
    }
  | { readonly refused: { readonly code: string; readonly problem: string } };

/** Parses a resume value in LangChain's format for a call to `toolName`. */
export function fromHitl(value: unknown, toolName: string): HitlAnswer {
  const parsed = HitlResponseSchema.safeParse(value);
  if (!parsed.success) {
    return {
      refused: {
        code: "not_a_decision",
        problem:
          'the answer was not a decision: resume with { decisions: [{ type: "approve" }] }, { decisions: [{ type: "reject", message? }] } ' +
          "or { decisions: [{ type: \"edit\", editedAction: { name, args } }] }, with exactly one decision",
      },
    };
  }
  const { decisions, approvalId } = parsed.data;
  const named = approvalId === undefined ? {} : { approvalId };
  const [decision] = decisions;
  if (decision === undefined) throw new Error("unreachable: the schema requires one decision");
  switch (decision.type) {
    case "approve":
      return { answer: { decision: "approve", ...named } };
    case "reject":
      return { answer: { decision: "reject", ...(decision.message === undefined ? {} : { message: decision.message }), ...named } };
    case "edit":
      if (decision.editedAction.name !== toolName) {
        return {
          refused: {
            code: "edited_tool",
            problem: `an edit may change the arguments, not the tool: editedAction.name must be "${toolName}"`,
          },
        };
      }
      return { answer: { decision: "edit", args: decision.editedAction.args, ...named } };
  }
}
