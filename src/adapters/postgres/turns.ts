/**
 * The turn service's records in the PostgreSQL store. A new turn is one insert-if-absent
 * statement; a lease holder's finish or renewal is a read and a compare-and-set on the record read;
 * anything else (and either of those after a missed compare) is one transaction that locks the
 * turn's row (`FOR UPDATE`), asks `../turns.js` what to answer and write, and writes it, so two
 * workers never both take a turn.
 */
import { randomUUID } from "node:crypto";
import {
  MutationStatusSchema,
  type BeginTurnInput,
  type BeginTurnResult,
  type FinishTurnInput,
  type MutationStatus,
  type RenewTurnInput,
  type ResumeTurnInput,
  type ResumeTurnResult,
  type TakePrunableTurnInput,
  type TurnRecord,
} from "../../contracts/index.js";
import { StoreContractError } from "../../errors.js";
import {
  beginTransition,
  finishTransition,
  listedTurn,
  parseTurnRecord,
  renewTransition,
  resumeTransition,
  takePrunableTransition,
  type ParsedListTurns,
  type TurnTransition,
} from "../../store/turns.js";
import { parseStoreValue } from "../../store/validate.js";
import { query, transaction, type Queryable, type Session } from "./connection.js";
import { claimedIdentityFromRow, decodeJson, decodeOptionalText, epochMs } from "./encoding.js";

const rowValues = (record: TurnRecord): unknown[] => [record.turnKey, record.state, Date.parse(record.updatedAt), JSON.stringify(record)];
const insertValues = (record: TurnRecord): unknown[] => [...rowValues(record), record.requestKey ?? null];

function fromRow(row: Record<string, unknown> | undefined, turnKey: string): TurnRecord | undefined {
  if (row === undefined) return undefined;
  const record = parseTurnRecord(decodeJson(row.record, `turn ${turnKey}`), `stored turn ${turnKey}`);
  if (record.turnKey !== turnKey) throw new StoreContractError(`corrupt turn ${turnKey}: the record names another turn key`);
  return record;
}

export async function getTurn(session: Session, turnKey: string): Promise<TurnRecord | undefined> {
  const { rows } = await query(session.pool, session.sql.getTurn, [turnKey]);
  return fromRow(rows[0], turnKey);
}

/**
 * Runs a transition under the turn row's lock. With no row, the write is an insert-if-absent: a
 * concurrent insert (of the turn, or of another turn holding its request key) wins, and the
 * transition is decided again against it.
 */
async function locked<A>(
  session: Session,
  turnKey: string,
  decide: (existing: TurnRecord | undefined, client: Queryable) => TurnTransition<A> | Promise<TurnTransition<A>>,
): Promise<A> {
  for (let attempt = 0; attempt < 4; attempt++) {
    const answer = await transaction(session.pool, async (client: Queryable): Promise<{ value: A } | undefined> => {
      const { rows } = await query(client, session.sql.lockTurn, [turnKey]);
      const existing = fromRow(rows[0], turnKey);
      const { answer: value, write } = await decide(existing, client);
      if (write === undefined) return { value };
      if (existing !== undefined) {
        await query(client, session.sql.updateTurn, rowValues(write));
        return { value };
      }
      const inserted = await query(client, session.sql.insertTurn, insertValues(write));
      return inserted.rowCount === 1 ? { value } : undefined;
    });
    if (answer !== undefined) return answer.value;
  }
  throw new Error("the turn transition did not settle on an answer after 4 attempts under concurrent changes");
}

/**
 * A lease holder's transition (finish, renew) in two statements and one write, instead of `BEGIN`,
 * the row lock, the write and `COMMIT` (four round trips): the record is read, the transition
 * decided on it (the same pure decision), and written by a compare-and-set on the record as read.
 * A change in between (a takeover, a renewal, prune) makes the compare miss: then it is decided
 * again under the row lock. An answer without a write stands on the record as read.
 */
async function swapped<A>(session: Session, turnKey: string, decide: (existing: TurnRecord | undefined) => TurnTransition<A>): Promise<A> {
  const { rows } = await query(session.pool, session.sql.getTurn, [turnKey]);
  const row = rows[0];
  const { answer, write } = decide(fromRow(row, turnKey));
  if (write === undefined) return answer;
  if (row !== undefined) {
    const applied = await query(session.pool, session.sql.swapTurn, [...rowValues(write), row.record]);
    if (applied.rowCount === 1) return answer;
  }
  return locked(session, turnKey, decide);
}

