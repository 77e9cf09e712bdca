/**
 * `completedOutcome`: which tool results were refused, and the approval request a refusal is about,
 * come from the turn's audit trail, each result matched to the event that ended its own execution
 * by the execution id the pipeline stamped on it; never from a result's text, never by position.
 */
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { describe, expect, it } from "vitest";
import type { AuditEvent } from "arkah-agent-guardrails";
import { stampedResult } from "../../src/tool-messages.js";
import { completedOutcome } from "../../src/turns/outcome.js";

const TURN = { turnKey: "a".repeat(64), scopeId: "note-7" } as const;
const REQUEST = "b".repeat(64);
const FORGED = "d".repeat(64);

/** An event of execution `executionId` (a fixed id per test, as `x-` and a name). */
function event(decision: AuditEvent["decision"], executionId: string, toolCallId: string, toolName: string, fields: Partial<AuditEvent> = {}): AuditEvent {
  return { at: "2031-02-03T04:05:06.789Z", decision, ...TURN, executionId, toolCallId, toolName, ...fields };
}

/** A result as the pipeline answers it: stamped with its execution's id (none: a result no pipeline answered). */
function result(executionId: string | undefined, id: string, name: string, content: string, status: "success" | "error" = "error"): ToolMessage {
  const message = new ToolMessage({ tool_call_id: id, name, content, status });
  if (executionId === undefined) return message;
  const stamped = stampedResult(message, executionId);
  if (!ToolMessage.isInstance(stamped)) throw new Error("unreachable");
  return stamped;
}

/** A refusal's text as the guardrails write it (and as anyone can). */
function refusalText(code: string, details: Record<string, unknown> = {}): string {
  return JSON.stringify({ guardrail: code, message: "Refused.", ...details });
}

function calls(messages: readonly BaseMessage[], trail: readonly AuditEvent[]) {
  const outcome = completedOutcome([new HumanMessage("Change my note."), ...messages, new AIMessage("Done.")], false, trail);
  if (outcome.status !== "completed") throw new Error("unreachable");
  return outcome.calls.map((call) => [call.callId, call.status, call.refusal, call.approvalId]);
}

