import type { Session } from '../model/session.js';
import { escapeOneLine } from './escape.js';
import { channelLabel } from './text.js';
import { channelTokens, statusCounts, walkTree } from './walk.js';
import { basisCounts, basisMark, channelCosts, formatUsd, type ChannelCostView } from './cost.js';
import type { CostReport, TokensBasis } from '../model/cost.js';

/** The end-of-run tree for stderr: one line per channel, children under their parent. */
export function summaryText(session: Session, out: string): string {
  const rows = walkTree(session.tree);
  const n = statusCounts(rows.map((r) => r.channel));
  const report = session.cost.report();
  const costs = channelCosts(report, session.tree, rows);
  const lines = [
    `subtee: ${rows.length - 1} subagents ` +
      `(${n.completed} completed, ${n.failed} failed, ${n.running} running), ` +
      `${session.input.lines} lines, ${session.input.quarantined} quarantined → ${escapeOneLine(out)}`,
    runCostLine(report, basisCounts(report, rows.map((r) => r.channel.id))),
  ];
  for (const { channel: ch, level, guide, last, parentRow } of rows) {
    const unreached = parentRow < 0 && ch.id !== null;
    let prefix = '';
    if (unreached) prefix = ch.orphan ? '?  ' : '   ';
    else if (level > 0) prefix = guide + (last ? '└─ ' : '├─ ');
    const depth = ch.id !== null ? `  depth ${ch.depth ?? '?'}` : '';
    lines.push(
      `${prefix}${escapeOneLine(channelLabel(ch))}  ${ch.status}${depth}  ` +
        `lines ${ch.lines}  tokens ${tokensOf(ch, costs.get(ch)?.tokens)}  ` +
        usdOf(costs.get(ch)) +
        (unreached && ch.orphan ? '  (spawn not seen)' : ''),
    );
  }
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

/** Input plus output tokens, the output true or estimated when the cost ledger knows it. */
function tokensOf(
  ch: Parameters<typeof channelTokens>[0],
  tokens: { output_tokens: number } | null | undefined,
): number {
  return tokens ? (ch.usage.input_tokens ?? 0) + tokens.output_tokens : channelTokens(ch);
}

/** The run's dollars beside Claude Code's own, and how they were found. */
function runCostLine(report: CostReport, counts: Record<TokensBasis, number>): string {
  const basis = report.basis === 'result' ? 'basis result' : `basis table ${report.prices_date ?? ''}`.trim();
  const claude =
    report.result_usd !== null
      ? `Claude Code ${formatUsd(report.result_usd)}`
      : report.basis === 'result'
        ? 'the result line states no total'
        : 'no result line';
  const unattributed =
    report.unattributed_usd === null ? '' : `, unattributed ${formatUsd(report.unattributed_usd)}`;
  return (
    `cost ${formatUsd(report.usd)}: subagent tree ${formatUsd(report.channels_usd)}${unattributed} ` +
    `(${claude}; ${basis}; agents' output tokens ${basisText(counts)})`
  );
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
export function statusLine(session: Session, linesPerSecond: number): string {
  const n = statusCounts(session.tree.channels());
  return (
    `subtee: ${session.input.lines} lines (${Math.round(linesPerSecond)}/s) · ${n.running} running · ` +
    `${n.completed} done · ${n.failed} failed · ${session.input.quarantined} quarantined`
  );
}
