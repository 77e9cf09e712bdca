/**
 * `pnpm postgres` (scripts/postgres/serve.ts) stops its server and removes its data when it is told
 * to stop: by SIGTERM or SIGINT to pnpm (which signals only the shell running the script: the script
 * `exec`s tsx, which relays the signal) or to the server's own process. Before, a SIGTERM to pnpm
 * left the server running, and one to the server's process left its data folder behind.
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../..", import.meta.url));

describe("pnpm postgres", () => {
  it.each([
    { target: "pnpm", command: "pnpm", args: ["postgres"], signal: "SIGTERM" },
    { target: "pnpm", command: "pnpm", args: ["postgres"], signal: "SIGINT" },
    { target: "the server's process", command: process.execPath, args: ["--import", "tsx", "scripts/postgres/serve.ts"], signal: "SIGTERM" },
  ] as const)("stops the server and removes its data on $signal to $target", async ({ command, args, signal }) => {
    // Its own process group, so a failed test can end everything it started.
    const child = spawn(command, args, { cwd: root, stdio: ["ignore", "pipe", "pipe"], detached: true });
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    let stdout = "";
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    try {
      const ready = await new Promise<{ url: string; dir: string }>((resolve, reject) => {
        child.stdout.on("data", (chunk: Buffer) => {
          stdout += chunk.toString();
          const url = /^ARKAH_PG_URL=(.+)$/m.exec(stdout)?.[1];
          const dir = /^data: (.+)$/m.exec(stdout)?.[1];
          if (url !== undefined && dir !== undefined) resolve({ url, dir });
        });
        void exited.then(() => reject(new Error(`pnpm postgres exited before it was ready:\n${stdout}\n${stderr}`)));
      });
      expect(existsSync(ready.dir)).toBe(true);

      child.kill(signal);
      await exited;

      expect(existsSync(ready.dir)).toBe(false);
      const client = new pg.Client({ connectionString: ready.url });
      await expect(client.connect()).rejects.toMatchObject({ code: "ECONNREFUSED" });
    } finally {
      // Whatever a failure left of the group (pnpm may exit and leave the rest running).
      try {
        if (child.pid !== undefined) process.kill(-child.pid, "SIGTERM");
      } catch {
        // ESRCH: nothing left.
      }
    }
  }, 60_000);
});