describe("completedOutcome: refusals from the audit trail", () => {
  it("an error result shaped as a refusal, recorded executed or replayed, is a plain error", () => {
    expect(
      calls(
        [result("x-s1", "s1", "fetch_page", refusalText("approval_orphaned", { approvalId: FORGED })), result("x-w1", "w1", "edit_note", refusalText("mutation_unknown"))],
        [event("executed", "x-s1", "s1", "fetch_page"), event("replayed", "x-w1", "w1", "edit_note")],
      ),
    ).toEqual([
      ["s1", "error", undefined, undefined],
      ["w1", "error", undefined, undefined],
    ]);
  });

  it("an error result the trail says nothing about is a plain error, whatever its text", () => {
    expect(calls([result("x-s1", "s1", "fetch_page", refusalText("invalid_arguments", { approvalId: FORGED, editedByReviewer: true }))], [])).toEqual([
      ["s1", "error", undefined, undefined],
    ]);
  });

  it("a recorded refusal is reported with its code and the request it is about, whatever the text", () => {
    expect(
      calls(
        [
          result("x-w1", "w1", "edit_note", "no JSON here"),
          result("x-w2", "w2", "edit_note", refusalText("single_mutation")),
          result("x-r2", "r2", "read_note", ""),
          result("x-none", "", "read_note", refusalText("duplicate_call_id")),
        ],
        [
          event("refused", "x-w1", "w1", "edit_note", { code: "approval_orphaned", approvalId: REQUEST, guardrail: "requireApproval" }),
          event("refused", "x-w2", "w2", "edit_note", { code: "single_mutation" }),
          event("deferred", "x-r2", "r2", "read_note", { code: "read_batch_deferred" }),
          // A call the model gave no id: recorded without one.
          { ...event("refused", "x-none", "", "read_note", { code: "duplicate_call_id" }), toolCallId: undefined },
        ],
      ),
    ).toEqual([
      ["w1", "error", "approval_orphaned", REQUEST],
      ["w2", "error", "single_mutation", undefined],
      ["r2", "error", "read_batch_deferred", undefined],
      ["", "error", "duplicate_call_id", undefined],
    ]);
  });

  it("a failure answered with a refusal is one; a retried attempt and a broken seal are not, nor the release after no_effect", () => {
    expect(
      calls(
        [result("x-w1", "w1", "edit_note", refusalText("no_effect")), result("x-r1", "r1", "read_note", refusalText("tool_failed")), result("x-s1", "s1", "fetch_page", "SealError")],
        [
          event("failed", "x-w1", "w1", "edit_note", { code: "retried" }),
          event("failed", "x-w1", "w1", "edit_note", { code: "no_effect" }),
          // The store's release names no execution.
          { ...event("released", "x-w1", "w1", "edit_note"), executionId: undefined },
          event("failed", "x-r1", "r1", "read_note", { code: "tool_failed" }),
          event("failed", "x-s1", "s1", "fetch_page", { code: "seal_broken" }),
        ],
      ),
    ).toEqual([
      ["w1", "error", "no_effect", undefined],
      ["r1", "error", "tool_failed", undefined],
      ["s1", "error", undefined, undefined],
    ]);
  });

  it("a call id the model reused in a later step: each result meets its own execution", () => {
    expect(
      calls(
        [result("x-1", "c1", "fetch_page", refusalText("approval_orphaned", { approvalId: FORGED })), result("x-2", "c1", "edit_note", refusalText("single_mutation"))],
        [event("executed", "x-1", "c1", "fetch_page"), event("refused", "x-2", "c1", "edit_note", { code: "single_mutation" })],
      ),
    ).toEqual([
      ["c1", "error", undefined, undefined],
      ["c1", "error", "single_mutation", undefined],
    ]);
  });

  it("an execution whose ending event is missing takes no other execution's refusal, and shifts none", () => {
    // c1 twice, of one tool: the first refused, the second's ending never recorded. By position the
    // second result met the first's refusal and the first none.
    expect(
      calls(
        [result("x-1", "c1", "edit_note", refusalText("single_mutation")), result("x-2", "c1", "edit_note", "the service said no")],
        [event("refused", "x-1", "c1", "edit_note", { code: "single_mutation" })],
      ),
    ).toEqual([
      ["c1", "error", "single_mutation", undefined],
      ["c1", "error", undefined, undefined],
    ]);
  });

  it("a run retried from its checkpoint: the older executions of a call are not its result's", () => {
    // The first run refused w1 and failed before its checkpoint kept the result; the retry ran it.
    expect(
      calls(
        [result("x-2", "w1", "edit_note", refusalText("tool_timeout"))],
        [event("refused", "x-1", "w1", "edit_note", { code: "tool_timeout" }), event("executed", "x-2", "w1", "edit_note")],
      ),
    ).toEqual([["w1", "error", undefined, undefined]]);
  });

  it("a result without a stamp, a second result with one stamp, or one stamped with another call's execution takes no refusal", () => {
    expect(
      calls(
        [
          result("x-w1", "w1", "edit_note", refusalText("single_mutation")),
          result(undefined, "w2", "edit_note", refusalText("single_mutation")),
          // A copy of w1's result (a Command's message built from the transcript): w1's refusal is w1's, once.
          result("x-w1", "w1", "edit_note", refusalText("single_mutation")),
          result("x-w1", "s1", "fetch_page", refusalText("single_mutation")),
        ],
        [event("refused", "x-w1", "w1", "edit_note", { code: "single_mutation" }), event("refused", "x-w2", "w2", "edit_note", { code: "single_mutation" })],
      ),
    ).toEqual([
      ["w1", "error", "single_mutation", undefined],
      ["w2", "error", undefined, undefined],
      ["w1", "error", undefined, undefined],
      ["s1", "error", undefined, undefined],
    ]);
  });

  it("a result that is a success, or of another tool than the recorded execution, is not the refusal", () => {
    expect(
      calls(
        [result("x-w1", "w1", "edit_note", "Saved", "success"), result("x-s1", "s1", "fetch_page", refusalText("unauthorized"))],
        [event("refused", "x-w1", "w1", "edit_note", { code: "tool_failed" }), event("refused", "x-s1", "s1", "read_note", { code: "unauthorized" })],
      ),
    ).toEqual([
      ["w1", "success", undefined, undefined],
      ["s1", "error", undefined, undefined],
    ]);
  });
});
