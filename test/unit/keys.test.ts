import { createHash } from "node:crypto";
import { DynamicStructuredTool, StructuredTool } from "@langchain/core/tools";
import { tool } from "langchain";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  digest,
  DigestError,
  effectKey,
  mutationKey,
  turnKey,
  type Segment,
  type ToolCallRef,
  type TurnRef,
} from "arkah-agent-guardrails";
import {
  IdentityFieldError,
  moderationDigest,
  MutationIdentitySchema,
  toolFingerprint,
} from "arkah-agent-guardrails/store";
import { sha256Hex } from "../../src/digest.js";
import { parseDefinition } from "../../src/execution/parse-definition.js";
import { declaredSchema } from "../../src/guardrails/schema.js";
import { discriminatorDigest, effectIdentity, identifyTool, mutationIdentity, readEvidenceDigest } from "../../src/keys.js";
import { MAX_DISCRIMINATOR_CHARS } from "../../src/contracts/policy.js";

const HEX64 = /^[0-9a-f]{64}$/;
const sha256 = (text: string) => createHash("sha256").update(text, "utf8").digest("hex");

const turn: TurnRef = { scopeId: "doc-1", turnId: "turn-1" };
const call: ToolCallRef = { id: "w1", name: "rename_document", args: { title: "Field notes", expectedRevision: 0 } };
const segments: Segment[] = [{ label: "user", content: "Please rename this document to Field notes." }];

/**
 * Fixed vectors, computed once from the inputs above. They pin the cross-language contract: if one
 * changes, every stored turn key, claim and receipt becomes unreachable and other services disagree.
 */
const VECTORS = {
  turnKey: "45b1406f23b44df374b7402cb5f90a9fea39e51767e43faeecf62c14a6a01146",
  mutationKey: "6b0897269955f906b7e88a2c543ddc32d36ce3cf4c81f80fe1f7b2ecc9d1f3db",
  moderationDigest: "c79fe5a48e6027d2980fcb1a28baae23384156a49e638cadbc20e188917e7dd9",
};

describe("turnKey", () => {
  it("is a lowercase hex SHA-256", () => {
    expect(turnKey(turn)).toMatch(HEX64);
  });

  it("depends on scopeId and turnId", () => {
    expect(turnKey({ scopeId: "doc-2", turnId: "turn-1" })).not.toBe(turnKey(turn));
    expect(turnKey({ scopeId: "doc-1", turnId: "turn-2" })).not.toBe(turnKey(turn));
    // Swapping the two values is a different turn.
    expect(turnKey({ scopeId: "turn-1", turnId: "doc-1" })).not.toBe(turnKey(turn));
  });

  it("does not depend on the policy version or the segments", () => {
    const a = { ...turn, policyVersion: "v1", segments: [{ label: "user", content: "a" }] };
    const b = { ...turn, policyVersion: "v2", segments: [{ label: "other", content: "b" }] };
    expect(turnKey(a)).toBe(turnKey(turn));
    expect(turnKey(b)).toBe(turnKey(turn));
  });

  it("is not confused by separators inside ids", () => {
    expect(turnKey({ scopeId: "a/b", turnId: "c" })).not.toBe(turnKey({ scopeId: "a", turnId: "b/c" }));
    expect(turnKey({ scopeId: "a", turnId: "bc" })).not.toBe(turnKey({ scopeId: "ab", turnId: "c" }));
  });

  it("follows the documented formula", () => {
    expect(turnKey(turn)).toBe(digest({ kind: "arkah.turn", v: 1, scopeId: "doc-1", turnId: "turn-1" }));
    expect(turnKey(turn)).toBe(sha256('{"kind":"arkah.turn","scopeId":"doc-1","turnId":"turn-1","v":1}'));
  });

  it("matches the fixed vector", () => {
    expect(turnKey(turn)).toBe(VECTORS.turnKey);
  });
});

