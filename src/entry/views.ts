// subtee/views: what is made of the model: index.json, transcripts, stats, the projection's
// figures.
export { buildIndex, INDEX_FORMAT, type IndexHead } from '../views/index-file.js';
export { renderRecord } from '../views/text.js';
export { type Projections } from '../open.js';
export {
  PROJECTION_DEFAULTS,
  type ToolCallStatus,
  type LineEvent,
  type QuarantineEvent,
  type Totals,
  type CostFigures,
  type RunCost,
} from '../views/projection.js';
export { formatUsd, type IndexCost } from '../views/cost.js';
export { type LiveValues } from '../views/message-stream.js';
export { subtreeTotals, type TreeRow, type SubtreeTotals } from '../views/walk.js';
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
} from '../views/stats.js';
