import {
  roundUsd,
  type CostReport,
  type ModelCost,
  type ModelTokens,
  type OutputTokensBasis,
} from '../model/cost.js';
import { boundedText } from '../model/bounded-text.js';
import type { Session } from '../model/session.js';
import type { Channel } from '../model/tree.js';
import { escapeOneLine } from './escape.js';
import { walkTree, type TreeLike, type TreeRow } from './walk.js';

/** The run's cost in index.json (format documented in docs/output-folder.md). */
export interface IndexCost {
  /** The run's total: the result's `total_cost_usd`, else the channels' sum; null if a model is unpriced. */
  usd: number | null;
  channels_usd: number | null;
  /** What the result counts and no channel shows; null without a result. */
  unattributed_usd: number | null;
  basis: 'result' | 'table';
  prices_date: string | null;
  output_tokens: OutputTokensBasis;
  result_usd: number | null;
  models: Record<string, ModelCost>;
}

/** A channel's cost: its own, and its subtree's (itself and every channel under it). */
export interface ChannelCostView {
  models: string[];
  usd: number | null;
  subtreeUsd: number | null;
  tokens: ModelTokens | null;
}

export function indexCost(report: CostReport): IndexCost {
  return {
    usd: report.usd,
    channels_usd: report.channels_usd,
    unattributed_usd: report.unattributed_usd,
    basis: report.basis,
    prices_date: report.prices_date,
    output_tokens: report.output_tokens,
    result_usd: report.result_usd,
    models: report.models,
  };
}

/**
 * Every channel's cost and its subtree's, rolled up along the walk (children after parents,
 * so one backward pass): a subtree with an unpriced channel costs null.
 */
export function channelCosts(
  report: CostReport,
  tree: TreeLike,
  rows: readonly TreeRow[] = walkTree(tree),
): Map<Channel, ChannelCostView> {
  const views = rows.map((row): ChannelCostView => {
    const own = report.channels.get(row.channel.id);
    const usd = own ? own.usd : 0;
    return { models: own?.models ?? [], usd, subtreeUsd: usd, tokens: own?.tokens ?? null };
  });
  for (let i = rows.length - 1; i >= 0; i--) {
    const parent = rows[i].parentRow;
    if (parent < 0) continue;
    const into = views[parent];
    const from = views[i];
    into.subtreeUsd =
      into.subtreeUsd === null || from.subtreeUsd === null ? null : into.subtreeUsd + from.subtreeUsd;
  }
  for (const v of views) v.subtreeUsd = roundUsd(v.subtreeUsd);
  return new Map(rows.map((row, i) => [row.channel, views[i]]));
}

/** Longest model name a warning shows: the name comes from the stream (index.json has it whole). */
const SHOWN_MODEL_CHARS = 100;

/** The run's cost now; at the run's end, one UNKNOWN_MODEL_PRICE warning per model nothing prices. */
export function finalCost(session: Session): CostReport {
  const report = session.cost.report();
  for (const model of report.unpriced) {
    const shown = escapeOneLine(boundedText(model, SHOWN_MODEL_CHARS));
    session.warn(
      'UNKNOWN_MODEL_PRICE',
      `model ${shown} has no price (not in the price table of ${session.cost.prices.date}, ` +
        'no result line priced it): its cost is null; add it with --prices FILE',
      model,
    );
  }
  return report;
}

/** Dollars as shown to a person: `$0.0029`, more digits for small sums, `?` when unknown. */
export function formatUsd(usd: number | null): string {
  if (usd === null) return '$?';
  if (usd === 0) return '$0';
  const abs = Math.abs(usd);
  const digits = abs >= 1 ? 2 : abs >= 0.01 ? 4 : 6;
  return `$${usd.toFixed(digits)}`;
}
