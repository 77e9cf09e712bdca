/**
 * Attack class 13: the HTTP example authorizes every answer. examples/http-service runs in this
 * process behind a real HTTP server (`@hono/node-server` on a free 127.0.0.1 port, stopped after),
 * on SQLite files in a temp directory, with the offline model. Writes are counted in the service's
 * own database (`note_writes`, one row per write the write service executed).
 *
 * - Only a turn's own user (its `principal`), or a configured approver, may decide its approvals:
 *   another user's approve, reject or edit is 403, decides nothing and writes nothing, and the
 *   request stays answerable by its user.
 * - Idempotency keys are the user's own: the same key from another user is another turn, with its
 *   own thread, receipt and claim, never the first user's answer, approvals or write.
 */
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { serve, type ServerType } from "@hono/node-server";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ApprovalRequest } from "arkah-agent-guardrails";
import { buildService, type Service } from "../../examples/http-service/agent.js";
import { createApp } from "../../examples/http-service/app.js";
import { tempDir } from "../processes/support.js";

interface Reply {
  readonly status: number;
  readonly body: Record<string, unknown>;
}

const dir = tempDir("arkah-http-security-");
let service: Service;
let server: ServerType;
let url: string;

beforeAll(async () => {
  // No API key in this env: the offline model, whatever the machine running the tests has set.
  service = await buildService(dir.path, {});
  const port = await new Promise<number>((listening) => {
    server = serve({ fetch: createApp(service, { approvers: ["carol"] }).fetch, port: 0, hostname: "127.0.0.1" }, (info: AddressInfo) => {
      listening(info.port);
    });
  });
  url = `http://127.0.0.1:${String(port)}`;
});

afterAll(async () => {
  await new Promise<void>((closed) => {
    server.close(() => {
      closed();
    });
  });
  service.close();
  dir.remove();
});

