// The package entry: open() and what it gives, the errors, and the plugin contract with the
// helpers a plugin reads records with. The chain, its stages and sinks, the adapters, the model
// and the views are subpaths: subtee/chain, subtee/stages, subtee/sinks, subtee/adapters,
// subtee/model, subtee/views.
export { StallError } from './chain/stages/idle-watchdog.js';
export {
  KIT_VERSION,
  definePlugin,
  type PluginDefinition,
  type PluginContext,
  type OptionSpec,
  type OptionSpecs,
} from './chain/plugin.js';
// A channel as the run hands it to a plugin (the tree's `main`, `get`, `channels()`, a record's
// `channel`): the live node, read only at run time as in its type (a write on it throws).
export { type ReadonlyChannel as Channel } from './model/tree.js';
export { type IndexDocument, type IndexChannel } from './views/index-file.js';
export { SubteeError, UsageError, EXIT, OutputError, writeFailed } from './errors.js';
export {
  open,
  type OpenOptions,
  type RunProjection,
  type ProjectionName,
  type OpenInput,
} from './open.js';
export {
  ProjectionError,
  SubagentError,
  type ToolCall,
  type SubagentHandle,
  type SubagentOutput,
  type SubagentStatus,
  type RunEvent,
  type RunOutput,
} from './views/projection.js';
export { type Message, type MessageBlock } from './views/message-stream.js';
export {
  quarantinedLines,
  type SubteeRecord,
  type LineRecord,
  type QuarantineRecord,
  type SpooledRecord,
} from './model/record.js';
export {
  type RecordPlugin,
  type RecordFunction,
  type RecordHandlers,
  type RecordResult,
} from './chain/plugin-stream.js';
export { rewriteText, mapStrings, type TextRewrite, type RewriteOptions } from './chain/record-text.js';
export { escapeControl, escapeOneLine, escapeHtml, escapeMarkdown } from './views/escape.js';
export { walkTree, statusCounts, channelTokens, MAX_GUIDE_LEVELS } from './views/walk.js';
export { shownTokens } from './views/cost.js';
export { type ThinkingMode } from './chain/stages/thinking-truncator.js';
export { contentBlocks } from './model/message.js';
export { type PluginRun, type Session } from './model/session.js';
