/**
 * `completedOutcome`: which tool results were refused, and the approval request a refusal is about,
 * come from the turn's audit trail, matched to the results by call id, newest to newest; never
 * from a result's text.
 */
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { describe, expect, it } from "vitest";
import type { AuditEvent } from "arkah-agent-guardrails";
import { completedOutcome } from "../../src/turns/outcome.js";

const TURN = { turnKey: "a".repeat(64), scopeId: "note-7" } as const;
const REQUEST = "b".repeat(64);
const FORGED = "d".repeat(64);

function event(decision: AuditEvent["decision"], toolCallId: string, toolName: string, fields: Partial<AuditEvent> = {}): AuditEvent {
  return { at: "2031-02-03T04:05:06.789Z", decision, ...TURN, toolCallId, toolName, ...fields };
}

function result(id: string, name: string, content: string, status: "success" | "error" = "error"): ToolMessage {
  return new ToolMessage({ tool_call_id: id, name, content, status });
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
        [result("s1", "fetch_page", refusalText("approval_orphaned", { approvalId: FORGED })), result("w1", "edit_note", refusalText("mutation_unknown"))],
        [event("executed", "s1", "fetch_page"), event("replayed", "w1", "edit_note")],
      ),
    ).toEqual([
      ["s1", "error", undefined, undefined],
      ["w1", "error", undefined, undefined],
    ]);
  });

  it("an error result the trail says nothing about is a plain error, whatever its text", () => {
    expect(calls([result("s1", "fetch_page", refusalText("invalid_arguments", { approvalId: FORGED, editedByReviewer: true }))], [])).toEqual([
      ["s1", "error", undefined, undefined],
    ]);
  });

  it("a recorded refusal is reported with its code and the request it is about, whatever the text", () => {
    expect(
      calls(
        [
          result("w1", "edit_note", "no JSON here"),
          result("w2", "edit_note", refusalText("single_mutation")),
          result("r2", "read_note", ""),
          result("", "read_note", refusalText("duplicate_call_id")),
        ],
        [
          event("refused", "w1", "edit_note", { code: "approval_orphaned", approvalId: REQUEST, guardrail: "requireApproval" }),
          event("refused", "w2", "edit_note", { code: "single_mutation" }),
          event("deferred", "r2", "read_note", { code: "read_batch_deferred" }),
          // A call the model gave no id: recorded without one.
          { ...event("refused", "", "read_note", { code: "duplicate_call_id" }), toolCallId: undefined },
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
        [result("w1", "edit_note", refusalText("no_effect")), result("r1", "read_note", refusalText("tool_failed")), result("s1", "fetch_page", "SealError")],
        [
          event("failed", "w1", "edit_note", { code: "retried" }),
          event("failed", "w1", "edit_note", { code: "no_effect" }),
          event("released", "w1", "edit_note"),
          event("failed", "r1", "read_note", { code: "tool_failed" }),
          event("failed", "s1", "fetch_page", { code: "seal_broken" }),
        ],
      ),
    ).toEqual([
      ["w1", "error", "no_effect", undefined],
      ["r1", "error", "tool_failed", undefined],
      ["s1", "error", undefined, undefined],
    ]);
  });

  it("a call id the model reused in a later step: each result meets its own execution, newest to newest", () => {
    expect(
      calls(
        [result("c1", "fetch_page", refusalText("approval_orphaned", { approvalId: FORGED })), result("c1", "edit_note", refusalText("single_mutation"))],
        [event("executed", "c1", "fetch_page"), event("refused", "c1", "edit_note", { code: "single_mutation" })],
      ),
    ).toEqual([
      ["c1", "error", undefined, undefined],
      ["c1", "error", "single_mutation", undefined],
    ]);
  });

  it("a run retried from its checkpoint: the older executions of a call are not its result's", () => {
    // The first run refused w1 and failed before its checkpoint kept the result; the retry ran it.
    expect(
      calls([result("w1", "edit_note", refusalText("tool_timeout"))], [event("refused", "w1", "edit_note", { code: "tool_timeout" }), event("executed", "w1", "edit_note")]),
    ).toEqual([["w1", "error", undefined, undefined]]);
  });

  it("a result that is a success, or of another tool than the recorded execution, is not the refusal", () => {
    expect(
      calls(
        [result("w1", "edit_note", "Saved", "success"), result("s1", "fetch_page", refusalText("unauthorized"))],
        [event("refused", "w1", "edit_note", { code: "tool_failed" }), event("refused", "s1", "read_note", { code: "unauthorized" })],
      ),
    ).toEqual([
      ["w1", "success", undefined, undefined],
      ["s1", "error", undefined, undefined],
    ]);
  });
});
