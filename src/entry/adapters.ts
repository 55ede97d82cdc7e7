// subtee/adapters: other agents' events mapped to stream-json lines, and the SDK tee.
export { teeJsonl, type SdkMessageLike } from '../adapters/claude-sdk.js';
export {
  LangGraphMapper,
  LANGGRAPH_DEFAULTS,
  isProtocolEvent,
  messageFields,
  toolOutputText,
  type ProtocolEvent,
  type LangGraphMapperOptions,
} from '../adapters/langgraph.js';
export {
  CopilotMapper,
  createCopilotMapper,
  isCopilotEvent,
  copilotVersionOf,
  COPILOT_DEFAULTS,
  type CopilotMapperOptions,
} from '../adapters/copilot.js';
export { CodexMapper, createCodexMapper, isCodexEvent } from '../adapters/codex.js';
export {
  GeminiMapper,
  createGeminiMapper,
  isGeminiEvent,
  GEMINI_DEFAULTS,
  type GeminiMapperOptions,
} from '../adapters/gemini.js';
export {
  OpencodeMapper,
  createOpencodeMapper,
  isOpencodeEvent,
  OPENCODE_DEFAULTS,
  type OpencodeMapperOptions,
} from '../adapters/opencode.js';
export {
  type StreamMapper,
  type MappedEvent,
  type ChannelTranscript,
} from '../adapters/stream-lines.js';