describe("moderationDigest", () => {
  const base = moderationDigest({ segments });

  it("is a lowercase hex SHA-256 and deterministic", () => {
    expect(base).toMatch(HEX64);
    expect(moderationDigest({ segments: segments.map((s) => ({ ...s })) })).toBe(base);
  });

  it("changes with whitespace", () => {
    const content = segments[0]!.content;
    for (const variant of [` ${content}`, `${content} `, `${content}\n`, content.replace(" ", "  "), content.replace(" ", "\t")]) {
      expect(moderationDigest({ segments: [{ label: "user", content: variant }] })).not.toBe(base);
    }
  });

  it("changes with empty segments", () => {
    const withEmpty = moderationDigest({ segments: [...segments, { label: "note", content: "" }] });
    expect(withEmpty).not.toBe(base);
    expect(moderationDigest({ segments: [...segments, { label: "other", content: "" }] })).not.toBe(withEmpty);
  });

  it("changes with order", () => {
    const a = { label: "user", content: "A" };
    const b = { label: "quote", content: "B" };
    expect(moderationDigest({ segments: [a, b] })).not.toBe(moderationDigest({ segments: [b, a] }));
  });

  it("changes with labels", () => {
    expect(moderationDigest({ segments: [{ label: "quote", content: segments[0]!.content }] })).not.toBe(base);
  });

  it("does not let content move between segments unnoticed", () => {
    expect(
      moderationDigest({
        segments: [
          { label: "a", content: "xy" },
          { label: "b", content: "" },
        ],
      }),
    ).not.toBe(
      moderationDigest({
        segments: [
          { label: "a", content: "x" },
          { label: "b", content: "y" },
        ],
      }),
    );
  });

  it("ignores fields other than label and content", () => {
    const extra = [{ ...segments[0]!, trusted: true } as Segment];
    expect(moderationDigest({ segments: extra })).toBe(base);
  });

  it("follows the documented formula", () => {
    expect(base).toBe(digest({ kind: "arkah.segments", v: 1, segments: [{ label: "user", content: segments[0]!.content }] }));
    expect(base).toBe(
      sha256(
        '{"kind":"arkah.segments","segments":[{"content":"Please rename this document to Field notes.","label":"user"}],"v":1}',
      ),
    );
  });

  it("matches the fixed vector", () => {
    expect(base).toBe(VECTORS.moderationDigest);
  });
});

describe("effectKey", () => {
  const mail = { name: "send_email", args: { to: "ana@example.com", subject: "Fixed" } };
  const base = { kind: "arkah.effect", v: 1, turnKey: turnKey(turn), toolName: mail.name, argsDigest: digest(mail.args) };

  it("follows the documented formula: without a discriminator (or with null) no discriminatorDigest", () => {
    expect(effectKey(turn, mail)).toBe(digest(base));
    expect(effectKey(turn, { ...mail, discriminator: null })).toBe(digest(base));
  });

  it("with a discriminator's answer, its digest joins the object, and the middleware's identity agrees", () => {
    const key = effectKey(turn, { ...mail, discriminator: { call: "e1" } });
    expect(key).toBe(digest({ ...base, discriminatorDigest: digest({ call: "e1" }) }));
    expect(key).not.toBe(effectKey(turn, { ...mail, discriminator: { call: "e2" } }));
    const identity = effectIdentity(
      { scopeId: turn.scopeId, turnKey: turnKey(turn) },
      { id: "e1", name: mail.name, argsDigest: digest(mail.args), toolFingerprint: "0".repeat(64), discriminatorDigest: discriminatorDigest({ call: "e1" }) },
    );
    expect(identity.effectKey).toBe(key);
  });

  it("discriminatorDigest takes plain JSON within MAX_DISCRIMINATOR_CHARS of canonical JSON, and nothing else", () => {
    expect(discriminatorDigest(null)).toBeUndefined();
    expect(discriminatorDigest("x".repeat(MAX_DISCRIMINATOR_CHARS - 2))).toBe(digest("x".repeat(MAX_DISCRIMINATOR_CHARS - 2)));
    expect(() => discriminatorDigest("x".repeat(MAX_DISCRIMINATOR_CHARS - 1))).toThrow(RangeError);
    for (const value of [undefined, Number.NaN, () => 1, Promise.resolve(1), new Date(0)]) expect(() => discriminatorDigest(value)).toThrow(DigestError);
  });
});

