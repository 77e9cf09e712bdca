/**
 * Reading a resume value once. LangGraph hands a task its resume values by position: the k-th
 * `interrupt()` call of a task's execution returns the k-th value the task was ever given
 * (@langchain/langgraph `interrupt.ts`, `pregel/algo.ts` `_scratchpad`). A task that pauses again
 * re-runs from its start on the next resume and meets every earlier value again, in order, as the
 * checkpoint round trip left it: a value can change on the way (an own `__proto__` key is
 * dropped), and it can meet another request than the one it answered (an earlier request of the
 * task is decided in the store now, so fewer `interrupt()` calls come first). So a value is
 * judged only when it is new: a value an earlier execution was handed is never judged again.
 *
 * Which values are new, LangGraph's scratchpad says: the values the task was handed before this
 * execution are stored with the task (its `resume` list, written each time `interrupt()` returned
 * one, also when the task then failed); a new one is either the run's unkeyed
 * `Command({ resume })` (`nullResume`, taken at the end of the list) or a keyed
 * `Command({ resume: { [interruptId]: value } })`, which LangGraph appends to the list when this
 * execution starts, as the object the host passed. The unkeyed value stays in the checkpoint until
 * the step completes, so a run invoked again without a new one (`invoke(null)`, a retry after a
 * failure) is handed it again, read back from the checkpoint, after the task's own copy of it: an
 * unkeyed value equal to the last one the task was handed is that repeat, not a new answer.
 * These are internals of @langchain/langgraph (checked against 1.7.3, with source maps); when
 * they cannot be read, no answer can be taken safely and the run fails with a
 * `ConfigurationError`.
 */
import { getConfig, interrupt } from "@langchain/langgraph";
import { ConfigurationError } from "../errors.js";

/** @langchain/langgraph's `CONFIG_KEY_SCRATCHPAD`, `CONFIG_KEY_RESUME_MAP` and `CONFIG_KEY_CHECKPOINTER`. */
const SCRATCHPAD = "__pregel_scratchpad";
const RESUME_MAP = "__pregel_resume_map";
const CHECKPOINTER = "__pregel_checkpointer";

/** What the scratchpad holds that this module reads. */
interface Scratchpad {
  readonly interruptCounter: number;
  readonly resume: readonly unknown[];
  readonly nullResume?: unknown;
}

/**
 * What an `interrupt()` call returned: a value seen now for the first time, or one the task was
 * handed before (`repeated`: handed again as if new, by a run invoked without a new answer).
 */
export type Resumed = { readonly fresh: true; readonly value: unknown } | { readonly fresh: false; readonly repeated: boolean };

/**
 * `interrupt(payload)`, saying whether the value it returns is new. Pauses the run (throws
 * LangGraph's `GraphInterrupt`) when the task has no value for this position.
 */
export function askOnce(payload: unknown): Resumed {
  const configurable = currentConfigurable();
  const scratchpad = configurable?.[SCRATCHPAD];
  if (!hasCheckpointer(configurable)) throw missingCheckpointer("an approval");
  if (!isScratchpad(scratchpad)) {
    throw new ConfigurationError(
      "approvals cannot tell a new resume value from one LangGraph replays: this @langchain/langgraph has no task " +
        "scratchpad the guardrails can read; use the @langchain/langgraph version this package supports (^1.7.3)",
    );
  }
  const { resume, nullResume } = scratchpad;
  const position = scratchpad.interruptCounter + 1;
  // At the end of the list, interrupt() takes the unkeyed value (or pauses when there is none).
  const repeated = position === resume.length && resume.length > 0 && sameValue(nullResume, resume[resume.length - 1]);
  const fresh =
    position === resume.length
      ? nullResume !== undefined && !repeated
      : position === resume.length - 1 && isKeyedValue(configurable?.[RESUME_MAP], resume[position]);
  const value: unknown = interrupt(payload);
  return fresh ? { fresh: true, value } : { fresh: false, repeated };
}

/**
 * Whether the graph running this call has a checkpointer: without one, LangGraph cannot pause
 * (its `interrupt()` throws "No checkpointer set").
 */
export function hasCheckpointer(configurable: Readonly<Record<string, unknown>> | undefined): boolean {
  const checkpointer = configurable?.[CHECKPOINTER];
  return checkpointer !== undefined && checkpointer !== null && checkpointer !== false;
}

/** The fix for an approval-capable agent without a checkpointer, in one message. */
export function missingCheckpointer(what: string): ConfigurationError {
  return new ConfigurationError(
    `${what} pauses the run for a person's approval, which needs a checkpointer: compile the agent with one, ` +
      "e.g. createAgent({ ..., checkpointer: new MemorySaver() }) (a durable checkpointer in production), " +
      "and invoke it with a thread_id",
  );
}

function currentConfigurable(): Record<string, unknown> | undefined {
  let config: { readonly configurable?: Record<string, unknown> } | undefined;
  try {
    config = getConfig() as { readonly configurable?: Record<string, unknown> } | undefined;
  } catch {
    return undefined;
  }
  return config?.configurable;
}

function isScratchpad(value: unknown): value is Scratchpad {
  if (typeof value !== "object" || value === null) return false;
  const { interruptCounter, resume } = value as Partial<Scratchpad>;
  return typeof interruptCounter === "number" && Array.isArray(resume);
}

/**
 * Whether two resume values are the same answer, as JSON (what the checkpoint keeps of them). A
 * value that is not JSON is not the same as anything: judged, it is refused, as no decision is.
 */
function sameValue(a: unknown, b: unknown): boolean {
  if (a === undefined || b === undefined) return false;
  try {
    return JSON.stringify(a) === JSON.stringify(b);
  } catch {
    return false;
  }
}

/**
 * Whether `value` is the object a keyed resume map holds (LangGraph appends it by reference; a
 * value read back from the checkpoint is a new object). A primitive equal to one is taken as new
 * too: judged again, it is refused again, since no primitive is a decision.
 */
function isKeyedValue(map: unknown, value: unknown): boolean {
  if (typeof map !== "object" || map === null) return false;
  return Object.values(map).some((keyed) => keyed === value);
}
