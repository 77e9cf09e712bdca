/**
 * `turnHttpReply` and `turnHttpErrorReply`: the shipped HTTP mapping of the turn service's answers,
 * row by row as docs/turns.md's table gives it, and an error's reply that carries no error text.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { TurnServiceError, turnHttpErrorReply, turnHttpReply, type DecideAnswer, type GuardrailLogger } from "arkah-agent-guardrails";

const turnKey = "a".repeat(64);

describe("turnHttpReply", () => {
  const rows: [DecideAnswer, number][] = [
    [{ status: "completed", turnKey, replayed: false, answer: "Done.", calls: [] }, 200],
    [{ status: "awaiting_approval", turnKey, replayed: false, approvals: [] }, 202],
    [{ status: "running", turnKey }, 409],
    [{ status: "not_pending", approvalStatus: "applied" }, 409],
    [{ status: "refused", code: "denied", turnKey, replayed: false }, 403],
    [{ status: "refused", code: "input_mismatch", turnKey, replayed: false }, 422],
    [{ status: "forbidden" }, 403],
    [{ status: "not_found" }, 404],
    // A decided edit that failed its checks: the turn went on with the call refused.
    [
      {
        status: "completed",
        turnKey,
        replayed: false,
        answer: "The edit was refused.",
        calls: [{ tool: "edit_note", callId: "w1", status: "error", refusal: "invalid_arguments", approvalId: "b".repeat(64) }],
      },
      200,
    ],
    [{ status: "failed", code: "admission_failed", detail: "transcript_mismatch", turnKey, replayed: false }, 422],
    [{ status: "failed", code: "run_failed", error: "Error", turnKey, replayed: false }, 500],
    [{ status: "failed", code: "moderation_failed", turnKey, replayed: false }, 500],
    [{ status: "failed", code: "unsupported_interrupt", turnKey, replayed: false }, 500],
  ];
  for (const [answer, status] of rows) {
    const code = "code" in answer ? ` ${answer.code}` : "";
    it(`${answer.status}${code} is ${String(status)}, with the answer as the body`, () => {
      expect(turnHttpReply(answer)).toEqual({ status, body: answer });
    });
  }
});

it("docs/turns.md's HTTP table gives each answer the status turnHttpReply gives it", () => {
  const docs = readFileSync(new URL("../../docs/turns.md", import.meta.url), "utf8");
  const table = docs.slice(docs.indexOf("## HTTP mapping"), docs.indexOf("## The thread"));
  const row = (label: string) => table.split("\n").find((line) => line.startsWith(`| ${label} |`)) ?? `(no row ${label})`;
  const statusOf = (answer: DecideAnswer) => String(turnHttpReply(answer).status);
  expect(row("`completed`")).toContain(statusOf({ status: "completed", turnKey, replayed: false, answer: "", calls: [] }));
  expect(row("`awaiting_approval`")).toContain(statusOf({ status: "awaiting_approval", turnKey, replayed: false, approvals: [] }));
  expect(row("`running`")).toContain(statusOf({ status: "running", turnKey }));
  expect(row("`refused` / `input_mismatch`")).toContain(statusOf({ status: "refused", code: "input_mismatch", turnKey, replayed: false }));
  expect(row("`refused` / `denied`")).toContain(statusOf({ status: "refused", code: "denied", turnKey, replayed: false }));
  expect(row("`decide`: `forbidden`")).toContain(statusOf({ status: "forbidden" }));
  expect(row("`decide` / `get`: `not_found`")).toContain(statusOf({ status: "not_found" }));
  expect(row("`decide`: `not_pending`")).toContain(statusOf({ status: "not_pending", approvalStatus: "applied" }));
  const editRefused: DecideAnswer = {
    status: "completed",
    turnKey,
    replayed: false,
    answer: "",
    calls: [{ tool: "edit_note", callId: "w1", status: "error", refusal: "invalid_arguments", approvalId: "b".repeat(64) }],
  };
  expect(row("`decide`: an edit that fails its checks")).toContain(statusOf(editRefused));
});

describe("turnHttpErrorReply", () => {
  it("a TurnServiceError is 422 with its code only", () => {
    const error = new TurnServiceError("invalid_input", "turnId must be ...");
    expect(turnHttpErrorReply(error)).toEqual({ status: 422, body: { error: "invalid_input" } });
  });

  it("anything else is 500 internal; the logger gets the class, never the message", () => {
    const warnings: [string, Readonly<Record<string, unknown>>][] = [];
    const logger: GuardrailLogger = { warn: (message, fields) => void warnings.push([message, fields]) };
    const error = new TypeError("the note says: my secret plan");
    expect(turnHttpErrorReply(error, logger)).toEqual({ status: 500, body: { error: "internal" } });
    expect(warnings).toEqual([["turn service call failed", { error: { name: "TypeError" } }]]);
    expect(JSON.stringify(warnings)).not.toContain("secret");
  });
});
