/**
 * An MCP tool as a plain-text tool. `@langchain/mcp-adapters` builds every MCP tool with
 * `responseFormat: "content_and_artifact"` (no option changes that), so its results carry an
 * artifact (`[]` for a text result) that a mutation's stored, replayed result cannot hold. This
 * keeps the tool's name, description, JSON Schema and call path, and returns only the text.
 */
import { DynamicStructuredTool, type StructuredToolInterface } from "@langchain/core/tools";

/** The text of an MCP tool's `[content, artifacts]`, or a throw when it holds anything else. */
function onlyText(result: unknown, name: string): string {
  if (!Array.isArray(result) || result.length !== 2) throw new Error(`${name}: not an MCP [content, artifacts] result`);
  const [content, artifacts] = result as [unknown, unknown];
  if (Array.isArray(artifacts) && artifacts.length > 0) throw new Error(`${name}: the MCP result has artifacts`);
  if (typeof content === "string") return content;
  const blocks = [content].flat() as { type?: unknown; text?: unknown }[];
  if (blocks.every((block) => block.type === "text" && typeof block.text === "string")) return blocks.map((block) => block.text).join("");
  throw new Error(`${name}: the MCP result is not text`);
}

/** What the adapter's tool offers: its declared parts and the function that calls the server. */
interface McpAdapterTool {
  readonly name: string;
  readonly description: string;
  readonly schema: Record<string, unknown>;
  readonly metadata?: Record<string, unknown>;
  func(args: Record<string, unknown>, runManager?: unknown, config?: unknown): Promise<unknown>;
}

export function textResultTool(mcpTool: StructuredToolInterface): StructuredToolInterface {
  if (!(mcpTool instanceof DynamicStructuredTool)) throw new Error(`${mcpTool.name}: not an MCP adapter tool`);
  const source = mcpTool as unknown as McpAdapterTool;
  return new DynamicStructuredTool({
    name: source.name,
    description: source.description,
    schema: source.schema,
    ...(source.metadata === undefined ? {} : { metadata: source.metadata }),
    func: async (args: Record<string, unknown>, runManager, config) => onlyText(await source.func(args, runManager, config), source.name),
  });
}