describe("mutationKey", () => {
  const base = mutationKey(turn, call);

  it("is a lowercase hex SHA-256 and deterministic", () => {
    expect(base).toMatch(HEX64);
    expect(mutationKey({ ...turn }, { ...call, args: { title: "Field notes", expectedRevision: 0 } })).toBe(base);
  });

  it("changes with the turn", () => {
    expect(mutationKey({ ...turn, turnId: "turn-2" }, call)).not.toBe(base);
    expect(mutationKey({ ...turn, scopeId: "doc-2" }, call)).not.toBe(base);
  });

  it("changes with the tool name", () => {
    expect(mutationKey(turn, { ...call, name: "retitle_document" })).not.toBe(base);
  });

  it("changes with the arguments", () => {
    expect(mutationKey(turn, { ...call, args: { title: "Field notes", expectedRevision: 1 } })).not.toBe(base);
    expect(mutationKey(turn, { ...call, args: { title: "Field notes ", expectedRevision: 0 } })).not.toBe(base);
    expect(mutationKey(turn, { ...call, args: { title: "Field notes" } })).not.toBe(base);
    expect(mutationKey(turn, { ...call, args: { title: "Field notes", expectedRevision: "0" } })).not.toBe(base);
  });

  it("changes with the call id", () => {
    expect(mutationKey(turn, { ...call, id: "w2" })).not.toBe(base);
  });

  it("does not depend on the key order of the arguments, at any depth", () => {
    const nested = { id: "w1", name: "patch", args: { a: 1, b: { x: [1, { p: 1, q: 2 }], y: null } } };
    const reordered = { id: "w1", name: "patch", args: { b: { y: null, x: [1, { q: 2, p: 1 }] }, a: 1 } };
    expect(mutationKey(turn, reordered)).toBe(mutationKey(turn, nested));
    expect(mutationKey(turn, { ...call, args: { expectedRevision: 0, title: "Field notes" } })).toBe(base);
  });

  it("does not depend on the policy version", () => {
    expect(mutationKey({ ...turn, policyVersion: "v9" } as TurnRef, call)).toBe(base);
  });

  it("rejects arguments that are not plain JSON with a DigestError", () => {
    let caught: unknown;
    try {
      mutationKey(turn, { ...call, args: { title: undefined } });
    } catch (error) {
      caught = error;
    }
    expect(DigestError.isInstance(caught)).toBe(true);
  });

  it("follows the documented formula", () => {
    const argsDigest = digest(call.args);
    expect(base).toBe(
      digest({ kind: "arkah.mutation", v: 1, turnKey: turnKey(turn), toolName: call.name, argsDigest, toolCallId: call.id }),
    );
    const argsByHand = sha256('{"expectedRevision":0,"title":"Field notes"}');
    expect(argsDigest).toBe(argsByHand);
    expect(base).toBe(
      sha256(
        `{"argsDigest":"${argsByHand}","kind":"arkah.mutation","toolCallId":"w1","toolName":"rename_document","turnKey":"${VECTORS.turnKey}","v":1}`,
      ),
    );
  });

  it("matches the fixed vector", () => {
    expect(base).toBe(VECTORS.mutationKey);
  });
});

describe("mutationIdentity (internal)", () => {
  it("carries the same mutationKey as the public function, and parses as a MutationIdentity", () => {
    const fingerprint = toolFingerprint({ name: call.name });
    const identity = mutationIdentity(
      { scopeId: turn.scopeId, turnKey: turnKey(turn) },
      { id: call.id, name: call.name, argsDigest: digest(call.args), toolFingerprint: fingerprint },
    );
    // The tool's fingerprint is recorded with the claim; the mutation key leaves it out.
    expect(identity).toEqual({
      turnKey: VECTORS.turnKey,
      scopeId: "doc-1",
      toolCallId: "w1",
      toolName: "rename_document",
      argsDigest: digest(call.args),
      mutationKey: VECTORS.mutationKey,
      toolFingerprint: fingerprint,
    });
    expect(MutationIdentitySchema.parse(identity)).toEqual(identity);
  });
});

