/**
 * LangGraph's interrupts (and its other bubble-up errors) must propagate through every catch in
 * the pipeline. Its check reads a property of whatever was thrown; a thrown value whose getter or
 * Proxy trap throws (a revoked Proxy) is not an interrupt, and asking must not throw instead.
 */
import { isGraphBubbleUp } from "@langchain/langgraph";

/** Whether `error` is a LangGraph bubble-up (an interrupt) to rethrow; never throws. */
export function bubblesUp(error: unknown): boolean {
  try {
    return isGraphBubbleUp(error);
  } catch {
    return false;
  }
}
