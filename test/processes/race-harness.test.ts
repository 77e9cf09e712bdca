/**
 * `raceGuardrailStore` from arkah-agent-guardrails/testing, run as an adapter author would: four OS
 * processes, each running two steps at once (the default), on the shared SQLite file and on the example file store's directory must pass every
 * race their parts allow; a store that is not shared (a private in-memory store per process) must
 * make it throw, naming the claim race.
 */
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { raceGuardrailStore, StoreRaceError, type StoreRaceReport } from "arkah-agent-guardrails/testing";
import { adminPool, describePostgres, dropSchema, freshSchema } from "../support/postgres.js";
import { tempDir, workerPath } from "./support.js";

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

const PROCESSES = 4;
/** The harness's default: each process runs two steps at once, so 8 racing steps. */
const RACERS = PROCESSES * 2;

function raced(report: StoreRaceReport) {
  return Object.fromEntries(report.races.map((race) => [race.race, race]));
}

describe("raceGuardrailStore", () => {
  it("passes the SQLite store: claims, audit, approvals, turns and effects, 4 processes", async () => {
    const dir = tempDir("arkah-race-harness-");
    cleanups.push(dir.remove);
    const report = await raceGuardrailStore({
      storeModule: workerPath("race-sqlite-store.ts"),
      options: { path: join(dir.path, "guardrails.sqlite") },
      processes: PROCESSES,
      rounds: 10,
      appends: 25,
    });
    const races = raced(report);
    expect(report.stepsPerProcess, "two steps at once per process by default").toBe(RACERS / PROCESSES);
    expect(Object.keys(races), "the races the SQLite store's parts allow").toEqual(["claims", "audit", "approvals", "turns", "effects"]);
    expect(races.claims?.counts, "one acquired and seven pending per round (4 processes, 2 steps each), then eight replays").toEqual({ acquired: 10, pending: 70, "after settlement: replay": 80 });
    expect(races.audit?.counts, "every appended event read back").toEqual({ appended: 8 * 25, read: 8 * 25 });
    expect(races.approvals?.counts, "one decision per round").toEqual({ decided: 10, already_decided: 70 });
    expect(races.turns?.counts, "one start per round").toEqual({ started: 10, running: 70 });
    expect(races.effects?.counts, "one claim of the same effect per round; four of eight distinct ones under maxPerTurn 4").toEqual({
      "same effect: acquired": 10,
      "same effect: pending": 70,
      "limited: acquired": 40,
      "limited: limit_reached": 40,
    });
  }, 300_000);

  it("passes the example file store (examples/file-store), 4 processes", async () => {
    const dir = tempDir("arkah-race-harness-file-");
    cleanups.push(dir.remove);
    const report = await raceGuardrailStore({
      storeModule: workerPath("race-file-store.ts"),
      options: { directory: dir.path },
      processes: PROCESSES,
      rounds: 5,
      appends: 10,
    });
    const races = raced(report);
    expect(report.races.every((race) => race.violations.length === 0), "no violations").toBe(true);
    expect(races.claims?.counts, "one acquired per round").toEqual({ acquired: 5, pending: 35, "after settlement: replay": 40 });
    expect(races.audit?.counts, "every appended event read back").toEqual({ appended: 8 * 10, read: 8 * 10 });
  }, 300_000);

  it("negative control: a private in-memory store per process breaks the claim race, and the harness throws naming it", async () => {
    const error = await raceGuardrailStore({
      storeModule: workerPath("race-memory-store.ts"),
      processes: PROCESSES,
      rounds: 2,
      appends: 3,
    }).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error, "the harness throws a StoreRaceError").toBeInstanceOf(StoreRaceError);
    const { message, report } = error as StoreRaceError;
    expect(message, "the message names the claim race").toContain("claims: round 0: 4 of 8 racing steps acquired the same turn's claim");
    expect(message, "and the audit race: each process reads only its own events").toContain("audit: p0 read 6 events; 24 were appended");
    expect(raced(report).claims?.counts, "every process acquired every claim once, its second step saw it pending").toEqual({ acquired: 8, pending: 8 });
  }, 300_000);
});

describePostgres("raceGuardrailStore on PostgreSQL", (url) => {
  it("passes the PostgreSQL store: the claim and effect races, 4 processes on one schema", async () => {
    const schema = freshSchema("arkah_race");
    const admin = adminPool({ max: 1 });
    try {
      const report = await raceGuardrailStore({
        storeModule: workerPath("race-postgres-store.ts"),
        options: { url, schema },
        processes: PROCESSES,
        rounds: 10,
        races: ["claims", "effects"],
      });
      const races = raced(report);
      expect(races.claims?.counts, "one acquired and seven pending per round (4 processes, 2 steps each), then eight replays").toEqual({ acquired: 10, pending: 70, "after settlement: replay": 80 });
      expect(races.effects?.counts, "one claim of the same effect per round; four of eight distinct ones under maxPerTurn 4").toEqual({
        "same effect: acquired": 10,
        "same effect: pending": 70,
        "limited: acquired": 40,
        "limited: limit_reached": 40,
      });
    } finally {
      await dropSchema(admin, schema);
      await admin.end();
    }
  }, 300_000);
});
