/**
 * The admission half of the middleware shell: which turn a call belongs to, and whether that
 * turn is admitted and still the one the transcript shows.
 */
import type { BaseMessage } from "@langchain/core/messages";
import { admittedBefore, assertResolvedAdmitted, resolveTurn, type ResolvedTurn } from "./admission.js";
import type { GuardrailStore, TurnInput } from "./contracts.js";
import { isSummaryMarked, isUserText, latestUserTextIndex, textContent } from "./decision/transcript.js";
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
  /**
   * The transcript this gate last found showing its turn, and where the user message sits in it:
   * one array, replaced at the next call (a server-wide gate holds no more than that).
   */
  #verified: { readonly messages: readonly BaseMessage[]; readonly length: number; readonly humanIndex: number } | undefined;
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

  #inTranscript(turn: ResolvedTurn, messages: readonly BaseMessage[]): AdmittedTurn {
    const humanIndex = this.#latestUserTextIndex(messages);
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
    this.#verified = { messages, length: messages.length, humanIndex };
    return { turn, humanIndex };
  }

  /**
   * `latestUserTextIndex` (src/decision/transcript.ts), checking only what is new since the
   * transcript last verified: the check runs at every model and tool call, and a turn's messages
   * grow with every step. A later step's transcript (LangGraph's reducer builds a new array each
   * update) that still holds the very same message objects from the user's on needs only its new
   * messages classified; any other is scanned whole. A message replaced by id is a new object.
   */
  #latestUserTextIndex(messages: readonly BaseMessage[]): number {
    const known = this.#verified;
    // The same array again (parallel calls of one step) is scanned whole: it may have been changed in place.
    if (known !== undefined && known.messages !== messages && known.length <= messages.length) {
      let index = known.humanIndex;
      while (index < known.length && messages[index] === known.messages[index]) index++;
      if (index === known.length) {
        for (let at = messages.length - 1; at >= index; at--) if (isUserText(messages[at])) return at;
        return known.humanIndex;
      }
    }
    return latestUserTextIndex(messages);
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
