/**
 * The operator CLI (`arkah-guardrails`): the commands in-process against a real SQLite file store,
 * `main` for flags, messages and exit codes, a few runs of the real entry point as a child
 * process, and the full round trip through a real `createAgent` loop: a write whose outcome is
 * lost, `inspect` showing it, `reconcile` resolving it, and the retry that follows. The round trip
 * also runs against PostgreSQL when ARKAH_PG_URL is set (required under CI=true).
 *
 * No mocks: the stores are real files and a real server, the agent is LangChain's, and the CLI
 * reads the same store the agent wrote through its own connection, as an operator's would.
 */
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { HumanMessage } from "@langchain/core/messages";
import { Command, MemorySaver } from "@langchain/langgraph";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import {
  digest,
  effectKey,
  mutationKey,
  requireApproval,
  turnKey,
  type ApprovalRecord,
  type ApprovalRequest,
  type ApprovalSubmission,
  type ConfirmClaim,
  type GuardrailStore,
  type JsonValue,
  type TurnRef,
} from "arkah-agent-guardrails";
import {
  toolFingerprint,
  type EffectIdentity,
  type MutationIdentity,
  type MutationSettlement,
} from "arkah-agent-guardrails/store";
import { MIGRATIONS, POSTGRES_SCHEMA_VERSION, PostgresGuardrailStore } from "arkah-agent-guardrails/postgres";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import {
  approvals,
  audit,
  CliError,
  decide,
  EXIT,
  expire,
  formatAge,
  inspect,
  printable,
  reconcile,
  reconcileAuto,
  reconcileEffect,
  shellWord,
  terminalJson,
} from "../../src/cli/commands.js";
import { main } from "../../src/cli/main.js";
import { redactSecrets, suggestedStore } from "../../src/cli/open-store.js";
import { reopenedBeforeReconcile } from "../support/confirm.js";
import {
  admit,
  DocumentService,
  ForwardingStore,
  guardedAgent,
  invokeTurn,
  outcomeOf,
  read,
  rename,
  turnInput,
  userText,
  type ToolHooks,
} from "../support/fixtures.js";
import { adminPool, dropSchema, freshSchema, PG_URL, requirePostgres } from "../support/postgres.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const T0 = Date.parse("2026-11-29T18:00:00.000Z");

// ---------------------------------------------------------------------------------------------
// Helpers

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "arkah-cli-test-"));
  dirs.push(dir);
  return dir;
}

/** A clock the test moves by hand. */
function manualClock(start = T0) {
  let now = start;
  return {
    now: () => new Date(now),
    advance(seconds: number) {
      now += seconds * 1000;
    },
  };
}

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** `main` in-process, capturing what it writes. */
async function cli(argv: readonly string[], options: { now?: () => Date; env?: Record<string, string> } = {}): Promise<Run> {
  let stdout = "";
  let stderr = "";
  const code = await main(argv, {
    out: (text) => {
      stdout += text;
    },
    err: (text) => {
      stderr += text;
    },
    env: options.env ?? {},
    ...(options.now === undefined ? {} : { now: options.now }),
  });
  return { code, stdout, stderr };
}

/** The real entry point, as the bin runs it, in a child process. */
function spawnCli(argv: readonly string[], env: Record<string, string> = {}): Run {
  const { ARKAH_DEBUG: _debug, ...inherited } = process.env;
  const child = spawnSync(process.execPath, ["--import", "tsx", "src/cli/index.ts", ...argv], {
    cwd: ROOT,
    encoding: "utf8",
    env: { ...inherited, ...env },
  });
  if (child.error !== undefined) throw child.error;
  return { code: child.status ?? -1, stdout: child.stdout, stderr: child.stderr };
}

/** A sink that collects output, for the command functions. */
function sink() {
  const lines = { out: "", err: "" };
  return {
    lines,
    out: (text: string) => {
      lines.out += text;
    },
    err: (text: string) => {
      lines.err += text;
    },
  };
}

function identity(turn: TurnRef, callId: string, toolName = "rename_document", args: unknown = { title: "x" }): MutationIdentity {
  return {
    turnKey: turnKey(turn),
    scopeId: turn.scopeId,
    toolCallId: callId,
    toolName,
    argsDigest: digest(args),
    mutationKey: mutationKey(turn, { id: callId, name: toolName, args }),
    toolFingerprint: toolFingerprint({ name: toolName }),
  };
}

/** Claims a mutation slot as a worker would, and settles it `unknown` if asked (else it stays pending). */
async function claim(store: GuardrailStore, turn: TurnRef, callId: string, settle?: "unknown"): Promise<MutationIdentity> {
  const id = identity(turn, callId);
  const claimed = await store.claimMutation(id);
  if (claimed.status !== "acquired") throw new Error(`expected to acquire, got ${claimed.status}`);
  if (settle === "unknown") await store.settleMutation({ turnKey: id.turnKey, token: claimed.token, outcome: "unknown" });
  return id;
}

/** An approval request as the middleware submits it; `n` makes it distinct. */
function submission(n: number, overrides: Partial<ApprovalSubmission> = {}): ApprovalSubmission {
  const args = overrides.args ?? { title: `Title ${String(n)}`, expectedRevision: 0 };
  return {
    approvalId: digest({ test: "approval", n }),
    turnKey: turnKey({ scopeId: "doc-1", turnId: `t-${String(n)}` }),
    scopeId: "doc-1",
    toolCallId: `call-${String(n)}`,
    toolName: "rename_document",
    toolFingerprint: toolFingerprint({ name: "rename_document" }),
    argsDigest: digest(args),
    args,
    guardrails: ["approval"],
    reason: `Rename the document to "Title ${String(n)}"?`,
    requestedAt: new Date(T0 + n * 60_000).toISOString(),
    ...overrides,
  };
}

/** A SQLite store file in a fresh directory. */
function sqliteFile(now?: () => Date) {
  const path = join(tempDir(), "guardrails.sqlite");
  const store = SqliteGuardrailStore.open({ path, ...(now === undefined ? {} : { now }) });
  return { path, store, flags: ["--sqlite", path] };
}

const stackLine = /^\s+at /m;

// ---------------------------------------------------------------------------------------------
// Commands, in-process, against a real SQLite file

describe("inspect", () => {
  it("says so when nothing is unresolved, as text and as JSON", async () => {
    const { store } = sqliteFile();
    const text = sink();
    expect(await inspect(store, {}, text)).toBe(EXIT.ok);
    expect(text.lines.out).toBe("no unresolved mutations\n\nno unresolved side effects\n");
    const json = sink();
    await inspect(store, { json: true }, json);
    expect(JSON.parse(json.lines.out)).toEqual([]);
    store.close();
  });

  it("lists pending and unknown mutations oldest first, with age, scope, turn key, tool, call id, state and mutationKey", async () => {
    const clock = manualClock();
    const { store } = sqliteFile(clock.now);
    const older = await claim(store, { scopeId: "doc-1", turnId: "t-1" }, "call-1", "unknown");
    clock.advance(60);
    const newer = await claim(store, { scopeId: "doc-2", turnId: "t-2" }, "call-2");
    clock.advance(132); // the older claim is now 3m12s old, the newer 2m12s

    const text = sink();
    expect(await inspect(store, { now: clock.now }, text)).toBe(EXIT.ok);
    const lines = text.lines.out.split("\n");
    expect(lines[0]).toBe("2 unresolved mutations (1 unknown, 1 pending), oldest first:");
    expect(lines[2]?.split(/\s{2,}/)).toEqual(["AGE", "STATE", "SCOPE", "TOOL", "CALL ID", "TURN KEY", "MUTATION KEY"]);
    expect(lines[3]?.split(/\s+/)).toEqual(["3m12s", "unknown", "doc-1", "rename_document", "call-1", older.turnKey, older.mutationKey]);
    expect(lines[4]?.split(/\s+/)).toEqual(["2m12s", "pending", "doc-2", "rename_document", "call-2", newer.turnKey, newer.mutationKey]);

    const json = sink();
    await inspect(store, { json: true, now: clock.now }, json);
    expect(JSON.parse(json.lines.out)).toEqual([
      {
        turnKey: older.turnKey,
        scopeId: "doc-1",
        toolName: "rename_document",
        toolCallId: "call-1",
        state: "unknown",
        claimedAt: "2026-11-29T18:00:00.000Z",
        ageSeconds: 192,
        mutationKey: older.mutationKey,
        argsDigest: older.argsDigest,
      },
      {
        turnKey: newer.turnKey,
        scopeId: "doc-2",
        toolName: "rename_document",
        toolCallId: "call-2",
        state: "pending",
        claimedAt: "2026-11-29T18:01:00.000Z",
        ageSeconds: 132,
        mutationKey: newer.mutationKey,
        argsDigest: newer.argsDigest,
      },
    ]);
    store.close();
  });

  it("escapes control characters in model-chosen ids instead of writing them to the terminal", async () => {
    const { store } = sqliteFile();
    const hostile = "call\u001b[2J\nx\u009b31m";
    await claim(store, { scopeId: "doc-1", turnId: "t-1" }, hostile);
    const text = sink();
    await inspect(store, {}, text);
    expect(text.lines.out).toContain("call\\u001b[2J\\u000ax\\u009b31m");
    expect(text.lines.out.includes("\u001b") || text.lines.out.includes("\u009b")).toBe(false);
    const json = sink();
    await inspect(store, { json: true }, json);
    expect(json.lines.out.includes("\u001b") || json.lines.out.includes("\u009b")).toBe(false);
    expect((JSON.parse(json.lines.out) as { toolCallId: string }[])[0]?.toolCallId).toBe(hostile);
    store.close();
  });

  it("formats ages as s, m+s, h+m and d+h, never negative", () => {
    expect([0, 59, 60, 192, 3599, 3600, 7500, 86_399, 86_400, 273_600, -5].map(formatAge)).toEqual([
      "0s",
      "59s",
      "1m00s",
      "3m12s",
      "59m59s",
      "1h00m",
      "2h05m",
      "23h59m",
      "1d00h",
      "3d04h",
      "0s",
    ]);
    expect(printable("a\u0007b\u2028")).toBe("a\\u0007b\\u2028");
  });
});

describe("reconcile", () => {
  it("completed: stores the operator's result, which the same call then replays; a second reconciliation is wrong state", async () => {
    const { store } = sqliteFile();
    const turn = { scopeId: "doc-1", turnId: "t-1" };
    const id = await claim(store, turn, "call-1", "unknown");
    const out = sink();
    const result = { content: '{"title":"x","revision":1}', status: "success" } as const;
    const code = await reconcile(store, { turnKey: id.turnKey, resolution: "completed", result, operatorRef: "INC-7" }, out);
    expect(code).toBe(EXIT.ok);
    expect(out.lines.out).toContain(`reconciled turn ${id.turnKey}`);
    expect(out.lines.out).toContain("rename_document call-1 in scope doc-1");
    expect(out.lines.out).toContain(`mutationKey:  ${id.mutationKey}`);
    expect(out.lines.out).toContain("was:          unknown");
    expect(out.lines.out).toContain("complete, with the operator's result (success, 26 characters)");
    expect(out.lines.out).toContain("the scope doc-1 is no longer blocked");
    expect(out.lines.out).toContain("operatorRef:  INC-7");
    expect(await store.claimMutation(id)).toEqual({ status: "replay", result });

    const again = reconcile(store, { turnKey: id.turnKey, resolution: "no-effect", operatorRef: "INC-8" }, sink());
    await expect(again).rejects.toMatchObject({ exitCode: EXIT.wrongState });
    await expect(again).rejects.toThrow(/not pending or unknown/);
    store.close();
  });

  it("no-effect: removes the claim so the turn may claim again; a turn key without a claim is not found", async () => {
    const { store } = sqliteFile();
    const turn = { scopeId: "doc-1", turnId: "t-1" };
    const id = await claim(store, turn, "call-1");
    const out = sink();
    await reconcile(store, { turnKey: id.turnKey, resolution: "no-effect", operatorRef: "INC-9" }, out);
    expect(out.lines.out).toContain("was:          pending");
    expect(out.lines.out).toContain("the turn's mutation slot is open again");
    expect((await store.claimMutation(id)).status).toBe("acquired");

    const missing = reconcile(store, { turnKey: "f".repeat(64), resolution: "no-effect", operatorRef: "INC-9" }, sink());
    await expect(missing).rejects.toBeInstanceOf(CliError);
    await expect(missing).rejects.toMatchObject({ exitCode: EXIT.notFound });
    store.close();
  });
});

/** Claims a side effect as a worker would, and settles it `unknown` if asked (else it stays pending). */
async function claimEffect(store: GuardrailStore, turn: TurnRef, callId: string, to: string, settle?: "unknown"): Promise<EffectIdentity> {
  const args = { to };
  const id: EffectIdentity = {
    turnKey: turnKey(turn),
    scopeId: turn.scopeId,
    toolCallId: callId,
    toolName: "send_email",
    argsDigest: digest(args),
    effectKey: effectKey(turn, { name: "send_email", args }),
    toolFingerprint: toolFingerprint({ name: "send_email" }),
  };
  const claimed = await store.claimEffect(id);
  if (claimed.status !== "acquired") throw new Error(`expected to acquire, got ${claimed.status}`);
  if (settle === "unknown") await store.settleEffect({ effectKey: id.effectKey, token: claimed.token, outcome: "unknown" });
  return id;
}