async function post(path: string, user: string, body: unknown, key?: string): Promise<Reply> {
  const headers: Record<string, string> = { "content-type": "application/json", "x-user": user };
  if (key !== undefined) headers["idempotency-key"] = key;
  const response = await fetch(`${url}${path}`, { method: "POST", headers, body: JSON.stringify(body) });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const turn = (user: string, key: string, noteId: string, message: string) => post("/turns", user, { noteId, message }, key);
const decide = (user: string, approvalId: string, decision: Record<string, unknown>) => post(`/approvals/${approvalId}`, user, decision);

/** Every write the write service executed, read from its database by another connection. */
function writes(): { noteId: string; body: string }[] {
  const db = new Database(join(dir.path, "notes.sqlite"), { readonly: true });
  try {
    return db.prepare("SELECT note_id AS noteId, body FROM note_writes ORDER BY written_at").all() as { noteId: string; body: string }[];
  } finally {
    db.close();
  }
}

/** Alice asks to clear `noteId` and the run pauses on her approval. */
async function alicePaused(key: string, noteId: string): Promise<ApprovalRequest> {
  const paused = await turn("alice", key, noteId, `Clear ${noteId}`);
  expect(paused.status).toBe(202);
  const [request, ...others] = paused.body.approvals as ApprovalRequest[];
  expect(others).toEqual([]);
  if (request === undefined) throw new Error("no approval request");
  return request;
}

describe("only a turn's own user, or an approver, decides its approvals", () => {
  it.each<[string, Record<string, unknown>]>([
    ["approves", { decision: "approve" }],
    ["rejects", { decision: "reject", message: "no" }],
    ["edits (to write their own text)", { decision: "edit", args: { noteId: "note-8", body: "bob was here" } }],
  ])("user B %s user A's pending approval: 403, nothing decided or written; A still decides it", async (_name, decision) => {
    const before = writes();
    const key = `clear-${String(decision.decision)}-0001`;
    const request = await alicePaused(key, "note-8");

    expect(await decide("bob", request.approvalId, decision)).toEqual({ status: 403, body: { error: "forbidden" } });
    expect(writes()).toEqual(before);
    expect((await service.store.getApproval(request.approvalId))?.status).toBe("pending");

    // Alice's own answer still decides it: she rejects, and nothing is written.
    const rejected = await decide("alice", request.approvalId, { decision: "reject" });
    expect(rejected.status).toBe(200);
    expect(rejected.body.answer).toBe("note-8 was not changed: approval_rejected.");
    expect(writes()).toEqual(before);
  });

  it("user B answering user A's approval that is no longer waiting learns nothing of it: 403, not its status", async () => {
    const request = await alicePaused("clear-answered-0001", "note-8");
    expect((await decide("alice", request.approvalId, { decision: "reject" })).status).toBe(200);
    expect(await decide("bob", request.approvalId, { decision: "approve" })).toEqual({ status: 403, body: { error: "forbidden" } });
  });

  it("an answer without X-User is 400 and decides nothing", async () => {
    const request = await alicePaused("clear-anonymous-01", "note-8");
    const response = await fetch(`${url}/approvals/${request.approvalId}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ decision: "approve" }),
    });
    expect(response.status).toBe(400);
    expect((await service.store.getApproval(request.approvalId))?.status).toBe("pending");
    expect((await decide("alice", request.approvalId, { decision: "reject" })).status).toBe(200);
  });

  it("the configured approver (carol) decides user A's approval: the note is cleared once", async () => {
    const before = writes();
    const request = await alicePaused("clear-approver-001", "note-8");
    const approved = await decide("carol", request.approvalId, { decision: "approve" });
    expect(approved.status).toBe(200);
    expect(approved.body).toMatchObject({ status: "completed", turnId: "alice/clear-approver-001" });
    expect(writes()).toEqual([...before, { noteId: "note-8", body: "" }]);
  });
});

describe("idempotency keys are scoped per user", () => {
  it("user B reusing user A's idempotency key gets their own turn, never A's answer", async () => {
    const request = ["shared-key-0001", "note-7", "Set note-7 to: Buy oat milk"] as const;
    const alice = await turn("alice", ...request);
    expect(alice.status).toBe(200);
    expect(alice.body).toMatchObject({ turnId: "alice/shared-key-0001", answer: expect.stringMatching(/^Done: /) as string });
    const before = writes();

    // The same key, note and message from Bob: a turn of his own, refused as his (he does not own
    // note-7), not Alice's answer replayed, not a 409 that tells him the key is taken.
    const bob = await turn("bob", ...request);
    expect(bob).toEqual({
      status: 200,
      body: {
        status: "completed",
        turnId: "bob/shared-key-0001",
        answer: "note-7 was not changed: unauthorized.",
        calls: [
          { tool: "read_note", callId: "call-1", status: "success" },
          { tool: "edit_note", callId: "call-2", status: "error", refusal: "unauthorized" },
        ],
      },
    });
    expect(writes()).toEqual(before);

    // Alice's retry with her key still gets her answer, and writes nothing again.
    expect(await turn("alice", ...request)).toEqual(alice);
    expect(writes()).toEqual(before);
  });

  it("user B using a key first does not take it from user A, nor get A's pending approvals", async () => {
    const before = writes();
    const bobFirst = await turn("bob", "shared-key-0002", "note-7", "Clear note-7");
    expect(bobFirst.status).toBe(200);
    expect(bobFirst.body).toMatchObject({ turnId: "bob/shared-key-0002", answer: "note-7 was not changed: unauthorized." });

    const request = await alicePaused("shared-key-0002", "note-7");
    // Bob sends the key again while Alice's turn waits: his own turn again, not her approvals.
    const bobAgain = await turn("bob", "shared-key-0002", "note-7", "Clear note-7");
    expect(bobAgain).toEqual(bobFirst);
    expect(JSON.stringify(bobAgain.body)).not.toContain(request.approvalId);

    const approved = await decide("alice", request.approvalId, { decision: "approve" });
    expect(approved.status).toBe(200);
    expect(writes()).toEqual([...before, { noteId: "note-7", body: "" }]);
  });
});
