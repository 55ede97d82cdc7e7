// subtee/model: the run model: the channel tree, message readers, content, costs and prices.
export {
  ChannelTree,
  type ChannelSnapshot,
  type ChannelStatus,
  type ChannelEvent,
} from '../model/tree.js';
export { type Warning, type AgentProducer, type Producer } from '../model/session.js';
export {
  RunModel,
  type ModelEvent,
  type RoutedEvent,
  type RunView,
  type ToolCallEvent,
  type ToolEvent,
  type ToolResultEvent,
  type UsageEvent,
} from '../model/run-model.js';
export { RoutedLine } from '../model/record.js';
export { lineContent, type ContentItem, type ContentKind } from '../model/content.js';
export {
  CUT_LENGTHS,
  cutText,
  displayPolicy,
  type CutClass,
  type DisplayPolicy,
} from '../model/display.js';
export {
  CostLedger,
  priceTokens,
  type CostReport,
  type ChannelCost,
  type ModelCost,
  type ModelTokens,
  type OutputTokensBasis,
  type CostBasis,
} from '../model/cost.js';
export {
  PRICE_TABLE,
  STANDARD_RATIOS,
  priceOf,
  overridePrices,
  type PriceTable,
  type ModelPrice,
} from '../model/prices.js';
export {
  type JsonObject,
  isObject,
  isPlainObject,
  nonEmpty,
  type TextBlock,
  type ThinkingBlock,
  type RedactedThinkingBlock,
  type ToolUseBlock,
  type ToolResultBlock,
  type ContentBlock,
  type ContentBlockType,
  type CountedBlockType,
  blockType,
  rawBlocks,
  asBlock,
  resultText,
  resultTextLazy,
  type Usage,
  type AssistantLine,
  type UserLine,
  type SystemLine,
  type ResultLine,
  type StreamEventLine,
  type StreamLine,
  type LineType,
  lineTypeOf,
  systemSubtypeOf,
  asStreamLine,
  channelIdOf,
  MAX_MESSAGE_TOKENS,
  usageNumbers,
  SPAWN_TOOLS,
  ASYNC_LAUNCH,
  runIdOf,
} from '../model/message.js';
