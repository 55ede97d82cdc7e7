// The public API: the stages and sinks (factories, their defaults and option types), the chain,
// the live projection, the model of a line, and the helpers for writing a plugin. What the
// package does internally (the line splitter, the tree's snapshots, the version guard's
// logic…) stays reachable only through these.
export { createLineParser, LINE_PARSER_DEFAULTS } from './chain/stages/line-parser.js';
export { createVersionGuard, VERSION_GUARD_DEFAULTS } from './chain/stages/version-guard.js';
export { createChannelRouter } from './chain/stages/channel-router.js';
export {
  createThinkingTruncator,
  THINKING_TRUNCATOR_DEFAULTS,
  THINKING_MODES,
} from './chain/stages/thinking-truncator.js';
export {
  createIdleWatchdog,
  IDLE_WATCHDOG_DEFAULTS,
  StallError,
  type Clock,
} from './chain/stages/idle-watchdog.js';
export { createFilesSink, FILES_SINK_DEFAULTS } from './chain/sinks/files.js';
export { createStdoutSink, STDOUT_MODES, STDOUT_SINK_DEFAULTS } from './chain/sinks/stdout.js';
export { createPinoSink, PINO_SINK_DEFAULTS } from './chain/sinks/pino.js';
export {
  buildChain,
  runChain,
  defaultSpec,
  DEFAULT_STAGES,
  type ChainSpec,
  type ComponentSpec,
  type ChainOptions,
} from './chain/chain.js';
export { readConfig, registerPlugins } from './chain/config.js';
export { configSchema } from './chain/schema.js';
export { loadPlugin, Registry, KIT_VERSION } from './chain/plugin.js';
export { builtinRegistry } from './chain/builtins.js';
export {
  ChannelTree,
  type Channel,
  type ChannelSnapshot,
  type ChannelStatus,
  type ChannelEvent,
} from './model/tree.js';
export * from './model/message.js';
export { type Warning } from './model/session.js';
export {
  buildIndex,
  INDEX_FORMAT,
  type IndexDocument,
  type IndexHead,
  type IndexChannel,
} from './views/index-file.js';
export { renderRecord } from './views/text.js';
export { lineContent, type ContentItem, type ContentKind } from './model/content.js';
export { SubteeError, UsageError, EXIT } from './errors.js';
export { open, type OpenOptions, type RunProjection, type Projections, type ProjectionName } from './open.js';
export {
  ProjectionError,
  SubagentError,
  PROJECTION_DEFAULTS,
  type ToolCall,
  type ToolCallStatus,
  type SubagentHandle,
  type SubagentOutput,
  type SubagentStatus,
  type RunEvent,
  type LineEvent,
  type QuarantineEvent,
  type RunOutput,
  type Totals,
  type CostFigures,
  type RunCost,
} from './views/projection.js';
export {
  CostLedger,
  priceTokens,
  type CostReport,
  type ChannelCost,
  type ModelCost,
  type ModelTokens,
  type OutputTokensBasis,
  type CostBasis,
} from './model/cost.js';
export {
  PRICE_TABLE,
  STANDARD_RATIOS,
  priceOf,
  overridePrices,
  type PriceTable,
  type ModelPrice,
} from './model/prices.js';
export { formatUsd, type IndexCost } from './views/cost.js';
export { type Message, type MessageBlock, type LiveValues } from './views/message-stream.js';
export { createObjectSource, OBJECT_SOURCE_DEFAULTS } from './chain/stages/object-source.js';
export {
  createInputFormat,
  INPUT_FORMATS,
  INPUT_FORMAT_DEFAULTS,
  type InputFormat,
} from './chain/stages/input-format.js';
export { teeJsonl, type SdkMessageLike } from './adapters/claude-sdk.js';
export {
  LangGraphMapper,
  LANGGRAPH_DEFAULTS,
  isProtocolEvent,
  messageFields,
  toolOutputText,
  type ProtocolEvent,
  type LangGraphMapperOptions,
} from './adapters/langgraph.js';
export {
  CopilotMapper,
  createCopilotMapper,
  isCopilotEvent,
  copilotVersionOf,
  COPILOT_DEFAULTS,
  type CopilotMapperOptions,
} from './adapters/copilot.js';
export { CodexMapper, createCodexMapper, isCodexEvent } from './adapters/codex.js';
export {
  GeminiMapper,
  createGeminiMapper,
  isGeminiEvent,
  GEMINI_DEFAULTS,
  type GeminiMapperOptions,
} from './adapters/gemini.js';
export {
  OpencodeMapper,
  createOpencodeMapper,
  isOpencodeEvent,
  OPENCODE_DEFAULTS,
  type OpencodeMapperOptions,
} from './adapters/opencode.js';
export type { StreamMapper, MappedEvent, ChannelTranscript } from './adapters/stream-lines.js';
export { AGENT_PRODUCERS, createAgentMapper, detectProducer } from './chain/stages/input-format.js';
export type { AgentProducer, Producer } from './model/session.js';
export type { OpenInput } from './open.js';

