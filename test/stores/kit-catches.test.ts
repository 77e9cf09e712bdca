/**
 * The conformance kit catches the three bugs it used to miss (issue 26), and a side-effect limit
 * counted across tools (issue 22): each is seeded into a
 * wrapper around the in-memory store, the kit's suites are run against it (collected here, not
 * registered with vitest), and the named kit tests must fail; the same suites pass against the
 * unbroken wrapper, so the failures are the seeded bugs'. The same for the key-value adapter bugs
 * the whole kit passed before its primitives suite (issue 40), seeded into a Redis-like adapter
 * (optimistic concurrency, a WATCH per connection) on `KeyValueGuardrailStore`.
 */
import { describe, expect, it } from "vitest";
import { InMemoryGuardrailStore, StoreContractError } from "arkah-agent-guardrails";
import {
  KeyValueGuardrailStore,
  StoreContractError as StoreError,
  type JsonValue,
  type KeyValueScanOptions,
  type KeyValueTransaction,
} from "arkah-agent-guardrails/store";
import type {
  ApplyApprovalInput,
  ApprovalDecisionResult,
  ApprovalQuery,
  ApprovalRecord,
  ApprovalSubmission,
  AuditQuery,
  DecideApprovalInput,
  EffectClaimOptions,
  EffectClaimResult,
  EffectIdentity,
  StoredAuditEvent,
} from "arkah-agent-guardrails/store";
import type { CorruptionTarget, KeyValueRawWrite } from "arkah-agent-guardrails/testing";
import { releaseSuite } from "../../src/testing/conformance/claims.js";
import { corruptionSuite } from "../../src/testing/conformance/corruption.js";
import { cursorsSuite } from "../../src/testing/conformance/cursors.js";
import { effectsSuite } from "../../src/testing/conformance/effects.js";
import { CLOCK_START, ManualClock, type StoreFixture, type StoreTest } from "../../src/testing/conformance/harness.js";
import { keyValueCorruptRecord } from "../../src/testing/conformance/key-value.js";
import { primitivesSuite } from "../../src/testing/conformance/primitives.js";

type Bug = "none" | "released-without-kind" | "unencoded-sink-names" | "unchecked-key" | "limit-across-tools";

/** The in-memory store with one seeded bug (or none), and a corruptRecord for its approvals. */
class SeededStore extends InMemoryGuardrailStore {
  /** Approval records a corruptRecord put under another id: what a backend that stores raw records would hold. */
  readonly rawApprovals = new Map<string, ApprovalRecord>();

  constructor(
    readonly bug: Bug,
    now: () => Date,
  ) {
    super({ now });
  }

  /** turn key -> every effect key claimed in it, whatever the tool: what the seeded limit bug counts. */
  readonly #effectsByTurn = new Map<string, Set<string>>();

