/** The turn service: `createTurnService` and its answers. */
export { TurnServiceError, type TurnServiceErrorCode } from "./errors.js";
export { turnHttpErrorReply, turnHttpReply, type TurnHttpReply } from "./http.js";
export {
  type DecideAnswer,
  type PendingApproval,
  type RunningAnswer,
  type TurnAnswer,
  type TurnCallOutcome,
  type TurnFailure,
  type TurnMutation,
  type TurnOutcome,
  type TurnView,
} from "./outcome.js";
export {
  createTurnService,
  turnThreadId,
  type DecideTurnInput,
  type MayDecide,
  type PruneTurnsOptions,
  type RecoveredTurn,
  type RecoverTurnsOptions,
  type RecoverySummary,
  type SubmitTurnInput,
  type ThreadConfig,
  type TurnAgent,
  type TurnPruneResult,
  type TurnService,
  type TurnServiceOptions,
} from "./service.js";
