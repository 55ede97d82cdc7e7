// subtee/stages: the built-in stages' factories, their defaults and option types.
export {
  createLineParser,
  LINE_PARSER_DEFAULTS,
  type LineParserOptions,
} from '../chain/stages/line-parser.js';
export {
  createVersionGuard,
  VERSION_GUARD_DEFAULTS,
  type VersionGuardOptions,
} from '../chain/stages/version-guard.js';
export { createChannelRouter, type ChannelRouterOptions } from '../chain/stages/channel-router.js';
export {
  createThinkingTruncator,
  THINKING_TRUNCATOR_DEFAULTS,
  THINKING_MODES,
  type ThinkingTruncatorOptions,
} from '../chain/stages/thinking-truncator.js';
export {
  createIdleWatchdog,
  IDLE_WATCHDOG_DEFAULTS,
  type Clock,
  type IdleWatchdogOptions,
  type IdleWatchdogSettings,
} from '../chain/stages/idle-watchdog.js';
export {
  createObjectSource,
  OBJECT_SOURCE_DEFAULTS,
  type ObjectSourceOptions,
} from '../chain/stages/object-source.js';
export {
  createInputFormat,
  INPUT_FORMATS,
  INPUT_FORMAT_DEFAULTS,
  type InputFormat,
  AGENT_PRODUCERS,
  createAgentMapper,
  detectProducer,
  type InputFormatOptions,
} from '../chain/stages/input-format.js';
