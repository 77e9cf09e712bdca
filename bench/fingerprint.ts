/**
 * The per-call cost of a tool's identity check (`identifyTool`, what every governed call runs in
 * its step check and again just before its body runs) on an unchanged tool, against computing the
 * fingerprint from scratch (what it costs when something changed, and what a per-call digest
 * without the reference check would cost). Cases: a zod tool without identity fields, one declaring
 * a string field, one declaring an object field (its canonical JSON is compared every call).
 *
 * Median ns/op over interleaved rounds. Run directly: `npx tsx bench/fingerprint.ts`.
 */
import { DynamicStructuredTool } from "@langchain/core/tools";
import { z } from "zod";
import { canonicalJson, digest, sha256Hex } from "../src/digest.js";
import { toJsonSchema } from "@langchain/core/utils/json_schema";
import { parseDefinition } from "../src/execution/parse-definition.js";
import { identifyTool } from "../src/keys.js";

const schema = z.object({ noteId: z.string(), body: z.string().max(10_000), expectedRevision: z.number().int() });

function makeTool(metadata: Record<string, unknown>) {
  return new DynamicStructuredTool({
    name: "edit_note",
    description: "Replace a note's body.",
    schema,
    func: ({ noteId }: { noteId: string }) => Promise.resolve(`saved ${noteId}`),
    metadata,
  });
}

/** The fingerprint from scratch: the schema conversion, the parse's definition, the body's source hash and the digest. */
function fromScratch(tool: DynamicStructuredTool, fields: readonly string[]): string {
  const values = Object.fromEntries(fields.map((field) => [field, (tool.metadata as Record<string, unknown>)[field]]));
  return digest({
    kind: "arkah.tool",
    v: 3,
    name: tool.name,
    description: tool.description,
    schema: toJsonSchema(schema) as unknown,
    parse: parseDefinition(schema),
    implementation: sha256Hex(Function.prototype.toString.call(tool.func)),
    identity: fields.length === 0 ? null : (JSON.parse(canonicalJson(values)) as unknown),
  });
}

function time(run: () => void, batchMs: number): number {
  let n = 0;
  const start = process.hrtime.bigint();
  let elapsed = 0n;
  const limit = BigInt(batchMs) * 1_000_000n;
  while (elapsed < limit) {
    for (let i = 0; i < 100; i++) run();
    n += 100;
    elapsed = process.hrtime.bigint() - start;
  }
  return Number(elapsed) / n;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN;

const cases: { name: string; tool: DynamicStructuredTool; fields: readonly string[] }[] = [
  { name: "no identity fields", tool: makeTool({}), fields: [] },
  { name: "a string field", tool: makeTool({ baseUrl: "https://notes.internal/v1" }), fields: ["baseUrl"] },
  { name: "an object field", tool: makeTool({ endpoint: { baseUrl: "https://notes.internal/v1", region: "eu", timeoutMs: 5000 } }), fields: ["endpoint"] },
];

const rows = cases.map(({ name, tool, fields }) => {
  identifyTool(tool, fields);
  const check = () => void identifyTool(tool, fields);
  const scratch = () => void fromScratch(tool, fields);
  time(check, 200);
  time(scratch, 200);
  const checks: number[] = [];
  const scratches: number[] = [];
  for (let round = 0; round < 11; round++) {
    checks.push(time(check, 20));
    scratches.push(time(scratch, 20));
  }
  return { case: name, checkNs: Math.round(median(checks)), fromScratchNs: Math.round(median(scratches)) };
});
console.table(rows);
