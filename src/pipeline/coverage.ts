/**
 * What a middleware governs of the agent it runs in. The agent's tools are only known once its
 * model is called (the request lists them), so coverage is observed there, and a tool nobody
 * listed can fail the run before the model may call it.
 */
import type { ToolKind } from "../contracts/index.js";
import { DigestError } from "../digest.js";
import { ConfigurationError } from "../errors.js";
import { compareManifests, describeDrift, toolManifest, type ManifestDrift, type ManifestTool, type ToolManifest } from "../inventory.js";
import { identifyTool, IdentityFieldError, type FingerprintedTool } from "../keys.js";

/** Which of the agent's tools are governed. */
export interface Coverage {
  /** Every tool the agent exposed to its model, as seen at its model calls so far. */
  readonly agentTools: readonly string[];
  /** Exposed and listed in `tools`. */
  readonly governed: readonly string[];
  /** Exposed but not listed: their calls are refused `unregistered_tool` (or the run fails). */
  readonly ungoverned: readonly string[];
  /** `full` when every tool the agent exposes is governed. */
  readonly level: "full" | "partial";
  /**
   * `pinned` when a reviewed manifest was given (`inventory`) and the governed tools seen at the
   * model calls so far match it; `drifted` when they do not (`drift` says how); `unpinned` without one.
   */
  readonly inventory: "pinned" | "drifted" | "unpinned";
  /** How the governed tools differ from the reviewed manifest; empty when they match or there is none. */
  readonly drift: readonly ManifestDrift[];
}

/** The `inventory` option: the reviewed manifest, and what a drift from it does. */
export interface InventoryOptions {
  /** The reviewed manifest (`report().manifest`, checked in; `parseToolManifest` reads one). */
  readonly manifest: ToolManifest;
  /**
   * `fail` (default): a model call whose tools do not match the manifest fails with a
   * `ConfigurationError` listing the drift, before the model is called. `refuse`: the run goes on,
   * and each call of a tool that does not match its manifest entry is refused `tool_changed`.
   */
  readonly onDrift?: "fail" | "refuse";
}

/**
 * The identity of the governed tools: the configuration fields each declares (`ToolPolicy.identity`),
 * their kinds, and the reviewed manifest, if any.
 */
export class ToolIdentities {
  readonly #fields: ReadonlyMap<string, readonly string[]>;
  readonly #kinds: ReadonlyMap<string, ToolKind>;
  readonly #pinned: ReadonlyMap<string, ManifestTool> | undefined;
  readonly manifest: ToolManifest | undefined;
  readonly failOnDrift: boolean;

  constructor(fields: ReadonlyMap<string, readonly string[]>, kinds: ReadonlyMap<string, ToolKind>, inventory?: InventoryOptions) {
    this.#fields = fields;
    this.#kinds = kinds;
    this.manifest = inventory?.manifest;
    this.#pinned = inventory === undefined ? undefined : new Map(inventory.manifest.tools.map((tool) => [tool.name, tool]));
    this.failOnDrift = (inventory?.onDrift ?? "fail") === "fail";
  }

