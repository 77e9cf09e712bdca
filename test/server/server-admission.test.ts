/**
 * Admission inside LangGraph Server: examples/langgraph-server, started as `langgraphjs dev` starts
 * a project (its `langgraph.json`, `startServer` in a child process under tsx; support/serve-example.ts),
 * driven over HTTP by `@langchain/langgraph-sdk`'s `Client` with the example's bearer tokens. The
 * test is an honest client talking to the server directly: it never calls `admitTurn` and never
 * sends a turn; the server's auth handler builds and admits it. Writes are counted from the notes
 * service's own log; receipts and claims are read from the guardrail store the server uses.
 * The attacks (no credentials, a forged turn, another user's note or thread) are in
 * test/security/server-admission.test.ts.
 */
import { randomUUID } from "node:crypto";
import type { Client } from "@langchain/langgraph-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { turnKey, type ApprovalRequest, type TurnInput } from "arkah-agent-guardrails";
import { startExampleServer, type ExampleServer } from "./support/example-server.js";

const ASK = "Set note-7 to: Buy oat milk";

interface WireMessage {
  readonly type: string;
  readonly content: unknown;
  readonly name?: string;
  readonly status?: string;
}

let server: ExampleServer;
let alice: Client;

beforeAll(async () => {
  server = await startExampleServer();
  alice = server.client("alice-token");
}, 60_000);

afterAll(async () => {
  await server.stop();
}, 30_000);

/** The turn the server should have built for `principal`'s request: the test's own statement of it. */
function expectedTurn(principal: string, requestId: string, noteId: string, text: string): TurnInput {
  return { scopeId: noteId, turnId: `${principal}/${requestId}`, policyVersion: "notes-v1", segments: [{ label: "user", content: text }], principal };
}

/** What an honest client sends: its one new message, the note and its request's id. No turn. */
function request(requestId: string, text = ASK, noteId = "note-7") {
  return { input: { messages: [{ role: "user", content: text }] }, context: { noteId, requestId } };
}

function edits(values: unknown): [string | undefined, unknown][] {
  return (values as { messages: WireMessage[] }).messages
    .filter((message) => message.type === "tool" && message.name === "edit_note")
    .map((message) => [message.status, message.content]);
}

