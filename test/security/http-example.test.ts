/**
 * Attack class 13: the HTTP example authorizes every answer. examples/http-service runs in this
 * process behind a real HTTP server, once on Hono (`@hono/node-server`) and once on Express (its
 * own `listen`), each on a free 127.0.0.1 port and stopped after, on SQLite files in a temp
 * directory, with the offline model. Both route to the same turn service; who may decide is its
 * `mayDecide` (the turn's principal, or an approver). Writes are counted in the service's own
 * database (`note_writes`, one row per write the write service executed), model calls by the model.
 *
 * - Only a turn's own user (its `principal`), or a configured approver, may decide its approvals:
 *   another user's approve, reject or edit is 403, decides nothing and writes nothing, and the
 *   request stays answerable by its user.
 * - Idempotency keys are the user's own: the same key from another user is another turn, with its
 *   own thread, receipt and claim, never the first user's answer, approvals or write.
 * - A key is one request: the same user's key for another note is 422 `input_mismatch`, and runs
 *   and writes nothing (the turn service's request key).
 * - A turn's state is its user's: another user's `GET /turns/:turnKey` is 404.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { PendingApproval } from "arkah-agent-guardrails";
import { FRAMEWORKS, startServer, type RunningServer } from "../examples/http-servers.js";

describe.each(FRAMEWORKS)("the HTTP example on %s", (framework) => {
  let server: RunningServer;

  beforeAll(async () => {
    server = await startServer(framework, { approvers: ["carol"] });
  });
  afterAll(async () => {
    await server.stop();
  });

  const turn = (user: string, key: string, noteId: string, message: string) => server.post("/turns", user, { noteId, message }, key);
  const decide = (user: string, approvalId: string, decision: Record<string, unknown>) => server.post(`/approvals/${approvalId}`, user, decision);
  const status = async (approvalId: string) => (await server.service.store.getApproval(approvalId))?.status;

  /** Alice asks to clear `noteId` and the run pauses on her approval. */
  async function alicePaused(key: string, noteId: string): Promise<PendingApproval> {
    const paused = await turn("alice", key, noteId, `Clear ${noteId}`);
    expect(paused.status).toBe(202);
    const [request, ...others] = paused.body.approvals as PendingApproval[];
    expect(others).toEqual([]);
    if (request === undefined) throw new Error("no approval request");
    return request;
  }

  describe("only a turn's own user, or an approver, decides its approvals", () => {
    it.each<[string, Record<string, unknown>]>([
      ["approves", { decision: "approve" }],
      ["rejects", { decision: "reject", message: "no" }],
      ["edits (to write their own text)", { decision: "edit", args: { noteId: "note-8", body: "bob was here" } }],
    ])("user B %s user A's pending approval: 403, nothing decided, run or written; A still decides it", async (_name, decision) => {
      const before = server.writes();
      const request = await alicePaused(`clear-${String(decision.decision)}-0001`, "note-8");
      const calls = server.model.calls;

      expect(await decide("bob", request.approvalId, decision)).toEqual({ status: 403, body: { status: "forbidden" } });
      expect(server.writes()).toEqual(before);
      expect(server.model.calls).toBe(calls);
      expect(await status(request.approvalId)).toBe("pending");

      // Alice's own answer still decides it: she rejects, and nothing is written.
      const rejected = await decide("alice", request.approvalId, { decision: "reject" });
      expect(rejected.status).toBe(200);
      expect(rejected.body.answer).toBe("note-8 was not changed: approval_rejected.");
      expect(server.writes()).toEqual(before);
    });

    it("user B answering user A's approval that is no longer waiting learns nothing of it: 403, not its status", async () => {
      const request = await alicePaused("clear-answered-0001", "note-8");
      expect((await decide("alice", request.approvalId, { decision: "reject" })).status).toBe(200);
      expect(await decide("bob", request.approvalId, { decision: "approve" })).toEqual({ status: 403, body: { status: "forbidden" } });
    });

    it("an answer without X-User is 400 and decides nothing", async () => {
      const request = await alicePaused("clear-anonymous-01", "note-8");
      const anonymous = await server.post(`/approvals/${request.approvalId}`, undefined, { decision: "approve" });
      expect(anonymous.status).toBe(400);
      expect(await status(request.approvalId)).toBe("pending");
      expect((await decide("alice", request.approvalId, { decision: "reject" })).status).toBe(200);
    });

    it("the configured approver (carol) decides user A's approval: the note is cleared once", async () => {
      const before = server.writes();
      const request = await alicePaused("clear-approver-001", "note-8");
      const approved = await decide("carol", request.approvalId, { decision: "approve" });
      expect(approved.status).toBe(200);
      expect(approved.body).toMatchObject({ status: "completed", answer: 'Done: {"noteId":"note-8","body":"","revision":2}' });
      expect(server.writes().map(({ noteId, body }) => ({ noteId, body }))).toEqual([
        ...before.map(({ noteId, body }) => ({ noteId, body })),
        { noteId: "note-8", body: "" },
      ]);
    });
  });

  describe("idempotency keys are scoped per user", () => {
    it("user B reusing user A's idempotency key gets their own turn, never A's answer", async () => {
      const request = ["shared-key-0001", "note-7", "Set note-7 to: Buy oat milk"] as const;
      const alice = await turn("alice", ...request);
      expect(alice.status).toBe(200);
      expect(alice.body).toMatchObject({ answer: expect.stringMatching(/^Done: /) as string });
      const before = server.writes();

      // The same key, note and message from Bob: a turn of his own, refused as his (he does not own
      // note-7), not Alice's answer replayed, not a 409 that tells him the key is taken.
      const bob = await turn("bob", ...request);
      expect(bob.status).toBe(200);
      expect(bob.body).toMatchObject({
        status: "completed",
        replayed: false,
        answer: "note-7 was not changed: unauthorized.",
        calls: [
          { tool: "read_note", callId: "call-1", status: "success" },
          { tool: "edit_note", callId: "call-2", status: "error", refusal: "unauthorized" },
        ],
      });
      expect(bob.body.turnKey).not.toBe(alice.body.turnKey);
      expect(server.writes()).toEqual(before);

      // Alice's retry with her key still gets her answer, replayed, and runs nothing.
      const calls = server.model.calls;
      expect(await turn("alice", ...request)).toEqual({ status: 200, body: { ...alice.body, replayed: true } });
      expect(server.model.calls).toBe(calls);
      expect(server.writes()).toEqual(before);
    });

    it("a user's same key for another note is 422 input_mismatch: no second turn, no second write", async () => {
      const first = await turn("alice", "one-request-0001", "note-7", "Set note-7 to: Buy oat milk");
      expect(first.status).toBe(200);
      const before = server.writes();
      const calls = server.model.calls;

      // The same key, the same user, another note (and another message): the same request, changed.
      for (const [noteId, message] of [["note-8", "Set note-8 to: Call the plumber"], ["note-8", "Set note-7 to: Buy oat milk"]] as const) {
        const other = await turn("alice", "one-request-0001", noteId, message);
        expect(other.status).toBe(422);
        expect(other.body).toMatchObject({ status: "refused", code: "input_mismatch", replayed: false });
        expect(other.body.turnKey).not.toBe(first.body.turnKey);
        expect(await server.get(`/turns/${String(other.body.turnKey)}`, "alice")).toEqual({ status: 404, body: { status: "not_found" } });
      }
      expect(server.writes()).toEqual(before);
      expect(server.model.calls).toBe(calls);

      // The key still answers its own request, replayed.
      expect(await turn("alice", "one-request-0001", "note-7", "Set note-7 to: Buy oat milk")).toEqual({ status: 200, body: { ...first.body, replayed: true } });
    });

    it("user B using a key first does not take it from user A, nor get A's pending approvals", async () => {
      const before = server.writes();
      const bobFirst = await turn("bob", "shared-key-0002", "note-7", "Clear note-7");
      expect(bobFirst.status).toBe(200);
      expect(bobFirst.body).toMatchObject({ answer: "note-7 was not changed: unauthorized." });

      const request = await alicePaused("shared-key-0002", "note-7");
      // Bob sends the key again while Alice's turn waits: his own turn, replayed, not her approvals.
      const bobAgain = await turn("bob", "shared-key-0002", "note-7", "Clear note-7");
      expect(bobAgain).toEqual({ status: 200, body: { ...bobFirst.body, replayed: true } });
      expect(JSON.stringify(bobAgain.body)).not.toContain(request.approvalId);

      const approved = await decide("alice", request.approvalId, { decision: "approve" });
      expect(approved.status).toBe(200);
      expect(server.writes().map(({ noteId, body }) => ({ noteId, body }))).toEqual([
        ...before.map(({ noteId, body }) => ({ noteId, body })),
        { noteId: "note-7", body: "" },
      ]);
    });
  });

  it("a turn's state is its user's: another user's GET /turns/:turnKey is 404, as for a turn that never was", async () => {
    const request = await alicePaused("read-guard-0001", "note-8");
    const paused = await server.get(`/turns/${String((await server.service.store.getApproval(request.approvalId))?.turnKey)}`, "bob");
    expect(paused).toEqual({ status: 404, body: { status: "not_found" } });
    expect(JSON.stringify(paused.body)).not.toContain(request.approvalId);
    expect((await decide("alice", request.approvalId, { decision: "reject" })).status).toBe(200);
  });
});
