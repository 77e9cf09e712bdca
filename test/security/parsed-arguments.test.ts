/**
 * Attack class 2: the tool runs with arguments nothing checked. Every decision (authorize, the
 * guardrails, the digest, the claim, the audit) is made on the arguments as the tool's own schema
 * parses them, and the body receives exactly those: a `.trim()`, a default or a transform cannot
 * turn an allowed call into a different one.
 */
import { tool } from "langchain";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { digest, type Guardrail } from "arkah-agent-guardrails";
import { outcomeOf } from "../support/fixtures.js";
import { NotesService, secureAgent } from "./support.js";

/** Denies any path under /etc, looking at the arguments it is given. */
const noEtc: Guardrail = {
  name: "no-etc",
  placements: ["tool-args"],
  check: ({ toolCall }) =>
    typeof toolCall.args.path === "string" && toolCall.args.path.startsWith("/etc")
      ? { action: "deny", outcome: "complete", detections: [{ rule: "etc", detected: true }], code: "forbidden_path" }
      : { action: "allow", outcome: "complete", detections: [] },
};

function fileTools() {
  const opened: string[] = [];
  const readFile = tool(
    ({ path }) => {
      opened.push(path);
      return `contents of ${path}`;
    },
    { name: "read_file", description: "Read a file.", schema: z.object({ path: z.string().trim() }) },
  );
  return { opened, readFile };
}

describe("decisions are made on the arguments the tool body receives", () => {
  it("whitespace around /etc/passwd: the deny rule sees the trimmed path and refuses; the file is never opened", async () => {
    const files = fileTools();
    const { run } = secureAgent({
      tools: [files.readFile],
      policies: { read_file: { kind: "source-read" } },
      guardrails: { guardrails: [noEtc] },
      script: [{ toolCalls: [{ id: "f1", name: "read_file", args: { path: "  /etc/passwd" } }] }, { content: "done" }],
    });
    const messages = await run();
    expect(outcomeOf(messages, "f1").code).toBe("forbidden_path");
    expect(files.opened).toEqual([]);
  });

  it("authorize is asked about the parsed arguments, and the body gets exactly the ones it allowed", async () => {
    const files = fileTools();
    const asked: unknown[] = [];
    const { run } = secureAgent({
      tools: [files.readFile],
      policies: { read_file: { kind: "source-read" } },
      guardrails: {
        authorize: (call) => {
          asked.push(call.args);
          return (call.args as { path: string }).path === "/srv/notes.txt";
        },
      },
      script: [{ toolCalls: [{ id: "f1", name: "read_file", args: { path: " /srv/notes.txt\n" } }] }, { content: "done" }],
    });
    const messages = await run();
    expect(asked).toEqual([{ path: "/srv/notes.txt" }]);
    expect(outcomeOf(messages, "f1").status).toBe("success");
    expect(files.opened).toEqual(["/srv/notes.txt"]);
  });

  it("a transform runs once: the body does not get the schema applied a second time", async () => {
    const received: unknown[] = [];
    const shout = tool(
      (args) => {
        received.push(args);
        return "ok";
      },
      {
        name: "shout",
        description: "Shout.",
        schema: z.object({ word: z.string().transform((word) => `${word}!`), times: z.number().default(1) }),
      },
    );
    const seen: unknown[] = [];
    const inspector: Guardrail = {
      name: "inspector",
      placements: ["tool-args"],
      check: ({ toolCall }) => {
        seen.push({ args: toolCall.args, rawArgs: toolCall.rawArgs });
        return { action: "allow", outcome: "complete", detections: [] };
      },
    };
    const { run } = secureAgent({
      tools: [shout],
      policies: { shout: { kind: "auxiliary" } },
      guardrails: { guardrails: [inspector] },
      script: [{ toolCalls: [{ id: "s1", name: "shout", args: { word: "hey" } }] }, { content: "done" }],
    });
    await run();
    expect(received).toEqual([{ word: "hey!", times: 1 }]);
    expect(seen).toEqual([{ args: { word: "hey!", times: 1 }, rawArgs: { word: "hey" } }]);
  });

  it("the claim and the audit carry the parsed arguments' digest, the one the write service computes from what it receives", async () => {
    const service = new NotesService();
    const { run, store } = secureAgent({
      service,
      script: [
        { toolCalls: [{ id: "r1", name: "read_note", args: { noteId: "note-7" } }] },
        // An unknown key the schema strips: the claim is for what runs.
        { toolCalls: [{ id: "w1", name: "edit_note", args: { noteId: "note-7", body: "Buy oat milk", extra: "x" } }] },
        { content: "done" },
      ],
    });
    await run();
    expect(service.writes).toEqual([{ noteId: "note-7", body: "Buy oat milk" }]);
    const executed = (await store.readAudit()).find((event) => event.decision === "executed" && event.toolCallId === "w1");
    expect(executed?.argsDigest).toBe(digest({ noteId: "note-7", body: "Buy oat milk" }));
  });
});
