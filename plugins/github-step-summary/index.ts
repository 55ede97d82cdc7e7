import { appendFileSync } from 'node:fs';
import {
  contentBlocks,
  definePlugin,
  escapeHtml,
  escapeMarkdown,
  MAX_GUIDE_LEVELS,
  shownTokens,
  statusCounts,
  walkTree,
  writeFailed,
  type Channel,
  type RecordHandlers,
  type PluginRun,
} from '../../src/index.js';

/** GitHub rejects a step summary over 1 MiB; stay well below it. */
export const STEP_SUMMARY_DEFAULTS = Object.freeze({ maxBytes: 1_000_000, reportChars: 4000 });

export interface StepSummaryOptions {
  /** Where to append; `$GITHUB_STEP_SUMMARY` by default. */
  path?: string;
  maxBytes?: number;
  reportChars?: number;
}

const ICON: Record<string, string> = { completed: '✅', failed: '❌', stopped: '⏹️', running: '⏳' };

/**
 * The summary as Markdown, never longer than maxBytes: the tree first (one line per agent),
 * then each agent's last report in a collapsed section; what does not fit is counted in a
 * closing note instead of being cut mid-way.
 */
export function stepSummary(
  run: PluginRun,
  lastText: Map<Channel, string>,
  o: { maxBytes: number; reportChars: number },
): string {
  const n = statusCounts(run.tree.channels());
  const parts: string[] = [
    `## subtee: ${run.tree.size - 1} subagent${run.tree.size === 2 ? '' : 's'} — ` +
      `${n.completed} completed, ${n.failed} failed, ` +
      // Most runs stop no subagent: their line reads as it always did.
      `${n.stopped > 0 ? `${n.stopped} stopped, ` : ''}${n.running} running\n\n`,
    `${run.input.lines} line${run.input.lines === 1 ? '' : 's'}, ${run.input.quarantined} quarantined` +
      `${run.stall !== null ? ', **stalled**' : ''}${run.interrupted ? ', **interrupted**' : ''}\n\n`,
  ];
  let size = Buffer.byteLength(parts.join(''));
  const budget = o.maxBytes - 200; // room for the closing note
  const add = (s: string) => {
    const b = Buffer.byteLength(s);
    if (size + b > budget) return false;
    parts.push(s);
    size += b;
    return true;
  };
  const order = walkTree(run.tree).map((row) => row.channel);
  const costs = run.cost.report().channels;
  let omitted = 0;
  for (const ch of order) {
    const indent = '  '.repeat(Math.min(MAX_GUIDE_LEVELS, Math.max(0, ch.depth ?? 1)));
    const name =
      ch.id === null
        ? '**main**'
        : `${escapeMarkdown(ch.agent ?? 'agent')} \`${escapeMarkdown(ch.tag)}\` ` +
          (ch.description ? `“${escapeMarkdown(ch.description)}”` : '');
    if (
      !add(
        `${indent}- ${ICON[ch.status]} ${name} — ` +
          `${ch.status}, ${ch.lines} line${ch.lines === 1 ? '' : 's'}, ` +
          `${shownTokens(ch, costs.get(ch.id))} tokens\n`,
      )
    )
      omitted++;
  }
  add('\n');
  for (const ch of order) {
    const report = ch.summary ?? lastText.get(ch);
    if (!report) continue;
    const text =
      report.length > o.reportChars
        ? `${report.slice(0, o.reportChars)}… (${report.length - o.reportChars} more chars)`
        : report;
    const title =
      ch.id === null
        ? 'main'
        : `${escapeMarkdown(ch.agent ?? 'agent')} ${escapeMarkdown(ch.tag)} — ${ch.status}`;
    if (!add(`<details><summary>${title}</summary>\n\n<pre>${escapeHtml(text)}</pre>\n\n</details>\n\n`))
      omitted++;
  }
  if (omitted > 0)
    parts.push(
      `\n_${omitted} more entries not shown: the summary is kept under ${o.maxBytes} bytes; ` +
        `see the output folder for everything._\n`,
    );
  return parts.join('');
}

/**
 * Appends a Markdown summary of the run to `$GITHUB_STEP_SUMMARY` at the end (a failed or
 * stopped run too): the tree, statuses, and each agent's last report.
 */
export function githubStepSummary(
  options: StepSummaryOptions & { session: PluginRun; env?: NodeJS.ProcessEnv },
): RecordHandlers {
  const o = {
    ...STEP_SUMMARY_DEFAULTS,
    ...Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)),
  };
  const path = options.path ?? (options.env ?? process.env).GITHUB_STEP_SUMMARY;
  const lastText = new Map<Channel, string>();
  return {
    record(rec) {
      if (rec.kind !== 'line' || !rec.channel) return;
      for (const b of contentBlocks(rec.value))
        if (b.type === 'text' && b.text.trim()) lastText.set(rec.channel, b.text.slice(0, o.reportChars + 1));
    },
    end() {
      if (!path) return;
      try {
        appendFileSync(path, stepSummary(options.session, lastText, o));
      } catch (err) {
        throw writeFailed(path, err);
      }
    },
  };
}

export default definePlugin<StepSummaryOptions>({
  name: 'github-step-summary',
  kind: 'sink',
  kit: '^0.1.0',
  reads: ['assistant'],
  options: {
    path: {
      type: 'string',
      minLength: 1,
      description: 'file to append to (default $GITHUB_STEP_SUMMARY; nothing is written when neither is set)',
    },
    maxBytes: {
      type: 'integer',
      min: 1000,
      default: STEP_SUMMARY_DEFAULTS.maxBytes,
      description: 'size limit of the summary (GitHub allows 1 MiB)',
    },
    reportChars: {
      type: 'integer',
      min: 1,
      default: STEP_SUMMARY_DEFAULTS.reportChars,
      description: "characters of each agent's last report",
    },
  },
  create: (o, ctx) => githubStepSummary({ ...o, session: ctx.session, env: ctx.env }),
});