// Writing a stage or a sink: the helpers the bundled plugins are built from (docs/plugins.md).
export {
  definePlugin,
  type PluginDefinition,
  type PluginContext,
  type OptionSpec,
  type OptionSpecs,
} from './chain/plugin.js';
export { Session, requireSession } from './model/session.js';
export {
  BATCH_HIGH_WATER_MARK,
  quarantinedLines,
  type RecordBatch,
  type SubteeRecord,
  type LineRecord,
  type QuarantineRecord,
  type SpooledRecord,
} from './model/record.js';
export { passOn } from './chain/sinks/pass-on.js';
export {
  BatchTransform,
  createBatchTransform,
  type BatchTransformHooks,
  type BatchTransformOptions,
  type BatchOutcome,
  type HandOn,
} from './chain/batch-transform.js';
export { LineSpool } from './chain/stages/line-spool.js';
export {
  type RecordPlugin,
  type RecordFunction,
  type RecordHandlers,
  type RecordResult,
} from './chain/plugin-stream.js';
export { rewriteText, mapStrings, type TextRewrite } from './chain/record-text.js';
export { OutputError, writeFailed } from './errors.js';
export { escapeControl, escapeOneLine, escapeHtml, escapeMarkdown } from './views/escape.js';
export {
  walkTree,
  statusCounts,
  channelTokens,
  subtreeTotals,
  MAX_GUIDE_LEVELS,
  type TreeRow,
  type SubtreeTotals,
} from './views/walk.js';

// Each factory's options, and the sinks a program composes beyond the ones above.
export type { LineParserOptions } from './chain/stages/line-parser.js';
export type { ObjectSourceOptions } from './chain/stages/object-source.js';
export type { InputFormatOptions } from './chain/stages/input-format.js';
export type { VersionGuardOptions } from './chain/stages/version-guard.js';
export type { ChannelRouterOptions } from './chain/stages/channel-router.js';
export type { ThinkingTruncatorOptions, ThinkingMode } from './chain/stages/thinking-truncator.js';
export type { IdleWatchdogOptions, IdleWatchdogSettings } from './chain/stages/idle-watchdog.js';
export type { FilesSinkOptions } from './chain/sinks/files.js';
export type { StdoutSinkOptions, StdoutMode } from './chain/sinks/stdout.js';
export type { PinoSinkOptions } from './chain/sinks/pino.js';
export type { ProjectionSinkOptions } from './chain/sinks/projection.js';
export { createOtlpSink, OTLP_SINK_DEFAULTS, type OtlpSinkOptions } from './chain/sinks/otlp.js';
export {
  createClickHouseSink,
  CLICKHOUSE_SINK_DEFAULTS,
  type ClickHouseSinkOptions,
} from './chain/sinks/clickhouse.js';
export { createReportSink, REPORT_SINK_DEFAULTS, type ReportSinkOptions } from './chain/sinks/report.js';
export {
  StatsAggregator,
  statsRunOf,
  STATS_DEFAULTS,
  type StatsReport,
  type StatsGroup,
  type StatsSubagent,
  type StatsRun,
  type StatsChannel,
  type StatsGrouping,
} from './views/stats.js';
