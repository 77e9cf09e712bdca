/**
 * The CLI's inventory commands, which need no store: `manifest` prints the tool manifest of a
 * module's guardrails, `compare` compares a reviewed manifest with another one or with a module's
 * running configuration, exiting `EXIT.drift` when they differ.
 *
 * A module is loaded with a dynamic `import()`, like the store adapters: the one named export
 * (default `default`) is `{ guardrails, tools }` (the `createDocumentGuardrails` middleware and the
 * tools passed to `createAgent`), or a function, possibly async, returning it. `reconcile --auto`
 * loads the same export for the tools' `confirm` functions.
 */
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { z } from "zod";
import type { ConfirmClaim } from "../contracts/index.js";
import { compareManifests, describeDrift, ToolManifestSchema, type ToolManifest } from "../inventory.js";
import { CliError, EXIT, printable, type ExitCode, type OutputSink } from "./commands.js";

const InventoryExportSchema = z.object({
  guardrails: z.custom<{ manifest(tools: readonly unknown[]): unknown }>(
    (value) => typeof value === "object" && value !== null && typeof (value as { manifest?: unknown }).manifest === "function",
    "guardrails must be what createDocumentGuardrails returns (it has manifest(tools))",
  ),
  tools: z.array(z.unknown()),
});

/** The manifest of the guardrails a module exports, computed from its tools without running an agent. */
export async function moduleManifest(path: string, exportName: string): Promise<ToolManifest> {
  const exported = await loadExport(path, exportName);
  const manifest = ToolManifestSchema.safeParse(exported.guardrails.manifest(exported.tools));
  if (!manifest.success) throw new CliError(EXIT.failure, `--module: the guardrails returned no valid manifest: ${z.prettifyError(manifest.error)}`);
  return manifest.data;
}

/**
 * The tools' `confirm` functions of the guardrails a module exports (`reconcile --auto`): the
 * same export as `manifest`'s, whose guardrails answer `confirmOf(toolName)`.
 */
export async function moduleConfirms(path: string, exportName: string): Promise<(toolName: string) => ConfirmClaim | undefined> {
  const { guardrails } = await loadExport(path, exportName);
  const { confirmOf } = guardrails as { confirmOf?: unknown };
  if (typeof confirmOf !== "function") {
    throw new CliError(EXIT.usage, `--module: the guardrails of ${path} have no confirmOf (build them with createDocumentGuardrails)`);
  }
  return (toolName) => {
    const found: unknown = (confirmOf as (name: string) => unknown).call(guardrails, toolName);
    return typeof found === "function" ? (found as ConfirmClaim) : undefined;
  };
}

async function loadExport(path: string, exportName: string): Promise<z.infer<typeof InventoryExportSchema>> {
  let module: Record<string, unknown>;
  try {
    module = (await import(pathToFileURL(resolve(path)).href)) as Record<string, unknown>;
  } catch (error) {
    throw new CliError(EXIT.failure, `--module: cannot load ${path}: ${(error as Error).message}`, { cause: error });
  }
  if (!Object.hasOwn(module, exportName)) {
    throw new CliError(EXIT.usage, `--module: ${path} has no export named "${exportName}" (choose one with --export NAME)`);
  }
  let exported = module[exportName];
  if (typeof exported === "function") exported = await (exported as () => unknown)();
  const parsed = InventoryExportSchema.safeParse(exported);
  if (!parsed.success) {
    throw new CliError(
      EXIT.usage,
      `--module: the export "${exportName}" of ${path} must be { guardrails, tools } (or a function returning it): ${z.prettifyError(parsed.error)}`,
    );
  }
  return parsed.data;
}

/** A manifest read from a file's text: JSON, validated. */
export function parseManifestText(flag: string, path: string, text: string): ToolManifest {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new CliError(EXIT.usage, `${flag}: ${path} is not JSON (${(error as Error).message})`);
  }
  const parsed = ToolManifestSchema.safeParse(value);
  if (!parsed.success) throw new CliError(EXIT.usage, `${flag}: ${path} is not a tool manifest: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}

/** Prints the manifest as the file to check in. */
export async function printManifest(manifest: ToolManifest, sink: OutputSink): Promise<ExitCode> {
  await sink.out(`${JSON.stringify(manifest, null, 2)}\n`);
  return EXIT.ok;
}

/** Prints every drift from the reviewed manifest, one a line; `EXIT.drift` when there is any. */
export async function compare(expected: ToolManifest, actual: ToolManifest, sink: OutputSink): Promise<ExitCode> {
  const drift = compareManifests(expected, actual);
  if (drift.length === 0) {
    await sink.out(`the tools match the reviewed manifest (${String(expected.tools.length)} tools)\n`);
    return EXIT.ok;
  }
  await sink.out(`${describeDrift(drift).split("\n").map(printable).join("\n")}\n`);
  return EXIT.drift;
}
