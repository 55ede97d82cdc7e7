/**
 * The index page over many run folders (`subtee report DIR` where DIR holds runs): one row
 * per run with its status, agents, tokens, cost and duration, linking each run's report page.
 * Plain HTML with no script at all: every string from the data is escaped text, and the
 * Content-Security-Policy allows nothing but the page's own style (by hash).
 */
import { createHash } from 'node:crypto';
import { escapeHtml } from '../escape.js';
import { formatUsd } from '../cost.js';
import { isObject } from '../../model/message.js';
import { formatMs } from '../stats.js';
import { counted } from '../summary.js';
import { endStatus, field, isoTime } from './model.js';
import { channelTokens, elapsedMs } from '../walk.js';

type RunStatus = 'completed' | 'failed' | 'running' | 'stalled' | 'interrupted' | 'unreadable';

export interface IndexPageRow {
  /** The run folder relative to the page, `/`-separated. */
  path: string;
  /** The run's report page relative to the index page; null when it could not be written. */
  report: string | null;
  status: RunStatus;
  /** Why the run could not be shown (an unreadable index.json, a report that failed). */
  problem: string | null;
  session: string | null;
  claudeCode: string | null;
  startMs: number | null;
  durationMs: number | null;
  subagents: number;
  failed: number;
  running: number;
  tokens: number;
  /** The run's dollars (`cost.usd` in index.json); null when unknown or not recorded. */
  costUsd: number | null;
}

/** A run's row from its parsed index.json; an `unreadable` row when it is not one. */
export function indexPageRow(path: string, report: string | null, index: unknown): IndexPageRow {
  const row: IndexPageRow = {
    path,
    report,
    status: 'unreadable',
    problem: null,
    session: null,
    claudeCode: null,
    startMs: null,
    durationMs: null,
    subagents: 0,
    failed: 0,
    running: 0,
    tokens: 0,
    costUsd: null,
  };
  if (!isObject(index) || !Array.isArray(index.channels)) {
    row.problem = 'not a subtee index.json';
    row.report = null;
    return row;
  }
  let first: number | null = null;
  let last: number | null = null;
  let mainStatus: unknown = 'running';
  for (const c of index.channels) {
    if (!isObject(c)) continue;
    const f = isoTime(c.first_seen);
    const l = isoTime(c.last_seen);
    if (f !== null && (first === null || f < first)) first = f;
    if (l !== null && (last === null || l > last)) last = l;
    row.tokens += channelTokens({ usage: isObject(c.usage) ? c.usage : {} });
    if (c.id === null) {
      mainStatus = c.status;
      continue;
    }
    row.subagents++;
    if (c.status === 'failed') row.failed++;
    else if (endStatus(c.status) === 'running') row.running++;
  }
  row.status =
    index.stalled === true
      ? 'stalled'
      : index.interrupted === true
        ? 'interrupted'
        : mainStatus === 'completed' || mainStatus === 'failed'
          ? mainStatus
          : 'running';
  row.session = field(index.session_id);
  row.claudeCode = field(index.claude_code_version);
  row.startMs = first;
  row.durationMs = elapsedMs(first, last);
  const cost = isObject(index.cost) ? index.cost.usd : undefined;
  row.costUsd = typeof cost === 'number' && Number.isFinite(cost) ? cost : null;
  return row;
}

/** Newest first; runs with no time last, by path. */
export function sortRows(rows: IndexPageRow[]): IndexPageRow[] {
  return rows.sort(
    (a, b) =>
      (b.startMs ?? -Infinity) - (a.startMs ?? -Infinity) || (a.path < b.path ? -1 : a.path > b.path ? 1 : 0),
  );
}

const INDEX_CSS = `
:root { --ok: #1f8a4c; --fail: #c62f2f; --run: #2f6fd0; --warn: #b26a00; --muted: #667; --line: #dde; }
* { box-sizing: border-box; }
body {
  margin: 0; padding: 12px 16px; font: 13px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif;
  color: #1c1c24; background: #f6f6f9;
}
h1 { font-size: 17px; margin: 0 0 4px; }
#summary { color: var(--muted); margin-bottom: 10px; }
table { border-collapse: collapse; width: 100%; background: #fff; border: 1px solid var(--line); }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid #eef; white-space: nowrap; }
th { color: var(--muted); font-weight: 600; position: sticky; top: 0; background: #fff; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.path { white-space: normal; word-break: break-all; }
.badge { display: inline-block; padding: 0 6px; border-radius: 8px; color: #fff; font-size: 11px; }
.badge.completed { background: var(--ok); }
.badge.failed, .badge.unreadable { background: var(--fail); }
.badge.running { background: var(--run); }
.badge.stalled, .badge.interrupted { background: var(--warn); }
.dim { color: var(--muted); }
`;

