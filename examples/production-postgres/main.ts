/**
 * PostgreSQL in production, end to end, on a throwaway server: the roles a DBA creates once, the
 * migration step as the schemas' owner (setup.ts), a worker as the runtime role (app.ts) serving a
 * turn and its retry, the operator CLI as the same runtime role, and the runtime role refused DDL.
 *
 *   pnpm postgres                                  # another terminal: prints ARKAH_PG_URL=...
 *   ARKAH_PG_URL=postgres://... pnpm example:postgres
 *
 * ARKAH_PG_URL must be a superuser's (it creates two roles): never point this at a real database.
 * Prints a trace and exits non-zero if anything differs from what is expected.
 */
import { randomBytes } from "node:crypto";
import { pathToFileURL } from "node:url";
import pg from "pg";
import { arkahGuardrails } from "../support/operator-cli.js";
import { handleTurn, noteTurn, runtimePool, startWorker } from "./app.js";
import { SCHEMAS, setupDatabase, type Schemas } from "./setup.js";

export interface DemoNames {
  readonly ownerRole: string;
  readonly runtimeRole: string;
  readonly schemas: Schemas;
}

/** `url` with another user and password. */
export function urlAs(url: string, user: string, password: string): string {
  const copy = new URL(url);
  copy.username = encodeURIComponent(user);
  copy.password = encodeURIComponent(password);
  return copy.href;
}

/**
 * What a DBA does once: an owner role that may create schemas in the database, and a runtime role
 * that may only log in. Returns their passwords (fresh each run).
 */
export async function createRoles(admin: pg.Pool, names: DemoNames): Promise<{ owner: string; runtime: string }> {
  const passwords = { owner: randomBytes(12).toString("hex"), runtime: randomBytes(12).toString("hex") };
  const database = (await admin.query<{ db: string }>("SELECT current_database() AS db")).rows[0]?.db ?? "";
  for (const [role, password] of [
    [names.ownerRole, passwords.owner],
    [names.runtimeRole, passwords.runtime],
  ] as const) {
    const exists = (await admin.query("SELECT 1 FROM pg_roles WHERE rolname = $1", [role])).rowCount === 1;
    // Role statements take no parameters: the password is a literal, escaped by the driver.
    await admin.query(`${exists ? "ALTER" : "CREATE"} ROLE ${pg.escapeIdentifier(role)} LOGIN PASSWORD ${pg.escapeLiteral(password)}`);
  }
  await admin.query(`GRANT CREATE ON DATABASE ${pg.escapeIdentifier(database)} TO ${pg.escapeIdentifier(names.ownerRole)}`);
  return passwords;
}

/** Runs the operator CLI with these arguments: another OS process. */
export type CliRunner = (args: readonly string[]) => { code: number | null; stdout: string; stderr: string };

/** The whole walk-through. Returns the trace lines and what differed from what was expected. */
export async function runDemo(
  adminUrl: string,
  names: DemoNames,
  cli: CliRunner = arkahGuardrails,
): Promise<{ trace: string[]; failures: string[] }> {
  const trace: string[] = [];
  const failures: string[] = [];
  const say = (line: string) => {
    trace.push(line);
    console.log(line);
  };
  const check = (what: string, ok: boolean) => {
    if (!ok) failures.push(what);
  };
  const { guardrails: g, checkpoints: c } = names.schemas;

  const admin = new pg.Pool({ connectionString: adminUrl, max: 1 });
  admin.on("error", () => undefined);
  try {
    const passwords = await createRoles(admin, names);
    say(`1. roles: ${names.ownerRole} (may create schemas), ${names.runtimeRole} (may log in)`);

    const ownerPool = new pg.Pool({ connectionString: urlAs(adminUrl, names.ownerRole, passwords.owner), max: 1 });
    ownerPool.on("error", () => undefined);
    try {
      await setupDatabase(ownerPool, names.runtimeRole, names.schemas);
    } finally {
      await ownerPool.end();
    }
    say(`2. setup as ${names.ownerRole}: migrated ${g} and ${c}, granted ${names.runtimeRole} DML on them`);

    const runtimeUrl = urlAs(adminUrl, names.runtimeRole, passwords.runtime);
    const pool = runtimePool(runtimeUrl);
    try {
      const worker = await startWorker(pool, names.schemas);
      const turn = noteTurn(`req-${randomBytes(4).toString("hex")}`, "Buy oat milk");
      say(`3. worker as ${names.runtimeRole}: ${await handleTurn(worker, turn)} (writes: ${String(worker.notes.writes)})`);
      check("the turn wrote once", worker.notes.writes === 1);
      await handleTurn(worker, turn);
      say(`4. the same turn retried: writes still ${String(worker.notes.writes)} (the claim replayed its result)`);
      check("the retry wrote nothing", worker.notes.writes === 1);

      const checkpoints = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${pg.escapeIdentifier(c)}.checkpoints WHERE thread_id = $1`, [
        `turn-${turn.turnId}`,
      ]);
      say(`5. the turn's thread has ${checkpoints.rows[0]?.n === 0 ? "no" : "its"} checkpoints in ${c}`);
      check("the checkpoints are in their schema", (checkpoints.rows[0]?.n ?? 0) > 0);

      const inspect = cli(["--postgres", runtimeUrl, "--schema", g, "inspect"]);
      say(`6. arkah-guardrails inspect as ${names.runtimeRole}: ${inspect.stdout.trim().split("\n")[0] ?? ""}`);
      check(`the CLI runs as the runtime role (${inspect.stderr.trim()})`, inspect.code === 0);

      const ddl: unknown = await pool.query(`CREATE TABLE ${pg.escapeIdentifier(g)}.mine (id int)`).catch((error: unknown) => error);
      const code = (ddl as { code?: unknown } | undefined)?.code;
      say(`7. CREATE TABLE as ${names.runtimeRole}: ${code === "42501" ? "refused, insufficient privilege" : "not refused"}`);
      check("the runtime role cannot run DDL", code === "42501");
    } finally {
      await pool.end();
    }
  } finally {
    await admin.end();
  }
  return { trace, failures };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const adminUrl = process.env.ARKAH_PG_URL;
  if (adminUrl === undefined || adminUrl === "") {
    console.error("set ARKAH_PG_URL to a throwaway server's superuser URL: `pnpm postgres` starts one and prints it");
    process.exit(2);
  }
  const { failures } = await runDemo(adminUrl, { ownerRole: "notes_owner", runtimeRole: "notes_runtime", schemas: SCHEMAS });
  if (failures.length > 0) {
    console.error(`\nFAILED: ${failures.join("; ")}`);
    process.exit(1);
  }
}
