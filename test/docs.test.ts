/**
 * The README's and docs' examples run as written (the quickstart in docs/getting-started.md is
 * examples/quickstart.ts, verbatim; the approval resume is examples/approval-resume.ts), and their
 * links work from the packed tarball.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, posix } from "node:path";
import { fileURLToPath } from "node:url";
import { HumanMessage } from "@langchain/core/messages";
import { Command, MemorySaver } from "@langchain/langgraph";
import { afterEach, describe, expect, it, vi } from "vitest";
import { AdmissionError, InMemoryGuardrailStore, requireApproval, turnContext, type ApprovalRequest } from "arkah-agent-guardrails";
import { admit, guardedAgent, read, rename, turnInput, userText } from "./support/fixtures.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");
/** Files the prepack script generates into the tarball: TypeDoc's index of the API reference. */
const GENERATED = ["docs/api/README.md"];
const guide = readFileSync(new URL("../docs/guardrails.md", import.meta.url), "utf8");
const gettingStarted = readFileSync(new URL("../docs/getting-started.md", import.meta.url), "utf8");
const composing = readFileSync(new URL("../docs/composing.md", import.meta.url), "utf8");
const toolsGuide = readFileSync(new URL("../docs/tools.md", import.meta.url), "utf8");

describe("docs/getting-started.md and the README's quick start", () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it("embeds examples/quickstart.ts verbatim", () => {
    const block = /<!-- quickstart:start -->\n```ts\n([\s\S]*?)```\n<!-- quickstart:end -->/.exec(gettingStarted)?.[1];
    expect(block).toBe(readFileSync(new URL("../examples/quickstart.ts", import.meta.url), "utf8"));
  });

  it("runs the quickstart and edits the note once", async () => {
    const lines: unknown[][] = [];
    vi.spyOn(console, "log").mockImplementation((...args: unknown[]) => {
      lines.push(args);
    });
    await import("../examples/quickstart.js");
    expect(lines).toEqual([["Done: the note now says “Buy oat milk”."], [{ body: "Buy oat milk", revision: 4 }]]);
  });

  // Issue 41: a team reads the README in ten minutes; everything else lives in docs/, reached from its map.
  it("is at most 250 lines and its map links every document in docs/", () => {
    expect(readme.split("\n").length).toBeLessThanOrEqual(250);
    const documents = readdirSync(new URL("../docs", import.meta.url)).filter((name) => name.endsWith(".md"));
    expect(documents.length).toBeGreaterThan(10);
    expect(documents.filter((name) => !readme.includes(`](docs/${name}`))).toEqual([]);
  });

  it("shows the demo's exact trace", () => {
    const demo = readFileSync(new URL("../examples/document-agent.ts", import.meta.url), "utf8");
    const expected = /const expected = \[([\s\S]*?)\];/.exec(demo)?.[1];
    expect(expected).toBeDefined();
    const lines = [...(expected ?? "").matchAll(/^\s*(?:'(.*)'|"(.*)"),$/gm)].map((match) => match[1] ?? match[2] ?? "");
    expect(lines.length).toBe(13);
    expect(readme).toContain(["```", ...lines, "```"].join("\n"));
  });
});

describe("docs/composing.md: your own graph (guardTools)", () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it("embeds examples/custom-graph.ts verbatim", () => {
    const block = /<!-- custom-graph:start -->\n```ts\n([\s\S]*?)```\n<!-- custom-graph:end -->/.exec(composing)?.[1];
    expect(block).toBe(readFileSync(new URL("../examples/custom-graph.ts", import.meta.url), "utf8"));
  });

  it("runs the example: a hand-built graph reads, then edits the note once", async () => {
    const lines: unknown[][] = [];
    vi.spyOn(console, "log").mockImplementation((...args: unknown[]) => {
      lines.push(args);
    });
    await import("../examples/custom-graph.js");
    expect(lines).toEqual([["Done.", { body: "Buy oat milk", revision: 4 }]]);
  });
});

