/**
 * LangChain's approval format: the answer the turn service builds for a decision
 * (`hitlResponse`) is read back by the guardrails (`fromHitl`) as that very decision, naming its
 * request, for each kind of decision.
 */
import { describe, expect, it } from "vitest";
import type { ApprovalDecision } from "../../src/contracts/index.js";
import { fromHitl, hitlResponse } from "../../src/guardrails/langchain-format.js";

const APPROVAL_ID = "a".repeat(64);

describe("hitlResponse", () => {
  const decisions: ApprovalDecision[] = [
    { decision: "approve" },
    { decision: "reject" },
    { decision: "reject", message: "Not today." },
    { decision: "edit", args: { noteId: "note-7", body: "Buy soy milk" } },
  ];
  it.each(decisions)("is read back by fromHitl as the same decision, naming its request: %j", (decision) => {
    expect(fromHitl(hitlResponse(decision, "edit_note", APPROVAL_ID), "edit_note")).toEqual({ answer: { ...decision, approvalId: APPROVAL_ID } });
  });
});
