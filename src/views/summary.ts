import { channelLabel, escapeOneLine } from './text.js';
import type { Run } from '../model/session.js';
import type { Channel } from '../model/tree.js';

/** Input plus output tokens of a channel. */
export function channelTokens(ch: Channel): number {
  return (ch.usage.input_tokens ?? 0) + (ch.usage.output_tokens ?? 0);
}

/** The end-of-run tree for stderr: one line per channel, children under their parent. */
export function summaryText(run: Run, out: string): string {
  const tree = run.tree;
  const all = tree.channels();
  const by = (s: string) => all.filter((c) => c.id !== null && c.status === s).length;
  const lines = [
    `subtee: ${all.length - 1} subagents (${by('completed')} completed, ${by('failed')} failed, ${by('running')} running), ` +
      `${run.input.lines} lines, ${run.input.quarantined} quarantined → ${escapeOneLine(out)}`,
  ];
  const row = (ch: Channel, prefix: string) =>
    `${prefix}${escapeOneLine(channelLabel(ch))}  ${ch.status}${ch.id !== null ? `  depth ${ch.depth ?? '?'}` : ''}  lines ${ch.lines}  tokens ${channelTokens(ch)}`;
  lines.push(row(tree.main, ''));
  const seen = new Set<Channel>([tree.main]);
  const walk = (ch: Channel, indent: string) => {
    ch.children.forEach((id, i) => {
      const child = tree.get(id);
      if (!child || seen.has(child)) return;
      seen.add(child);
      const last = i === ch.children.length - 1;
      lines.push(row(child, `${indent}${last ? '└─ ' : '├─ '}`));
      walk(child, `${indent}${last ? '   ' : '│  '}`);
    });
  };
  walk(tree.main, '');
  for (const ch of all) {
    if (seen.has(ch)) continue;
    seen.add(ch);
    lines.push(row(ch, ch.orphan ? '?  ' : '   ') + (ch.orphan ? '  (spawn not seen)' : ''));
    walk(ch, '   ');
  }
  return lines.join('\n') + '\n';
}

/** The live one-line status for a terminal. */
export function statusLine(run: Run, linesPerSecond: number): string {
  const subs = run.tree.channels().filter((c) => c.id !== null);
  const n = (s: string) => subs.filter((c) => c.status === s).length;
  return `subtee: ${run.input.lines} lines (${Math.round(linesPerSecond)}/s) · ${n('running')} running · ${n('completed')} done · ${n('failed')} failed · ${run.input.quarantined} quarantined`;
}