  override async claimEffect(identity: EffectIdentity, options?: EffectClaimOptions): Promise<EffectClaimResult> {
    if (this.bug === "limit-across-tools" && options?.maxPerTurn !== undefined && (await this.getEffect(identity.effectKey)) === undefined) {
      // The seeded bug: the turn's effects are counted across all its tools.
      if ((this.#effectsByTurn.get(identity.turnKey)?.size ?? 0) >= options.maxPerTurn) return { status: "limit_reached" };
    }
    const result = await super.claimEffect(identity, options);
    if (result.status === "acquired") this.#effectsByTurn.set(identity.turnKey, (this.#effectsByTurn.get(identity.turnKey) ?? new Set()).add(identity.effectKey));
    return result;
  }

  override async readAudit(query?: AuditQuery): Promise<StoredAuditEvent[]> {
    const events = await super.readAudit(query);
    if (this.bug !== "released-without-kind") return events;
    return events.map((event) => {
      if (event.decision !== "released") return event;
      const { kind: _kind, ...rest } = event;
      return rest;
    });
  }

  /** UTF-8 storage without encoding: a lone surrogate becomes U+FFFD, so two names can be one. */
  #sink(name: string): string {
    return this.bug === "unencoded-sink-names" && typeof name === "string" ? Buffer.from(name, "utf8").toString("utf8") : name;
  }

  override getAuditCursor(sink: string): Promise<number> {
    return super.getAuditCursor(this.#sink(sink));
  }

  override advanceAuditCursor(input: { sink: string; seq: number }): Promise<boolean> {
    return super.advanceAuditCursor({ ...input, sink: this.#sink(input.sink) });
  }

  /** What a store that checks the key does with a record stored under another one. */
  #refuse(approvalId: string): void {
    if (this.rawApprovals.has(approvalId)) throw new StoreContractError(`approval ${approvalId}: the stored record names another id`);
  }

  override async getApproval(approvalId: string): Promise<ApprovalRecord | undefined> {
    const raw = this.rawApprovals.get(approvalId);
    // The seeded bug: the record is returned without checking it is the one for this id.
    if (raw !== undefined && this.bug === "unchecked-key") return structuredClone(raw);
    this.#refuse(approvalId);
    return super.getApproval(approvalId);
  }

  override async requestApproval(request: ApprovalSubmission): Promise<ApprovalRecord> {
    this.#refuse(request.approvalId);
    return super.requestApproval(request);
  }

  override async decideApproval(input: DecideApprovalInput): Promise<ApprovalDecisionResult> {
    this.#refuse(input.approvalId);
    return super.decideApproval(input);
  }

  override async applyApproval(input: ApplyApprovalInput): Promise<boolean> {
    this.#refuse(input.approvalId);
    return super.applyApproval(input);
  }

  override async listApprovals(query?: ApprovalQuery): Promise<ApprovalRecord[]> {
    for (const id of this.rawApprovals.keys()) this.#refuse(id);
    return super.listApprovals(query);
  }
}

function corruptRecord(store: SeededStore, target: CorruptionTarget): Promise<"unsupported" | undefined> {
  return (async () => {
    if (target.record !== "approval" || target.mode !== "wrong_key") return "unsupported";
    const other = await InMemoryGuardrailStore.prototype.getApproval.call(store, target.otherKey);
    if (other === undefined) throw new Error("no record under the other key");
    store.rawApprovals.set(target.key, other);
    return undefined;
  })();
}

interface Collected {
  readonly name: string;
  readonly body: (fixture: StoreFixture) => Promise<void>;
}

/** Runs every test `register` declares against a fresh store with `bug`; the names of those that fail. */
async function failures(register: (test: StoreTest) => void, bug: Bug, only: RegExp): Promise<string[]> {
  const collected: Collected[] = [];
  register((name, body) => {
    if (only.test(name)) collected.push({ name, body });
  });
  expect(collected.length, `the kit has tests matching ${String(only)}`).toBeGreaterThan(0);
  const failed: string[] = [];
  for (const { name, body } of collected) {
    const clock = new ManualClock(CLOCK_START);
    const store = new SeededStore(bug, clock.now);
    const corrupt = async (target: CorruptionTarget) => (await corruptRecord(store, target)) !== "unsupported";
    try {
      await body({ store, clock, corrupt });
    } catch {
      failed.push(name);
    }
  }
  return failed;
}

describe("the kit fails a store with each bug it used to miss, and passes the same store without it", () => {
  it("a released event without kind", async () => {
    const only = /released event/;
    expect(await failures(releaseSuite, "none", only), "the unbroken store passes").toEqual([]);
    expect(await failures(releaseSuite, "released-without-kind", only), "the released-event check fails").toEqual([
      "appends one released event with the claim's identity, at the store's time",
    ]);
  });

  it("audit sink names stored unencoded: two names differing only in a lone surrogate collide", async () => {
    const only = /lone surrogate/;
    expect(await failures(cursorsSuite, "none", only), "the unbroken store passes").toEqual([]);
    expect(await failures(cursorsSuite, "unencoded-sink-names", only), "the exact-name check fails").toEqual([
      "sink names are stored exactly: two names differing only in a lone surrogate have their own cursors",
    ]);
  });

  it("a record not checked against the key it was read by", async () => {
    const only = /approval stored wrong_key/;
    expect(await failures(corruptionSuite, "none", only), "the unbroken store fails closed").toEqual([]);
    expect(await failures(corruptionSuite, "unchecked-key", only), "the fail-closed check fails").toEqual(["an approval stored wrong_key: every read fails closed"]);
  });

  it("a side-effect limit counted across the turn's tools, not per (turn, tool)", async () => {
    const only = /maxPerTurn counts one tool/;
    expect(await failures(effectsSuite, "none", only), "the unbroken store passes").toEqual([]);
    expect(await failures(effectsSuite, "limit-across-tools", only), "the per-tool limit check fails").toEqual([
      "maxPerTurn counts one tool in one turn: not other tools, not other turns",
    ]);
  });
});

type KeyValueBug = "none" | "scan-skips-keys-extending-after" | "scan-in-utf8-byte-order" | "one-connection-for-concurrent-steps";

/** The server side of a Redis-like backend: JSON text per entry, and a version per entry and per collection for WATCH. */
class Server {
  readonly data = new Map<string, Map<string, string>>();
  readonly #versions = new Map<string, number>();

  version(name: string): number {
    return this.#versions.get(name) ?? 0;
  }

  bump(name: string): void {
    this.#versions.set(name, this.version(name) + 1);
  }
}

/** A round trip: other steps run in between, as they would while a command is on the wire. */
const roundTrip = () =>
  new Promise<void>((resolve) => {
    setImmediate(resolve);
  });

/** A connection: Redis keeps WATCHed keys per connection, and EXEC (whatever its outcome) unwatches them all. */
class Connection {
  readonly #watched = new Map<string, number>();

  constructor(readonly server: Server) {}

  async watch(name: string): Promise<void> {
    await roundTrip();
    if (!this.#watched.has(name)) this.#watched.set(name, this.server.version(name));
  }

  /** EXEC: applies `writes` only if nothing watched changed since its WATCH; unwatches everything either way. */
  async exec(writes: ReadonlyMap<string, ReadonlyMap<string, string | undefined>>): Promise<boolean> {
    await roundTrip();
    const clean = [...this.#watched].every(([name, version]) => this.server.version(name) === version);
    this.#watched.clear();
    if (!clean) return false;
    for (const [collection, entries] of writes) {
      const stored = this.server.data.get(collection) ?? new Map<string, string>();
      for (const [key, text] of entries) {
        if (text === undefined) stored.delete(key);
        else stored.set(key, text);
        this.server.bump(`${collection}\u0000${key}`);
      }
      this.server.bump(collection);
      this.server.data.set(collection, stored);
    }
    return true;
  }
}

const utf8Order = (a: string, b: string) => Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"));
const codeUnitOrder = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/**
 * A Redis-like adapter written from docs/storage-adapters.md: WATCH each entry (and, for a scan,
 * its collection) before reading it, buffer the writes, EXEC them; re-run the step when EXEC
 * aborts, and when a step that rejected had watched something that changed (it may have rejected
 * on a view that never existed). With one seeded bug, or none.
 */
class OptimisticKeyValueStore extends KeyValueGuardrailStore {
  readonly server = new Server();
  readonly #shared: Connection;

  constructor(
    readonly bug: KeyValueBug,
    now: () => Date,
  ) {
    super({ now });
    this.#shared = new Connection(this.server);
  }

  /** The kit's raw write. */
  writeRaw(write: KeyValueRawWrite): void {
    const entries = this.server.data.get(write.collection) ?? new Map<string, string>();
    entries.set(write.key, "value" in write ? JSON.stringify(write.value) : "{truncated");
    this.server.data.set(write.collection, entries);
  }

  #decode(collection: string, key: string, text: string): unknown {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw new StoreError(`the entry ${JSON.stringify(key)} of ${collection} is not JSON`);
    }
  }

  protected override async atomic<T>(step: (tx: KeyValueTransaction) => Promise<T>): Promise<T> {
    for (let attempt = 0; attempt < 1_000; attempt++) {
      // The seeded bug: one connection for the store object, so concurrent steps share (and clear) one set of WATCHes.
      const connection = this.bug === "one-connection-for-concurrent-steps" ? this.#shared : new Connection(this.server);
      const writes = new Map<string, Map<string, string | undefined>>();
      const buffered = (collection: string, key: string) => writes.get(collection)?.get(key);
      const isBuffered = (collection: string, key: string) => writes.get(collection)?.has(key) === true;
      const read = async (collection: string, key: string): Promise<unknown> => {
        await connection.watch(`${collection}\u0000${key}`);
        const text = isBuffered(collection, key) ? buffered(collection, key) : this.server.data.get(collection)?.get(key);
        return text === undefined ? undefined : this.#decode(collection, key, text);
      };
      const buffer = (collection: string, key: string, text: string | undefined) => {
        const entries = writes.get(collection) ?? new Map<string, string | undefined>();
        entries.set(key, text);
        writes.set(collection, entries);
      };
      const tx: KeyValueTransaction = {
        get: read,
        put: (collection, key, value: JsonValue) => {
          buffer(collection, key, JSON.stringify(value));
        },
        delete: (collection, key) => {
          buffer(collection, key, undefined);
        },
        scan: async (collection, options: KeyValueScanOptions = {}) => {
          await connection.watch(collection);
          const keys = new Set([...(this.server.data.get(collection)?.keys() ?? []), ...(writes.get(collection)?.keys() ?? [])]);
          const { after } = options;
          const sorted = [...keys]
            .sort(this.bug === "scan-in-utf8-byte-order" ? utf8Order : codeUnitOrder)
            .filter((key) => {
              if (after === undefined) return true;
              // The seeded bug: a key that extends `after` is taken for `after` itself.
              if (this.bug === "scan-skips-keys-extending-after" && key.startsWith(after)) return false;
              return this.bug === "scan-in-utf8-byte-order" ? utf8Order(key, after) > 0 : key > after;
            });
          const entries: (readonly [string, unknown])[] = [];
          for (const key of sorted) {
            if (entries.length >= (options.limit ?? Number.POSITIVE_INFINITY)) break;
            const value = await read(collection, key);
            if (value !== undefined) entries.push([key, value]);
          }
          return entries;
        },
      };
      let result: T;
      try {
        result = await step(tx);
      } catch (error) {
        // A rejection decided on a view that changed under it is a conflict, not an answer: an empty EXEC tells which.
        if (await connection.exec(new Map())) throw error;
        continue;
      }
      // Read-only steps EXEC too: it is what checks that their reads were one state.
      if (await connection.exec(writes)) return result;
    }
    throw new Error("OptimisticKeyValueStore: a step conflicted 1000 times");
  }
}

/** Runs every test `register` declares (matching `only`) against a fresh seeded key-value store; the names of those that fail. */
async function keyValueFailures(register: (test: StoreTest) => void, bug: KeyValueBug, only: RegExp): Promise<string[]> {
  const collected: Collected[] = [];
  register((name, body) => {
    if (only.test(name)) collected.push({ name, body });
  });
  expect(collected.length, `the kit has tests matching ${String(only)}`).toBeGreaterThan(0);
  const corruptRecord = keyValueCorruptRecord((store: OptimisticKeyValueStore, write) => {
    store.writeRaw(write);
  });
  const failed: string[] = [];
  for (const { name, body } of collected) {
    const clock = new ManualClock(CLOCK_START);
    const store = new OptimisticKeyValueStore(bug, clock.now);
    const corrupt = async (target: CorruptionTarget) => (await corruptRecord(store, target)) !== "unsupported";
    const writeRaw = async (write: KeyValueRawWrite) => {
      await Promise.resolve();
      store.writeRaw(write);
    };
    try {
      await body({ store, clock, corrupt, writeRaw });
    } catch {
      failed.push(name);
    }
  }
  return failed;
}

describe("the kit's primitives suite fails a key-value adapter with each bug the rest of the kit passed (issue 40), and passes it without", () => {
  it("the unbroken Redis-like adapter passes the primitives and corruption suites", async () => {
    expect(await keyValueFailures(primitivesSuite, "none", /./), "the primitives suite").toEqual([]);
    expect(await keyValueFailures(corruptionSuite, "none", /./), "the corruption suite, with the kit's own hook from writeRaw").toEqual([]);
  });

  it("a scan that skips the keys extending `after`", async () => {
    expect(await keyValueFailures(primitivesSuite, "scan-skips-keys-extending-after", /./)).toEqual([
      "scan after a key answers every key after it, those that extend it included; with limit, the first of them",
    ]);
  });

  it("a scan ordered by UTF-8 bytes, not UTF-16 code units", async () => {
    expect(await keyValueFailures(primitivesSuite, "scan-in-utf8-byte-order", /./)).toEqual([
      "scan answers keys in UTF-16 code unit order (as JavaScript's < compares), not UTF-8 byte order: astral characters, U+E000-U+FFFF, lone surrogates, prefixes",
    ]);
  });

  it("one connection shared by concurrent steps (Redis keeps WATCHes per connection)", async () => {
    expect(await keyValueFailures(primitivesSuite, "one-connection-for-concurrent-steps", /./)).toEqual([
      "concurrent steps on one store object are serializable: no lost update, each sees only its own buffer, read-only steps see one consistent state",
    ]);
  });
});