describe("reconcile --auto", () => {
  const MODULE = fileURLToPath(new URL("fixtures/confirm-module.ts", import.meta.url));

  it("asks each unresolved claim's confirm and settles it; a claim without confirm, or whose confirm does not know, is left (exit 6)", async () => {
    const { path, store } = sqliteFile();
    const notWritten = await claim(store, { scopeId: "doc-1", turnId: "t-2" }, "call-2");
    const written = await claim(store, { scopeId: "doc-1", turnId: "t-1" }, "call-1", "unknown");
    const archiveId = identity({ scopeId: "doc-2", turnId: "t-3" }, "call-3", "archive_document");
    const archived = await store.claimMutation(archiveId);
    if (archived.status !== "acquired") throw new Error("expected to acquire");
    await store.settleMutation({ turnKey: archiveId.turnKey, token: archived.token, outcome: "unknown" });
    const mail = await claimEffect(store, { scopeId: "doc-1", turnId: "t-1" }, "mail-1", "ana@example.com", "unknown");

    const run = await cli(["--sqlite", path, "reconcile", "--auto", "--module", MODULE]);

    expect(run.code).toBe(6);
    expect(run.stdout).toContain(`settled mutation of turn ${written.turnKey} (rename_document call-1, was unknown): completed, by confirm:rename_document`);
    expect(run.stdout).toContain(`settled mutation of turn ${notWritten.turnKey} (rename_document call-2, was pending): no-effect, by confirm:rename_document`);
    expect(run.stdout).toContain(`left for an operator: mutation of turn ${archiveId.turnKey} (archive_document call-3, unknown): its tool has no confirm`);
    expect(run.stdout).toContain(`left for an operator: side effect ${mail.effectKey} (send_email mail-1, unknown): confirm does not know`);
    expect(run.stdout).toContain("2 settled by confirm, 2 left for an operator");
    // The same store path as an operator's: the confirmed result replays, the reopened slot claims again.
    expect(await store.claimMutation(written)).toEqual({ status: "replay", result: { content: "renamed to x", status: "success" } });
    expect((await store.claimMutation(notWritten)).status).toBe("acquired");
    expect(await store.listUnresolvedEffects()).toMatchObject([{ effectKey: mail.effectKey, state: "unknown" }]);
    const reconciled = (await store.readAudit()).filter((event) => event.decision === "reconciled");
    expect(reconciled.map((event) => [event.mutationKey, event.action, event.operatorRef])).toEqual([
      [notWritten.mutationKey, "no-effect", "confirm:rename_document"],
      [written.mutationKey, "completed", "confirm:rename_document"],
    ]);

    // Again: the same two left; the reopened slot this test claimed again is pending, and settled again.
    const again = await cli(["--sqlite", path, "reconcile", "--auto", "--module", MODULE]);
    expect(again.code).toBe(6);
    expect(again.stdout).toContain("1 settled by confirm, 2 left for an operator");
    store.close();
  });

  it("a slot reopened and claimed by another call while confirm was asked is left for an operator, the new claim untouched", async () => {
    const { store } = sqliteFile();
    const turn = { scopeId: "doc-1", turnId: "t-1" };
    const asked = await claim(store, turn, "call-1", "unknown");
    const rival = identity(turn, "call-2", "rename_document", { title: "y" });
    const racing = reopenedBeforeReconcile(store, rival);
    const confirm: ConfirmClaim = () => ({ outcome: "completed", result: "renamed to x" });
    const out = sink();

    expect(await reconcileAuto(racing.store, (name) => (name === "rename_document" ? confirm : undefined), out)).toBe(EXIT.leftForOperator);

    expect(out.lines.out).toContain(`left for an operator: mutation of turn ${asked.turnKey} (rename_document call-1): it changed meanwhile`);
    expect(await store.listUnresolved()).toMatchObject([{ toolCallId: "call-2", mutationKey: rival.mutationKey, state: "pending" }]);
    expect((await store.readAudit()).filter((event) => event.decision === "reconciled").map((event) => event.operatorRef)).toEqual(["INC-1"]);
    expect(await store.settleMutation({ turnKey: rival.turnKey, token: racing.rivalToken(), outcome: "complete", result: { content: "renamed to y", status: "success" } })).toBe(true);
    store.close();
  });

  it("with nothing left it exits 0; --auto without --module, or with a key, is a usage error", async () => {
    const { path, store } = sqliteFile();
    await claim(store, { scopeId: "doc-1", turnId: "t-1" }, "call-1", "unknown");
    expect(await cli(["--sqlite", path, "reconcile", "--auto"])).toMatchObject({ code: 2 });
    expect(await cli(["--sqlite", path, "reconcile", "--auto", "--module", MODULE, "--turn-key", "f".repeat(64)])).toMatchObject({ code: 2 });
    expect(await cli(["--sqlite", path, "reconcile", "--turn-key", "f".repeat(64), "--no-effect", "--operator-ref", "R", "--module", MODULE])).toMatchObject({ code: 2 });
    const run = await cli(["--sqlite", path, "reconcile", "--auto", "--module", MODULE]);
    expect(run).toMatchObject({ code: 0 });
    expect(run.stdout).toContain("1 settled by confirm, 0 left for an operator");
    store.close();
  });
});

describe("side effects: inspect and reconcile --effect", () => {
  it("inspect lists pending and unknown side effects after the mutations, labelled, with effect key, tool, call id, state and claim time", async () => {
    const clock = manualClock();
    const { store } = sqliteFile(clock.now);
    const mutation = await claim(store, { scopeId: "doc-1", turnId: "t-1" }, "call-1", "unknown");
    const older = await claimEffect(store, { scopeId: "doc-1", turnId: "t-1" }, "mail-1", "ana@example.com", "unknown");
    clock.advance(30);
    const newer = await claimEffect(store, { scopeId: "doc-2", turnId: "t-2" }, "mail-2", "bo@example.com");
    clock.advance(30);
    const text = sink();
    await inspect(store, { now: clock.now }, text);
    const [mutations = "", effects = ""] = text.lines.out.split(/\n(?=2 unresolved side effects)/);
    expect(mutations).toContain(mutation.mutationKey);
    expect(mutations).not.toContain(older.effectKey);
    expect(effects).toMatch(/^2 unresolved side effects \(1 unknown, 1 pending\), oldest first:/);
    expect(effects).toMatch(/AGE\s+STATE\s+SCOPE\s+TOOL\s+CALL ID\s+CLAIMED AT\s+EFFECT KEY/);
    expect(effects).toMatch(new RegExp(`^1m00s\\s+unknown\\s+doc-1\\s+send_email\\s+mail-1\\s+2026-11-29T18:00:00.000Z\\s+${older.effectKey}$`, "m"));
    expect(effects).toMatch(new RegExp(`^30s\\s+pending\\s+doc-2\\s+send_email\\s+mail-2\\s+2026-11-29T18:00:30.000Z\\s+${newer.effectKey}$`, "m"));
    expect(effects).toContain("reconcile --effect KEY --completed --result-file FILE --operator-ref REF");

    const json = sink();
    await inspect(store, { now: clock.now, json: true }, json);
    expect((JSON.parse(json.lines.out) as { mutationKey: string }[]).map((entry) => entry.mutationKey)).toEqual([mutation.mutationKey]);
    const effectsJson = sink();
    await inspect(store, { now: clock.now, json: true, effects: true }, effectsJson);
    expect(JSON.parse(effectsJson.lines.out)).toEqual([
      {
        effectKey: older.effectKey,
        turnKey: older.turnKey,
        scopeId: "doc-1",
        toolName: "send_email",
        toolCallId: "mail-1",
        state: "unknown",
        claimedAt: "2026-11-29T18:00:00.000Z",
        ageSeconds: 60,
        argsDigest: older.argsDigest,
      },
      {
        effectKey: newer.effectKey,
        turnKey: newer.turnKey,
        scopeId: "doc-2",
        toolName: "send_email",
        toolCallId: "mail-2",
        state: "pending",
        claimedAt: "2026-11-29T18:00:30.000Z",
        ageSeconds: 30,
        argsDigest: newer.argsDigest,
      },
    ]);
    const only = sink();
    await inspect(store, { now: clock.now, effects: true }, only);
    expect(only.lines.out).not.toContain("mutation");
    store.close();
  });

  it("reconcile --effect completed stores the result the effect then replays; repeated is ok; no-effect then is wrong state; an unknown key is not found", async () => {
    const { store } = sqliteFile();
    const turn = { scopeId: "doc-1", turnId: "t-1" };
    const id = await claimEffect(store, turn, "mail-1", "ana@example.com", "unknown");
    const result = { content: "sent (checked in the mail log)", status: "success" } as const;
    const out = sink();
    expect(await reconcileEffect(store, { effectKey: id.effectKey, resolution: "completed", result, operatorRef: "INC-7" }, out)).toBe(EXIT.ok);
    expect(out.lines.out).toContain(`reconciled side effect ${id.effectKey}`);
    expect(out.lines.out).toContain("send_email mail-1 in scope doc-1");
    expect(out.lines.out).toContain("was:          unknown");
    expect(out.lines.out).toContain("operatorRef:  INC-7");
    expect(await store.claimEffect({ ...id, toolCallId: "mail-9" })).toEqual({ status: "replay", result });

    const repeated = sink();
    expect(await reconcileEffect(store, { effectKey: id.effectKey, resolution: "completed", result, operatorRef: "INC-8" }, repeated)).toBe(EXIT.ok);
    expect(repeated.lines.out).toContain("already reconciled");
    const other = reconcileEffect(store, { effectKey: id.effectKey, resolution: "no-effect", operatorRef: "INC-8" }, sink());
    await expect(other).rejects.toMatchObject({ exitCode: EXIT.wrongState });
    const missing = reconcileEffect(store, { effectKey: "f".repeat(64), resolution: "no-effect", operatorRef: "INC-9" }, sink());
    await expect(missing).rejects.toMatchObject({ exitCode: EXIT.notFound });
    store.close();
  });

  it("through main: reconcile --effect KEY --no-effect reopens the effect; --effect with --turn-key, or a malformed key, is a usage error", async () => {
    const { path, store } = sqliteFile();
    const id = await claimEffect(store, { scopeId: "doc-1", turnId: "t-1" }, "mail-1", "ana@example.com");
    store.close();
    const flags = ["--sqlite", path];
    const both = await cli([...flags, "reconcile", "--effect", id.effectKey, "--turn-key", id.turnKey, "--no-effect", "--operator-ref", "R"]);
    expect(both.code).toBe(EXIT.usage);
    const malformed = await cli([...flags, "reconcile", "--effect", "nope", "--no-effect", "--operator-ref", "R"]);
    expect(malformed.code).toBe(EXIT.usage);
    expect(malformed.stderr).toContain("--effect: expected 64 lowercase hex characters");
    const listed = await cli([...flags, "inspect", "--effects", "--json"]);
    expect((JSON.parse(listed.stdout) as { effectKey: string }[]).map((entry) => entry.effectKey)).toEqual([id.effectKey]);
    const done = await cli([...flags, "reconcile", "--effect", id.effectKey, "--no-effect", "--operator-ref", "INC-1"]);
    expect(done).toMatchObject({ code: EXIT.ok, stderr: "" });
    expect(done.stdout).toContain("no claim (no-effect): the same call may run again, once");
    expect((await cli([...flags, "inspect", "--effects"])).stdout).toBe("no unresolved side effects\n");
    const reopened = SqliteGuardrailStore.open({ path });
    expect((await reopened.claimEffect(id)).status).toBe("acquired");
    const audited = await reopened.readAudit({ turnKey: id.turnKey });
    expect(audited.map((event) => [event.decision, event.action, event.effectKey, event.operatorRef])).toEqual([
      ["reconciled", "no-effect", id.effectKey, "INC-1"],
    ]);
    reopened.close();
  });
});

describe("reconcile --mutation-key", () => {
  it("reconciles only the named call's claim: another call's in the slot is wrong state, nothing changed; a repeat after its no-effect is ok", async () => {
    const { path, store } = sqliteFile();
    const turn = { scopeId: "doc-1", turnId: "t-1" };
    const first = await claim(store, turn, "call-1", "unknown");
    const flags = ["--sqlite", path, "reconcile", "--turn-key", first.turnKey];
    const checked = ["--mutation-key", first.mutationKey];

    const done = await cli([...flags, ...checked, "--no-effect", "--operator-ref", "INC-1"]);
    expect(done).toMatchObject({ code: EXIT.ok, stderr: "" });
    expect(done.stdout).toContain(`mutationKey:  ${first.mutationKey}`);
    // Another call claims the reopened slot and is still writing.
    const rival = identity(turn, "call-2", "rename_document", { title: "y" });
    const claimed = await store.claimMutation(rival);
    if (claimed.status !== "acquired") throw new Error("expected to acquire");

    const resultFile = join(tempDir(), "result.txt");
    writeFileSync(resultFile, "renamed to x");
    const late = await cli([...flags, ...checked, "--completed", "--result-file", resultFile, "--operator-ref", "INC-2"]);
    expect(late.code).toBe(EXIT.wrongState);
    expect(late.stderr).toContain("is another call's, not the one --mutation-key names");
    const repeated = await cli([...flags, ...checked, "--no-effect", "--operator-ref", "INC-3"]);
    expect(repeated).toMatchObject({ code: EXIT.ok });
    expect(repeated.stdout).toContain("already reconciled");
    expect(await store.listUnresolved()).toMatchObject([{ toolCallId: "call-2", state: "pending" }]);
    expect((await store.readAudit()).filter((event) => event.decision === "reconciled").map((event) => event.operatorRef)).toEqual(["INC-1"]);
    expect(await store.settleMutation({ turnKey: rival.turnKey, token: claimed.token, outcome: "complete", result: { content: "renamed to y", status: "success" } })).toBe(true);

    // Without --mutation-key, as before: whichever claim the turn holds (now complete).
    expect((await cli([...flags, "--no-effect", "--operator-ref", "INC-4"])).code).toBe(EXIT.wrongState);
    store.close();
  });

  it("--mutation-key with --effect, malformed, or with --auto is a usage error", async () => {
    const { path, store } = sqliteFile();
    store.close();
    const flags = ["--sqlite", path, "reconcile"];
    const key = "a".repeat(64);
    expect((await cli([...flags, "--effect", key, "--mutation-key", key, "--no-effect", "--operator-ref", "R"])).code).toBe(EXIT.usage);
    const malformed = await cli([...flags, "--turn-key", key, "--mutation-key", "call-1", "--no-effect", "--operator-ref", "R"]);
    expect(malformed.code).toBe(EXIT.usage);
    expect(malformed.stderr).toContain("--mutation-key: expected 64 lowercase hex characters");
    expect((await cli([...flags, "--auto", "--module", "x.js", "--mutation-key", key])).code).toBe(EXIT.usage);
  });
});