describe("readEvidenceDigest (internal)", () => {
  const read = { toolCallId: "r1", toolName: "read_document", content: '{"title":"Untitled","revision":0}' };
  const base = readEvidenceDigest(VECTORS.turnKey, read);

  it("follows the documented formula", () => {
    const { content, ...rest } = read;
    expect(base).toBe(
      digest({ kind: "arkah.read", v: 1, turnKey: VECTORS.turnKey, ...rest, contentDigest: sha256Hex(content) }),
    );
  });

  it("is the formula's digest for ids that need escaping or are not ASCII, and refuses a lone surrogate as digest does", () => {
    for (const [toolCallId, toolName] of [
      ['call "1"\\x', "read\tdoc"],
      ["звонок-1", "読む"],
      ["\u0001\u001f", "emoji-😀"],
      ["x".repeat(200), "y".repeat(65)],
    ] as const) {
      expect(readEvidenceDigest(VECTORS.turnKey, { toolCallId, toolName, content: "doc" })).toBe(
        digest({ kind: "arkah.read", v: 1, turnKey: VECTORS.turnKey, toolCallId, toolName, contentDigest: sha256Hex("doc") }),
      );
    }
    expect(() => readEvidenceDigest(VECTORS.turnKey, { toolCallId: "r\ud800", toolName: "read", content: "doc" })).toThrow(DigestError);
  });

  it("changes with the turn key, call id, tool name and content", () => {
    expect(readEvidenceDigest(turnKey({ ...turn, turnId: "turn-2" }), read)).not.toBe(base);
    expect(readEvidenceDigest(VECTORS.turnKey, { ...read, toolCallId: "r2" })).not.toBe(base);
    expect(readEvidenceDigest(VECTORS.turnKey, { ...read, toolName: "read_outline" })).not.toBe(base);
    expect(readEvidenceDigest(VECTORS.turnKey, { ...read, content: `${read.content} ` })).not.toBe(base);
  });
});

