/**
 * Connections: a statement on the pool or on a transaction's client, a transaction on one
 * connection (a broken connection is discarded, never reused), and the audit trail's append, which
 * every atomic step that writes an event runs inside its own transaction.
 */
import { createHash } from "node:crypto";
import type pg from "pg";
import type { AuditEvent } from "../../contracts/index.js";
import { encodeText, epochMs } from "./encoding.js";
import type { Statement, Statements } from "./statements.js";

export type Queryable = Pick<pg.PoolClient, "query">;

/** What the atomic steps need of a store: its pool, statements, clock and audit lock. */
export interface Session {
  readonly pool: pg.Pool;
  readonly sql: Statements;
  /** The advisory lock key that orders audit sequence numbers (see `appendEvent`). */
  readonly auditLock: string;
  /** The schema's name (unquoted), for the advisory locks it names. */
  readonly schema: string;
  readonly timestamp: () => string;
}

/** Runs a prepared statement on `client` (the pool: its own implicit transaction). */
export function query(client: Queryable, statement: Statement, values: readonly unknown[]) {
  return client.query<Record<string, unknown>>({ name: statement.name, text: statement.text, values: [...values] });
}

/** Runs `fn` in a transaction on one connection. A broken connection is discarded, not reused. */
export async function transaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  const connection = watch(client);
  try {
    await client.query("BEGIN");
    const result = await fn(client);
    await client.query("COMMIT");
    return result;
  } catch (error) {
    await rollback(client, connection);
    throw error;
  } finally {
    connection.release();
  }
}

/**
 * Inserts an event with the next sequence number, taken under the audit advisory lock that is
 * held until the (implicit or enclosing) transaction commits: numbers are assigned in commit
 * order, so a reader never sees event n+1 committed before event n.
 */
export async function appendEvent(session: Session, event: AuditEvent, client: Queryable): Promise<void> {
  await query(client, session.sql.appendAudit, [session.auditLock, ...eventValues(event)]);
}

/** An event's columns after the lock key: at, at_ms, decision, turn_key, scope_id, approval_id, event. */
export function eventValues(event: AuditEvent): unknown[] {
  return [
    event.at,
    epochMs(event.at),
    event.decision,
    event.turnKey,
    encodeText(event.scopeId),
    event.approvalId ?? null,
    JSON.stringify(event),
  ];
}

/** A signed 64-bit advisory lock key, as decimal text, from a name. */
export function lockKey(name: string): string {
  return createHash("sha256").update(name).digest().readBigInt64BE(0).toString();
}
/**
 * Watches a checked-out client: a connection that dies while checked out emits 'error' on the
 * client, which would crash the process without a listener (the pool listens only while it is
 * idle). `release` hands it back to the pool, destroying it if it broke.
 */
export function watch(client: pg.PoolClient): { broken: Error | undefined; release: () => void } {
  const state: { broken: Error | undefined; release: () => void } = {
    broken: undefined,
    release: () => {
      client.removeListener("error", onError);
      client.release(state.broken);
    },
  };
  const onError = (error: Error) => {
    state.broken ??= error;
  };
  client.on("error", onError);
  return state;
}

/** Rolls back; a connection that cannot even do that is marked broken, so the pool discards it. */
export async function rollback(client: pg.PoolClient, connection: { broken: Error | undefined }): Promise<void> {
  try {
    await client.query("ROLLBACK");
  } catch (error) {
    connection.broken ??= error instanceof Error ? error : new Error(String(error));
  }
}

/**
 * Waits until every commit a `readAudit` statement saw is flushed to the WAL, given its `flushed`
 * column (checked in the statement itself, after its snapshot): the events it answers may include
 * ones committed without waiting for their flush (a read's), and an event is shipped to a sink
 * only once the store cannot lose it in a server crash (a lost event's `seq` could be given to
 * another one after recovery, which a sink deduplicating by `seq` would drop). Usually the WAL is
 * flushed already and nothing is sent; otherwise one synchronous commit flushes it.
 */
export async function awaitFlushed(session: Session, flushed: unknown): Promise<void> {
  if (flushed === true) return;
  await query(session.pool, session.sql.flushWal, []);
}