describe("reconcile, repeated with the same outcome", () => {
  it("completed twice with the same result exits 0 with 'already reconciled'; another result or status is still wrong state", async () => {
    const { path, store } = sqliteFile();
    const id = await claim(store, { scopeId: "doc-1", turnId: "t-1" }, "call-1", "unknown");
    store.close();
    const resultFile = join(tempDir(), "result.txt");
    writeFileSync(resultFile, "Renamed\n");
    const args = ["--sqlite", path, "reconcile", "--turn-key", id.turnKey, "--completed", "--result-file", resultFile];
    expect((await cli([...args, "--operator-ref", "INC-1"])).code).toBe(EXIT.ok);

    const repeated = await cli([...args, "--operator-ref", "INC-2"]);
    expect(repeated).toEqual({
      code: EXIT.ok,
      stdout: `already reconciled: turn ${id.turnKey} was reconciled with this same outcome; nothing changed\n  now:          complete, with this same result\n`,
      stderr: "",
    });
    const otherStatus = await cli([...args, "--result-status", "error", "--operator-ref", "INC-3"]);
    expect(otherStatus.code).toBe(EXIT.wrongState);
    writeFileSync(resultFile, "Renamed twice\n");
    const otherContent = await cli([...args, "--operator-ref", "INC-4"]);
    expect(otherContent.code).toBe(EXIT.wrongState);
    const otherResolution = await cli(["--sqlite", path, "reconcile", "--turn-key", id.turnKey, "--no-effect", "--operator-ref", "INC-5"]);
    expect(otherResolution.code).toBe(EXIT.wrongState);
    // Only the first reconciliation is in the audit trail: the repeats changed nothing.
    const audit = await cli(["--sqlite", path, "audit"]);
    const reconciled = audit.stdout.trim().split("\n").map((line) => JSON.parse(line) as { decision: string; operatorRef?: string }).filter((event) => event.decision === "reconciled");
    expect(reconciled.map((event) => event.operatorRef)).toEqual(["INC-1"]);
  });

  it("no-effect twice exits 0 with 'already reconciled'; once the turn claims again, or for a turn never claimed, it is not", async () => {
    const { store } = sqliteFile();
    const id = await claim(store, { scopeId: "doc-1", turnId: "t-1" }, "call-1");
    const noEffect = { turnKey: id.turnKey, resolution: "no-effect", operatorRef: "INC-1" } as const;
    expect(await reconcile(store, noEffect, sink())).toBe(EXIT.ok);
    const out = sink();
    expect(await reconcile(store, { ...noEffect, operatorRef: "INC-2" }, out)).toBe(EXIT.ok);
    expect(out.lines.out).toBe(
      `already reconciled: turn ${id.turnKey} was reconciled with this same outcome; nothing changed\n  now:          no claim (no-effect): the turn's mutation slot is open\n`,
    );

    expect((await store.claimMutation(id)).status).toBe("acquired");
    const fresh = sink();
    expect(await reconcile(store, { ...noEffect, operatorRef: "INC-3" }, fresh)).toBe(EXIT.ok);
    expect(fresh.lines.out).toContain(`reconciled turn ${id.turnKey}\n`); // the new claim, reconciled for real
    expect(fresh.lines.out).not.toContain("already");
    const completed = { turnKey: id.turnKey, resolution: "completed", result: { content: "x", status: "success" }, operatorRef: "INC-4" } as const;
    await expect(reconcile(store, completed, sink())).rejects.toMatchObject({ exitCode: EXIT.notFound });
    await expect(reconcile(store, { ...noEffect, turnKey: "e".repeat(64) }, sink())).rejects.toMatchObject({ exitCode: EXIT.notFound });
    store.close();
  });
});

