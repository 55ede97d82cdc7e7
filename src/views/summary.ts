import type { Session } from '../model/session.js';
import { escapeOneLine } from './escape.js';
import { channelLabel } from './text.js';
import { channelTokens, statusCounts, walkTree } from './walk.js';

/** The end-of-run tree for stderr: one line per channel, children under their parent. */
export function summaryText(session: Session, out: string): string {
  const rows = walkTree(session.tree);
  const n = statusCounts(rows.map((r) => r.channel));
  const lines = [
    `subtee: ${rows.length - 1} subagents ` +
      `(${n.completed} completed, ${n.failed} failed, ${n.running} running), ` +
      `${session.input.lines} lines, ${session.input.quarantined} quarantined → ${escapeOneLine(out)}`,
  ];
  for (const { channel: ch, level, guide, last, parentRow } of rows) {
    const unreached = parentRow < 0 && ch.id !== null;
    let prefix = '';
    if (unreached) prefix = ch.orphan ? '?  ' : '   ';
    else if (level > 0) prefix = guide + (last ? '└─ ' : '├─ ');
    const depth = ch.id !== null ? `  depth ${ch.depth ?? '?'}` : '';
    lines.push(
      `${prefix}${escapeOneLine(channelLabel(ch))}  ${ch.status}${depth}  ` +
        `lines ${ch.lines}  tokens ${channelTokens(ch)}` +
        (unreached && ch.orphan ? '  (spawn not seen)' : ''),
    );
  }
  return lines.join('\n') + '\n';
}

/** The live one-line status for a terminal. */
export function statusLine(session: Session, linesPerSecond: number): string {
  const n = statusCounts(session.tree.channels());
  return (
    `subtee: ${session.input.lines} lines (${Math.round(linesPerSecond)}/s) · ${n.running} running · ` +
    `${n.completed} done · ${n.failed} failed · ${session.input.quarantined} quarantined`
  );
}
