/**
 * Which commits of a guarded turn wait for their WAL flush on PostgreSQL, proven by crashing the
 * server (`pg_ctl stop -m immediate`: what was not flushed is lost) between a turn's steps, on a
 * server of its own with `synchronous_commit = on` (what production runs) and a WAL writer that
 * waits 10 s between rounds, so a commit that did not wait for its flush is still unflushed when
 * the server is killed. The turns run through the real `createAgent`; the write tool's body counts
 * the writes it made (this process survives the server's crash).
 *
 * An allowed receipt and read evidence (with its audit event) do not wait: lost, the retried turn
 * is admitted and reads again. The claim and its settlement wait, and the claim's flush carries
 * every earlier commit with it, so once a write can run nothing it relied on can be lost.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { digest, turnKey, type GuardrailStore, type TurnInput } from "arkah-agent-guardrails";
import { PostgresGuardrailStore } from "arkah-agent-guardrails/postgres";
import type { ClaimOptions, ClaimResult, MutationIdentity } from "arkah-agent-guardrails/store";
import { startEmbeddedPostgres, type EmbeddedServer } from "../../scripts/postgres/embedded.js";
import { countingPool } from "../support/counting-pool.js";
import { admit, DocumentService, ForwardingStore, guardedAgent, invokeTurn, outcomeOf, read, rename, turnInput } from "../support/fixtures.js";

/** Runs `fn` until it stops failing (the pool finds its connections dead after a crash one by one). */
async function once<T>(fn: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn();
    } catch (error) {
      if (attempt >= 20) throw error;
    }
  }
}

/**
 * A store view whose claim first crashes the server: the turn is killed between its read and its
 * claim. `restarted`: the server is back before the claim is asked (else the claim finds it down).
 */
class CrashBeforeClaim extends ForwardingStore {
  constructor(
    inner: GuardrailStore,
    private readonly server: EmbeddedServer,
    private readonly restarted: boolean,
  ) {
    super(inner);
  }
  override async claimMutation(identity: MutationIdentity, options?: ClaimOptions): Promise<ClaimResult> {
    await (this.restarted ? this.server.crash() : this.server.kill());
    return super.claimMutation(identity, options);
  }
}

