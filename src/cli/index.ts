#!/usr/bin/env node
/**
 * The `arkah-guardrails` bin: wires `main` to the process (argv, stdout, stderr, exit code).
 * Everything else is in main.ts, where tests run it in-process.
 */
import { main } from "./main.js";

/** Writes `text`, and waits for the stream to drain when its buffer is full (large audit exports). */
function writer(stream: NodeJS.WriteStream): (text: string) => Promise<void> {
  return (text) =>
    new Promise<void>((resolve) => {
      if (stream.write(text)) resolve();
      else stream.once("drain", resolve);
    });
}

// A closed pipe (`... audit | head`) ends the export quietly.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code === "EPIPE") process.exit(process.exitCode ?? 0);
  throw error;
});

void main(process.argv.slice(2), { out: writer(process.stdout), err: writer(process.stderr), env: process.env }).then(
  (code) => {
    process.exitCode = code;
  },
);
