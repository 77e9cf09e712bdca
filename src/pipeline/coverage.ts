/**
 * What a middleware governs of the agent it runs in. The agent's tools are only known once its
 * model is called (the request lists them), so coverage is observed there, and a tool nobody
 * listed can fail the run before the model may call it.
 */
import { ConfigurationError } from "../errors.js";
import { toolFingerprint, type FingerprintedTool } from "../keys.js";

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
}

export class ToolCoverage {
  readonly #registered: ReadonlySet<string>;
  readonly #failOnUngoverned: boolean;
  readonly #seen = new Set<string>();
  readonly #fingerprints = new Map<string, string>();
  /** The tool lists already looked at: a list is checked once, not at every model call. */
  readonly #checked = new WeakSet<readonly unknown[]>();

  constructor(registered: Iterable<string>, unregisteredTools: "refuse" | "fail" = "refuse") {
    this.#registered = new Set(registered);
    this.#failOnUngoverned = unregisteredTools === "fail";
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
      else this.#fingerprints.set(name, fingerprintOf(name, tool as FingerprintedTool));
    }
    if (this.#failOnUngoverned && ungoverned.length > 0) {
      throw new ConfigurationError(
        `the agent exposes tools the guardrails do not govern: ${ungoverned.join(", ")}; ` +
          'list them in `tools`, or remove unregisteredTools: "fail" to refuse their calls instead',
      );
    }
    this.#checked.add(tools);
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
    return {
      agentTools,
      governed: agentTools.filter((name) => this.#registered.has(name)),
      ungoverned,
      level: ungoverned.length === 0 ? "full" : "partial",
    };
  }
}

function fingerprintOf(name: string, tool: FingerprintedTool): string {
  try {
    return toolFingerprint(tool);
  } catch (error) {
    throw new ConfigurationError(`tools.${name}: its declared input schema is not plain JSON, so it has no fingerprint`, {
      cause: error,
    });
  }
}
