/**
 * `raceGuardrailStore`: races several OS processes on one shared store, for adapter authors whose
 * store is meant to be shared across processes (what the in-process conformance suites cannot
 * check). Each child opens the store from the author's module; the parent sends every child the
 * same request at once and checks the answers against the contract.
 */
import { fork, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { JsonValue } from "../contracts/index.js";
import { GuardrailsError } from "../errors.js";
import type { StorePart } from "../store/capabilities.js";
import {
  raceApproval,
  raceAuditEvent,
  raceEffectIdentity,
  raceIdentity,
  raceTurnStart,
  type RaceAnswer,
  type RaceMessage,
  type RaceRequest,
  type RaceValue,
} from "./race/protocol.js";

/** The races the harness runs: `approvals`, `turns` and `effects` only on a store with that part. */
export type StoreRace = "claims" | "audit" | "approvals" | "turns" | "effects";

/** What `raceGuardrailStore` races: the adapter's store module, the shared storage, how hard. */
export interface RaceGuardrailStoreOptions {
  /**
   * The module each child imports (an absolute path, a path relative to `cwd`, or a URL): its
   * `openStore(options)`, else its default export, opens the store (or resolves to it) on the shared
   * storage `options` describes. A `close()` on the store is called before the child exits.
   */
  readonly storeModule: string | URL;
  /** Passed to the opener in every child; JSON, as it crosses a process boundary. */
  readonly options?: JsonValue;
  /** How many processes race (at least 2; default 4). */
  readonly processes?: number;
  /**
   * How many steps each process runs at once in every race (at least 1; default 2): its store
   * object must serve concurrent steps too (a connection per step where the backend keeps
   * transaction state per connection, such as a Redis `WATCH`).
   */
  readonly stepsPerProcess?: number;
  /** Rounds of the claim, approval, turn and effect races, each on a turn of its own (default 20). */
  readonly rounds?: number;
  /** Audit events each process appends in the audit race (default 50). */
  readonly appends?: number;
  /** Only these races (default: all the store's parts allow). */
  readonly races?: readonly StoreRace[];
  /** The whole run must finish within this (default 120 000 ms); then the children are killed and it throws. */
  readonly timeoutMs?: number;
  /** Node options of the children (default: the parent's, with `--import tsx` added when a module is TypeScript). */
  readonly execArgv?: readonly string[];
  /** The children's working directory (default: `process.cwd()`). */
  readonly cwd?: string;
}

/** One race's outcome: how often each answer came, and every way it broke the contract. */
export interface StoreRaceResult {
  /** Which race. */
  readonly race: StoreRace;
  /** How many rounds it ran (for `audit`: one). */
  readonly rounds: number;
  /** How often each answer came, by answer (`acquired`, `pending`, `replay`, `decided`...). */
  readonly counts: Readonly<Record<string, number>>;
  /** Every way the store broke the contract, one line each; empty when it held. */
  readonly violations: readonly string[];
}

/** What `raceGuardrailStore` found: one result per race it ran. */
export interface StoreRaceReport {
  /** How many processes raced. */
  readonly processes: number;
  /** How many steps each process ran at once. */
  readonly stepsPerProcess: number;
  /** The optional parts the store has (as the first child detected them). */
  readonly parts: readonly StorePart[];
  /** One result per race, in the order they ran. */
  readonly races: readonly StoreRaceResult[];
}

/** Thrown by `raceGuardrailStore` when a race broke the contract; `report` has every violation. */
export class StoreRaceError extends GuardrailsError {
  protected static override readonly brandName: string = "StoreRaceError";

  /** Every race's result, the broken ones with their violations. */
  readonly report: StoreRaceReport;

  constructor(report: StoreRaceReport) {
    const broken = report.races.filter((race) => race.violations.length > 0);
    const lines = broken.flatMap((race) => race.violations.slice(0, 10).map((violation) => `- ${race.race}: ${violation}`));
    const total = broken.reduce((sum, race) => sum + race.violations.length, 0);
    super(
      `the store broke the contract under ${String(report.processes)} racing processes (${String(report.stepsPerProcess)} steps at once each) in the ${broken.map((race) => race.race).join(", ")} race` +
        `${broken.length === 1 ? "" : "s"} (${String(total)} violation${total === 1 ? "" : "s"}):\n${lines.join("\n")}`,
    );
    this.report = report;
  }
}

const here = typeof __dirname === "string" ? __dirname : dirname(fileURLToPath(import.meta.url));

/** The child entry: the built one beside this module (dist/testing/), else the source (under tsx or vitest). */
function childEntry(): string {
  const candidates = [join(here, "race-child.js"), join(here, "testing", "race-child.js"), join(here, "race", "child.ts")];
  const found = candidates.find((candidate) => existsSync(candidate));
  if (found === undefined) throw new Error(`raceGuardrailStore: its child entry is missing (looked for ${candidates.join(", ")})`);
  return found;
}

const isTypeScript = (file: string) => /\.[cm]?tsx?$/.test(file);

interface Child {
  readonly name: string;
  readonly process: ChildProcess;
  call(request: RaceRequest): Promise<RaceValue>;
  readonly exited: Promise<void>;
}

function startChild(index: number, entry: string, execArgv: string[], cwd: string, abort: (error: Error) => void): { child: Child; ready: Promise<void> } {
  const name = `p${String(index)}`;
  const child = fork(entry, [], { cwd, execArgv, stdio: ["ignore", "inherit", "pipe", "ipc"] });
  let stderr = "";
  child.stderr?.setEncoding("utf8");
  child.stderr?.on("data", (chunk: string) => {
    stderr = (stderr + chunk).slice(-4000);
  });
  const pending = new Map<number, { resolve: (value: RaceValue) => void; reject: (error: Error) => void }>();
  let nextId = 1;
  let markReady: () => void = () => undefined;
  const ready = new Promise<void>((resolvePromise) => {
    markReady = resolvePromise;
  });
  child.on("message", (message: RaceAnswer) => {
    if ("type" in message) {
      markReady();
      return;
    }
    const waiter = pending.get(message.id);
    pending.delete(message.id);
    if (message.ok) waiter?.resolve(message.value);
    else waiter?.reject(new Error(`${name}: ${message.error}`));
  });
  const exited = new Promise<void>((resolvePromise) => {
    child.on("exit", (code, signal) => {
      const error = new Error(`raceGuardrailStore: process ${name} exited (code ${String(code)}, signal ${String(signal)})${stderr === "" ? "" : `:\n${stderr}`}`);
      for (const waiter of pending.values()) waiter.reject(error);
      pending.clear();
      abort(error);
      resolvePromise();
    });
  });
  child.on("error", (error) => {
    abort(error);
  });
  return {
    ready: Promise.race([ready, exited.then(() => Promise.reject(new Error(`raceGuardrailStore: process ${name} exited before it was ready:\n${stderr}`)))]),
    child: {
      name,
      process: child,
      exited,
      call(request) {
        const id = nextId++;
        return new Promise<RaceValue>((resolvePromise, reject) => {
          pending.set(id, { resolve: resolvePromise, reject });
          child.send({ id, request } satisfies RaceMessage);
        });
      },
    },
  };
}

const count = (counts: Record<string, number>, key: string) => {
  counts[key] = (counts[key] ?? 0) + 1;
};

function expectValue<T extends RaceValue["type"]>(value: RaceValue, type: T): Extract<RaceValue, { type: T }> {
  if (value.type !== type) throw new Error(`raceGuardrailStore: expected a ${type} answer, got ${value.type}`);
  return value as Extract<RaceValue, { type: T }>;
}

/** One racing step: a process, and which of its concurrent steps (`p1.0`, `p1.1`). */
interface Racer {
  readonly name: string;
  readonly child: Child;
}

/** Every racer sends `request(racer)` at once; the answers in racer order. */
const all = <T extends RaceValue["type"]>(racers: readonly Racer[], type: T, request: (racer: Racer, index: number) => RaceRequest) =>
  Promise.all(racers.map(async (racer, index) => expectValue(await racer.child.call(request(racer, index)), type)));

async function claimsRace(racers: readonly Racer[], runId: string, rounds: number): Promise<StoreRaceResult> {
  const counts: Record<string, number> = {};
  const violations: string[] = [];
  for (let round = 0; round < rounds; round++) {
    const identity = raceIdentity(runId, round);
    const claims = await all(racers, "claimed", () => ({ type: "claim", identity }));
    const statuses = claims.map(({ result }) => result.status);
    for (const status of statuses) count(counts, status);
    const winners = claims.flatMap(({ result }, index) => (result.status === "acquired" ? [{ index, token: result.token }] : []));
    const others = statuses.filter((status) => status !== "acquired" && status !== "pending");
    if (winners.length !== 1 || others.length > 0) {
      violations.push(
        `round ${String(round)}: ${String(winners.length)} of ${String(racers.length)} racing steps acquired the same turn's claim ` +
          `(answers: ${statuses.join(", ")}); exactly one must acquire, the others see pending`,
      );
      continue;
    }
    const [winner] = winners;
    if (winner === undefined) continue;
    const winnerRacer = racers[winner.index];
    if (winnerRacer === undefined) continue;
    const content = `round ${String(round)} by ${winnerRacer.name}`;
    const settled = expectValue(await winnerRacer.child.call({ type: "settle", turnKey: identity.turnKey, token: winner.token, content }), "settled");
    if (!settled.applied) {
      violations.push(`round ${String(round)}: the winner's settlement with its own token did not apply`);
      continue;
    }
    const replays = await all(racers, "claimed", () => ({ type: "claim", identity }));
    replays.forEach(({ result }, index) => {
      count(counts, `after settlement: ${result.status}`);
      if (result.status !== "replay" || result.result.content !== content || result.result.status !== "success") {
        violations.push(`round ${String(round)}: after the settlement ${racers[index]?.name ?? ""} got ${JSON.stringify(result)}, not a replay of "${content}"`);
      }
    });
  }
  return { race: "claims", rounds, counts, violations };
}

async function auditRace(children: readonly Child[], racers: readonly Racer[], runId: string, appends: number): Promise<StoreRaceResult> {
  const violations: string[] = [];
  // Each racer appends its own sequence, one after another; a process runs several at once.
  await all(racers, "appended", (_, writer) => ({
    type: "append",
    events: Array.from({ length: appends }, (__, index) => raceAuditEvent(runId, writer, index)),
  }));
  const reads = await all(
    children.map((child) => ({ name: child.name, child })),
    "audit",
    () => ({ type: "read-audit", scopeId: `race-${runId}` }),
  );
  const expected = racers.length * appends;
  reads.forEach(({ events }, reader) => {
    const who = `p${String(reader)} read`;
    if (events.length !== expected) violations.push(`${who} ${String(events.length)} events; ${String(expected)} were appended`);
    const seen = new Map<string, number>();
    let previous = 0;
    for (const { seq, toolCallId = "(none)" } of events) {
      if (seq <= previous) violations.push(`${who} seq ${String(seq)} after seq ${String(previous)}: numbers must be unique and ascending`);
      previous = Math.max(previous, seq);
      if (seen.has(toolCallId)) violations.push(`${who} the event ${toolCallId} twice (seq ${String(seen.get(toolCallId))} and ${String(seq)})`);
      seen.set(toolCallId, seq);
    }
    // One racer appends one after another: its events must be numbered in that order.
    for (let writer = 0; writer < racers.length; writer++) {
      let last = 0;
      for (let index = 0; index < appends; index++) {
        const id = `p${String(writer)}-${String(index)}`;
        const seq = seen.get(id);
        if (seq === undefined) {
          if (events.length === expected) violations.push(`${who} no event ${id}`);
          continue;
        }
        if (seq <= last) violations.push(`${who} ${id} at seq ${String(seq)}, not after the same step sequence's earlier event at seq ${String(last)}`);
        last = seq;
      }
    }
  });
  return { race: "audit", rounds: 1, counts: { appended: expected, read: reads[0]?.events.length ?? 0 }, violations };
}

async function approvalsRace(racers: readonly Racer[], runId: string, rounds: number): Promise<StoreRaceResult> {
  const counts: Record<string, number> = {};
  const violations: string[] = [];
  const [first] = racers;
  if (first === undefined) return { race: "approvals", rounds, counts, violations };
  for (let round = 0; round < rounds; round++) {
    expectValue(await first.child.call({ type: "request-approval", runId, round }), "requested");
    const { approvalId } = raceApproval(runId, round);
    const answers = await all(racers, "decided", (racer, index) => ({ type: "decide", approvalId, operatorRef: racer.name, approve: index % 2 === 0 }));
    const winners = answers.flatMap(({ result }, index) => (result.decided ? [{ index, record: result.record }] : []));
    for (const { result } of answers) count(counts, result.decided ? "decided" : result.reason);
    const winner = winners[0];
    if (winners.length !== 1 || winner === undefined) {
      violations.push(`round ${String(round)}: ${String(winners.length)} of ${String(racers.length)} concurrent decisions of one request were decided; exactly one must be`);
      continue;
    }
    answers.forEach(({ result }, index) => {
      if (index === winner.index) return;
      if (result.decided || result.reason !== "already_decided" || result.record?.status !== winner.record.status || result.record.operatorRef !== winner.record.operatorRef) {
        violations.push(`round ${String(round)}: ${racers[index]?.name ?? ""} got ${JSON.stringify(result.decided ? "decided" : result.reason)} with ${JSON.stringify(result.record?.status)} by ${String(result.record?.operatorRef)}; expected already_decided with the winner's ${winner.record.status} by ${String(winner.record.operatorRef)}`);
      }
    });
  }
  return { race: "approvals", rounds, counts, violations };
}

async function turnsRace(racers: readonly Racer[], runId: string, rounds: number): Promise<StoreRaceResult> {
  const counts: Record<string, number> = {};
  const violations: string[] = [];
  for (let round = 0; round < rounds; round++) {
    const turn = raceTurnStart(runId, round);
    const answers = await all(racers, "begun", () => ({ type: "begin-turn", turn }));
    const statuses = answers.map(({ result }) => result.status);
    for (const status of statuses) count(counts, status);
    const started = statuses.filter((status) => status === "started").length;
    if (started !== 1 || statuses.some((status) => status !== "started" && status !== "running")) {
      violations.push(`round ${String(round)}: concurrent beginTurn of one new turn answered ${statuses.join(", ")}; exactly one must start it, the others see running`);
    }
  }
  return { race: "turns", rounds, counts, violations };
}

/**
 * Each round: every process claims the same side effect (exactly one `acquired`, the rest
 * `pending`), then each claims a distinct effect of the same tool in another turn with
 * `maxPerTurn` half the processes (exactly that many `acquired`, the rest `limit_reached`).
 */
async function effectsRace(racers: readonly Racer[], runId: string, rounds: number): Promise<StoreRaceResult> {
  const counts: Record<string, number> = {};
  const violations: string[] = [];
  const limit = Math.max(1, Math.floor(racers.length / 2));
  for (let round = 0; round < rounds; round++) {
    const identity = raceEffectIdentity(runId, 2 * round, 0);
    const same = (await all(racers, "effect-claimed", () => ({ type: "claim-effect", identity }))).map(({ result }) => result.status);
    for (const status of same) count(counts, `same effect: ${status}`);
    if (same.filter((status) => status === "acquired").length !== 1 || same.some((status) => status !== "acquired" && status !== "pending")) {
      violations.push(`round ${String(round)}: concurrent claims of one side effect answered ${same.join(", ")}; exactly one must acquire, the others see pending`);
    }
    const limited = (
      await all(racers, "effect-claimed", (_, index) => ({ type: "claim-effect", identity: raceEffectIdentity(runId, 2 * round + 1, index + 1), maxPerTurn: limit }))
    ).map(({ result }) => result.status);
    for (const status of limited) count(counts, `limited: ${status}`);
    const acquired = limited.filter((status) => status === "acquired").length;
    if (acquired !== limit || limited.some((status) => status !== "acquired" && status !== "limit_reached")) {
      violations.push(
        `round ${String(round)}: concurrent claims of ${String(racers.length)} distinct side effects of one tool with maxPerTurn ${String(limit)} answered ` +
          `${limited.join(", ")}; exactly ${String(limit)} must acquire, the others see limit_reached`,
      );
    }
  }
  return { race: "effects", rounds, counts, violations };
}

async function stop(children: readonly Child[]): Promise<void> {
  await Promise.all(
    children.map(async (child) => {
      if (child.process.exitCode !== null || child.process.signalCode !== null) return;
      if (child.process.connected) child.process.send({ type: "exit" } satisfies RaceMessage);
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<"late">((resolvePromise) => {
        timer = setTimeout(() => {
          resolvePromise("late");
        }, 5_000);
      });
      const how = await Promise.race([child.exited, late]);
      clearTimeout(timer);
      if (how === "late") {
        child.process.kill("SIGKILL");
        await child.exited;
      }
    }),
  );
}

/**
 * Races `processes` OS processes on one shared store, each running `stepsPerProcess` steps at once
 * (so a store object shared by concurrent steps is raced too), and checks the contract: of concurrent claims
 * of one turn exactly one `acquired` (the rest `pending`), then every process replays the winner's
 * settled result; concurrent `appendAudit` gives unique, ascending `seq` (gaps allowed) with every
 * event once and each process's events in its append order; with `approvals`, of concurrent
 * `decideApproval`s of one request exactly one decides (the rest `already_decided`, seeing the
 * winner's record); with `turns`, of concurrent `beginTurn`s of a new turn exactly one `started`
 * (the rest `running`); with `effects`, of concurrent claims of one side effect exactly one
 * `acquired` (the rest `pending`), and of concurrent claims of distinct effects of one tool in one
 * turn with `maxPerTurn` k exactly k `acquired` (the rest `limit_reached`). Resolves with the report; throws a {@link StoreRaceError} listing every
 * violation. The children are stopped whatever happens (killed after a timeout).
 */
export async function raceGuardrailStore(options: RaceGuardrailStoreOptions): Promise<StoreRaceReport> {
  const processes = options.processes ?? 4;
  const rounds = options.rounds ?? 20;
  const appends = options.appends ?? 50;
  const stepsPerProcess = options.stepsPerProcess ?? 2;
  if (!Number.isInteger(processes) || processes < 2) throw new RangeError("raceGuardrailStore: processes must be an integer of at least 2");
  if (!Number.isInteger(rounds) || rounds < 1) throw new RangeError("raceGuardrailStore: rounds must be a positive integer");
  if (!Number.isInteger(appends) || appends < 1) throw new RangeError("raceGuardrailStore: appends must be a positive integer");
  if (!Number.isInteger(stepsPerProcess) || stepsPerProcess < 1) throw new RangeError("raceGuardrailStore: stepsPerProcess must be a positive integer");
  const cwd = options.cwd ?? process.cwd();
  const storeModule =
    options.storeModule instanceof URL ? options.storeModule.href : isAbsolute(options.storeModule) || /^[a-z][a-z0-9+.-]*:/i.test(options.storeModule) && !/^[a-z]:[\\/]/i.test(options.storeModule) ? options.storeModule : resolve(cwd, options.storeModule);
  const entry = childEntry();
  const execArgv = [...(options.execArgv ?? process.execArgv)];
  const needsTsx = isTypeScript(entry) || isTypeScript(storeModule);
  if (options.execArgv === undefined && needsTsx && !execArgv.some((arg) => arg.includes("tsx"))) execArgv.push("--import", "tsx");

  const runId = randomUUID().slice(0, 8);
  const children: Child[] = [];
  let fail: (error: Error) => void = () => undefined;
  const failed = new Promise<never>((_, reject) => {
    fail = reject;
  });
  failed.catch(() => undefined);
  let timer: NodeJS.Timeout | undefined;
  let finished = false;
  const abort = (error: Error) => {
    if (!finished) fail(error);
  };
  const run = async (): Promise<StoreRaceReport> => {
    const started = Array.from({ length: processes }, (_, index) => startChild(index, entry, execArgv, cwd, abort));
    children.push(...started.map(({ child }) => child));
    await Promise.all(started.map(({ ready }) => ready));
    const opened = await all(
      children.map((child) => ({ name: child.name, child })),
      "opened",
      () => ({ type: "open", storeModule, options: options.options ?? null }),
    );
    const racers: Racer[] = children.flatMap((child) =>
      Array.from({ length: stepsPerProcess }, (_, step) => ({ name: stepsPerProcess === 1 ? child.name : `${child.name}.${String(step)}`, child })),
    );
    const parts = opened[0]?.parts ?? [];
    const wanted = (race: StoreRace) => options.races === undefined || options.races.includes(race);
    const races: StoreRaceResult[] = [];
    if (wanted("claims")) races.push(await claimsRace(racers, runId, rounds));
    if (wanted("audit")) races.push(await auditRace(children, racers, runId, appends));
    if (wanted("approvals") && parts.includes("approvals")) races.push(await approvalsRace(racers, runId, rounds));
    if (wanted("turns") && parts.includes("turns")) races.push(await turnsRace(racers, runId, rounds));
    if (wanted("effects") && parts.includes("effects")) races.push(await effectsRace(racers, runId, rounds));
    return { processes, stepsPerProcess, parts, races };
  };
  try {
    const timeoutMs = options.timeoutMs ?? 120_000;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        reject(new Error(`raceGuardrailStore: the run did not finish within ${String(timeoutMs)} ms`));
      }, timeoutMs);
    });
    const report = await Promise.race([run(), failed, timedOut]);
    if (report.races.some((race) => race.violations.length > 0)) throw new StoreRaceError(report);
    return report;
  } finally {
    finished = true;
    clearTimeout(timer);
    await stop(children);
  }
}
