/**
 * A `pg.Pool` whose connections tally what they send: every `query` call is one round trip (the
 * driver sends a statement's parse, bind and execute together and waits for its answer), and
 * every commit, explicit (`COMMIT`) or implicit (a statement outside `BEGIN` ... `COMMIT` is its
 * own transaction, read-only ones included, as `pg_stat_database.xact_commit` counts them). The
 * statements are listed by their prepared-statement name without the schema's tag, or by their
 * first word. Counts, not times: the regression tests of a turn's SQL read them.
 */
import pg from "pg";

/** What the pool's connections sent since the last `reset`. */
export interface SqlTally {
  /** `query` calls: one round trip each. */
  roundTrips: number;
  /** Commits, explicit and implicit. */
  commits: number;
  /** Explicit transactions (`BEGIN`). */
  transactions: number;
  /** Each statement sent, in order: `get_receipt`, `BEGIN`, ... */
  readonly statements: string[];
}

/** A statement's short name: the store's prepared-statement name after `arkah_<tag>_`, else its first word. */
function label(query: unknown): string {
  if (typeof query === "string") return query.trim().split(/\s+/, 1)[0]?.toUpperCase() ?? "";
  if (typeof query === "object" && query !== null) {
    const { name, text } = query as { name?: unknown; text?: unknown };
    if (typeof name === "string") return name.replace(/^arkah_[0-9a-f]{12}_/, "");
    if (typeof text === "string") return label(text);
  }
  return "?";
}

/** What `countingPool` returns. */
export interface CountingPool {
  readonly pool: pg.Pool;
  readonly tally: SqlTally;
  /** Zeroes the tally. */
  readonly reset: () => void;
  /** Runs `fn` once, just before the next statement named `statement` is sent (then sends it): a change another worker makes in between. */
  readonly before: (statement: string, fn: () => Promise<unknown>) => void;
}

/** A pool on `url` counting what its connections send into `tally` (see {@link SqlTally}). */
export function countingPool(url: string): CountingPool {
  const tally: SqlTally = { roundTrips: 0, commits: 0, transactions: 0, statements: [] };
  const hooks = new Map<string, () => Promise<unknown>>();
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  pool.on("error", () => undefined);
  pool.on("connect", (client) => {
    let inTransaction = false;
    const target = client as unknown as { query: (...args: unknown[]) => unknown };
    const send = target.query.bind(client);
    target.query = (...args: unknown[]) => {
      const statement = label(args[0]);
      tally.roundTrips += 1;
      tally.statements.push(statement);
      if (statement === "BEGIN") {
        inTransaction = true;
        tally.transactions += 1;
      } else if (statement === "COMMIT") {
        inTransaction = false;
        tally.commits += 1;
      } else if (statement === "ROLLBACK") {
        inTransaction = false;
      } else if (!inTransaction) {
        // Its own implicit transaction (one that fails rolls back; the counted turns fail none).
        tally.commits += 1;
      }
      const hook = hooks.get(statement);
      if (hook === undefined) return send(...args);
      hooks.delete(statement);
      return hook().then(() => send(...args));
    };
  });
  const reset = () => {
    tally.roundTrips = 0;
    tally.commits = 0;
    tally.transactions = 0;
    tally.statements.length = 0;
  };
  return { pool, tally, reset, before: (statement, fn) => hooks.set(statement, fn) };
}