describe("docs/tools.md: a side-effect tool", () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it("embeds examples/side-effects.ts verbatim", () => {
    const block = /<!-- side-effects:start -->\n```ts\n([\s\S]*?)```\n<!-- side-effects:end -->/.exec(toolsGuide)?.[1];
    expect(block).toBe(readFileSync(new URL("../examples/side-effects.ts", import.meta.url), "utf8"));
  });

  it("runs the example: the model asks for the same email twice, it is sent once", async () => {
    const lines: unknown[][] = [];
    vi.spyOn(console, "log").mockImplementation((...args: unknown[]) => {
      lines.push(args);
    });
    await import("../examples/side-effects.js");
    expect(lines).toEqual([["Done.", ["ana@example.com: Ticket 42 is fixed"]]]);
  });
});

describe("docs/guardrails.md: resuming an approval with a shared middleware", () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it("embeds examples/approval-resume.ts verbatim", () => {
    const block = /<!-- approval-resume:start -->\n```ts\n([\s\S]*?)```\n<!-- approval-resume:end -->/.exec(guide)?.[1];
    expect(block).toBe(readFileSync(new URL("../examples/approval-resume.ts", import.meta.url), "utf8"));
  });

  it("runs the snippet: paused for approval, resumed with the turn in context, written once", async () => {
    const lines: unknown[][] = [];
    vi.spyOn(console, "log").mockImplementation((...args: unknown[]) => {
      lines.push(args);
    });
    await import("../examples/approval-resume.js");
    expect(lines).toEqual([
      ['waiting for approval: edit_note {"noteId":"note-7","body":"Buy oat milk"}'],
      ["Done.", "Buy oat milk"],
    ]);
  });

  it("a resume without the turn in context fails before anything runs, and one with it writes once", async () => {
    const store = new InMemoryGuardrailStore();
    const input = turnInput();
    const { agent, service } = guardedAgent({
      store,
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "Renamed." }],
      // Shared: no `input`, so the turn comes from each invocation's context.
      guardrails: { input: undefined, guardrails: [requireApproval({ tools: ["rename_document"] })] },
      checkpointer: new MemorySaver(),
    });
    await admit(store, input);
    const thread = { configurable: { thread_id: "resume-context" } };
    const paused = await agent.invoke({ messages: [new HumanMessage(userText(input))] }, { ...thread, context: turnContext(input) });
    const request = paused.__interrupt__?.[0]?.value as ApprovalRequest;
    expect(request.tool).toBe("rename_document");

    const resume = new Command({ resume: { decision: "approve", approvalId: request.approvalId } });
    const error: unknown = await agent.invoke(resume, thread).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(AdmissionError.find(error)?.code).toBe("invalid_input");
    expect(AdmissionError.find(error)?.message).toContain("no turn in context");
    expect(service.writes).toBe(0);
    expect((await store.getApproval(request.approvalId))?.status).toBe("pending");

    await agent.invoke(resume, { ...thread, context: turnContext(input) });
    expect(service.writes).toBe(1);
    expect(service.title).toBe("Field notes");
  });
});

describe("docs/deploying.md: admission inside LangGraph Server", () => {
  it("embeds examples/langgraph-server/auth.ts verbatim", () => {
    const deploying = readFileSync(new URL("../docs/deploying.md", import.meta.url), "utf8");
    const block = /<!-- server-admission:start -->\n```ts\n([\s\S]*?)```\n<!-- server-admission:end -->/.exec(deploying)?.[1];
    expect(block).toBe(readFileSync(new URL("../examples/langgraph-server/auth.ts", import.meta.url), "utf8"));
  });
});

/**
 * The README and docs reach npm users: every relative link (and its #anchor) in a shipped markdown
 * file must resolve inside the packed tarball, since that is all an npm user has; anything else
 * must be an absolute URL.
 */
