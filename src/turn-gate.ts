/**
 * The admission half of the middleware shell: which turn a call belongs to, and whether that
 * turn is admitted and still the one the transcript shows.
 */
import type { BaseMessage } from "@langchain/core/messages";
import { admittedBefore, assertResolvedAdmitted, resolveTurn, type ResolvedTurn } from "./admission.js";
import type { GuardrailStore, TurnInput } from "./contracts/index.js";
import { isSummaryMarked, latestUserTextIndex, textContent } from "./decision/transcript.js";
import { AdmissionError } from "./errors.js";

/** The `context` key under which one compiled agent receives the trusted turn per invocation. */
export const TURN_CONTEXT_KEY = "arkahTurn";

/**
 * The `context` for `agent.invoke(input, { context: turnContext(turn) })` when one middleware
 * serves many turns. Spread it into your own context object if you have one. The turn object is
 * validated once and frozen: build a new object for each turn.
 */
export function turnContext(input: TurnInput): { readonly [TURN_CONTEXT_KEY]: TurnInput } {
  return { [TURN_CONTEXT_KEY]: input };
}

/** An admitted turn and where its user message sits in the transcript. */
export interface AdmittedTurn {
  readonly turn: ResolvedTurn;
  /** Index of the admitted user message: the turn's own messages follow it. */
  readonly humanIndex: number;
}

export class TurnGate {
  readonly #store: GuardrailStore;
  readonly #userMessageLabel: string;
  readonly #fixed: ResolvedTurn | undefined;
  readonly #texts = new WeakMap<ResolvedTurn, string>();

  constructor(store: GuardrailStore, userMessageLabel: string, fixed: ResolvedTurn | undefined) {
    this.#store = store;
    this.#userMessageLabel = userMessageLabel;
    this.#fixed = fixed;
  }

  /**
   * Resolves the call's turn and throws `AdmissionError` unless its receipt is allowed and the
   * latest message a model would receive as the user's (`isUserText`: a `HumanMessage`, any
   * `ChatMessage`) is text exactly equal to the admitted user segment. So any user text after the
   * admitted message, from the input or a resume's `update`, is `transcript_mismatch`.
   *
   * Answers synchronously (and may throw) once this process verified the turn's receipt: it runs
   * before every model and tool call, where a promise costs more than the check itself.
   */
  admit(context: unknown, messages: readonly BaseMessage[]): AdmittedTurn | Promise<AdmittedTurn> {
    const turn = this.#fixed ?? this.#fromContext(context);
    if (admittedBefore(this.#store, turn)) return this.#inTranscript(turn, messages);
    return assertResolvedAdmitted(this.#store, turn).then(() => this.#inTranscript(turn, messages));
  }

  /**
   * Every check classifies the turn's messages again (from the end back to the latest user text):
   * a message is a mutable object, so one checked before can say it is the user's now (its `type`
   * set in place), in the same array slot; no record of earlier checks can stand for a new one.
   */
  #inTranscript(turn: ResolvedTurn, messages: readonly BaseMessage[]): AdmittedTurn {
    const humanIndex = latestUserTextIndex(messages);
    const human = messages[humanIndex];
    if (human === undefined || textContent(human) !== this.#expectedText(turn)) {
      throw new AdmissionError(
        "transcript_mismatch",
        isSummaryMarked(human)
          ? "a summary replaced the admitted user message, so the transcript no longer shows it; " +
              "keep the turn's messages when summarizing (see docs/guardrails.md, Composing with LangChain middleware)"
          : "the latest user message is not the admitted user segment; admit the new message as a new turn",
      );
    }
    return { turn, humanIndex };
  }

  /** The admitted user segment's text, found once per turn. */
  #expectedText(turn: ResolvedTurn): string {
    let text = this.#texts.get(turn);
    if (text === undefined) {
      text = userSegment(turn.input, this.#userMessageLabel);
      this.#texts.set(turn, text);
    }
    return text;
  }

  #fromContext(context: unknown): ResolvedTurn {
    const raw =
      typeof context === "object" && context !== null
        ? (context as Record<string, unknown>)[TURN_CONTEXT_KEY]
        : undefined;
    if (typeof raw !== "object" || raw === null) {
      throw new AdmissionError(
        "invalid_input",
        `no turn in context: pass { context: turnContext(turn) } to agent.invoke, or construct the middleware with input`,
      );
    }
    const turn = resolveTurn(raw);
    this.#expectedText(turn); // a turn without the user's segment fails here, before any check
    return turn;
  }
}

/** The content of the segment the user typed. Throws if the turn has no such segment. */
export function userSegment(input: TurnInput, label: string): string {
  const segment = input.segments.find((candidate) => candidate.label === label);
  if (segment === undefined) {
    throw new AdmissionError("invalid_input", `the turn has no segment labelled "${label}" (userMessageLabel)`);
  }
  return segment.content;
}