describe("admission inside LangGraph Server: the auth handler admits each run's turn", () => {
  it("an honest client's run is admitted by the server, for its authenticated user, and writes once", async () => {
    const before = server.writes().length;
    const requestId = randomUUID();
    const thread = await alice.threads.create();

    const values = await alice.runs.wait(thread.thread_id, "notes", request(requestId));
    expect(edits(values)).toEqual([["success", "Saved note-7"]]);
    expect(server.writes().slice(before)).toEqual([{ noteId: "note-7", body: "Buy oat milk" }]);

    // The receipt is the server's: the turn it built, for the user the token names.
    const turn = expectedTurn("alice", requestId, "note-7", ASK);
    expect(await server.store.getReceipt(turnKey(turn))).toMatchObject({ turnId: `alice/${requestId}`, principal: "alice", allowed: true });
    expect(await server.store.getMutation(turnKey(turn))).toMatchObject({ state: "complete", toolName: "edit_note" });
  });

  it("a retry of the request (same requestId) replays the write, on its thread and on a new one: one write", async () => {
    const before = server.writes().length;
    const requestId = randomUUID();
    const thread = await alice.threads.create();

    const first = await alice.runs.wait(thread.thread_id, "notes", request(requestId));
    expect(edits(first)).toEqual([["success", "Saved note-7"]]);
    const decidedAt = (await server.store.getReceipt(turnKey(expectedTurn("alice", requestId, "note-7", ASK))))?.decidedAt;

    // The client lost the answer: the same request again, on its thread, then on a new thread.
    const again = await alice.runs.wait(thread.thread_id, "notes", request(requestId));
    expect(edits(again)).toEqual([
      ["success", "Saved note-7"],
      ["success", "Saved note-7"],
    ]);
    const elsewhere = await alice.threads.create();
    const fresh = await alice.runs.wait(elsewhere.thread_id, "notes", request(requestId));
    expect(edits(fresh)).toEqual([["success", "Saved note-7"]]);

    expect(server.writes()).toHaveLength(before + 1);
    // Admitted once: the retries found the receipt (moderation is not asked again).
    expect((await server.store.getReceipt(turnKey(expectedTurn("alice", requestId, "note-7", ASK))))?.decidedAt).toBe(decidedAt);
  });

  it("a new request (a new requestId) is a new turn and writes again", async () => {
    const before = server.writes().length;
    const thread = await alice.threads.create();
    await alice.runs.wait(thread.thread_id, "notes", request(randomUUID(), "Set note-7 to: Buy bread"));
    await alice.runs.wait(thread.thread_id, "notes", request(randomUUID(), "Set note-7 to: Buy eggs"));
    expect(server.writes().slice(before)).toEqual([
      { noteId: "note-7", body: "Buy bread" },
      { noteId: "note-7", body: "Buy eggs" },
    ]);
  });

  it("the same requestId with another message is 409 input_mismatch: nothing runs or writes", async () => {
    const before = server.writes().length;
    const requestId = randomUUID();
    const thread = await alice.threads.create();
    await alice.runs.wait(thread.thread_id, "notes", request(requestId));

    await expect(alice.runs.wait(thread.thread_id, "notes", request(requestId, "Set note-7 to: Buy beer"))).rejects.toMatchObject({ status: 409 });
    expect(server.writes()).toHaveLength(before + 1);
    expect((await alice.runs.list(thread.thread_id)).map((run) => run.status)).toEqual(["success"]);
  });

  it("moderation denies the turn: 403, no run, no write, and the denial is stored for retries", async () => {
    const before = server.writes().length;
    const requestId = randomUUID();
    const text = "Set note-7 to: my password is hunter2";
    const thread = await alice.threads.create();

    await expect(alice.runs.wait(thread.thread_id, "notes", request(requestId, text))).rejects.toMatchObject({ status: 403 });
    await expect(alice.runs.wait(thread.thread_id, "notes", request(requestId, text))).rejects.toMatchObject({ status: 403 });
    expect(await alice.runs.list(thread.thread_id)).toEqual([]);
    expect(server.writes()).toHaveLength(before);
    expect(await server.store.getReceipt(turnKey(expectedTurn("alice", requestId, "note-7", text)))).toMatchObject({ allowed: false });
  });

  it("a pause is resumed by its own user: the resume's turn is rebuilt from the request and checked, never admitted anew; it writes once", async () => {
    const before = server.writes().length;
    const requestId = randomUUID();
    const clear = "Clear note-7";
    const thread = await alice.threads.create();

    await alice.runs.wait(thread.thread_id, "notes", request(requestId, clear));
    const interrupts = (await alice.threads.getState(thread.thread_id)).tasks.flatMap((task) => task.interrupts);
    const pending = interrupts[0]?.value as ApprovalRequest;
    expect(pending).toMatchObject({ type: "arkah.approval", tool: "edit_note", args: { noteId: "note-7", body: "" } });
    expect(server.writes()).toHaveLength(before);

    // The resume repeats the request (note, id, message) and carries only the answer.
    const resume = (message: string, id = requestId) => ({
      command: { resume: { decision: "approve", approvalId: pending.approvalId } },
      context: { noteId: "note-7", requestId: id, message },
    });
    // Not the request's message, or a request never admitted: refused before any run.
    await expect(alice.runs.wait(thread.thread_id, "notes", resume("Clear note-7 now"))).rejects.toMatchObject({ status: 409 });
    await expect(alice.runs.wait(thread.thread_id, "notes", resume(clear, randomUUID()))).rejects.toMatchObject({ status: 403 });
    expect(await server.store.getApproval(pending.approvalId)).toMatchObject({ status: "pending" });

    const done = await alice.runs.wait(thread.thread_id, "notes", resume(clear));
    expect(edits(done)).toEqual([["success", "Saved note-7"]]);
    expect(server.writes().slice(before)).toEqual([{ noteId: "note-7", body: "" }]);
    expect(await server.store.getApproval(pending.approvalId)).toMatchObject({ status: "applied" });
  });
});