describe("audit", () => {
  it("pages through readAudit until exhausted, honouring since, afterSeq and limit", async () => {
    const { store } = sqliteFile();
    const turn = turnKey({ scopeId: "doc-1", turnId: "t-1" });
    for (let minute = 0; minute < 7; minute++) {
      await store.appendAudit({
        at: new Date(T0 + minute * 60_000).toISOString(),
        decision: "executed",
        turnKey: turn,
        scopeId: "doc-1",
        toolCallId: `call-${String(minute)}`,
      });
    }
    const seqs = (text: string) => text.trim().split("\n").map((line) => (JSON.parse(line) as { seq: number }).seq);

    const all = sink();
    expect(await audit(store, { pageSize: 2 }, all)).toBe(EXIT.ok);
    expect(seqs(all.lines.out)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(JSON.parse(all.lines.out.split("\n")[0] ?? "")).toEqual({
      at: "2026-11-29T18:00:00.000Z",
      decision: "executed",
      turnKey: turn,
      scopeId: "doc-1",
      toolCallId: "call-0",
      seq: 1,
    });

    const since = sink();
    await audit(store, { since: new Date(T0 + 3 * 60_000).toISOString(), pageSize: 2 }, since);
    expect(seqs(since.lines.out)).toEqual([4, 5, 6, 7]);

    const page = sink();
    await audit(store, { afterSeq: 2, limit: 3, pageSize: 2 }, page);
    expect(seqs(page.lines.out)).toEqual([3, 4, 5]);

    const none = sink();
    await audit(store, { afterSeq: 7 }, none);
    expect(none.lines.out).toBe("");
    store.close();
  });

  it("--turn-key and --scope keep one turn's or one document's events, through the command line", async () => {
    const { store, flags } = sqliteFile();
    const turns = [
      { scopeId: "doc-1", turnId: "t-1" },
      { scopeId: "doc-2", turnId: "t-2" },
      { scopeId: "doc-1", turnId: "t-3" },
    ];
    for (const [index, turn] of turns.entries()) {
      await store.appendAudit({ at: new Date(T0 + index * 60_000).toISOString(), decision: "executed", turnKey: turnKey(turn), scopeId: turn.scopeId });
    }
    store.close();
    const seqsOf = (text: string) => text.trim().split("\n").filter(Boolean).map((line) => (JSON.parse(line) as { seq: number }).seq);

    const byTurn = await cli([...flags, "audit", "--turn-key", turnKey(turns[2] ?? turns[0]!)]);
    expect(byTurn.code).toBe(EXIT.ok);
    expect(seqsOf(byTurn.stdout)).toEqual([3]);
    const byScope = await cli([...flags, "audit", "--scope", "doc-1"]);
    expect(seqsOf(byScope.stdout)).toEqual([1, 3]);
    const both = await cli([...flags, "audit", "--scope", "doc-2", "--turn-key", turnKey(turns[0]!)]);
    expect(seqsOf(both.stdout)).toEqual([]);
    const bad = await cli([...flags, "audit", "--turn-key", "t-1"]);
    expect(bad.code).toBe(EXIT.usage);
    expect(bad.stderr).toContain("--turn-key: expected a turn key");
  });
});

describe("approvals", () => {
  it("says so when there is none, as text and as JSON, with or without --status", async () => {
    const { store } = sqliteFile();
    const all = sink();
    expect(await approvals(store, {}, all)).toBe(EXIT.ok);
    expect(all.lines.out).toBe("no approval requests\n");
    const pending = sink();
    await approvals(store, { status: "pending" }, pending);
    expect(pending.lines.out).toBe("no pending approval requests\n");
    const json = sink();
    await approvals(store, { json: true }, json);
    expect(JSON.parse(json.lines.out)).toEqual([]);
    store.close();
  });

  it("lists requests oldest first with age, status, scope, tool, call id, approval id, arguments, reason and decision", async () => {
    const clock = manualClock(T0 + 10 * 60_000);
    const { store } = sqliteFile(clock.now);
    // Requested out of order: listed by requestedAt.
    await store.requestApproval(submission(3));
    await store.requestApproval(submission(1));
    await store.requestApproval(submission(2, { reason: undefined }));
    await store.decideApproval({ approvalId: submission(1).approvalId, decision: { decision: "reject", message: "Not now" }, operatorRef: "OPS-1", decidedAt: new Date(T0 + 5 * 60_000).toISOString() });
    await store.decideApproval({ approvalId: submission(2).approvalId, decision: { decision: "edit", args: { title: "Edited", expectedRevision: 0 } }, decidedAt: new Date(T0 + 6 * 60_000).toISOString() });

    const text = sink();
    expect(await approvals(store, { now: clock.now, store: { flags: "--sqlite g.sqlite" } }, text)).toBe(EXIT.ok);
    const lines = text.lines.out.split("\n");
    expect(lines[0]).toBe("3 approval requests (1 pending, 1 rejected, 1 edited), oldest first:");
    expect(lines[2]?.split(/\s{2,}/)).toEqual(["AGE", "STATUS", "SCOPE", "TOOL", "CALL ID", "APPROVAL ID", "ARGUMENTS"]);
    expect(lines.slice(3)).toEqual([
      expect.stringMatching(new RegExp(`^9m00s +rejected +doc-1 +rename_document +call-1 +${submission(1).approvalId} +\\{"title":"Title 1","expectedRevision":0\\}$`)),
      '  reason:    Rename the document to "Title 1"?',
      `  asked by:  approval, in turn ${submission(1).turnKey}`,
      '  decision:  reject by OPS-1 at 2026-11-29T18:05:00.000Z, message "Not now"',
      expect.stringMatching(new RegExp(`^8m00s +edited +doc-1 +rename_document +call-2 +${submission(2).approvalId} +\\{"title":"Title 2","expectedRevision":0\\}$`)),
      `  asked by:  approval, in turn ${submission(2).turnKey}`,
      '  decision:  edit at 2026-11-29T18:06:00.000Z, arguments {"title":"Edited","expectedRevision":0}',
      expect.stringMatching(new RegExp(`^7m00s +pending +doc-1 +rename_document +call-3 +${submission(3).approvalId} +\\{"title":"Title 3","expectedRevision":0\\}$`)),
      '  reason:    Rename the document to "Title 3"?',
      `  asked by:  approval, in turn ${submission(3).turnKey}`,
      "",
      "Decide the pending request (its run applies the decision when it resumes):",
      `  arkah-guardrails --sqlite g.sqlite decide --approval-id ${submission(3).approvalId} --approve --operator-ref REF`,
      `  arkah-guardrails --sqlite g.sqlite decide --approval-id ${submission(3).approvalId} --reject --message TEXT --operator-ref REF`,
      `  arkah-guardrails --sqlite g.sqlite decide --approval-id ${submission(3).approvalId} --edit-file ARGS.json --operator-ref REF`,
      "",
    ]);

    const json = sink();
    await approvals(store, { json: true, now: clock.now }, json);
    const records = await store.listApprovals();
    const listed = JSON.parse(json.lines.out) as Record<string, unknown>[];
    expect(listed).toEqual(records.map((record, index) => ({ ...record, ageSeconds: [540, 480, 420][index] })));
    // The record's own field names: requestedAt is its creation time, so there is no createdAt.
    expect(listed[0]).toMatchObject({
      approvalId: submission(1).approvalId,
      toolName: "rename_document",
      toolCallId: "call-1",
      status: "rejected",
      requestedAt: "2026-11-29T18:01:00.000Z",
      args: { title: "Title 1", expectedRevision: 0 },
      decision: { decision: "reject", message: "Not now" },
      operatorRef: "OPS-1",
    });
    expect(listed.some((record) => "createdAt" in record)).toBe(false);

    const rejected = sink();
    await approvals(store, { status: "rejected", now: clock.now }, rejected);
    expect(rejected.lines.out.split("\n")[0]).toBe("1 rejected approval request, oldest first:");
    expect(rejected.lines.out).not.toContain("Decide");

    const limited = sink();
    await approvals(store, { limit: 2, json: true }, limited);
    expect((JSON.parse(limited.lines.out) as { toolCallId: string }[]).map((record) => record.toolCallId)).toEqual(["call-1", "call-2"]);
    const limitedText = sink();
    await approvals(store, { limit: 2 }, limitedText);
    expect(limitedText.lines.out).toContain("(the oldest 2: there may be more; narrow with --status)");
    store.close();
  });

  it("with several pending requests, suggests deciding each by its APPROVAL ID; applied and expired requests say so", async () => {
    const clock = manualClock(T0 + 10 * 60_000);
    const { store } = sqliteFile(clock.now);
    for (const n of [1, 2, 3, 4]) await store.requestApproval(submission(n));
    await store.decideApproval({ approvalId: submission(1).approvalId, decision: { decision: "approve" }, operatorRef: "OPS-1", decidedAt: new Date(T0 + 2 * 60_000).toISOString() });
    await store.applyApproval({ approvalId: submission(1).approvalId, appliedAt: new Date(T0 + 3 * 60_000).toISOString() });
    await store.expireApprovals({ olderThan: new Date(T0 + 2.5 * 60_000).toISOString() });

    const text = sink();
    await approvals(store, { now: clock.now }, text);
    expect(text.lines.out).toContain("4 approval requests (2 pending, 1 applied, 1 expired), oldest first:");
    expect(text.lines.out).toContain("  decision:  approve by OPS-1 at 2026-11-29T18:02:00.000Z\n  applied:   2026-11-29T18:03:00.000Z (the call it allowed ran)\n");
    expect(text.lines.out).toMatch(/\n {2}expired: {3}\S+ \(nobody decided it in time\)\n/);
    expect(text.lines.out).toContain("Decide a pending request by its APPROVAL ID (its run applies the decision when it resumes):");
    expect(text.lines.out).toContain("  arkah-guardrails STORE decide --approval-id ID --approve --operator-ref REF");
    store.close();
  });
});

describe("decide", () => {
  it("approve, reject with a message, edit: records the operator's decision and says what the resumed run will do", async () => {
    const clock = manualClock(T0 + 10 * 60_000);
    const { store } = sqliteFile(clock.now);
    for (const n of [1, 2, 3]) await store.requestApproval(submission(n));

    const approved = sink();
    const code = await decide(store, { approvalId: submission(1).approvalId, decision: { decision: "approve" }, operatorRef: "OPS-1", now: clock.now }, approved);
    expect(code).toBe(EXIT.ok);
    expect(approved.lines.out.split("\n").slice(0, 6)).toEqual([
      `decided approval request ${submission(1).approvalId}: approved`,
      "  call:         rename_document call-1 in scope doc-1",
      `  turn:         ${submission(1).turnKey}`,
      '  arguments:    {"title":"Title 1","expectedRevision":0}',
      "  was:          pending",
      "  now:          approved: when its run resumes, the call runs with these arguments and the",
    ]);
    expect(approved.lines.out).toContain("whatever the resume value says");
    expect(approved.lines.out).toContain("operatorRef:  OPS-1 (recorded in the audit trail)");
    expect(await store.getApproval(submission(1).approvalId)).toMatchObject({
      status: "approved",
      decision: { decision: "approve" },
      operatorRef: "OPS-1",
      decidedAt: "2026-11-29T18:10:00.000Z",
    });

    const rejected = sink();
    await decide(store, { approvalId: submission(2).approvalId, decision: { decision: "reject", message: "Wrong title" }, operatorRef: "OPS-2" }, rejected);
    expect(rejected.lines.out).toContain('now:          rejected: when its run resumes, the model gets approval_rejected with your message "Wrong title"');
    expect(await store.getApproval(submission(2).approvalId)).toMatchObject({ status: "rejected", decision: { decision: "reject", message: "Wrong title" } });

    const edited = sink();
    const args = { title: "Field notes", expectedRevision: 0 };
    await decide(store, { approvalId: submission(3).approvalId, decision: { decision: "edit", args }, operatorRef: "OPS-3" }, edited);
    expect(edited.lines.out).toContain('now:          edited: when its run resumes, the call runs with {"title":"Field notes","expectedRevision":0}');
    expect(edited.lines.out).toContain("only the JSON shape was checked here: the full check (the tool's schema, its");
    expect(edited.lines.out).toContain("the call is refused with that check's code, nothing runs, and the request is");
    expect(await store.getApproval(submission(3).approvalId)).toMatchObject({ status: "edited", decision: { decision: "edit", args } });

    const trail = (await store.readAudit()).filter((event) => event.decision === "approval");
    expect(trail.map((event) => [event.action, event.operatorRef])).toEqual([
      ["requested", undefined],
      ["requested", undefined],
      ["requested", undefined],
      ["approve", "OPS-1"],
      ["reject", "OPS-2"],
      ["edit", "OPS-3"],
    ]);
    store.close();
  });

  it("a request of a turn the turn service runs is not decidable until the turn's pause is stored (its checkpoint written)", async () => {
    const clock = manualClock(T0 + 10 * 60_000);
    const { store } = sqliteFile(clock.now);
    const request = submission(1);
    await store.requestApproval(request);
    const input = { scopeId: "doc-1", turnId: "t-1", policyVersion: "v1", segments: [{ label: "user", content: "Rename it" }] };
    const begun = await store.beginTurn({
      turn: { turnKey: request.turnKey, scopeId: "doc-1", input, inputDigest: digest(input), requestKey: digest({ request: "t-1" }), threadId: "thread-1" },
      leaseMs: 60_000,
    });
    if (begun.status !== "started") throw new Error(`expected started, got ${begun.status}`);
    const approve = () => decide(store, { approvalId: request.approvalId, decision: { decision: "approve" }, operatorRef: "OPS-1", now: clock.now }, sink());
    await expect(approve()).rejects.toMatchObject({ exitCode: EXIT.wrongState });
    await expect(approve()).rejects.toThrow(/is not decidable yet: its turn is still running and its pause is not stored; nothing decided/);
    expect((await store.getApproval(request.approvalId))?.status, "nothing decided").toBe("pending");
    const pause = {
      status: "awaiting_approval",
      approvals: [{ approvalId: request.approvalId, tool: "rename_document", toolCallId: "call-1", args: request.args, guardrails: ["approval"] }],
    };
    expect(await store.finishTurn({ turnKey: request.turnKey, token: begun.token, state: "awaiting_approval", outcome: pause })).toBe(true);
    expect(await approve()).toBe(EXIT.ok);
    expect((await store.getApproval(request.approvalId))?.status).toBe("approved");
  });

  it("refuses to decide a request that is not pending, saying what its status is; an unknown id is not found; nothing changes", async () => {
    const clock = manualClock(T0 + 10 * 60_000);
    const { store } = sqliteFile(clock.now);
    for (const n of [1, 2, 3]) await store.requestApproval(submission(n));
    await store.decideApproval({ approvalId: submission(1).approvalId, decision: { decision: "reject" }, operatorRef: "OPS-1", decidedAt: new Date(T0).toISOString() });
    await store.decideApproval({ approvalId: submission(2).approvalId, decision: { decision: "approve" }, operatorRef: "OPS-2", decidedAt: new Date(T0).toISOString() });
    await store.applyApproval({ approvalId: submission(2).approvalId, appliedAt: new Date(T0 + 60_000).toISOString() });
    await store.expireApprovals({ olderThan: new Date(T0 + 9 * 60_000).toISOString() });
    const before = await store.listApprovals();

    const approve = (n: number) =>
      decide(store, { approvalId: submission(n).approvalId, decision: { decision: "approve" }, operatorRef: "OPS-9", now: clock.now }, sink());
    await expect(approve(1)).rejects.toMatchObject({
      exitCode: EXIT.wrongState,
      message: `approval request ${submission(1).approvalId} is rejected (reject by OPS-1 at 2026-11-29T18:00:00.000Z): nothing changed`,
    });
    const applied = approve(2);
    await expect(applied).rejects.toMatchObject({ exitCode: EXIT.wrongState });
    await expect(applied).rejects.toThrow(/is applied \(approve by OPS-2 at .*; the call it allowed ran at 2026-11-29T18:01:00.000Z\): nothing changed$/);
    const expired = approve(3);
    await expect(expired).rejects.toMatchObject({ exitCode: EXIT.wrongState });
    await expect(expired).rejects.toThrow(
      /is expired \(at 2026-11-29T18:10:00.000Z; nobody decided it in time\), and can no longer be decided: its call is refused approval_expired: nothing changed$/,
    );
    const missing = decide(store, { approvalId: "a".repeat(64), decision: { decision: "approve" }, operatorRef: "OPS-9" }, sink());
    await expect(missing).rejects.toBeInstanceOf(CliError);
    await expect(missing).rejects.toMatchObject({ exitCode: EXIT.notFound });
    await expect(missing).rejects.toThrow(`no approval request ${"a".repeat(64)}: nothing decided`);
    expect(await store.listApprovals()).toEqual(before);
    // A refused decision is audited (decision_refused), a missing request is not.
    const refused = (await store.readAudit()).filter((event) => event.action === "decision_refused");
    expect(refused.map((event) => [event.code, event.operatorRef])).toEqual([
      ["already_decided", "OPS-9"],
      ["already_decided", "OPS-9"],
      ["expired", "OPS-9"],
    ]);
    store.close();
  });
});

describe("expire", () => {
  it("expires the pending requests older than the duration and prints how many", async () => {
    const clock = manualClock(T0 + 10 * 60_000);
    const { store } = sqliteFile(clock.now);
    for (const n of [1, 2, 3, 8]) await store.requestApproval(submission(n));
    await store.decideApproval({ approvalId: submission(1).approvalId, decision: { decision: "approve" }, decidedAt: new Date(T0).toISOString() });

    // Ten minutes after T0: requests 2 and 3 (made at +2m and +3m) are older than 5m; 1 is decided, 8 is recent.
    const out = sink();
    expect(await expire(store, { olderThan: "5m", olderThanMs: 5 * 60_000, now: clock.now }, out)).toBe(EXIT.ok);
    expect(out.lines.out).toBe(
      "expired 2 pending approval requests made before 2026-11-29T18:05:00.000Z (older than 5m)\n" +
        "  they can no longer be decided; when their runs resume, their calls are refused approval_expired\n",
    );
    expect((await store.listApprovals()).map((record) => [record.toolCallId, record.status])).toEqual([
      ["call-1", "approved"],
      ["call-2", "expired"],
      ["call-3", "expired"],
      ["call-8", "pending"],
    ]);
    const again = sink();
    await expire(store, { olderThan: "5m", olderThanMs: 5 * 60_000, now: clock.now }, again);
    expect(again.lines.out).toBe("expired 0 pending approval requests made before 2026-11-29T18:05:00.000Z (older than 5m): nothing changed\n");
    store.close();
  });
});

describe("suggested command lines name the store", () => {
  it("shell-quotes what needs it", () => {
    expect(shellWord("/var/lib/app/guardrails.sqlite")).toBe("/var/lib/app/guardrails.sqlite");
    expect(shellWord("my store's file.sqlite")).toBe("'my store'\\''s file.sqlite'");
    expect(shellWord("$HOME/g.sqlite")).toBe("'$HOME/g.sqlite'");
  });

  it("SQLite by its path; PostgreSQL by its URL without the password, with --schema when given", () => {
    expect(suggestedStore({ kind: "sqlite", path: "data/g.sqlite" })).toEqual({ flags: "--sqlite data/g.sqlite" });
    expect(suggestedStore({ kind: "postgres", url: "postgres://ops@db.internal:5432/app", schema: undefined })).toEqual({
      flags: "--postgres postgres://ops@db.internal:5432/app",
    });
    expect(suggestedStore({ kind: "postgres", url: "postgres://ops:hunter2@db.internal:5432/app?sslmode=require", schema: "guard" })).toEqual({
      flags: "--postgres 'postgres://ops@db.internal:5432/app?sslmode=require' --schema guard",
      note: "the password is left out of these lines: put it in PGPASSWORD or ~/.pgpass",
    });
    const query = suggestedStore({ kind: "postgres", url: "postgres://ops@db/app?password=hunter2", schema: undefined });
    expect(query.flags).not.toContain("hunter2");
    expect(query.note).toBeDefined();
  });

  it("inspect and approvals print them with the store flags main was given, ready to paste", async () => {
    const dir = tempDir();
    const path = join(dir, "my guardrails.sqlite");
    const store = SqliteGuardrailStore.open({ path });
    await claim(store, { scopeId: "doc-1", turnId: "t-1" }, "call-1", "unknown");
    await store.requestApproval(submission(1));
    store.close();
    const quoted = `'${path}'`;

    const inspected = await cli(["--sqlite", path, "inspect"]);
    expect(inspected.code).toBe(EXIT.ok);
    const reconcileLines = inspected.stdout.split("\n").filter((line) => line.includes("arkah-guardrails"));
    expect(reconcileLines).toEqual([
      `  arkah-guardrails --sqlite ${quoted} reconcile --turn-key KEY --completed --result-file FILE --operator-ref REF`,
      `  arkah-guardrails --sqlite ${quoted} reconcile --turn-key KEY --no-effect --operator-ref REF`,
    ]);

    const listed = await cli(["--sqlite", path, "approvals"]);
    expect(listed.code).toBe(EXIT.ok);
    const decideLines = listed.stdout.split("\n").filter((line) => line.includes("arkah-guardrails"));
    expect(decideLines).toHaveLength(3);
    for (const line of decideLines) expect(line).toContain(`  arkah-guardrails --sqlite ${quoted} decide --approval-id ${submission(1).approvalId} --`);

    // Pasted as printed (with a real shell word split), the approve line decides the request.
    const approveLine = decideLines[0]?.replace("REF", "OPS-5") ?? "";
    const words = spawnSync("sh", ["-c", `printf '%s\\n' ${approveLine.trim().replace(/^arkah-guardrails /, "")}`], { encoding: "utf8" }).stdout.trim().split("\n");
    const decided = await cli(words);
    expect(decided.code).toBe(EXIT.ok);
    expect(decided.stdout).toContain(": approved");
  });
});

// ---------------------------------------------------------------------------------------------
// Unicode format characters (bidi overrides, zero-width, tags) and lone surrogates

/** U+202E RIGHT-TO-LEFT OVERRIDE: "rename_\u202Etnemucod" shows as "rename_document" reversed. */
const RLO = "\u202e";
/** Every format character a stored value may carry, and what each must print as. */
const FORMAT_CHARACTERS: [string, string][] = [
  ["\u202a", "\\u202a"], // LEFT-TO-RIGHT EMBEDDING
  [RLO, "\\u202e"], // RIGHT-TO-LEFT OVERRIDE
  ["\u2066", "\\u2066"], // LEFT-TO-RIGHT ISOLATE
  ["\u2067", "\\u2067"], // RIGHT-TO-LEFT ISOLATE
  ["\u2068", "\\u2068"], // FIRST STRONG ISOLATE
  ["\u2069", "\\u2069"], // POP DIRECTIONAL ISOLATE
  ["\u200b", "\\u200b"], // ZERO WIDTH SPACE
  ["\u200d", "\\u200d"], // ZERO WIDTH JOINER
  ["\u200f", "\\u200f"], // RIGHT-TO-LEFT MARK
  ["\ufeff", "\\ufeff"], // ZERO WIDTH NO-BREAK SPACE (BOM)
  ["\u061c", "\\u061c"], // ARABIC LETTER MARK
  ["\u00ad", "\\u00ad"], // SOFT HYPHEN
  ["\u{e0041}", "\\udb40\\udc41"], // TAG LATIN CAPITAL LETTER A (above U+FFFF: two units)
];
const ALL_FORMAT = FORMAT_CHARACTERS.map(([raw]) => raw).join("");
const ALL_ESCAPED = FORMAT_CHARACTERS.map(([, escaped]) => escaped).join("");

/** Whether a terminal would receive any format character, control character or lone surrogate. */
const hasUnsafe = (text: string) => /[\p{Cf}\p{Cs}\u007f-\u009f]/u.test(text);

describe("terminal output escapes Unicode format characters and lone surrogates", () => {
  it("printable escapes each format character, lone surrogates and controls; ordinary text and emoji stay", () => {
    for (const [raw, escaped] of FORMAT_CHARACTERS) expect(printable(`a${raw}b`)).toBe(`a${escaped}b`);
    expect(printable("a\ud800b\udc00c")).toBe("a\\ud800b\\udc00c");
    expect(printable("x\u001b[31m\u009b\u2028")).toBe("x\\u001b[31m\\u009b\\u2028");
    expect(printable("Zürich 東京 \u{1f600} \u05e9\u05dc\u05d5\u05dd")).toBe("Zürich 東京 \u{1f600} \u05e9\u05dc\u05d5\u05dd");
  });

  it("terminalJson escapes them inside strings and stays the same JSON", () => {
    const value = { toolName: `rename_${RLO}tnemucod`, all: ALL_FORMAT, lone: "a\ud800", n: 1 };
    for (const indent of [undefined, 2]) {
      const text = terminalJson(value, indent);
      expect(hasUnsafe(text)).toBe(false);
      expect(text).toContain(ALL_ESCAPED);
      expect(JSON.parse(text)).toEqual(value);
    }
  });

  it("inspect, as a table and as JSON: a bidi override in a tool name, scope id and call id is escaped", async () => {
    const { store } = sqliteFile();
    const turn = { scopeId: `doc-${RLO}1-${ALL_FORMAT}`, turnId: "t-1" };
    await store.claimMutation(identity(turn, `call-${RLO}9`, `rename_${RLO}tnemucod`));
    const table = sink();
    await inspect(store, {}, table);
    expect(hasUnsafe(table.lines.out)).toBe(false);
    expect(table.lines.out).toContain("rename_\\u202etnemucod");
    expect(table.lines.out).toContain(`doc-\\u202e1-${ALL_ESCAPED}`);
    expect(table.lines.out).toContain("call-\\u202e9");
    const json = sink();
    await inspect(store, { json: true }, json);
    expect(hasUnsafe(json.lines.out)).toBe(false);
    expect((JSON.parse(json.lines.out) as { toolName: string; scopeId: string }[])[0]).toMatchObject({
      toolName: `rename_${RLO}tnemucod`,
      scopeId: turn.scopeId,
    });
    store.close();
  });

  it("reconcile: the call, scope and operator ref it prints are escaped", async () => {
    const { store } = sqliteFile();
    const turn = { scopeId: `doc-${RLO}1`, turnId: "t-1" };
    const id = identity(turn, `call-${RLO}1`, `rename_${RLO}tnemucod`);
    await store.claimMutation(id);
    const out = sink();
    await reconcile(store, { turnKey: id.turnKey, resolution: "no-effect", operatorRef: `INC-${RLO}7${ALL_FORMAT}` }, out);
    expect(hasUnsafe(out.lines.out)).toBe(false);
    expect(out.lines.out).toContain("rename_\\u202etnemucod call-\\u202e1 in scope doc-\\u202e1");
    expect(out.lines.out).toContain(`operatorRef:  INC-\\u202e7${ALL_ESCAPED} (recorded in the audit trail)`);
    store.close();
  });

  it("audit: a result, tool name and scope id with format characters are escaped, and each line is the same JSON", async () => {
    const { store } = sqliteFile();
    const turn = turnKey({ scopeId: "doc-1", turnId: "t-1" });
    const event = {
      at: new Date(T0).toISOString(),
      decision: "executed",
      turnKey: turn,
      scopeId: `doc-${RLO}1`,
      toolCallId: "call-1",
      toolName: `rename_${RLO}tnemucod`,
      result: `{"title":"${RLO}txt.exe ${ALL_FORMAT}"}`,
    } as const;
    await store.appendAudit(event);
    const out = sink();
    await audit(store, {}, out);
    expect(hasUnsafe(out.lines.out)).toBe(false);
    expect(out.lines.out).toContain(ALL_ESCAPED);
    expect(JSON.parse(out.lines.out)).toEqual({ ...event, seq: 1 });
    store.close();
  });

  it("approvals, as a table and as JSON: format characters in arguments (keys and values), tool, call id, scope, reason and decision are escaped", async () => {
    const { store } = sqliteFile();
    const args = { [`ti${RLO}tle`]: `Invoice ${RLO}fdp.exe ${ALL_FORMAT}`, nested: [{ note: `a\u200bb` }], n: 1 };
    const hostile = submission(1, {
      args,
      argsDigest: digest(args),
      toolName: `rename_${RLO}tnemucod`,
      toolCallId: `call-${RLO}1`,
      scopeId: `doc-${RLO}1`,
      reason: `Rename to ${RLO}fdp.exe?`,
      guardrails: [`appro${RLO}val`],
    });
    await store.requestApproval(hostile);
    await store.decideApproval({
      approvalId: hostile.approvalId,
      decision: { decision: "reject", message: `no ${RLO}way ${ALL_FORMAT}` },
      operatorRef: `OPS-${RLO}1`,
      decidedAt: new Date(T0).toISOString(),
    });
    const table = sink();
    await approvals(store, {}, table);
    expect(hasUnsafe(table.lines.out)).toBe(false);
    expect(table.lines.out).toContain(`{"ti\\u202etle":"Invoice \\u202efdp.exe ${ALL_ESCAPED}","nested":[{"note":"a\\u200bb"}],"n":1}`);
    expect(table.lines.out).toContain("rename_\\u202etnemucod");
    expect(table.lines.out).toContain("call-\\u202e1");
    expect(table.lines.out).toContain("doc-\\u202e1");
    expect(table.lines.out).toContain("reason:    Rename to \\u202efdp.exe?");
    expect(table.lines.out).toContain("asked by:  appro\\u202eval");
    expect(table.lines.out).toContain(`decision:  reject by OPS-\\u202e1 at 2026-11-29T18:00:00.000Z, message "no \\u202eway ${ALL_ESCAPED}"`);
    const json = sink();
    await approvals(store, { json: true }, json);
    expect(hasUnsafe(json.lines.out)).toBe(false);
    expect((JSON.parse(json.lines.out) as ApprovalRecord[])[0]).toMatchObject({
      args,
      toolName: hostile.toolName,
      reason: hostile.reason,
      decision: { decision: "reject", message: `no ${RLO}way ${ALL_FORMAT}` },
      operatorRef: `OPS-${RLO}1`,
    });
    store.close();
  });

  it("decide: the call, arguments, edited arguments and operator ref it prints are escaped, and so is a refusal on stderr", async () => {
    const { path, store } = sqliteFile();
    const args = { title: `${RLO}fdp.exe` };
    const hostile = submission(1, { args, argsDigest: digest(args), toolName: `rename_${RLO}tnemucod`, toolCallId: `call-${RLO}1` });
    await store.requestApproval(hostile);
    const out = sink();
    const edit: Record<string, JsonValue> = { title: `${ALL_FORMAT}x` };
    await decide(store, { approvalId: hostile.approvalId, decision: { decision: "edit", args: edit }, operatorRef: `OPS-${RLO}2` }, out);
    expect(hasUnsafe(out.lines.out)).toBe(false);
    expect(out.lines.out).toContain("call:         rename_\\u202etnemucod call-\\u202e1 in scope doc-1");
    expect(out.lines.out).toContain('arguments:    {"title":"\\u202efdp.exe"}');
    expect(out.lines.out).toContain(`the call runs with {"title":"${ALL_ESCAPED}x"}`);
    expect(out.lines.out).toContain("operatorRef:  OPS-\\u202e2");
    store.close();

    const refused = await cli(["--sqlite", path, "decide", "--approval-id", hostile.approvalId, "--approve", "--operator-ref", "OPS-3"]);
    expect(refused.code).toBe(EXIT.wrongState);
    expect(hasUnsafe(refused.stderr)).toBe(false);
    expect(refused.stderr).toContain(`is edited (edit by OPS-\\u202e2 at `);
    expect(refused.stderr).toContain(`arguments {"title":"${ALL_ESCAPED}x"}): nothing changed`);

    const editFile = join(tempDir(), "edit.json");
    writeFileSync(editFile, `{"title": "${RLO}x" oops}`);
    const bad = await cli(["--sqlite", path, "decide", "--approval-id", hostile.approvalId, "--edit-file", editFile, "--operator-ref", "R"]);
    expect(bad.code).toBe(EXIT.usage);
    expect(hasUnsafe(bad.stderr)).toBe(false);
  });

  it("main: an error message quoting a value escapes it on stderr, line by line", async () => {
    const run = await cli(["--sqlite", "/nonexistent/g.sqlite", "audit", "--since", `2026-11-29${RLO}`]);
    expect(run.code).toBe(EXIT.usage);
    expect(hasUnsafe(run.stderr)).toBe(false);
    expect(run.stderr).toContain('got "2026-11-29\\u202e"');
    expect(run.stderr).toContain("\nRun 'arkah-guardrails audit --help' for usage.");
  });
});

// ---------------------------------------------------------------------------------------------
// main: flags, messages, exit codes

describe("main", () => {
  it("prints help globally and per command, with the exit codes, and the version", async () => {
    const global = await cli(["--help"]);
    expect(global.code).toBe(0);
    expect(global.stdout).toContain("Commands:");
    expect(global.stdout).toContain("--schema NAME        with --postgres: the store's schema (default: arkah_guardrails)");
    expect(global.stdout).toMatch(/Exit codes:\n {2}0 {2}ok\n {2}1 {2}operational failure.*\n {2}2 {2}usage error.*\n {2}3 {2}not found.*\n {2}4 {2}wrong state/);
    expect(global.stdout).toMatch(/\n {2}approvals {3}list approval requests/);
    expect(global.stdout).toMatch(/\n {2}decide {6}approve, reject or edit one pending approval request/);
    expect(global.stdout).toMatch(/\n {2}expire {6}expire pending approval requests older than a duration/);
    for (const command of ["inspect", "reconcile", "audit", "approvals", "decide", "expire"]) {
      const help = await cli([command, "-h"]);
      expect(help.code).toBe(0);
      expect(help.stdout).toContain(`arkah-guardrails STORE ${command}`);
      expect(help.stdout).toContain("Exit codes:");
    }
    const version = await cli(["--version"]);
    expect(version).toEqual({ code: 0, stdout: "0.2.0\n", stderr: "" });
  });

  it.each([
    [[], /missing command/],
    [["frobnicate"], /unknown command "frobnicate"/],
    [["inspect", "extra"], /unexpected argument "extra"/],
    [["inspect", "--bogus"], /Unknown option '--bogus'/],
    [["inspect", "--since", "2026-01-01"], /--since is not an option of inspect/],
    [["--json"], /--json needs a command/],
    [["inspect"], /give exactly one store/],
    [["--sqlite", "a", "--postgres", "postgres://h/db", "inspect"], /give exactly one store/],
    [["--sqlite", "a", "--sqlite", "b", "inspect"], /--sqlite given more than once/],
    [["--sqlite", "a", "--schema", "s", "inspect"], /--schema applies to --postgres only/],
    [["--sqlite", "--json", "inspect"], /argument is ambiguous/],
    [["--postgres", "not a url", "inspect"], /--postgres: not a valid URL/],
    [["--postgres", "mysql://u:pw@h/db", "inspect"], /expected a postgres:\/\/ or postgresql:\/\/ URL/],
    [["--postgres", "postgres://h/db", "--schema", "pg_catalog", "inspect"], /--schema: "pg_catalog" is not a schema name/],
    [["--sqlite", "a", "reconcile", "--no-effect", "--operator-ref", "R"], /give exactly one of --turn-key KEY \(a mutation\) or --effect KEY \(a side effect\)/],
    [["--sqlite", "a", "reconcile", "--turn-key", "ABC", "--no-effect", "--operator-ref", "R"], /64 lowercase hex characters/],
    [["--sqlite", "a", "reconcile", "--turn-key", "A".repeat(64), "--no-effect", "--operator-ref", "R"], /64 lowercase hex/],
    [["--sqlite", "a", "reconcile", "--turn-key", "a".repeat(64), "--no-effect"], /--operator-ref REF is required/],
    [["--sqlite", "a", "reconcile", "--turn-key", "a".repeat(64), "--no-effect", "--operator-ref", " "], /--operator-ref/],
    [["--sqlite", "a", "reconcile", "--turn-key", "a".repeat(64), "--operator-ref", "R"], /exactly one of --completed or --no-effect/],
    [
      ["--sqlite", "a", "reconcile", "--turn-key", "a".repeat(64), "--completed", "--no-effect", "--operator-ref", "R"],
      /exactly one of --completed or --no-effect/,
    ],
    [["--sqlite", "a", "reconcile", "--turn-key", "a".repeat(64), "--completed", "--operator-ref", "R"], /--completed needs --result-file/],
    [
      ["--sqlite", "a", "reconcile", "--turn-key", "a".repeat(64), "--no-effect", "--result-file", "f", "--operator-ref", "R"],
      /apply to --completed only/,
    ],
    [
      ["--sqlite", "a", "reconcile", "--turn-key", "a".repeat(64), "--completed", "--result-file", "f", "--result-status", "ok", "--operator-ref", "R"],
      /--result-status: expected success or error/,
    ],
    [["--sqlite", "a", "audit", "--since", "yesterday"], /--since: expected an ISO 8601 time with a zone/],
    [["--sqlite", "a", "audit", "--since", "2026-11-29T18:00:00"], /--since: expected an ISO 8601 time with a zone/],
    [["--sqlite", "a", "audit", "--since", "2026-02-30"], /--since: expected an ISO 8601 time/],
    [["--sqlite", "a", "audit", "--after-seq=-1"], /--after-seq: expected a whole number of at least 0/],
    [["--sqlite", "a", "audit", "--limit", "0"], /--limit: expected a whole number of at least 1/],
    [["--sqlite", "a", "audit", "--limit", "1e3"], /--limit: expected a whole number/],
    [["--sqlite", "a", "approvals", "--status", "done"], /--status: expected one of pending, approved, rejected, edited, applied, expired, orphaned, got "done"/],
    [["--sqlite", "a", "approvals", "--limit", "0"], /--limit: expected a whole number from 1 to 10000/],
    [["--sqlite", "a", "approvals", "--limit", "10001"], /--limit: expected a whole number from 1 to 10000/],
    [["--sqlite", "a", "approvals", "--since", "2026-01-01"], /--since is not an option of approvals/],
    [["--sqlite", "a", "decide", "--approve", "--operator-ref", "R"], /--approval-id ID is required/],
    [["--sqlite", "a", "decide", "--approval-id", "XYZ", "--approve", "--operator-ref", "R"], /--approval-id: expected 64 lowercase hex characters/],
    [["--sqlite", "a", "decide", "--approval-id", "a".repeat(64), "--approve"], /--operator-ref REF is required/],
    [["--sqlite", "a", "decide", "--approval-id", "a".repeat(64), "--operator-ref", "R"], /exactly one of --approve, --reject or --edit-file/],
    [["--sqlite", "a", "decide", "--approval-id", "a".repeat(64), "--approve", "--reject", "--operator-ref", "R"], /exactly one of --approve, --reject/],
    [["--sqlite", "a", "decide", "--approval-id", "a".repeat(64), "--reject", "--edit-file", "f", "--operator-ref", "R"], /exactly one of/],
    [["--sqlite", "a", "decide", "--approval-id", "a".repeat(64), "--approve", "--message", "m", "--operator-ref", "R"], /--message applies to --reject only/],
    [["--sqlite", "a", "decide", "--approval-id", "a".repeat(64), "--approve", "--turn-key", "k", "--operator-ref", "R"], /--turn-key is not an option of decide/],
    [["--sqlite", "a", "expire"], /--older-than DURATION is required/],
    [["--sqlite", "a", "expire", "--older-than", "24"], /--older-than: expected a duration such as 30m, 24h or 7d/],
    [["--sqlite", "a", "expire", "--older-than", "0h"], /--older-than: expected a duration/],
    [["--sqlite", "a", "expire", "--older-than", "1w"], /--older-than: expected a duration/],
    [["--sqlite", "a", "expire", "--older-than", "-5m"], /--older-than/],
    [["--sqlite", "a", "expire", "--older-than", "99999999999999999d"], /--older-than: expected a duration/],
  ])("usage error (exit 2) for %j", async (argv, message) => {
    const run = await cli(argv);
    expect(run.code).toBe(EXIT.usage);
    expect(run.stdout).toBe("");
    expect(run.stderr).toMatch(/^arkah-guardrails: /);
    expect(run.stderr).toMatch(message);
    expect(run.stderr).toContain("--help' for usage.");
    expect(run.stderr).not.toMatch(stackLine);
  });

  it("reports a store it cannot open with exit 1: missing directory, missing file, directory, not SQLite, not a guardrail store", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, "notes.txt"), "hello, this is not a database at all");
    writeFileSync(join(dir, "empty.sqlite"), "");
    const foreign = join(dir, "foreign.sqlite");
    SqliteGuardrailStore.open({ path: join(dir, "real.sqlite") }).close();
    const Database = (await import("better-sqlite3")).default;
    const db = new Database(foreign);
    db.exec("CREATE TABLE other_app (id INTEGER)");
    db.close();

    const cases: [string, RegExp][] = [
      [join(dir, "missing", "g.sqlite"), /the directory .*missing does not exist/],
      [join(dir, "absent.sqlite"), /the file does not exist \(the CLI opens existing stores only/],
      [dir, /it is a directory, not a SQLite database file/],
      [join(dir, "notes.txt"), /it is not a SQLite database/],
      [join(dir, "empty.sqlite"), /the file is empty: not an arkah-agent-guardrails store/],
      [foreign, /a SQLite database but not an arkah-agent-guardrails store/],
    ];
    for (const [path, message] of cases) {
      const run = await cli(["--sqlite", path, "inspect"]);
      expect({ path, code: run.code }).toEqual({ path, code: EXIT.failure });
      expect(run.stderr).toMatch(/^arkah-guardrails: cannot open the store at /);
      expect(run.stderr).toMatch(message);
      expect(run.stderr).not.toMatch(stackLine);
    }
    // Refusing a foreign database changed nothing in it.
    const check = new Database(foreign, { readonly: true });
    expect(check.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck().all()).toEqual(["other_app"]);
    check.close();
    expect((await cli(["--sqlite", join(dir, "real.sqlite"), "inspect"])).code).toBe(EXIT.ok);
  });

  it("reports a missing or unreadable result file before touching the store", async () => {
    const { path, store } = sqliteFile();
    const id = await claim(store, { scopeId: "doc-1", turnId: "t-1" }, "call-1", "unknown");
    const dir = tempDir();
    const base = ["--sqlite", path, "reconcile", "--turn-key", id.turnKey, "--completed", "--operator-ref", "R", "--result-file"];
    const missing = await cli([...base, join(dir, "nope.txt")]);
    expect(missing.code).toBe(EXIT.failure);
    expect(missing.stderr).toMatch(/--result-file: cannot read .*nope\.txt: the file does not exist/);
    const directory = await cli([...base, dir]);
    expect(directory.code).toBe(EXIT.failure);
    expect(directory.stderr).toMatch(/it is a directory/);
    writeFileSync(join(dir, "latin1.txt"), Buffer.from([0x63, 0x61, 0x66, 0xe9]));
    const notUtf8 = await cli([...base, join(dir, "latin1.txt")]);
    expect(notUtf8.code).toBe(EXIT.usage);
    expect(notUtf8.stderr).toMatch(/is not UTF-8 text/);
    expect((await store.listUnresolved()).map((mutation) => mutation.state)).toEqual(["unknown"]);
    store.close();
  });

  it("checks the edit file before touching the store: a JSON object of arguments, or it says what is wrong", async () => {
    const { path, store } = sqliteFile();
    await store.requestApproval(submission(1));
    const dir = tempDir();
    const base = ["--sqlite", path, "decide", "--approval-id", submission(1).approvalId, "--operator-ref", "R", "--edit-file"];
    const cases: [string, string | Buffer, number, RegExp][] = [
      ["array.json", "[1, 2]", EXIT.usage, /array\.json holds an array, not an object; it must hold the edited arguments as one JSON object/],
      ["null.json", "null", EXIT.usage, /null\.json holds null, not an object/],
      ["string.json", '"Field notes"', EXIT.usage, /string\.json holds a string, not an object/],
      ["broken.json", '{"title": "x",', EXIT.usage, /broken\.json is not JSON \(.+\); it must hold the edited arguments/],
      ["empty.json", "", EXIT.usage, /empty\.json is not JSON/],
      ["surrogate.json", '{"title": "a\\ud800"}', EXIT.usage, /surrogate\.json has a value the store cannot keep at \/title: a string with a lone surrogate/],
      ["key.json", '{"ok": {"a\\udc00": 1}}', EXIT.usage, /key\.json has a value the store cannot keep at \/ok\/a\\udc00: a key with a lone surrogate/],
      ["huge.json", '{"amount": [1, 1e999]}', EXIT.usage, /huge\.json has a value the store cannot keep at \/amount\/1: a number too large for JSON/],
      ["latin1.json", Buffer.from([0x7b, 0x22, 0xe9, 0x22, 0x3a, 0x31, 0x7d]), EXIT.usage, /latin1\.json is not UTF-8 text/],
      ["missing.json", "", EXIT.failure, /--edit-file: cannot read .*nowhere\.json: the file does not exist/],
    ];
    for (const [name, content, code, message] of cases) {
      const file = join(dir, name === "missing.json" ? "nowhere.json" : name);
      if (name !== "missing.json") writeFileSync(file, content);
      const run = await cli([...base, file]);
      expect({ name, code: run.code }).toEqual({ name, code });
      expect(run.stderr).toMatch(message);
      expect(run.stdout).toBe("");
    }
    expect((await store.getApproval(submission(1).approvalId))?.status).toBe("pending");

    writeFileSync(join(dir, "ok.json"), '{"title": "Field notes", "expectedRevision": 0}\n');
    const ok = await cli([...base, join(dir, "ok.json")]);
    expect(ok.code).toBe(EXIT.ok);
    expect(await store.getApproval(submission(1).approvalId)).toMatchObject({
      status: "edited",
      decision: { decision: "edit", args: { title: "Field notes", expectedRevision: 0 } },
      operatorRef: "R",
    });
    store.close();
  });

  it("runs approvals, decide, expire, orphan and audit --approval-id against a SQLite file: a missing request is 3, another decision on a decided, expired or orphaned one is 4", async () => {
    const clock = manualClock(T0 + 10 * 60_000);
    const { path, store } = sqliteFile(clock.now);
    for (const n of [1, 2, 3]) await store.requestApproval(submission(n));
    store.close();
    const flags = ["--sqlite", path];

    const listed = await cli([...flags, "approvals", "--status", "pending", "--json"], { now: clock.now });
    expect(listed.code).toBe(EXIT.ok);
    expect((JSON.parse(listed.stdout) as ApprovalRecord[]).map((record) => record.approvalId)).toEqual([1, 2, 3].map((n) => submission(n).approvalId));

    const approve = [...flags, "decide", "--approval-id", submission(1).approvalId, "--approve", "--operator-ref", "OPS-1"];
    expect((await cli(approve, { now: clock.now })).code).toBe(EXIT.ok);
    // The same decision again (a retried command) is answered as done, and is no refusal.
    const again = await cli(approve);
    expect(again.code).toBe(EXIT.ok);
    expect(again.stdout).toMatch(/^approval request [0-9a-f]{64} was already decided this way: approved \(approve by OPS-1 at 2026-11-29T18:10:00.000Z\); nothing changed\n$/);
    const other = await cli([...flags, "decide", "--approval-id", submission(1).approvalId, "--reject", "--operator-ref", "OPS-1"]);
    expect(other.code).toBe(EXIT.wrongState);
    expect(other.stderr).toMatch(/^arkah-guardrails: approval request [0-9a-f]{64} is approved \(approve by OPS-1 at 2026-11-29T18:10:00.000Z\): nothing changed\n$/);

    const rejected = await cli([...flags, "decide", "--approval-id", submission(2).approvalId, "--reject", "--message", "Not this one", "--operator-ref", "OPS-2"]);
    expect(rejected.code).toBe(EXIT.ok);
    expect(rejected.stdout).toContain("rejected");

    clock.advance(3600);
    const expired = await cli([...flags, "expire", "--older-than", "30m"], { now: clock.now });
    expect(expired).toEqual({
      code: EXIT.ok,
      stdout:
        "expired 1 pending approval request made before 2026-11-29T18:40:00.000Z (older than 30m)\n" +
        "  they can no longer be decided; when their runs resume, their calls are refused approval_expired\n",
      stderr: "",
    });
    const late = await cli([...flags, "decide", "--approval-id", submission(3).approvalId, "--approve", "--operator-ref", "OPS-3"]);
    expect(late.code).toBe(EXIT.wrongState);
    expect(late.stderr).toContain("is expired (at ");
    const missing = await cli([...flags, "decide", "--approval-id", "0".repeat(64), "--approve", "--operator-ref", "OPS-3"]);
    expect(missing.code).toBe(EXIT.notFound);
    expect(missing.stderr).toContain("no approval request 0000");

    // The approved request's call never ran: the operator orphans it.
    const orphaned = await cli([...flags, "orphan", "--older-than", "30m"], { now: clock.now });
    expect(orphaned.code).toBe(EXIT.ok);
    expect(orphaned.stdout.split("\n")[0]).toBe(
      "orphaned 1 approved or edited request decided before 2026-11-29T18:40:00.000Z (older than 30m) whose call never ran",
    );
    expect((await cli([...flags, "orphan", "--older-than", "30m"], { now: clock.now })).stdout).toMatch(/^orphaned 0 .*: nothing changed\n$/);
    const dead = await cli(approve);
    expect(dead.code).toBe(EXIT.wrongState);
    expect(dead.stderr).toContain("is orphaned (at ");
    expect(dead.stderr).toContain("approval_orphaned");
    const history = await cli([...flags, "audit", "--approval-id", submission(1).approvalId]);
    expect(history.stdout.trim().split("\n").map((line) => (JSON.parse(line) as { action?: string; code?: string }).action)).toEqual([
      "requested",
      "approve",
      "decision_refused",
      "orphaned",
      "decision_refused",
    ]);
    expect((await cli([...flags, "audit", "--approval-id", "nope"])).code).toBe(EXIT.usage);

    const table = await cli([...flags, "approvals"], { now: clock.now });
    expect(table.stdout.split("\n")[0]).toBe("3 approval requests (1 rejected, 1 expired, 1 orphaned), oldest first:");
    expect(table.stdout).toContain("  orphaned:  ");
    const audited = (await cli([...flags, "audit"])).stdout.trim().split("\n").map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(audited.filter((event) => event.decision === "approval").map((event) => [event.action, event.code, event.operatorRef])).toEqual([
      ["requested", undefined, undefined],
      ["requested", undefined, undefined],
      ["requested", undefined, undefined],
      ["approve", undefined, "OPS-1"],
      ["decision_refused", "already_decided", "OPS-1"],
      ["reject", undefined, "OPS-2"],
      ["expired", undefined, undefined],
      ["decision_refused", "expired", "OPS-3"],
      ["orphaned", undefined, undefined],
      ["decision_refused", "orphaned", "OPS-1"],
    ]);
  });

  it("runs inspect, reconcile and audit against a SQLite file: not found is 3, a repeated reconciliation is 4", async () => {
    const clock = manualClock();
    const { path, store } = sqliteFile(clock.now);
    const id = await claim(store, { scopeId: "doc-1", turnId: "t-1" }, "call-1", "unknown");
    store.close();
    clock.advance(75);
    const flags = ["--sqlite", path];

    const listed = await cli([...flags, "inspect"], { now: clock.now });
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(new RegExp(`^1m15s\\s+unknown\\s+doc-1\\s+rename_document\\s+call-1\\s+${id.turnKey}\\s+${id.mutationKey}$`, "m"));

    const resultFile = join(tempDir(), "result.txt");
    writeFileSync(resultFile, "Renamed (verified in the document service)\n");
    const reconcileArgs = [...flags, "reconcile", "--turn-key", id.turnKey, "--completed", "--result-file", resultFile];
    const done = await cli([...reconcileArgs, "--result-status", "error", "--operator-ref", "INC-42"], { now: clock.now });
    expect(done.code).toBe(0);
    expect(done.stdout).toContain("complete, with the operator's result (error, 43 characters, ending with a newline)");
    expect(done.stderr).toBe("");

    const repeated = await cli([...reconcileArgs, "--operator-ref", "INC-43"]);
    expect(repeated.code).toBe(EXIT.wrongState);
    expect(repeated.stderr).toMatch(/is not pending or unknown .*nothing changed/);

    const unknownTurn = await cli([...flags, "reconcile", "--turn-key", "0".repeat(64), "--no-effect", "--operator-ref", "R"]);
    expect(unknownTurn.code).toBe(EXIT.notFound);
    expect(unknownTurn.stderr).toMatch(/has no mutation claim: nothing to reconcile/);

    expect((await cli([...flags, "inspect"])).stdout).toBe("no unresolved mutations\n\nno unresolved side effects\n");

    const exported = await cli([...flags, "audit", "--since", "2026-11-29"]);
    expect(exported.code).toBe(0);
    expect(exported.stdout.trim().split("\n").map((line) => JSON.parse(line) as unknown)).toEqual([
      {
        at: "2026-11-29T18:01:15.000Z",
        decision: "reconciled",
        turnKey: id.turnKey,
        scopeId: "doc-1",
        toolCallId: "call-1",
        toolName: "rename_document",
        toolFingerprint: id.toolFingerprint,
        kind: "mutation",
        argsDigest: id.argsDigest,
        mutationKey: id.mutationKey,
        action: "completed",
        operatorRef: "INC-42",
        seq: 1,
      },
    ]);
    expect((await cli([...flags, "audit", "--since", "2026-11-29T18:01:16Z"])).stdout).toBe("");
    expect((await cli([...flags, "audit", "--since", "2026-11-29T19:01:15+01:00"])).stdout).toContain('"seq":1');

    const reopened = SqliteGuardrailStore.open({ path });
    expect(await reopened.claimMutation(id)).toEqual({
      status: "replay",
      result: { content: "Renamed (verified in the document service)\n", status: "error" },
    });
    reopened.close();
  });

  it("prints stack traces only with ARKAH_DEBUG=1", async () => {
    const path = join(tempDir(), "missing", "g.sqlite");
    const quiet = await cli(["--sqlite", path, "inspect"]);
    expect(quiet.stderr).not.toMatch(stackLine);
    const debug = await cli(["--sqlite", path, "inspect"], { env: { ARKAH_DEBUG: "1" } });
    expect(debug.code).toBe(EXIT.failure);
    expect(debug.stderr).toMatch(stackLine);
  });

  it("never prints a PostgreSQL password: unreachable server, redaction of messages", async () => {
    // Port 1 on loopback: nothing listens there, the connection is refused at once.
    const secret = "s3cr%40t-Pa55";
    const run = await cli(["--postgres", `postgres://operator:${secret}@127.0.0.1:1/guardrails`, "inspect"], {
      env: { ARKAH_DEBUG: "1" },
    });
    expect(run.code).toBe(EXIT.failure);
    expect(run.stderr).toContain("cannot open the store at postgres://operator:***@127.0.0.1:1/guardrails");
    expect(run.stderr).toContain("refused the connection");
    expect(run.stderr).not.toContain("Pa55");
    expect(run.stderr).not.toContain("s3cr@t");

    const badUrl = await cli(["--postgres", "postgres://operator:hunter2@[bad/db", "inspect"]);
    expect(badUrl.code).toBe(EXIT.usage);
    expect(badUrl.stderr).not.toContain("hunter2");
    expect(redactSecrets("see postgresql://u:pw@h/db and pw", ["postgres://u:pw@h/db"])).toBe("see postgresql://u:***@h/db and ***");
    expect(redactSecrets("p@ss@h and p@ss", ["postgres://u:p@ss@h/db"])).toBe("***@h and ***");
    expect(redactSecrets("failed: qwerty", ["postgres://u@h/db?password=qwerty"])).toBe("failed: ***");
  });
});

