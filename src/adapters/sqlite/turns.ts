/**
 * The turn service's records in the SQLite store: each transition is one `BEGIN IMMEDIATE`
 * transaction (callers run them with `.immediate()`) that reads the turn's row, asks
 * `../turns.js` what to answer and write, and writes it.
 */
import { randomUUID } from "node:crypto";
import type Database from "better-sqlite3";
import type { BeginTurnInput, BeginTurnResult, FinishTurnInput, RenewTurnInput, ResumeTurnInput, ResumeTurnResult, TakePrunableTurnInput, TurnRecord } from "../../contracts/index.js";
import {
  beginTransition,
  finishTransition,
  listedTurn,
  parseTurnRecord,
  renewTransition,
  resumeTransition,
  takePrunableTransition,
  type ParsedListTurns,
} from "../../store/turns.js";
import { epochMs, parseJson } from "./encoding.js";
import { corrupt } from "./errors.js";
import type { Statements } from "./statements.js";

export interface TurnSteps {
  readonly begin: Database.Transaction<(input: BeginTurnInput) => BeginTurnResult>;
  readonly finish: Database.Transaction<(input: FinishTurnInput) => boolean>;
  readonly resume: Database.Transaction<(input: ResumeTurnInput) => ResumeTurnResult>;
  readonly renew: Database.Transaction<(input: RenewTurnInput) => boolean>;
  readonly takePrunable: Database.Transaction<(input: TakePrunableTurnInput) => boolean>;
}

/** Rows of the listing read at once: the expiry filter runs on parsed records, so a page may list fewer. */
const LIST_PAGE = 500;

/**
 * `listTurns`: live turns of the query's state in key order, by the turns_live index, or the
 * finished ones prune would remove; each row parsed (a corrupt one fails closed). One read
 * transaction, so the pages are one snapshot.
 */
export function listTurns(db: Database.Database, sql: Statements, query: ParsedListTurns, now: string): TurnRecord[] {
  // An unparseable cut-off compares false with every time, as in prune: nothing is listed.
  const cutoff = query.olderThan === undefined ? null : epochMs(query.olderThan);
  if (query.state === "finished" && cutoff === null) return [];
  return db.transaction(() => {
    const listed: TurnRecord[] = [];
    let after = query.after ?? "";
    for (;;) {
      const rows =
        query.state === "finished"
          ? sql.listFinishedTurns.all({ cutoff, after, limit: LIST_PAGE })
          : query.decided
            ? sql.listDecidedTurns.all({ after, limit: LIST_PAGE })
            : sql.listTurns.all({ state: query.state, after, limit: LIST_PAGE });
      for (const row of rows) {
        const key = row.turn_key;
        if (typeof key !== "string") throw corrupt("turn row", "its turn_key is not text");
        const record = parseTurnRecord(parseJson(row.record, `turn ${key}`), `turn ${key}`);
        if (record.turnKey !== key) throw corrupt(`turn ${key}`, "the record names another turn key");
        if (!listedTurn(record, query, now)) continue;
        listed.push(record);
        if (listed.length === query.limit) return listed;
      }
      const last = rows.at(-1);
      if (rows.length < LIST_PAGE || last === undefined) return listed;
      after = String(last.turn_key);
    }
  })();
}

/** The stored record for `turnKey`, parsed; one stored under another key is corrupt. */
export function readTurn(sql: Statements, turnKey: string): TurnRecord | undefined {
  const row = sql.getTurn.get(turnKey);
  if (row === undefined) return undefined;
  const record = parseTurnRecord(parseJson(row.record, `turn ${turnKey}`), `turn ${turnKey}`);
  if (record.turnKey !== turnKey) throw corrupt(`turn ${turnKey}`, "the record names another turn key");
  return record;
}

/** The turn key holding `requestKey`, if a turn does. */
function requestHolder(sql: Statements, requestKey: string): string | undefined {
  const row = sql.turnOfRequest.get(requestKey);
  if (row === undefined) return undefined;
  if (typeof row.turn_key !== "string") throw corrupt(`turn of request ${requestKey}`, "its turn key is not text");
  return row.turn_key;
}

export function prepareTurnSteps(db: Database.Database, sql: Statements, timestamp: () => string): TurnSteps {
  const write = (record: TurnRecord | undefined): void => {
    if (record !== undefined) {
      sql.putTurn.run(record.turnKey, record.state, Date.parse(record.updatedAt), JSON.stringify(record), record.requestKey ?? null);
    }
  };
  const begin = db.transaction((input: BeginTurnInput): BeginTurnResult => {
    const existing = readTurn(sql, input.turn.turnKey);
    const holder = existing === undefined ? requestHolder(sql, input.turn.requestKey) : undefined;
    const { answer, write: record } = beginTransition(existing, input, timestamp(), randomUUID(), holder);
    write(record);
    return answer;
  });
  const finish = db.transaction((input: FinishTurnInput): boolean => {
    const { answer, write: record } = finishTransition(readTurn(sql, input.turnKey), input, timestamp());
    write(record);
    return answer;
  });
  const resume = db.transaction((input: ResumeTurnInput): ResumeTurnResult => {
    const { answer, write: record } = resumeTransition(readTurn(sql, input.turnKey), input, timestamp(), randomUUID());
    write(record);
    return answer;
  });
  const renew = db.transaction((input: RenewTurnInput): boolean => {
    const { answer, write: record } = renewTransition(readTurn(sql, input.turnKey), input, timestamp());
    write(record);
    return answer;
  });
  const takePrunable = db.transaction((input: TakePrunableTurnInput): boolean => {
    const { answer, write: record } = takePrunableTransition(readTurn(sql, input.turnKey), input);
    write(record);
    return answer;
  });
  return { begin, finish, resume, renew, takePrunable };
}
