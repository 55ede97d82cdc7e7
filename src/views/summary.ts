import type { RunView } from '../model/run-model.js';
import { escapeOneLine, escapeWorkflowCommands } from './escape.js';
import { ChannelLabels } from './text.js';
import { statusCounts, walkTree, type TreeLike, type TreeRow } from './walk.js';
import { withDefaults } from '../defaults.js';
import type { ReadonlyChannel } from '../model/tree.js';
import {
  basisCounts,
  basisMark,
  channelCosts,
  formatUsd,
  shownTokens,
  runUsdLeavesOut,
  usdLeavingOut,
  type ChannelCostView,
} from './cost.js';
import type { ReadonlyCostReport, TokensBasis } from '../model/cost.js';

/** How much of the tree the end-of-run summary shows before it only lists and counts. */
export const SUMMARY_DEFAULTS = Object.freeze({
  /** A tree of at most this many channels is shown whole; a larger one by its top rows. */
  maxTreeRows: 20,
  /** Failed subagents, and costliest ones, listed below a tree shown by its top. */
  listed: 5,
});

export interface SummaryOptions {
  maxTreeRows?: number;
  listed?: number;
}

/** `1 subagent`, `2 subagents`. */
export function counted(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}

/**
 * Every channel's label as the summary's tree gives it (main `main`, a subagent its description
 * or its type and tag): given in the same walk order, a description shown twice gets the tag on
 * the same row. The summary of a tree past `maxTreeRows` labels only the rows it shows.
 */
export function summaryLabels(tree: TreeLike): Map<string | null, string> {
  const labels = new ChannelLabels();
  return new Map(walkTree(tree).map(({ channel }) => [channel.id, labels.of(channel)]));
}

/**
 * The end-of-run summary for stderr: counts and cost, then the tree, one line per channel,
 * children under their parent. A tree larger than `maxTreeRows` channels is shown by its top
 * (main and the subagents it spawned, each with how many are below it), then its failed and
 * its costliest subagents, then how many more there are: bounded whatever the run's size.
 */
export function summaryText(session: RunView, out: string, options: SummaryOptions = {}): string {
  const { maxTreeRows, listed } = withDefaults(SUMMARY_DEFAULTS, options);
  const rows = walkTree(session.tree);
  const n = statusCounts(rows.map((r) => r.channel));
  const report = session.cost.report();
  const costs = channelCosts(report, session.tree, rows);
  const labels = new ChannelLabels();
  const lines = [
    `subtee: ${counted(rows.length - 1, 'subagent')} ` +
      `(${n.completed} completed, ${n.failed} failed, ` +
      `${stoppedText(n.stopped, ', ')}${n.running} running), ` +
      `${counted(session.input.lines, 'line')}, ${session.input.quarantined} quarantined` +
      // The lines read that the folder lacks, and why: they add up to `lines` with those in it.
      (session.input.unwritten > 0 ? `, ${session.input.unwritten} not written` : '') +
      (session.input.dropped > 0 ? `, ${session.input.dropped} dropped by a plugin` : '') +
      ` → ${escapeOneLine(out)}`,
    runCostLine(report, basisCounts(report, rows.map((r) => r.channel.id)), session.tree.main.status),
  ];
  const rowText = (prefix: string, { channel: ch, parentRow }: TreeRow, note = '') => {
    const unreached = parentRow < 0 && ch.id !== null && ch.orphan;
    const depth = ch.id !== null ? `  depth ${ch.depth ?? '?'}` : '';
    // Main without a line (the input held none it could read) has not run at all.
    const status = ch.id === null && ch.lines === 0 ? 'no lines' : ch.status;
    // A row may start with the label, after blanks only: a description that is a workflow command.
    return escapeWorkflowCommands(
      `${prefix}${labels.of(ch)}  ${status}${depth}  ` +
      `lines ${ch.lines}  tokens ${shownTokens(ch, costs.get(ch))}  ` +
      usdOf(costs.get(ch)) +
      (unreached ? '  (spawn not seen)' : '') +
      note
    );
  };
  const prefixOf = ({ channel: ch, level, guide, last, parentRow }: TreeRow) => {
    if (parentRow < 0 && ch.id !== null) return ch.orphan ? '?  ' : '   ';
    return level > 0 ? guide + (last ? '└─ ' : '├─ ') : '';
  };
  if (rows.length <= maxTreeRows) {
    for (const row of rows) lines.push(rowText(prefixOf(row), row));
    return lines.join('\n') + '\n';
  }
  // The top: main and its children, each with the size of its subtree.
  const below = new Array<number>(rows.length).fill(0);
  for (let i = rows.length - 1; i >= 0; i--) {
    const parent = rows[i].parentRow;
    if (parent >= 0) below[parent] += below[i] + 1;
  }
  const top = rows.flatMap((row, i) => (i === 0 || (row.level === 1 && row.parentRow === 0) ? [i] : []));
  const shownTop = top.slice(0, maxTreeRows);
  const shown = new Set<ReadonlyChannel>();
  for (const i of shownTop) {
    const row = rows[i];
    const cut = i !== 0 && row.last && shownTop.length < top.length;
    const prefix = i === 0 ? '' : row.last && !cut ? '└─ ' : '├─ ';
    lines.push(rowText(prefix, row, i !== 0 && below[i] > 0 ? `  (+${below[i]} below)` : ''));
    shown.add(row.channel);
  }
  if (shownTop.length < top.length)
    lines.push(`└─ … ${top.length - shownTop.length} more spawned by main`);
  const subagents = rows.slice(1);
  const failed = subagents.filter((r) => r.channel.status === 'failed');
  const failedListed = failed.filter((r) => !shown.has(r.channel)).slice(0, listed);
  if (failedListed.length > 0) {
    lines.push(`failed: ${failed.length}${failed.length > failedListed.length ? ', below the top:' : ''}`);
    for (const row of failedListed) {
      lines.push(rowText('   ', row));
      shown.add(row.channel);
    }
  }
  const usd = (r: TreeRow) => costs.get(r.channel)?.usd ?? -1;
  const costliest = subagents
    .filter((r) => !shown.has(r.channel) && usd(r) > 0)
    .sort((a, b) => usd(b) - usd(a) || a.channel.seq - b.channel.seq)
    .slice(0, listed);
  if (costliest.length > 0) {
    lines.push('costliest below the top:');
    for (const row of costliest) {
      lines.push(rowText('   ', row));
      shown.add(row.channel);
    }
  }
  const more = subagents.filter((r) => !shown.has(r.channel)).length;
  if (more > 0)
    lines.push(
      `… and ${counted(more, 'more subagent')}: index.json lists every one, ` +
        `subtee report ${escapeOneLine(out)} draws the whole tree`,
    );
  return lines.join('\n') + '\n';
}