// ---------------------------------------------------------------------------------------------
// The real entry point, as a child process

describe("the bin (node --import tsx src/cli/index.ts)", () => {
  // Each run starts Node and tsx: generous limits for a loaded machine (no assertion is on time).
  const SLOW = { timeout: 120_000 };

  it("exits 0 with help, 1 for a bad path, 2 for a bad key", SLOW, () => {
    const help = spawnCli(["--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("Exit codes:");
    expect(help.stderr).toBe("");

    const badPath = spawnCli(["--sqlite", join(tempDir(), "nowhere", "g.sqlite"), "inspect"]);
    expect(badPath.code).toBe(1);
    expect(badPath.stderr).toMatch(/^arkah-guardrails: cannot open the store at .*: the directory .* does not exist\n$/);

    const badKey = spawnCli(["--sqlite", "g.sqlite", "reconcile", "--turn-key", "A".repeat(64), "--no-effect", "--operator-ref", "R"]);
    expect(badKey.code).toBe(2);
    expect(badKey.stderr).toContain("--turn-key: expected 64 lowercase hex characters");
  });

  it("exits 3 for an unknown turn; 0, 0 (already reconciled) then 4 for a repeated reconciliation with another outcome, with a stack trace only under ARKAH_DEBUG=1", SLOW, async () => {
    const { path, store } = sqliteFile();
    const id = await claim(store, { scopeId: "doc-1", turnId: "t-1" }, "call-1", "unknown");
    store.close();
    const flags = ["--sqlite", path];

    const notFound = spawnCli([...flags, "reconcile", "--turn-key", "e".repeat(64), "--no-effect", "--operator-ref", "R"]);
    expect(notFound.code).toBe(3);
    expect(notFound.stderr).toContain("has no mutation claim");

    const listed = spawnCli([...flags, "inspect", "--json"]);
    expect(listed.code).toBe(0);
    expect(JSON.parse(listed.stdout)).toEqual([expect.objectContaining({ turnKey: id.turnKey, state: "unknown" })]);

    const resultFile = join(tempDir(), "result.txt");
    writeFileSync(resultFile, "Saved");
    const args = [...flags, "reconcile", "--turn-key", id.turnKey, "--completed", "--result-file", resultFile, "--operator-ref", "INC-1"];
    const first = spawnCli(args);
    expect(first.code).toBe(0);
    expect(first.stdout).toContain(`reconciled turn ${id.turnKey}`);
    const same = spawnCli(args);
    expect(same).toMatchObject({ code: 0, stderr: "" });
    expect(same.stdout).toContain(`already reconciled: turn ${id.turnKey}`);
    const second = spawnCli([...args, "--result-status", "error"]);
    expect(second.code).toBe(4);
    expect(second.stderr).toMatch(/^arkah-guardrails: the mutation of turn [0-9a-f]{64} is not pending or unknown/);
    expect(second.stderr).not.toMatch(stackLine);

    const debug = spawnCli([...flags, "reconcile", "--turn-key", id.turnKey, "--no-effect", "--operator-ref", "R"], { ARKAH_DEBUG: "1" });
    expect(debug.code).toBe(4);
    expect(debug.stderr).toMatch(stackLine);
  });
});

// ---------------------------------------------------------------------------------------------
// The round trip through a real agent, on every available backend

interface Backend {
  readonly name: string;
  /** A fresh, empty store, the CLI flags that reach it, and the agent's own connection. */
  create(): Promise<{ store: GuardrailStore; flags: string[]; close(): Promise<void> }>;
}

const schemas: string[] = [];

const backends: Backend[] = [
  {
    name: "SQLite",
    create: async () => {
      const { store, flags } = sqliteFile();
      return { store, flags, close: async () => store.close() };
    },
  },
];
if (PG_URL !== undefined) {
  const url = PG_URL;
  backends.push({
    name: "PostgreSQL",
    create: async () => {
      const schema = freshSchema("arkah_cli");
      schemas.push(schema);
      const store = await PostgresGuardrailStore.open({ connectionString: url }, { schema });
      return { store, flags: ["--postgres", url, "--schema", schema], close: () => store.close() };
    },
  });
}

afterAll(async () => {
  if (PG_URL === undefined || schemas.length === 0) return;
  const admin = adminPool();
  try {
    for (const schema of schemas) await dropSchema(admin, schema);
  } finally {
    await admin.end();
  }
});

// Without a server this fails with the reason (as in test/stores/): the PostgreSQL runs are required.
requirePostgres();

describe.each(PG_URL === undefined ? [] : [PG_URL])("main against PostgreSQL", (url) => {
  it("a missing or wrong password is said in words, naming the fix, never echoing the password", async () => {
    // pg falls back to PGPASSWORD and ~/.pgpass: neither may supply one here.
    vi.stubEnv("PGPASSWORD", undefined);
    vi.stubEnv("PGPASSFILE", join(tempDir(), "no-pgpass"));
    try {
      const none = new URL(url);
      expect(none.password).not.toBe("");
      none.password = "";
      const missing = await cli(["--postgres", none.href, "inspect"]);
      expect(missing.code).toBe(EXIT.failure);
      expect(missing.stderr).toContain(`no password was given for user "${decodeURIComponent(none.username)}" and the server asks for one: set PGPASSWORD, add it to ~/.pgpass, or put it in the URL`);
      expect(missing.stderr).not.toContain("SASL");

      const wrong = new URL(url);
      wrong.password = "not-the-Pa55word";
      const refused = await cli(["--postgres", wrong.href, "inspect"]);
      expect(refused.code).toBe(EXIT.failure);
      expect(refused.stderr).toContain(`password authentication failed for user "${decodeURIComponent(wrong.username)}": the server refused the password; correct it in the URL, PGPASSWORD or ~/.pgpass`);
      expect(refused.stderr).not.toContain("Pa55word");
    } finally {
      vi.unstubAllEnvs();
    }
  });

  it("refuses a schema without a store, and creates nothing; names a missing database", async () => {
    const schema = freshSchema("arkah_cli_absent");
    const absent = await cli(["--postgres", url, "--schema", schema, "inspect"]);
    expect(absent.code).toBe(EXIT.failure);
    expect(absent.stderr).toContain(`the schema "${schema}" holds no arkah-agent-guardrails store`);
    const admin = adminPool();
    try {
      const found = await admin.query("SELECT 1 FROM pg_namespace WHERE nspname = $1", [schema]);
      expect(found.rowCount).toBe(0);
    } finally {
      await admin.end();
    }

    const database = new URL(url);
    database.pathname = `/no_such_db_${randomBytes(4).toString("hex")}`;
    const missing = await cli(["--postgres", database.href, "inspect"]);
    expect(missing.code).toBe(EXIT.failure);
    expect(missing.stderr).toMatch(/the database "no_such_db_[0-9a-f]+" does not exist/);
  });

  it("never migrates: a schema at an older version is refused naming both versions, and stays at its version", async () => {
    const schema = freshSchema("arkah_cli_old");
    schemas.push(schema);
    const admin = adminPool();
    try {
      const s = `"${schema}"`;
      await admin.query(`CREATE SCHEMA ${s}`);
      for (const statement of MIGRATIONS.filter((m) => m.version <= 2).flatMap((m) => m.statements(s))) await admin.query(statement);
      await admin.query(`CREATE TABLE ${s}.schema_migrations (version integer PRIMARY KEY, description text NOT NULL, applied_at text NOT NULL)`);
      await admin.query(`INSERT INTO ${s}.schema_migrations VALUES (1, 'v1', '2031-01-01T00:00:00.000Z'), (2, 'v2', '2031-01-02T00:00:00.000Z')`);
      const run = await cli(["--postgres", url, "--schema", schema, "inspect"]);
      expect(run.code).toBe(EXIT.failure);
      expect(run.stderr).toContain(`schema "${schema}"`);
      expect(run.stderr).toContain(`is at version 2; this version of arkah-agent-guardrails needs version ${String(POSTGRES_SCHEMA_VERSION)}`);
      const { rows } = await admin.query<{ v: number }>(`SELECT max(version) AS v FROM ${s}.schema_migrations`);
      expect(rows[0]?.v).toBe(2);
    } finally {
      await admin.end();
    }
  });
});

/** A view of the shared store whose settlement write fails: the result is lost, the claim stays pending. */
class LostSettlementStore extends ForwardingStore {
  override async settleMutation(_settlement: MutationSettlement): Promise<boolean> {
    throw new Error("guardrail ledger unreachable while recording the result");
  }
}

const RENAMED = '{"title":"Field notes","revision":1}';

describe.each(backends)("round trip through a real agent on $name", (backend) => {
  /** One invocation of the turn: read, then the rename `callId`, on a fresh agent over the shared store. */
  async function attempt(
    shared: { store: GuardrailStore; service: DocumentService; input: ReturnType<typeof turnInput> },
    readId: string,
    callId: string,
    hooks: ToolHooks = {},
  ) {
    const { agent } = guardedAgent({
      ...shared,
      hooks,
      script: [{ toolCalls: [read(readId)] }, { toolCalls: [rename(callId)] }, { content: "done" }],
    });
    return invokeTurn(agent, shared.input);
  }

  async function inspectJson(flags: string[]) {
    const run = await cli([...flags, "inspect", "--json"]);
    expect(run.code).toBe(0);
    return JSON.parse(run.stdout) as Record<string, unknown>[];
  }

  it("a write that throws after its side effect: unknown, inspect, reconcile --completed, the retry replays the operator's result", async () => {
    const { store, flags, close } = await backend.create();
    const service = new DocumentService();
    const input = turnInput({ turnId: "turn-crash" });
    const shared = { store, service, input };
    await admit(store, input);

    const crashed = await attempt(shared, "read-1", "rename-1", {
      afterWrite: () => {
        throw new Error("connection reset after the write was sent");
      },
    });
    expect(outcomeOf(crashed, "rename-1").code).toBe("mutation_unknown");
    expect(service.writes).toBe(1);

    const key = turnKey(input);
    const expectedMutationKey = mutationKey(input, { id: "rename-1", name: "rename_document", args: { title: "Field notes", expectedRevision: 0 } });
    expect(await inspectJson(flags)).toEqual([
      expect.objectContaining({
        turnKey: key,
        scopeId: "doc-1",
        toolName: "rename_document",
        toolCallId: "rename-1",
        state: "unknown",
        mutationKey: expectedMutationKey,
      }),
    ]);

    // While it is unknown, another turn in the scope may not write.
    const other = turnInput({ turnId: "turn-other" });
    await admit(store, other);
    const blocked = await attempt({ store, service, input: other }, "read-o", "rename-o");
    expect(outcomeOf(blocked, "rename-o").code).toBe("scope_unresolved");

    // The operator finds the write in the document service and records its result.
    expect(service.snapshot()).toBe(RENAMED);
    const resultFile = join(tempDir(), "verified-result.txt");
    writeFileSync(resultFile, service.snapshot());
    const reconciled = await cli([...flags, "reconcile", "--turn-key", key, "--completed", "--result-file", resultFile, "--operator-ref", "INC-7"]);
    expect(reconciled.code).toBe(0);
    expect(reconciled.stdout).toContain("was:          unknown");

    // A transport retry of the same call replays the operator's result; nothing runs again.
    const retried = await attempt(shared, "read-2", "rename-1");
    expect(outcomeOf(retried, "rename-1")).toMatchObject({ status: "success", code: undefined, content: RENAMED });
    expect(service.writes).toBe(1);
    expect(await inspectJson(flags)).toEqual([]);

    // The same reconciliation again (a retried script) is a success that changes nothing.
    const again = await cli([...flags, "reconcile", "--turn-key", key, "--completed", "--result-file", resultFile, "--operator-ref", "INC-7"]);
    expect(again.code).toBe(EXIT.ok);
    expect(again.stdout).toContain("already reconciled");

    const trail = (await cli([...flags, "audit"])).stdout.trim().split("\n").map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(trail.filter((event) => event.decision === "reconciled")).toEqual([
      expect.objectContaining({ turnKey: key, toolCallId: "rename-1", mutationKey: expectedMutationKey, action: "completed", operatorRef: "INC-7" }),
    ]);
    await close();
  });

  it("a write that failed before its side effect: unknown, reconcile --no-effect, a new attempt writes once", async () => {
    const { store, flags, close } = await backend.create();
    const service = new DocumentService();
    const input = turnInput({ turnId: "turn-refused" });
    const shared = { store, service, input };
    await admit(store, input);

    const failed = await attempt(shared, "read-1", "rename-1", {
      beforeWrite: () => {
        throw new Error("timeout before the request reached the document service");
      },
    });
    expect(outcomeOf(failed, "rename-1").code).toBe("mutation_unknown");
    expect(service.writes).toBe(0);
    const [row] = await inspectJson(flags);
    expect(row).toMatchObject({ state: "unknown", toolCallId: "rename-1" });

    // The operator finds no write under that mutationKey.
    const reconciled = await cli([...flags, "reconcile", "--turn-key", turnKey(input), "--no-effect", "--operator-ref", "INC-8"]);
    expect(reconciled.code).toBe(0);
    expect(reconciled.stdout).toContain("the turn's mutation slot is open again");

    const retried = await attempt(shared, "read-2", "rename-1");
    expect(outcomeOf(retried, "rename-1")).toMatchObject({ status: "success", content: RENAMED });
    expect(service.writes).toBe(1);
    // And once only: a further retry replays.
    const replayed = await attempt(shared, "read-3", "rename-1");
    expect(outcomeOf(replayed, "rename-1")).toMatchObject({ status: "success", content: RENAMED });
    expect(service.writes).toBe(1);
    await close();
  });

  it("a write whose settlement is lost: pending, inspect, reconcile --completed, the retry replays", async () => {
    const { store, flags, close } = await backend.create();
    const service = new DocumentService();
    const input = turnInput({ turnId: "turn-lost" });
    await admit(store, input);

    await expect(attempt({ store: new LostSettlementStore(store), service, input }, "read-1", "rename-1")).rejects.toThrow();
    expect(service.writes).toBe(1);
    const [row] = await inspectJson(flags);
    expect(row).toMatchObject({ state: "pending", toolCallId: "rename-1" });

    const pending = await attempt({ store, service, input }, "read-2", "rename-1");
    expect(outcomeOf(pending, "rename-1").code).toBe("mutation_pending");

    const resultFile = join(tempDir(), "verified-result.txt");
    writeFileSync(resultFile, service.snapshot());
    const reconciled = await cli([...flags, "reconcile", "--turn-key", turnKey(input), "--completed", "--result-file", resultFile, "--operator-ref", "INC-9"]);
    expect(reconciled.code).toBe(0);
    expect(reconciled.stdout).toContain("was:          pending");

    const retried = await attempt({ store, service, input }, "read-3", "rename-1");
    expect(outcomeOf(retried, "rename-1")).toMatchObject({ status: "success", content: RENAMED });
    expect(service.writes).toBe(1);
    await close();
  });
});

describe.each(backends)("approvals decided with the CLI, through a real agent on $name", (backend) => {
  /** A paused turn: read, then a rename that `requireApproval` holds for a person. */
  async function pausedTurn(turnId: string) {
    const { store, flags, close } = await backend.create();
    const service = new DocumentService();
    const input = turnInput({ turnId });
    await admit(store, input);
    const { agent } = guardedAgent({
      store,
      service,
      input,
      checkpointer: new MemorySaver(),
      guardrails: {
        guardrails: [requireApproval({ tools: ["rename_document"], describe: ({ args }) => `Rename the document to ${JSON.stringify(args.title)}?` })],
      },
      script: [{ toolCalls: [read("read-1")] }, { toolCalls: [rename("rename-1")] }, { content: "done" }],
    });
    const config = { configurable: { thread_id: turnId } };
    const paused = await agent.invoke({ messages: [new HumanMessage(userText(input))] }, config);
    const requests = (paused.__interrupt__ ?? []).map((pending) => pending.value as ApprovalRequest);
    expect(requests).toHaveLength(1);
    expect(service.writes).toBe(0);
    const resume = async (value: unknown) => (await agent.invoke(new Command({ resume: value }), config)).messages;
    return { store, flags, close, service, request: requests[0] as ApprovalRequest, resume };
  }

  async function listed(flags: string[], status?: string) {
    const run = await cli([...flags, "approvals", ...(status === undefined ? [] : ["--status", status]), "--json"]);
    expect(run.code).toBe(EXIT.ok);
    return JSON.parse(run.stdout) as ApprovalRecord[];
  }

  it("approve: approvals shows the request with its arguments, decide approves it, the resumed run renames once and the request is applied", async () => {
    const { flags, close, service, request, resume } = await pausedTurn("turn-approve");
    const [pending, ...others] = await listed(flags, "pending");
    expect(others).toEqual([]);
    expect(pending).toMatchObject({
      approvalId: request.approvalId,
      toolName: "rename_document",
      toolCallId: "rename-1",
      status: "pending",
      args: { title: "Field notes", expectedRevision: 0 },
      reason: 'Rename the document to "Field notes"?',
    });
    const table = await cli([...flags, "approvals"]);
    expect(table.stdout).toContain('{"title":"Field notes","expectedRevision":0}');
    const paste = table.stdout.split("\n").find((line) => line.includes("--approve"));
    const target =
      flags[0] === "--sqlite"
        ? ({ kind: "sqlite", path: flags[1] ?? "" } as const)
        : ({ kind: "postgres", url: flags[1] ?? "", schema: flags[3] } as const);
    const store = suggestedStore(target);
    expect(paste).toBe(`  arkah-guardrails ${store.flags} decide --approval-id ${request.approvalId} --approve --operator-ref REF`);
    if (target.kind === "postgres") {
      // The store flags name the schema; a password in the URL is left out, and the note says so.
      expect(store.flags).toContain(` --schema ${target.schema ?? ""}`);
      const password = new URL(target.url).password;
      if (password !== "") {
        expect(table.stdout).not.toContain(password);
        expect(table.stdout).toContain("(the password is left out of these lines: put it in PGPASSWORD or ~/.pgpass)");
      }
    }

    const decided = await cli([...flags, "decide", "--approval-id", request.approvalId, "--approve", "--operator-ref", "OPS-11"]);
    expect(decided.code).toBe(EXIT.ok);
    // The decision in the store stands, whatever the resume value says.
    const messages = await resume({ decision: "reject", message: "ignored: decided out of band" });
    expect(outcomeOf(messages, "rename-1")).toMatchObject({ status: "success", content: RENAMED });
    expect(service.writes).toBe(1);
    expect(await listed(flags, "applied")).toEqual([expect.objectContaining({ approvalId: request.approvalId, operatorRef: "OPS-11", decision: { decision: "approve" } })]);
    const again = await cli([...flags, "decide", "--approval-id", request.approvalId, "--reject", "--operator-ref", "OPS-12"]);
    expect(again.code).toBe(EXIT.wrongState);
    expect(again.stderr).toContain(`approval request ${request.approvalId} is applied (approve by OPS-11 at `);
    await close();
  });

  it("reject: the resumed run gives the model approval_rejected with the operator's message, and nothing runs", async () => {
    const { flags, close, service, request, resume } = await pausedTurn("turn-reject");
    const decided = await cli([...flags, "decide", "--approval-id", request.approvalId, "--reject", "--message", "Keep the old title", "--operator-ref", "OPS-13"]);
    expect(decided.code).toBe(EXIT.ok);
    const messages = await resume({ decision: "approve" });
    const outcome = outcomeOf(messages, "rename-1");
    expect(outcome).toMatchObject({ status: "error", code: "approval_rejected" });
    expect(JSON.parse(outcome.content)).toMatchObject({ reviewerMessage: "Keep the old title" });
    expect(service.writes).toBe(0);
    expect(await listed(flags)).toEqual([expect.objectContaining({ status: "rejected", operatorRef: "OPS-13" })]);
    await close();
  });

  it("edit: the resumed run renames with the arguments from the edit file, checked again", async () => {
    const { flags, close, service, request, resume } = await pausedTurn("turn-edit");
    const editFile = join(tempDir(), "edit.json");
    writeFileSync(editFile, JSON.stringify({ title: "Field notes (edited)", expectedRevision: 0 }));
    const decided = await cli([...flags, "decide", "--approval-id", request.approvalId, "--edit-file", editFile, "--operator-ref", "OPS-14"]);
    expect(decided.code).toBe(EXIT.ok);
    const messages = await resume({ decision: "approve" });
    expect(outcomeOf(messages, "rename-1")).toMatchObject({ status: "success", content: '{"title":"Field notes (edited)","revision":1}' });
    expect(service.writes).toBe(1);
    expect(await listed(flags)).toEqual([expect.objectContaining({ status: "applied", decision: { decision: "edit", args: { title: "Field notes (edited)", expectedRevision: 0 } } })]);
    await close();
  });

  it("expire: the resumed run gives the model approval_expired, and a late decision is refused with exit 4", async () => {
    const { flags, close, service, request, resume } = await pausedTurn("turn-expire");
    const later = () => new Date(Date.now() + 3_600_000);
    const expired = await cli([...flags, "expire", "--older-than", "30m"], { now: later });
    expect(expired.code).toBe(EXIT.ok);
    expect(expired.stdout).toMatch(/^expired 1 pending approval request made before /);
    const late = await cli([...flags, "decide", "--approval-id", request.approvalId, "--approve", "--operator-ref", "OPS-15"]);
    expect(late.code).toBe(EXIT.wrongState);
    expect(late.stderr).toContain("is expired");
    const messages = await resume({ decision: "approve" });
    expect(outcomeOf(messages, "rename-1")).toMatchObject({ status: "error", code: "approval_expired" });
    expect(service.writes).toBe(0);
    await close();
  });
});