  /** The governed tool's fingerprint now, and the first one it had in this process (see `identifyTool`). */
  identify(name: string, tool: FingerprintedTool): { readonly fingerprint: string; readonly first: string } {
    return identifyTool(tool, this.#fields.get(name));
  }

  kindOf(name: string): ToolKind | undefined {
    return this.#kinds.get(name);
  }

  /** Whether the reviewed manifest admits a call of `name` to a tool with this fingerprint: always, without one. */
  admits(name: string, fingerprint: string): boolean {
    if (this.#pinned === undefined) return true;
    const reviewed = this.#pinned.get(name);
    return reviewed !== undefined && reviewed.kind === this.#kinds.get(name) && reviewed.fingerprint === fingerprint;
  }
}

export class ToolCoverage {
  readonly #registered: ReadonlySet<string>;
  readonly #failOnUngoverned: boolean;
  readonly #seen = new Set<string>();
  readonly #fingerprints = new Map<string, string>();
  readonly #identities: ToolIdentities | undefined;
  /** The tool lists already looked at: a list is checked once, not at every model call. */
  readonly #checked = new WeakSet<readonly unknown[]>();

  constructor(registered: Iterable<string>, unregisteredTools: "refuse" | "fail" = "refuse", identities?: ToolIdentities) {
    this.#registered = new Set(registered);
    this.#failOnUngoverned = unregisteredTools === "fail";
    this.#identities = identities;
  }

  /** Notes the tools of a model request; with `fail`, throws for any tool that is not registered. */
  observe(tools: readonly unknown[]): void {
    if (this.#checked.has(tools)) return;
    const ungoverned: string[] = [];
    for (const tool of tools) {
      const name = (tool as { name?: unknown } | null)?.name;
      if (typeof name !== "string") continue;
      this.#seen.add(name);
      if (!this.#registered.has(name)) ungoverned.push(name);
      else this.#fingerprints.set(name, this.#fingerprintOf(name, tool as FingerprintedTool));
    }
    if (this.#failOnUngoverned && ungoverned.length > 0) {
      throw new ConfigurationError(
        `the agent exposes tools the guardrails do not govern: ${ungoverned.join(", ")}; ` +
          'list them in `tools`, or remove unregisteredTools: "fail" to refuse their calls instead',
      );
    }
    const drift = this.drift();
    if (this.#identities?.failOnDrift === true && drift.length > 0) {
      throw new ConfigurationError(
        `the agent's tools do not match the reviewed manifest (inventory.manifest):\n${describeDrift(drift)}\n` +
          "review the change and check in the new manifest (report().manifest, or arkah-guardrails manifest)",
      );
    }
    this.#checked.add(tools);
  }

  /** The manifest of these tools (the governed ones among them), without observing them. */
  manifestOf(tools: readonly unknown[]): ToolManifest {
    const entries: ManifestTool[] = [];
    for (const tool of tools) {
      const name = (tool as { name?: unknown } | null)?.name;
      if (typeof name !== "string" || !this.#registered.has(name)) continue;
      const kind = this.#identities?.kindOf(name);
      if (kind !== undefined) entries.push({ name, kind, fingerprint: this.#fingerprintOf(name, tool as FingerprintedTool) });
    }
    return toolManifest(entries);
  }

  /** The manifest of the governed tools seen at the model calls so far; undefined before the first. */
  manifest(): ToolManifest | undefined {
    if (this.#seen.size === 0) return undefined;
    const entries: ManifestTool[] = [];
    for (const [name, fingerprint] of this.#fingerprints) {
      const kind = this.#identities?.kindOf(name);
      if (kind !== undefined) entries.push({ name, kind, fingerprint });
    }
    return toolManifest(entries);
  }

  /** How the governed tools seen so far differ from the reviewed manifest (none without one). */
  drift(): ManifestDrift[] {
    const reviewed = this.#identities?.manifest;
    const actual = this.manifest();
    return reviewed === undefined || actual === undefined ? [] : compareManifests(reviewed, actual);
  }

  /** A governed tool's `toolFingerprint`, as last seen in a model request. */
  fingerprint(name: string): string | undefined {
    return this.#fingerprints.get(name);
  }

  /** Undefined until the agent's model was first called. */
  report(): Coverage | undefined {
    if (this.#seen.size === 0) return undefined;
    const agentTools = [...this.#seen].sort();
    const ungoverned = agentTools.filter((name) => !this.#registered.has(name));
    const drift = this.drift();
    return {
      agentTools,
      governed: agentTools.filter((name) => this.#registered.has(name)),
      ungoverned,
      level: ungoverned.length === 0 ? "full" : "partial",
      inventory: this.#identities?.manifest === undefined ? "unpinned" : drift.length === 0 ? "pinned" : "drifted",
      drift,
    };
  }

  #fingerprintOf(name: string, tool: FingerprintedTool): string {
    try {
      return (this.#identities?.identify(name, tool) ?? identifyTool(tool)).fingerprint;
    } catch (error) {
      throw new ConfigurationError(`tools.${name}: ${noFingerprint(error)}, so it has no fingerprint`, { cause: error });
    }
  }
}

/**
 * Why a tool has no fingerprint: a declared identity field it lacks, a value that is not plain
 * JSON, or a zod schema too large to describe (the DigestError says which, by path; never a value).
 */
export function noFingerprint(error: unknown): string {
  if (error instanceof IdentityFieldError) return error.message;
  const detail = DigestError.isInstance(error) ? ` (${error.message})` : "";
  return `its declared input schema or an identity field's value cannot be fingerprinted${detail}`;
}