describe("PostgreSQL crashed between a turn's steps (a server of its own, synchronous_commit = on)", () => {
  let server: EmbeddedServer;
  let store: PostgresGuardrailStore;
  let admin: pg.Pool;

  beforeAll(async () => {
    server = await startEmbeddedPostgres({
      database: "arkah_flush",
      // A 10 s WAL writer round (and no autovacuum writing WAL): an unflushed commit stays unflushed until the crash.
      settings: { synchronous_commit: "on", wal_writer_delay: "10000ms", autovacuum: "off" },
    });
    store = await PostgresGuardrailStore.open({ connectionString: server.url });
    admin = new pg.Pool({ connectionString: server.url, max: 1 });
    admin.on("error", () => undefined);
  }, 120_000);

  afterAll(async () => {
    await store.close();
    await admin.end().catch(() => undefined);
    await server.stop();
  }, 60_000);

  /** A read-then-write turn on `service`, through `on` (the store or a view of it). */
  const runTurn = (on: GuardrailStore, input: TurnInput, service: DocumentService) =>
    guardedAgent({
      store: on,
      input,
      service,
      script: [{ toolCalls: [read("read-1")] }, { toolCalls: [rename("write-1")] }, { content: "Renamed." }],
    }).agent;

  const evidenceCount = async (input: TurnInput) =>
    Number((await admin.query<{ n: string }>("SELECT count(*) AS n FROM arkah_guardrails.read_evidence WHERE turn_key = $1", [turnKey(input)])).rows[0]?.n);

  // First, before any crash: the pool has no dead connections to find yet.
  it("readAudit is one round trip when the WAL is flushed past what it reads (the check is in the read statement), and adds one flushing commit when it is not", async () => {
    const counted = countingPool(server.url);
    const counting = await PostgresGuardrailStore.open({ pool: counted.pool });
    try {
      const key = turnKey(turnInput({ scopeId: "doc-flush-6", turnId: "audit-round-trips" }));
      const audit = { at: new Date().toISOString(), decision: "executed" as const, turnKey: key, scopeId: "doc-flush-6", toolCallId: "read-1", toolName: "read_document" };
      // A read's commit does not wait for its flush, and the WAL writer's next round is seconds away.
      await counting.recordSuccessfulRead({ turnKey: key, evidenceDigest: digest({ kind: "test.evidence", key }) }, { audit });
      counted.reset();
      expect((await counting.readAudit({ turnKey: key })).map((event) => event.toolCallId)).toEqual(["read-1"]);
      expect(counted.tally.statements, "its event is not flushed yet: the read, then one flushing commit").toEqual(["read_audit_by_turn", "flush_wal"]);
      counted.reset();
      expect((await counting.readAudit({ turnKey: key })).map((event) => event.toolCallId)).toEqual(["read-1"]);
      expect(counted.tally.statements, "flushed now: the read alone").toEqual(["read_audit_by_turn"]);
      expect(counted.tally.roundTrips).toBe(1);
    } finally {
      await counting.close();
      await counted.pool.end();
    }
  }, 120_000);

  it("crashed between the read and the claim: the receipt and the read evidence, not waited for, are lost; the retried turn is admitted again, reads again and writes once", async () => {
    const input = turnInput({ scopeId: "doc-flush-1", turnId: "before-claim" });
    const service = new DocumentService();
    await admit(store, input);
    await expect(invokeTurn(runTurn(new CrashBeforeClaim(store, server, false), input, service), input)).rejects.toThrow();
    await server.restart();
    expect(service.reads).toBe(1);
    expect(service.writes).toBe(0);

    // Neither commit waited for its flush, and nothing flushed the WAL before the crash.
    expect(await once(() => store.getReceipt(turnKey(input)))).toBeUndefined();
    expect(await once(() => evidenceCount(input))).toBe(0);
    expect(await store.getMutation(turnKey(input))).toBeUndefined();

    // The retry redoes the lost work: admission, the read; the write runs once.
    expect((await admit(store, input)).allowed).toBe(true);
    const messages = await invokeTurn(runTurn(store, input, service), input);
    expect(outcomeOf(messages, "write-1")).toMatchObject({ status: "success", code: undefined });
    expect(service).toMatchObject({ reads: 2, writes: 1 });
  }, 120_000);

  it("crashed and back between the read and the claim: the claim finds the read evidence lost and refuses read_required, nothing written; the retry writes once", async () => {
    const input = turnInput({ scopeId: "doc-flush-5", turnId: "back-before-claim" });
    const service = new DocumentService();
    await admit(store, input);
    const messages = await invokeTurn(runTurn(new CrashBeforeClaim(store, server, true), input, service), input);
    expect(outcomeOf(messages, "write-1")).toMatchObject({ status: "error", code: "read_required" });
    expect(service.writes).toBe(0);
    expect(await store.getMutation(turnKey(input))).toBeUndefined();

    expect((await admit(store, input)).allowed).toBe(true);
    const again = await invokeTurn(runTurn(store, input, service), input);
    expect(outcomeOf(again, "write-1")).toMatchObject({ status: "success", code: undefined });
    expect(service).toMatchObject({ reads: 2, writes: 1 });
  }, 120_000);

  it("crashed right after a turn: the claim's flush carried the receipt and the read evidence; the retry replays the write without running it", async () => {
    const input = turnInput({ scopeId: "doc-flush-2", turnId: "after-turn" });
    const service = new DocumentService();
    await admit(store, input);
    const first = await invokeTurn(runTurn(store, input, service), input);
    expect(outcomeOf(first, "write-1").status).toBe("success");
    expect(service.writes).toBe(1);

    await server.crash();

    expect(await once(() => store.getReceipt(turnKey(input)))).toMatchObject({ allowed: true });
    expect(await once(() => evidenceCount(input))).toBe(1);
    expect(await store.getMutation(turnKey(input))).toMatchObject({ state: "complete" });
    // Retried (admitted again: the stored receipt answers), the write is replayed, not run.
    await admit(store, input);
    const again = await invokeTurn(runTurn(store, input, service), input);
    expect(outcomeOf(again, "write-1")).toMatchObject({ status: "success", content: outcomeOf(first, "write-1").content });
    expect(service.writes).toBe(1);
  }, 120_000);

  it("a refused admission waits for its flush: it survives a crash right after, and a retry that moderation would allow is refused still", async () => {
    const input = turnInput({ scopeId: "doc-flush-3", turnId: "refused" });
    expect((await admit(store, input, false)).allowed).toBe(false);

    await server.crash();

    expect(await once(() => store.getReceipt(turnKey(input)))).toMatchObject({ allowed: false });
    expect((await admit(store, input, true)).allowed).toBe(false);
  }, 120_000);

  it("readAudit answers a read's event only once it is flushed: the event survives a crash right after it was read", async () => {
    const input = turnInput({ scopeId: "doc-flush-4", turnId: "audited-read" });
    const service = new DocumentService();
    await admit(store, input);
    // The turn stops after its read: nothing synchronous follows the read's unflushed commit.
    const agent = guardedAgent({ store, input, service, script: [{ toolCalls: [read("read-1")] }, { content: "Read it." }] }).agent;
    await invokeTurn(agent, input);
    const before = await store.readAudit({ turnKey: turnKey(input) });
    expect(before.map((event) => event.decision)).toContain("executed");

    await server.crash();

    expect(await once(() => store.readAudit({ turnKey: turnKey(input) }))).toEqual(before);
  }, 120_000);
});