describe("toolFingerprint", () => {
  const schema = z.object({ title: z.string(), expectedRevision: z.number().int() });
  const rename = (description = "Rename the document.", input: z.ZodType = schema) =>
    tool(() => "ok", { name: "rename_document", description, schema: input });
  const JSON_SCHEMA = {
    type: "object",
    properties: { title: { type: "string" } },
    required: ["title"],
    additionalProperties: false,
  };
  const jsonTool = (description: string | undefined, input: unknown = JSON_SCHEMA) =>
    new DynamicStructuredTool({ name: "rename_document", description: description ?? "", schema: input as never, func: () => Promise.resolve("ok") });

  const source = (body: unknown) => sha256Hex(Function.prototype.toString.call(body));

  it("follows the documented formula: name, description, the declared schema as JSON Schema, its zod parse, the body's source and the declared fields", () => {
    const zodTool = rename();
    expect(toolFingerprint(zodTool)).toBe(
      digest({
        kind: "arkah.tool",
        v: 3,
        name: "rename_document",
        description: "Rename the document.",
        schema: declaredSchema(zodTool),
        parse: parseDefinition(zodTool.schema),
        implementation: source(zodTool.func),
        identity: null,
      }),
    );
    // A JSON Schema tool's schema is taken as is.
    const json = jsonTool("Rename it.");
    expect(toolFingerprint(json)).toBe(
      digest({
        kind: "arkah.tool",
        v: 3,
        name: "rename_document",
        description: "Rename it.",
        schema: JSON_SCHEMA,
        parse: null,
        implementation: source(json.func),
        identity: null,
      }),
    );
    const configured = new DynamicStructuredTool({
      name: "fetch_page",
      description: "Fetch a page.",
      schema: JSON_SCHEMA as never,
      func: () => Promise.resolve("ok"),
      metadata: { baseUrl: "https://a.example" },
    });
    expect(toolFingerprint(configured, { identity: ["baseUrl"] })).toBe(
      digest({
        kind: "arkah.tool",
        v: 3,
        name: "fetch_page",
        description: "Fetch a page.",
        schema: JSON_SCHEMA,
        parse: null,
        implementation: source(configured.func),
        identity: { baseUrl: "https://a.example" },
      }),
    );
    expect(toolFingerprint(zodTool)).toMatch(HEX64);
  });

  it("matches the fixed vector for a tool without a body of its own", () => {
    const described = { name: "rename_document", description: "Rename it.", schema: JSON_SCHEMA };
    expect(toolFingerprint(described)).toBe("005bce328a61c36669173c8cd4490f237fa4d11a1aa487a9b87b8e42f7425394");
    expect(toolFingerprint(described)).toBe(
      sha256(
        '{"description":"Rename it.","identity":null,"implementation":null,"kind":"arkah.tool","name":"rename_document","parse":null,' +
          '"schema":{"additionalProperties":false,"properties":{"title":{"type":"string"}},"required":["title"],"type":"object"},"v":3}',
      ),
    );
  });

  it("converts a zod schema: the fingerprint holds its JSON Schema, not the zod object", () => {
    const converted = declaredSchema(rename());
    expect(converted).toMatchObject({ type: "object", properties: { title: { type: "string" } } });
  });

  it("an absent description is the empty string, an absent schema and body null", () => {
    const bare = { name: "ping", invoke: () => Promise.resolve("pong") };
    expect(toolFingerprint(bare)).toBe(
      digest({ kind: "arkah.tool", v: 3, name: "ping", description: "", schema: null, parse: null, implementation: null, identity: null }),
    );
    expect(toolFingerprint({ ...bare, description: 7 })).toBe(toolFingerprint(bare));
  });

  it("changes with the name, the description and the schema", () => {
    const base = toolFingerprint(rename());
    expect(toolFingerprint(rename("Rename the document!"))).not.toBe(base);
    expect(toolFingerprint(rename(undefined, schema.extend({ force: z.boolean() })))).not.toBe(base);
    expect(toolFingerprint(tool(() => "ok", { name: "retitle_document", description: "Rename the document.", schema }))).not.toBe(base);
    expect(toolFingerprint(jsonTool("d", { ...JSON_SCHEMA, required: [] }))).not.toBe(toolFingerprint(jsonTool("d")));
  });

  it("follows the body: two tools declaring the same thing with other functions differ, the same source text does not", () => {
    const direct = (func: () => Promise<string>) =>
      new DynamicStructuredTool({ name: "rename_document", description: "Rename it.", schema: JSON_SCHEMA as never, func });
    expect(toolFingerprint(direct(() => Promise.resolve("something else")))).not.toBe(toolFingerprint(direct(() => Promise.resolve("ok"))));
    // The source text, not the function object: a second closure of the same code is the same tool.
    expect(toolFingerprint(jsonTool("d"))).toBe(toolFingerprint(jsonTool("d")));
  });

  it("cannot see the function tool() wraps: LangChain's func closes over it, so only the wrapper's source is covered", () => {
    const other = tool(() => "something else", { name: "rename_document", description: "Rename the document.", schema });
    expect(toolFingerprint(other)).toBe(toolFingerprint(rename()));
  });

  it("covers a StructuredTool subclass's _call", () => {
    class Pinger extends StructuredTool {
      name = "ping";
      description = "Ping.";
      schema = z.object({});
      _call() {
        return Promise.resolve("pong");
      }
    }
    class Ponger extends Pinger {
      override _call() {
        return Promise.resolve("pong!");
      }
    }
    expect(toolFingerprint(new Pinger())).toBe(toolFingerprint(new Pinger()));
    expect(toolFingerprint(new Ponger())).not.toBe(toolFingerprint(new Pinger()));
  });

  it("is recomputed when a reference it covers changed, and remembers the first fingerprint", () => {
    const config = { baseUrl: "https://a.example" };
    const watched = tool(() => "ok", { name: "fetch_page", description: "Fetch.", schema, metadata: { config, region: "eu" } });
    const fields = ["config", "region"];
    const first = identifyTool(watched, fields);
    expect(first.first).toBe(first.fingerprint);
    expect(identifyTool(watched, fields)).toEqual(first);
    config.baseUrl = "https://b.example"; // changed in place: same reference, other content
    const moved = identifyTool(watched, fields);
    expect(moved.fingerprint).not.toBe(first.fingerprint);
    expect(moved.first).toBe(first.fingerprint);
    config.baseUrl = "https://a.example";
    expect(identifyTool(watched, fields).fingerprint).toBe(first.fingerprint);
    (watched.metadata as Record<string, unknown>).region = "us";
    expect(identifyTool(watched, fields).fingerprint).not.toBe(first.fingerprint);
    watched.description = "Fetch a page.";
    expect(toolFingerprint(watched)).not.toBe(toolFingerprint(tool(() => "ok", { name: "fetch_page", description: "Fetch.", schema })));
    // Another declaration is another identity, with its own first fingerprint.
    expect(identifyTool(watched, ["region"]).first).toBe(identifyTool(watched, ["region"]).fingerprint);
  });

  it("refuses a declared field the tool does not have, and a value that is not plain JSON", () => {
    const plain = tool(() => "ok", { name: "fetch_page", description: "Fetch.", schema, metadata: { when: new Date(0) } });
    expect(() => toolFingerprint(plain, { identity: ["baseUrl"] })).toThrow(IdentityFieldError);
    expect(() => toolFingerprint(plain, { identity: ["when"] })).toThrow(DigestError);
  });
});
