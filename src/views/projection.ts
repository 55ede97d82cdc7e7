/**
 * The live projection (see projection/): its types, the tool-call pairing, the event log,
 * replay, handles and the projection itself, each in its own file; this names what others use.
 */
export {
  PROJECTION_DEFAULTS,
  ProjectionError,
  SubagentError,
  type CostFigures,
  type LineEvent,
  type ProjectionOptions,
  type QuarantineEvent,
  type RunCost,
  type RunEvent,
  type ReplayStore,
  type RunOutput,
  type SubagentHandle,
  type SubagentOutput,
  type SubagentStatus,
  type ToolCall,
  type ToolCallStatus,
  type Totals,
} from './projection/types.js';
export { ToolCallPairing } from './projection/tool-calls.js';
export { messagesOf, toolCallsOf } from './projection/handles.js';
export { Projection } from './projection/projection.js';