/**
 * A channel's dollars: `~` before an estimated or stream figure, `$?` when unpriced or its
 * usage is unknown (never `$0` for what is not known).
 */
function usdOf(cost: ChannelCostView | undefined): string {
  if (cost === undefined) return formatUsd(null);
  return cost.usd === null ? formatUsd(null) : `${basisMark(cost.basis)}${formatUsd(cost.usd)}`;
}

/**
 * The run's dollars beside Claude Code's own, and how they were found. A sum that leaves out
 * channels of unknown usage says how many (`$0.0012 + 1 unknown`, as a transcript's `# cost:`
 * line); one where nothing is known is `$?`, never `$0`. Without the result's dollars it says
 * what is missing: the result line (main still `running`: only a result ends it), its total,
 * or any dollars at all (every Codex, Gemini and opencode result, a cut Claude one).
 */
function runCostLine(
  report: ReadonlyCostReport,
  counts: Record<TokensBasis, number>,
  mainStatus: string,
): string {
  const basis = report.basis === 'result' ? 'basis result' : `basis table ${report.prices_date ?? ''}`.trim();
  const claude =
    report.result_usd !== null
      ? `Claude Code ${formatUsd(report.result_usd)}`
      : report.basis === 'result'
        ? 'the result line states no total'
        : mainStatus === 'running'
          ? 'no result line'
          : 'the result line states no dollars';
  const unattributed =
    report.unattributed_usd === null ? '' : `, unattributed ${formatUsd(report.unattributed_usd)}`;
  const run = usdLeavingOut(report.usd, runUsdLeavesOut(report, counts.unknown));
  // The channels' dollars: a run with no subagent has no tree, only main.
  const channels = mainAlone(counts) ? 'main' : 'subagent tree';
  return (
    `cost ${run}: ${channels} ${usdLeavingOut(report.channels_usd, counts.unknown)}${unattributed} ` +
    `(${claude}; ${basis}; ${outputTokensText(counts)})`
  );
}

/** Whether the run's one channel is main: no subagent. */
function mainAlone(counts: Record<TokensBasis, number>): boolean {
  return counts.exact + counts.estimated + counts.stream + counts.unknown === 1;
}

/**
 * How the agents' output tokens were found: `agents' output tokens 3 exact, 1 unknown ($?)`;
 * with no subagent, main's alone, uncounted (`main's output tokens unknown ($?)`).
 */
function outputTokensText(counts: Record<TokensBasis, number>): string {
  if (!mainAlone(counts)) return `agents' output tokens ${basisText(counts)}`;
  return `main's output tokens ${basisText(counts).replace(/^1 /, '')}`;
}

/** `3 exact, 2 estimated (~), 1 unknown ($?)`: the channels by basis, the empty ones left out. */
function basisText(counts: Record<TokensBasis, number>): string {
  const parts: string[] = [];
  if (counts.exact > 0) parts.push(`${counts.exact} exact`);
  if (counts.estimated > 0) parts.push(`${counts.estimated} estimated (~)`);
  if (counts.stream > 0) parts.push(`${counts.stream} as the stream states (~, an undercount)`);
  if (counts.unknown > 0) parts.push(`${counts.unknown} unknown ($?)`);
  return parts.join(', ') || 'none';
}

/** The live one-line status for a terminal. */
export function statusLine(session: RunView, linesPerSecond: number): string {
  const n = statusCounts(session.tree.channels());
  return (
    `subtee: ${session.input.lines} lines (${Math.round(linesPerSecond)}/s) · ${n.running} running · ` +
    `${n.completed} done · ${n.failed} failed · ${stoppedText(n.stopped, ' · ')}` +
    `${session.input.quarantined} quarantined`
  );
}

/**
 * `2 stopped` and the separator after it, or nothing: most runs stop no subagent, and their
 * counts read as they always did.
 */
function stoppedText(stopped: number, separator: string): string {
  return stopped > 0 ? `${stopped} stopped${separator}` : '';
}
