import {
  roundingLost,
  roundUsd,
  usdToAdd,
  type ReadonlyChannelCost,
  type ReadonlyCostReport,
  type ModelCost,
  type ModelTokens,
  type TokensBasis,
} from '../model/cost.js';
import { cutText } from '../model/display.js';
import type { SinkRun } from '../model/session.js';
import type { ReadonlyChannel } from '../model/tree.js';
import { escapeOneLine } from './escape.js';
import { channelTokens, walkTree, type TreeLike, type TreeRow } from './walk.js';

/** The mark an estimated or stream figure carries where dollars are shown: `~` (see docs/cost.md). */
export function basisMark(basis: TokensBasis): string {
  return basis === 'estimated' || basis === 'stream' ? '~' : '';
}

/**
 * Dollars of a subtree as they are added up, in every view (docs/cost.md, "Unknown is
 * unknown"): a channel of unknown usage adds nothing and is counted apart; an unpriced one
 * makes the sum null. The channels' dollars are added before rounding (`usdToAdd`), free of
 * float dust however many they are (model/cost.ts's `addUsd`). The report page's script has a
 * copy of its own (report/client.ts), which adds the rounded figures of index.json plainly: it
 * shows at most six decimals.
 */
export interface UsdSum {
  /** The dollars of the channels whose usage is known, less `lost`; null once one is unpriced. */
  usd: number | null;
  /** What rounding lost adding up `usd` (see `addUsd`): the figure is `usd + lost`. */
  lost: number;
  /** Channels whose usage is known (in `usd`). */
  known: number;
  /** Channels whose usage is unknown (not in `usd`). */
  unknown: number;
}

/** One channel's dollars as a sum: `unknownUsage`, its usage is unknown (its dollars not in it). */
export function usdSumOf(usd: number | null, unknownUsage: boolean): UsdSum {
  return unknownUsage ? { usd: 0, lost: 0, known: 0, unknown: 1 } : { usd, lost: 0, known: 1, unknown: 0 };
}

/** A channel's cost as a sum: its dollars before rounding (`usdToAdd`); no cost, its usage unknown. */
export function channelUsdSum(cost: ReadonlyChannelCost | null | undefined): UsdSum {
  return cost && cost.basis !== 'unknown' ? usdSumOf(usdToAdd(cost), false) : usdSumOf(null, true);
}

/** Adds `from` (a child's subtree) into `into`. */
export function addUsdSum(into: UsdSum, from: UsdSum): void {
  if (into.usd === null || from.usd === null) into.usd = null;
  else {
    const usd = into.usd + from.usd;
    into.lost += roundingLost(into.usd, from.usd, usd) + from.lost;
    into.usd = usd;
  }
  into.known += from.known;
  into.unknown += from.unknown;
}

/** The sum's figure: null (`$?`) when no channel in it is of known usage, or one is unpriced. */
export function usdSumFigure(sum: UsdSum): number | null {
  return sum.known === 0 || sum.usd === null ? null : sum.usd + sum.lost;
}

/**
 * Dollars that leave out channels of unknown usage, as a person reads them: `$0.0012 + 2
 * unknown`; `$?` for a null figure (nothing known, or unpriced), never `$0 + 2 unknown`.
 */
export function usdLeavingOut(usd: number | null, unknown: number): string {
  return formatUsd(usd) + (usd !== null && unknown > 0 ? ` + ${unknown} unknown` : '');
}

/** The run's cost in index.json (format documented in docs/output-folder.md). */
export interface IndexCost {
  /**
   * The run's total: the result's `total_cost_usd`, else the channels' sum over those whose
   * usage is known; null if a model is unpriced or no channel's usage is known.
   */
  usd: number | null;
  /** The channels' dollars, those of unknown usage counted apart; null as `usd`. */
  channels_usd: number | null;
  /** What the result counts and no channel shows; null without a result. */
  unattributed_usd: number | null;
  basis: 'result' | 'table';
  prices_date: string | null;
  /** The least exact basis of the channels whose usage is known; `unknown` when none is. */
  output_tokens: TokensBasis;
  result_usd: number | null;
  models: Record<string, ModelCost>;
  /** Channels by how their output tokens were found (`unknown`: no usage, dollars null). */
  channels_by_basis: Record<TokensBasis, number>;
}

/** A channel's cost: its own, and its subtree's (itself and every channel under it). */
export interface ChannelCostView {
  models: readonly string[];
  /** null: unpriced, or its usage unknown (see `basis` and `reason`). */
  usd: number | null;
  /**
   * Its subtree's dollars, over the channels whose usage is known; null when one is unpriced or
   * none is known (`usdSumFigure`).
   */
  subtreeUsd: number | null;
  /** Channels in its subtree (itself included) whose usage is unknown: not in `subtreeUsd`. */
  subtreeUnknown: number;
  tokens: ModelTokens | null;
  basis: TokensBasis;
  reason: string | null;
  /** Its figures are all from Claude Code's transcript (the stream showed none). */
  transcriptOnly: boolean;
}

/** Why a channel the ledger never heard of has no cost. */
export const NO_USAGE_REASON = 'the stream shows no usage for it';

/** How many channels have each basis, over the channels of the tree. */
export function basisCounts(
  report: ReadonlyCostReport,
  ids: Iterable<string | null>,
): Record<TokensBasis, number> {
  const counts: Record<TokensBasis, number> = { exact: 0, estimated: 0, stream: 0, unknown: 0 };
  for (const id of ids) counts[report.channels.get(id)?.basis ?? 'unknown']++;
  return counts;
}