describe("links in the packed tarball", () => {
  // Packed without running prepack (no build here): what the prepack generates is listed in
  // GENERATED, and scripts/smoke.sh checks that a real pack ships it.
  const packed = [...packedFiles().filter((path) => !path.startsWith("docs/api/")), ...GENERATED];
  const markdown = packed.filter((path) => path.endsWith(".md") && !GENERATED.includes(path));

  it("ships the README, the docs and the examples they link to", () => {
    expect(markdown).toEqual(expect.arrayContaining(["README.md", "docs/guardrails.md", "SECURITY.md"]));
    expect(packed).toContain("examples/quickstart.ts");
  });

  it("prepack builds dist/ and the API reference, and both ship", () => {
    const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { files: string[]; scripts: Record<string, string> };
    expect(pkg.scripts.prepack).toBe("pnpm build && pnpm docs:api");
    expect(pkg.files).toEqual(expect.arrayContaining(["dist", "docs/api"]));
    expect(readme).toContain("](docs/api/README.md)");
  });

  it("every relative link in a shipped markdown file resolves to a packed file and heading", () => {
    const broken: string[] = [];
    let checked = 0;
    for (const file of markdown) {
      for (const target of markdownLinks(readFileSync(join(root, file), "utf8"))) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // absolute: https:, mailto:
        checked += 1;
        const [path = "", anchor] = target.split("#", 2);
        const resolved = path === "" ? file : posix.normalize(posix.join(posix.dirname(file), decodeURIComponent(path)));
        if (!packed.includes(resolved)) {
          broken.push(`${file}: ${target} (${resolved} is not in the tarball)`);
        } else if (anchor !== undefined && resolved.endsWith(".md") && !headingSlugs(readFileSync(join(root, resolved), "utf8")).has(anchor)) {
          broken.push(`${file}: ${target} (no heading #${anchor} in ${resolved})`);
        }
      }
    }
    expect(broken).toEqual([]);
    expect(checked).toBeGreaterThan(20);
  });

  // The sources and tests are not in the package: a reader of the docs must be able to do without
  // them, so the docs never send one there, not even to the repository on GitHub.
  it("no shipped markdown file links into src/ or test/", () => {
    const offending: string[] = [];
    const repository = /^https:\/\/github\.com\/arkah-io\/arkah-agent-guardrails\/(?:blob|tree)\/[^/]+\/(src|test)(?:\/|$)/;
    for (const file of markdown) {
      for (const target of markdownLinks(readFileSync(join(root, file), "utf8"))) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) {
          if (repository.test(target)) offending.push(`${file}: ${target}`);
          continue;
        }
        const [path = ""] = target.split("#", 1);
        const resolved = path === "" ? file : posix.normalize(posix.join(posix.dirname(file), decodeURIComponent(path)));
        if (/^(src|test)(\/|$)/.test(resolved)) offending.push(`${file}: ${target}`);
      }
    }
    expect(offending).toEqual([]);
    expect(markdown).toEqual(expect.arrayContaining(["docs/storage-adapters.md", "examples/file-store/README.md"]));
  });

  it("package.json points npm users at the repository, its homepage and its issues", () => {
    const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
      repository?: { url?: string };
      homepage?: string;
      bugs?: { url?: string };
    };
    expect(pkg.repository?.url).toBe("git+https://github.com/arkah-io/arkah-agent-guardrails.git");
    expect(pkg.homepage).toBe("https://github.com/arkah-io/arkah-agent-guardrails#readme");
    expect(pkg.bugs?.url).toBe("https://github.com/arkah-io/arkah-agent-guardrails/issues");
  });
});

/** The files `pnpm pack` puts in the tarball (as the smoke test and a publish do), prepack skipped. */
function packedFiles(): string[] {
  const destination = mkdtempSync(join(tmpdir(), "arkah-docs-pack-"));
  try {
    const output = execFileSync("pnpm", ["--config.ignore-scripts=true", "pack", "--json", "--pack-destination", destination], {
      cwd: root,
      encoding: "utf8",
    });
    const report = JSON.parse(output) as { files: { path: string }[] };
    return report.files.map((entry) => entry.path);
  } finally {
    rmSync(destination, { recursive: true, force: true });
  }
}

/** Inline link targets outside code: `[text](target)` and `[text](<target>)`. */
function markdownLinks(text: string): string[] {
  const prose = withoutCode(text);
  return [...prose.matchAll(/\]\(<?([^)\s>]+)>?(?:\s+"[^"]*")?\)/g)].map((match) => match[1] ?? "");
}

/** The anchors GitHub (and npm) give a file's headings. */
function headingSlugs(text: string): Set<string> {
  const slugs = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of withoutFences(text).split("\n")) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const base = heading
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/\s/g, "-");
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    slugs.add(count === 0 ? base : `${base}-${String(count)}`);
  }
  return slugs;
}

function withoutFences(text: string): string {
  return text.replace(/^```[\s\S]*?^```/gm, "");
}

function withoutCode(text: string): string {
  return withoutFences(text).replace(/`[^`\n]*`/g, "");
}