/** The turn key holding `requestKey`, if a turn does (read in the caller's transaction). */
async function requestHolder(session: Session, client: Queryable, requestKey: string): Promise<string | undefined> {
  const { rows } = await query(client, session.sql.turnOfRequest, [requestKey]);
  const holder = rows[0]?.turn_key;
  if (holder === undefined) return undefined;
  if (typeof holder !== "string") throw new StoreContractError(`corrupt turn of request ${requestKey}: its turn key is not text`);
  return holder;
}

export async function beginTurn(session: Session, input: BeginTurnInput): Promise<BeginTurnResult> {
  // Fast path, one statement: a new turn is inserted here. It inserts nothing if the turn key, or
  // the request key, is already held; the locked path then tells which.
  const token = randomUUID();
  const fresh = beginTransition(undefined, input, session.timestamp(), token, undefined);
  if (fresh.write !== undefined) {
    const inserted = await query(session.pool, session.sql.insertTurn, insertValues(fresh.write));
    if (inserted.rowCount === 1) return fresh.answer;
  }
  return locked(session, input.turn.turnKey, async (existing, client) => {
    const holder = existing === undefined ? await requestHolder(session, client, input.turn.requestKey) : undefined;
    return beginTransition(existing, input, session.timestamp(), randomUUID(), holder);
  });
}

export function finishTurn(session: Session, input: FinishTurnInput): Promise<boolean> {
  return swapped(session, input.turnKey, (existing) => finishTransition(existing, input, session.timestamp()));
}

export function resumeTurn(session: Session, input: ResumeTurnInput): Promise<ResumeTurnResult> {
  return locked(session, input.turnKey, (existing) => resumeTransition(existing, input, session.timestamp(), randomUUID()));
}

export function renewTurn(session: Session, input: RenewTurnInput): Promise<boolean> {
  return swapped(session, input.turnKey, (existing) => renewTransition(existing, input, session.timestamp()));
}

/** A compare-and-set on the record as read: a `resumeTurn` in between (under the row lock) makes it miss, and it is decided again under the lock. */
export function takePrunableTurn(session: Session, input: TakePrunableTurnInput): Promise<boolean> {
  return swapped(session, input.turnKey, (existing) => takePrunableTransition(existing, input));
}

/** Rows of the listing read at once: the expiry filter runs on parsed records, so a page may list fewer. */
const LIST_PAGE = 500;

/**
 * `listTurns`: live turns of the query's state in key order, by the turns_live index, or the
 * finished ones prune would remove; each row parsed (a corrupt one fails closed).
 */
export async function listTurns(session: Session, listing: ParsedListTurns): Promise<TurnRecord[]> {
  const now = session.timestamp();
  // An unparseable cut-off compares false with every time, as in prune: nothing is listed.
  const cutoff = listing.olderThan === undefined ? null : epochMs(listing.olderThan);
  if (listing.state === "finished" && cutoff === null) return [];
  const listed: TurnRecord[] = [];
  let after = listing.after ?? "";
  for (;;) {
    const { rows } =
      listing.state === "finished"
        ? await query(session.pool, session.sql.listFinishedTurns, [cutoff, after, LIST_PAGE])
        : listing.decided
          ? await query(session.pool, session.sql.listDecidedTurns, [after, LIST_PAGE])
          : await query(session.pool, session.sql.listTurns, [listing.state, after, LIST_PAGE]);
    for (const row of rows) {
      const key = row.turn_key;
      if (typeof key !== "string") throw new StoreContractError("corrupt turn row: its turn_key is not text");
      const record = fromRow(row, key);
      if (record === undefined || !listedTurn(record, listing, now)) continue;
      listed.push(record);
      if (listed.length === listing.limit) return listed;
    }
    const last = rows.at(-1);
    if (rows.length < LIST_PAGE || last === undefined) return listed;
    after = String(last.turn_key);
  }
}

export async function getMutation(session: Session, turnKey: string): Promise<MutationStatus | undefined> {
  const { rows } = await query(session.pool, session.sql.getMutation, [turnKey]);
  const row = rows[0];
  if (row === undefined) return undefined;
  // The whole row is parsed, not only what the answer shows: a corrupt claim answers nothing.
  const identity = claimedIdentityFromRow(row);
  const complete = row.state === "complete";
  return parseStoreValue(
    MutationStatusSchema,
    {
      state: row.state,
      toolName: identity.toolName,
      toolCallId: identity.toolCallId,
      ...(complete
        ? { result: { content: decodeOptionalText(row.result_content, "claim result"), status: row.result_status } }
        : {}),
    },
    `mutation of turn ${turnKey}`,
  );
}