export function indexCost(
  report: ReadonlyCostReport,
  ids: Iterable<string | null> = report.channels.keys(),
): IndexCost {
  return {
    usd: report.usd,
    channels_usd: report.channels_usd,
    unattributed_usd: report.unattributed_usd,
    basis: report.basis,
    prices_date: report.prices_date,
    output_tokens: report.output_tokens,
    result_usd: report.result_usd,
    models: report.models,
    channels_by_basis: basisCounts(report, ids),
  };
}

/**
 * A channel's usage as index.json shows it: the stream's, with the ledger's output tokens (true,
 * estimated or a transcript's), or a transcript's counts whole when the stream showed none of
 * its messages. `tokens` null (no usage known): the stream's as they are.
 */
export function usageShown<U extends Readonly<Record<string, number>>>(
  usage: U,
  tokens: ModelTokens | null,
  transcriptOnly: boolean,
): U {
  if (!tokens) return usage;
  if (!transcriptOnly) return { ...usage, output_tokens: tokens.output_tokens };
  return {
    ...usage,
    input_tokens: tokens.input_tokens,
    output_tokens: tokens.output_tokens,
    cache_read_input_tokens: tokens.cache_read_input_tokens,
    cache_creation_input_tokens:
      tokens.cache_creation_5m_input_tokens + tokens.cache_creation_1h_input_tokens,
  };
}

/**
 * A channel's usage as every view shows it (index.json, the live page, the end-of-run summary,
 * pino's status line): its usage as `usageShown` makes it from its cost, the ledger's now or the
 * run's final one. No cost, or its usage unknown: the stream's as they are.
 */
export function channelUsage<U extends Readonly<Record<string, number>>>(
  usage: U,
  cost: { tokens: ModelTokens | null; basis: TokensBasis; transcriptOnly: boolean } | null | undefined,
): U {
  const tokens = cost && cost.basis !== 'unknown' ? cost.tokens : null;
  return usageShown(usage, tokens, cost?.transcriptOnly ?? false);
}

/**
 * Input plus output tokens of a channel as every view shows them (index.json, the summary, the
 * report): its usage as `channelUsage` makes it from its cost, which a plugin reads as
 * `run.cost.report().channels.get(channel.id)`. Without a cost, the stream's as they are.
 */
export function shownTokens(
  ch: { usage: Readonly<Record<string, number>> },
  cost?: Parameters<typeof channelUsage>[1],
): number {
  return channelTokens({ usage: channelUsage(ch.usage, cost) });
}

/**
 * Every channel's cost and its subtree's, rolled up along the walk (children after parents,
 * so one backward pass): a subtree with an unpriced channel costs null; a channel of unknown
 * usage adds nothing and is counted (`subtreeUnknown`), so the figure is shown as a floor; a
 * subtree of unknown usage only costs null, as the run does when none is known.
 */
export function channelCosts(
  report: ReadonlyCostReport,
  tree: TreeLike,
  rows: readonly TreeRow[] = walkTree(tree),
): Map<ReadonlyChannel, ChannelCostView> {
  const sums: UsdSum[] = [];
  const views = rows.map((row): ChannelCostView => {
    const own = report.channels.get(row.channel.id);
    const usd = own ? own.usd : null;
    sums.push(channelUsdSum(own));
    return {
      models: own?.models ?? [],
      usd,
      subtreeUsd: null,
      subtreeUnknown: 0,
      tokens: own && own.basis !== 'unknown' ? own.tokens : null,
      basis: own?.basis ?? 'unknown',
      reason: own ? own.reason : NO_USAGE_REASON,
      transcriptOnly: own?.transcriptOnly ?? false,
    };
  });
  for (let i = rows.length - 1; i >= 0; i--) {
    const parent = rows[i].parentRow;
    if (parent >= 0) addUsdSum(sums[parent], sums[i]);
  }
  views.forEach((v, i) => {
    v.subtreeUsd = roundUsd(usdSumFigure(sums[i]));
    v.subtreeUnknown = sums[i].unknown;
  });
  return new Map(rows.map((row, i) => [row.channel, views[i]]));
}

/**
 * How many channels of unknown usage the run's dollars leave out: those counted apart when the
 * figure is its channels' sum (no dollars from the result), none when the result states it.
 */
export function runUsdLeavesOut(report: ReadonlyCostReport, unknown: number): number {
  const channelsSum =
    report.usd !== null && report.unattributed_usd === null && report.usd === report.channels_usd;
  return channelsSum ? unknown : 0;
}

/** The run's cost now; at the run's end, one UNKNOWN_MODEL_PRICE warning per model nothing prices. */
export function finalCost(session: SinkRun): ReadonlyCostReport {
  const report = session.cost.report();
  for (const model of report.unpriced) {
    // The name comes from the stream (index.json has it whole): cut as a `preview`.
    const shown = escapeOneLine(cutText(model, 'preview').text);
    session.warn(
      'UNKNOWN_MODEL_PRICE',
      `model ${shown} has no price (not in the price table of ${session.cost.prices.date}, ` +
        'no result line priced it): its cost is null; add it with --prices FILE',
      model,
    );
  }
  return report;
}

/**
 * Dollars as shown to a person: `$0.0029`, more digits for small sums, `?` when unknown (or
 * not a sane figure: nothing shows a negative, NaN or infinite amount).
 */
export function formatUsd(usd: number | null): string {
  if (usd === null || !Number.isFinite(usd) || usd < 0) return '$?';
  if (usd === 0) return '$0';
  const digits = usd >= 1 ? 2 : usd >= 0.01 ? 4 : 6;
  return `$${usd.toFixed(digits)}`;
}