const sha256 = (s: string) => `'sha256-${createHash('sha256').update(s, 'utf8').digest('base64')}'`;

function indexPagePolicy(): string {
  return [
    "default-src 'none'",
    `style-src ${sha256(INDEX_CSS)}`,
    "script-src 'none'",
    "base-uri 'none'",
    "form-action 'none'",
  ].join('; ');
}

/** A relative link: each segment percent-encoded, so a folder name cannot leave the attribute or the page. */
function relativeHref(path: string): string {
  return path.split('/').map(encodeURIComponent).join('/');
}

const when = (ms: number | null) =>
  ms === null ? '–' : new Date(ms).toISOString().replace('T', ' ').slice(0, 19);

function rowHtml(r: IndexPageRow): string {
  const name = escapeHtml(r.path);
  const link = r.report === null ? name : `<a href="${escapeHtml(relativeHref(r.report))}">${name}</a>`;
  const title = r.problem ?? (r.session ? `session ${r.session}` : '');
  const problem = r.problem ? ` <span class="dim">${escapeHtml(r.problem)}</span>` : '';
  const unreadable = r.status === 'unreadable';
  const tokens = unreadable ? '–' : r.tokens.toLocaleString('en-US');
  const agents = unreadable
    ? '–'
    : `${r.subagents}${r.failed > 0 ? ` <span class="dim">(${r.failed} failed)</span>` : ''}` +
      `${r.running > 0 ? ` <span class="dim">(${r.running} running)</span>` : ''}`;
  return (
    `<tr data-status="${r.status}"><td class="path" title="${escapeHtml(title)}">${link}</td>` +
    `<td>${when(r.startMs)}</td>` +
    `<td><span class="badge ${r.status}">${r.status}</span>${problem}</td>` +
    `<td class="num" data-subagents="${r.subagents}" data-failed="${r.failed}">${agents}</td>` +
    `<td class="num" data-tokens="${r.tokens}">${tokens}</td>` +
    `<td class="num" data-cost="${r.costUsd ?? ''}">${formatUsd(r.costUsd)}</td>` +
    `<td class="num" data-duration-ms="${r.durationMs ?? ''}">${formatMs(r.durationMs)}</td>` +
    `<td>${r.claudeCode === null ? '–' : escapeHtml(r.claudeCode)}</td></tr>`
  );
}

/** The whole index page. */
export function indexPageHtml(rows: readonly IndexPageRow[], subteeVersion: string): string {
  const failed = rows.filter((r) => r.status !== 'completed').length;
  const priced = rows.filter((r) => r.costUsd !== null);
  const cost = priced.reduce((s, r) => s + (r.costUsd ?? 0), 0);
  const summary =
    `${counted(rows.length, 'run')}, ${failed} not completed` +
    (priced.length > 0 ? `, ${formatUsd(cost)} over ${counted(priced.length, 'priced run')}` : '') +
    ` · subtee ${escapeHtml(subteeVersion)}`;
  return (
    '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">\n' +
    `<meta http-equiv="Content-Security-Policy" content="${indexPagePolicy()}">\n` +
    '<meta name="referrer" content="no-referrer">' +
    '<meta name="viewport" content="width=device-width, initial-scale=1">\n' +
    `<title>subtee runs</title>\n<style>${INDEX_CSS}</style>\n</head><body>\n` +
    `<h1>subtee runs</h1>\n<div id="summary">${summary}</div>\n` +
    '<table id="runs"><thead><tr><th>run</th><th>started (UTC)</th><th>status</th>' +
    '<th class="num">subagents</th><th class="num">tokens</th><th class="num">cost</th>' +
    '<th class="num">duration</th><th>Claude Code</th></tr></thead>\n<tbody>\n' +
    rows.map(rowHtml).join('\n') +
    '\n</tbody></table>\n</body></html>\n'
  );
}
