/**
 * The pinned inventory: a manifest of the tools an agent's guardrails govern (name, kind,
 * fingerprint), a versioned JSON document a reviewer checks in, and the drift between a reviewed
 * manifest and the running tools. Pure: building, reading and comparing manifests; the middleware
 * decides what a drift does (src/pipeline/coverage.ts).
 */
import { z } from "zod";
import { DigestSchema, ToolKindSchema } from "./contracts/index.js";
import { ConfigurationError } from "./errors.js";

/** One governed tool in a manifest. */
export const ManifestToolSchema = z.strictObject({
  /** The tool's name, as registered in `tools`. */
  name: z.string().min(1),
  /** Its kind, from its policy. */
  kind: ToolKindSchema,
  /** `toolFingerprint` of the tool, with the identity fields its policy declares. */
  fingerprint: DigestSchema,
});
/** One governed tool in a manifest: its name, kind and fingerprint. */
export interface ManifestTool {
  /** The tool's name, as registered in `tools`. */
  readonly name: string;
  /** Its kind, from its policy. */
  readonly kind: z.infer<typeof ManifestToolSchema>["kind"];
  /** `toolFingerprint` of the tool, with the identity fields its policy declares. */
  readonly fingerprint: string;
}

/**
 * The manifest format's version. It names the fingerprint format too: version 2 holds
 * `toolFingerprint` v3 values (which see the zod parse). A manifest of another version is refused
 * with a message that says to print and review it again, never compared fingerprint by fingerprint
 * (every tool would drift, or worse, an old format would be trusted).
 */
export const TOOL_MANIFEST_VERSION = 2;

/** Why a manifest of version 1 is refused, and what to do. */
const REPIN =
  "version 1 holds fingerprints of an older format that did not see the zod parse (toolFingerprint v2); " +
  "re-pin: print the manifest again (report().manifest or arkah-guardrails manifest), review it and check it in";

/**
 * The tools an agent's guardrails govern, as `report().manifest` (or the CLI's `manifest`) gives
 * it: every governed tool the agent exposes, sorted by name. Check it in; pass the reviewed one as
 * `inventory.manifest` and the guardrails compare the running tools with it.
 */
export const ToolManifestSchema = z.strictObject({
  format: z.literal("arkah.tool-manifest"),
  version: z.literal(TOOL_MANIFEST_VERSION, { error: (issue) => (issue.input === 1 ? REPIN : undefined) }),
  tools: z
    .array(ManifestToolSchema)
    .refine((tools) => new Set(tools.map((tool) => tool.name)).size === tools.length, "list each tool once"),
});
/**
 * A reviewed tool manifest: what `report().manifest` and the CLI's `manifest` give, and
 * `parseToolManifest` reads.
 */
export type ToolManifest = z.infer<typeof ToolManifestSchema>;

/** One difference between a reviewed manifest and the running tools. */
export type ManifestDrift =
  /** Reviewed, but the agent does not expose it (or no longer governs it). */
  | { readonly tool: string; readonly change: "missing"; readonly expected: ManifestTool }
  /** Exposed and governed, but not reviewed. */
  | { readonly tool: string; readonly change: "extra"; readonly actual: ManifestTool }
  /** Its policy gives it another kind than the reviewed one. */
  | { readonly tool: string; readonly change: "kind"; readonly expected: ManifestTool; readonly actual: ManifestTool }
  /** Another implementation, description, schema or declared configuration than the reviewed one. */
  | { readonly tool: string; readonly change: "fingerprint"; readonly expected: ManifestTool; readonly actual: ManifestTool };

/** The manifest of these governed tools, sorted by name. */
export function toolManifest(tools: Iterable<ManifestTool>): ToolManifest {
  const sorted = [...tools].map(({ name, kind, fingerprint }) => ({ name, kind, fingerprint }));
  sorted.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return { format: "arkah.tool-manifest", version: TOOL_MANIFEST_VERSION, tools: sorted };
}

/**
 * Reads a manifest (parsed JSON, e.g. a checked-in file). Throws `ConfigurationError` naming
 * every problem when it is not one.
 */
export function parseToolManifest(value: unknown): ToolManifest {
  const parsed = ToolManifestSchema.safeParse(value);
  if (!parsed.success) throw new ConfigurationError(`not a tool manifest: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}

/** Every difference between the reviewed manifest and the actual one, by tool name. Empty when they match. */
export function compareManifests(expected: ToolManifest, actual: ToolManifest): ManifestDrift[] {
  const running = new Map(actual.tools.map((tool) => [tool.name, tool]));
  const reviewed = new Map(expected.tools.map((tool) => [tool.name, tool]));
  const drift: ManifestDrift[] = [];
  for (const want of expected.tools) {
    const have = running.get(want.name);
    if (have === undefined) drift.push({ tool: want.name, change: "missing", expected: want });
    else if (have.kind !== want.kind) drift.push({ tool: want.name, change: "kind", expected: want, actual: have });
    else if (have.fingerprint !== want.fingerprint) drift.push({ tool: want.name, change: "fingerprint", expected: want, actual: have });
  }
  for (const have of actual.tools) if (!reviewed.has(have.name)) drift.push({ tool: have.name, change: "extra", actual: have });
  return drift.sort((a, b) => (a.tool < b.tool ? -1 : a.tool > b.tool ? 1 : 0));
}

/** One line per drift, for an error message or the CLI. */
export function describeDrift(drift: readonly ManifestDrift[]): string {
  return drift
    .map((entry) => {
      switch (entry.change) {
        case "missing":
          return `${entry.tool}: missing (reviewed as ${entry.expected.kind}, not exposed or not governed)`;
        case "extra":
          return `${entry.tool}: extra (${entry.actual.kind}, not in the reviewed manifest)`;
        case "kind":
          return `${entry.tool}: kind changed from ${entry.expected.kind} to ${entry.actual.kind}`;
        case "fingerprint":
          return `${entry.tool}: fingerprint changed from ${entry.expected.fingerprint} to ${entry.actual.fingerprint} (its code, description, schema or declared configuration)`;
      }
    })
    .join("\n");
}
