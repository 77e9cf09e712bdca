/**
 * Another process holding a SQLite file's write lock, for test/processes/sqlite-locked.test.ts.
 *
 *   node --import tsx sqlite-locker.ts <db path>
 *
 * Messages: parent -> locker `{ type: "lock" }` (BEGIN EXCLUSIVE; with `releaseAfterMs`, ROLLBACK
 * on its own that much later, for a parent whose thread is blocked waiting on the lock),
 * `{ type: "unlock" }` (ROLLBACK) or `{ type: "exit" }`; locker -> parent `{ type: "ready" }`,
 * `{ type: "locked" }`, `{ type: "unlocked" }`.
 */
import Database from "better-sqlite3";

export interface LockerCommand {
  readonly type: "lock" | "unlock" | "exit";
  readonly releaseAfterMs?: number;
}
export interface LockerReport {
  readonly type: "ready" | "locked" | "unlocked";
}

const [dbPath] = process.argv.slice(2);
if (dbPath === undefined) throw new Error("usage: sqlite-locker.ts <db path>");

const db = new Database(dbPath);
const send = (report: LockerReport) => {
  process.send?.(report);
};

process.on("message", (command: LockerCommand) => {
  switch (command.type) {
    case "lock":
      db.exec("BEGIN EXCLUSIVE");
      send({ type: "locked" });
      if (command.releaseAfterMs !== undefined) {
        setTimeout(() => {
          db.exec("ROLLBACK");
          send({ type: "unlocked" });
        }, command.releaseAfterMs);
      }
      return;
    case "unlock":
      db.exec("ROLLBACK");
      send({ type: "unlocked" });
      return;
    case "exit":
      db.close();
      process.disconnect();
      return;
  }
});

send({ type: "ready" });
