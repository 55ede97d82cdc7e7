/// <reference lib="dom" />
/**
 * The report page's script. It runs in the browser, inlined into the page as one module
 * (so it imports nothing at run time), and puts every string from the data on screen with
 * textContent or as an SVG text node: nothing from the stream is ever parsed as markup. The
 * tree helpers at the top are plain functions, exported for tests that run them in Node.
 */
import type { ChannelView, Entry, ReportData, RunView } from './model.js';

export interface Totals {
  tokens: number;
  /** Dollars; null when any channel in it is unpriced. */
  usd: number | null;
  first: number | null;
  last: number | null;
}

/**
 * The page's own copy of views/cost.ts's subtree-dollars rule (UsdSum and its functions): the
 * page's script imports nothing at run time. test/cost.test.ts checks that the two agree.
 */
export interface UsdSum {
  /** The dollars of the channels whose usage is known; null once one of them is unpriced. */
  usd: number | null;
  /** Channels whose usage is known (in `usd`). */
  known: number;
  /** Channels whose usage is unknown (not in `usd`). */
  unknown: number;
}

/** One channel's dollars as a sum: `unknownUsage`, its usage is unknown (its dollars not in it). */
export function usdSumOf(usd: number | null, unknownUsage: boolean): UsdSum {
  return unknownUsage ? { usd: 0, known: 0, unknown: 1 } : { usd, known: 1, unknown: 0 };
}

/** Adds `from` (a child's subtree) into `into`. */
export function addUsdSum(into: UsdSum, from: UsdSum): void {
  into.usd = into.usd === null || from.usd === null ? null : into.usd + from.usd;
  into.known += from.known;
  into.unknown += from.unknown;
}

/** The sum's figure: null (`$?`) when no channel in it is of known usage, or one is unpriced. */
export function usdSumFigure(sum: UsdSum): number | null {
  return sum.known === 0 ? null : sum.usd;
}

/**
 * Dollars that leave out channels of unknown usage, as a person reads them: `$0.0012 + 2
 * unknown`; `$?` for a null figure (nothing known, or unpriced), never `$0 + 2 unknown`.
 */
export function usdLeavingOut(usd: number | null, unknown: number): string {
  return formatUsd(usd) + (usd !== null && unknown > 0 ? ` + ${unknown} unknown` : '');
}

/**
 * A channel's subtree figures over every channel under it, stated in the data when the page
 * leaves some of them out (see fitReportPage): its Σ columns show these, not a sum over the
 * channels the page kept.
 */
export interface StatedSubtree {
  tokens: number;
  /** As a UsdSum: the dollars of the channels of known usage, how many are known and unknown. */
  usd: number | null;
  known: number;
  unknown: number;
  first: number | null;
  last: number | null;
}

/** A channel as the page's data holds it: its `subtree` stated when the page leaves some of it out. */
export type PageChannel = ChannelView & { subtree?: StatedSubtree };

/** The stated figures of a row's subtree, as treeRows added them up. */
export function statedSubtree(row: Row): StatedSubtree {
  const { tokens, first, last } = row.sub;
  const { usd, known, unknown } = row.subUsd;
  return { tokens, usd, known, unknown, first, last };
}

export interface Row {
  index: number;
  ch: ChannelView;
  /** Nesting level in the page's tree (not the stream's depth, which may be unknown). */
  level: number;
  /** Row of the parent in the page's tree, -1 for a root. */
  parentRow: number;
  hasChildren: boolean;
  own: Totals;
  /** The subtree's: `usd` is `usdSumFigure(subUsd)`. */
  sub: Totals;
  subUsd: UsdSum;
  /** Its subtree's figures are stated in the data (some of it is not in the page), not added up. */
  stated: boolean;
}

/** A channel's tokens as the data states them (the summary's count, see Usage). */
export function tokensOf(ch: ChannelView): number {
  return ch.usage.tokens;
}

/**
 * The channels in tree order: the main conversation and everything under it, then the
 * channels whose spawn was never seen (and any that only lead back to each other, which
 * hostile input can arrange), each with its subtree. The walk uses an explicit stack, so
 * the stream cannot choose how deep the call stack grows, and visits every channel once.
 */
export function treeRows(channels: readonly PageChannel[]): Row[] {
  const byId = new Map<string, number>();
  channels.forEach((c, i) => {
    if (c.id !== null && !byId.has(c.id)) byId.set(c.id, i);
  });
  const main = channels.findIndex((c) => c.id === null);
  const children: number[][] = channels.map(() => []);
  const roots: number[] = [];
  channels.forEach((c, i) => {
    let parent = -1;
    if (c.id !== null && byId.get(c.id) === i && !c.orphan) {
      parent = c.parent === null ? main : (byId.get(c.parent) ?? -1);
    }
    if (parent === -1 || parent === i) roots.push(i);
    else children[parent].push(i);
  });
  const rows: Row[] = [];
  const visited = new Uint8Array(channels.length);
  const walk = (root: number) => {
    const stack: Array<[number, number, number]> = [[root, 0, -1]];
    while (stack.length > 0) {
      const [i, level, parentRow] = stack.pop()!;
      if (visited[i]) continue;
      visited[i] = 1;
      const ch = channels[i];
      const own = {
        tokens: tokensOf(ch),
        usd: ch.cost,
        first: ch.first ?? ch.spawned,
        last: ch.last ?? ch.first ?? ch.spawned,
      };
      // A channel of unknown usage adds nothing to its parents' sums (it is not unpriced).
      let subUsd = usdSumOf(ch.cost, ch.costBasis === 'unknown');
      let sub: Totals = { ...own, usd: null };
      const s = ch.subtree;
      if (s) {
        subUsd = { usd: s.usd, known: s.known, unknown: s.unknown };
        sub = { tokens: s.tokens, usd: null, first: s.first, last: s.last };
      }
      rows.push({ index: i, ch, level, parentRow, hasChildren: false, own, sub, subUsd, stated: !!s });
      const row = rows.length - 1;
      const kids = children[i];
      for (let k = kids.length - 1; k >= 0; k--) if (!visited[kids[k]]) stack.push([kids[k], level + 1, row]);
    }
  };
  for (const r of roots) walk(r);
  // Channels left are in cycles (each has a parent, none reaches a root): list them anyway.
  for (let i = 0; i < channels.length; i++) if (!visited[i]) walk(i);
  // Preorder puts every child after its parent, so one backward pass rolls subtrees up.
  for (let r = rows.length - 1; r >= 0; r--) {
    const p = rows[r].parentRow;
    if (p < 0) continue;
    const s = rows[r].sub;
    const t = rows[p].sub;
    rows[p].hasChildren = true;
    // A stated subtree already holds its children's figures, those of the page and the others.
    if (rows[p].stated) continue;
    t.tokens += s.tokens;
    addUsdSum(rows[p].subUsd, rows[r].subUsd);
    if (s.first !== null && (t.first === null || s.first < t.first)) t.first = s.first;
    if (s.last !== null && (t.last === null || s.last > t.last)) t.last = s.last;
  }
  for (const row of rows) row.sub.usd = usdSumFigure(row.subUsd);
  return rows;
}

export function elapsed(t: Totals): number | null {
  return t.first !== null && t.last !== null ? Math.max(0, t.last - t.first) : null;
}

export function formatDuration(ms: number | null): string {
  if (ms === null) return '–';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(s < 10 ? 2 : 1)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(Math.floor(s % 60)).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, '0')}m`;
}

/** Dollars: more digits for small sums, `?` when unpriced (the page imports nothing at run time). */
export function formatUsd(usd: number | null): string {
  if (usd === null || !Number.isFinite(usd) || usd < 0) return '$?';
  if (usd === 0) return '$0';
  const abs = Math.abs(usd);
  return `$${usd.toFixed(abs >= 1 ? 2 : abs >= 0.01 ? 4 : 6)}`;
}

/**
 * How many channels of unknown usage the run's dollars leave out: those counted apart when the
 * figure is its channels' sum (no dollars from the result), none when the result states it. The
 * page's own copy of views/cost.ts's runUsdLeavesOut (test/cost.test.ts checks that they agree).
 */
export function runUsdLeavesOut(
  cost: { usd: number | null; channelsUsd: number | null; unattributedUsd: number | null },
  unknown: number,
): number {
  const channelsSum = cost.usd !== null && cost.unattributedUsd === null && cost.usd === cost.channelsUsd;
  return channelsSum ? unknown : 0;
}

/**
 * The run's cost beside Claude Code's own, for the header, as the end-of-run summary shows it:
 * a sum that leaves out the `unknown` channels of unknown usage says how many.
 */
export function costLine(run: RunView, unknown: number, mainStatus: string): string {
  const c = run.cost;
  if (!c) return '';
  // As the summary words it: main is `running` until a result line ends it.
  const claude =
    c.resultUsd !== null
      ? `Claude Code ${formatUsd(c.resultUsd)}`
      : c.basis === 'result'
        ? 'the result line states no total'
        : mainStatus === 'running'
          ? 'no result line'
          : 'the result line states no dollars';
  const unattributed = c.unattributedUsd === null ? '' : ` · unattributed ${formatUsd(c.unattributedUsd)}`;
  const basis = c.basis === 'result' ? 'basis result' : `basis table ${c.pricesDate ?? ''}`.trim();
  return (
    `cost ${usdLeavingOut(c.usd, runUsdLeavesOut(c, unknown))} (${claude}) · ` +
    `agents ${usdLeavingOut(c.channelsUsd, unknown)}${unattributed} · ` +
    `${basis} · output tokens ${c.outputTokens}`
  );
}

export function formatCount(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

/**
 * `1 subagent`, `1,200 lines`: a count and its noun, in the singular for one. The page's own
 * copy of views/summary.ts's counted, with thousands separators (test/report.test.ts checks that
 * they agree).
 */
export function counted(n: number, noun: string): string {
  return `${formatCount(n)} ${noun}${n === 1 ? '' : 's'}`;
}

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

function clock(t: number | null): string {
  return t === null ? '–' : `${new Date(t).toISOString().slice(11, 23)}Z`;
}

export function channelLabel(ch: ChannelView): string {
  if (ch.id === null) return 'main';
  return ch.agent ?? 'agent';
}

/** Where a deep link points: `#agent=<id>` for a subagent, `#main` for the main conversation. */
export function linkFor(ch: ChannelView): string {
  return ch.id === null ? '#main' : `#agent=${encodeURIComponent(ch.id)}`;
}

export function targetOf(hash: string): { id: string | null } | null {
  if (hash === '#main') return { id: null };
  const m = /^#agent=(.*)$/.exec(hash);
  if (!m) return null;
  try {
    return { id: decodeURIComponent(m[1]) };
  } catch {
    return null;
  }
}

// Shown text is cut by whole characters: a cut inside a surrogate pair would show a lone half.
// The page imports nothing, so these are the page's own copies of bounded-text's headOf/tailOf.

const isHigh = (code: number) => code >= 0xd800 && code <= 0xdbff;
const isLow = (code: number) => code >= 0xdc00 && code <= 0xdfff;
/** Whether index `i` of `s` falls between the two halves of a surrogate pair. */
const splitsPair = (s: string, i: number) =>
  i > 0 && i < s.length && isHigh(s.charCodeAt(i - 1)) && isLow(s.charCodeAt(i));

/** The first `max` UTF-16 units of `s`, one fewer when the cut would fall inside a pair. */
export function headOf(s: string, max: number): string {
  if (max <= 0) return '';
  if (s.length <= max) return s;
  return s.slice(0, splitsPair(s, max) ? max - 1 : max);
}

/** The last `max` UTF-16 units of `s`, one fewer when the cut would fall inside a pair. */
export function tailOf(s: string, max: number): string {
  if (max <= 0) return '';
  if (s.length <= max) return s;
  const from = s.length - max;
  return s.slice(splitsPair(s, from) ? from + 1 : from);
}

/**
 * Levels a timeline label is indented by, 12 px each: each takes two units off its label, so the
 * label ends where the level above's does, down to the level whose label is cut to its shortest
 * (8 units); deeper ones are not indented further, or they would run into the plot or off the page.
 */
const TIMELINE_INDENT_LEVELS = 13;

/** A timeline label: whole within `36 - 2·level` units, else its head and `…`. */
export function timelineLabel(label: string, level: number): string {
  return label.length > 36 - level * 2 ? `${headOf(label, Math.max(8, 34 - level * 2))}…` : label;
}

/** A card's last words: the text's last 300 units after `…` when longer. */
export function lastWords(text: string): string {
  return text.length > 300 ? `…${tailOf(text, 300)}` : text;
}

/**
 * Lower case for search, one UTF-16 unit for one: a character whose lower case is longer or
 * shorter (`İ`) is kept as it is, so an index into the folded text is an index into the text.
 */
export function foldCase(s: string): string {
  const low = s.toLowerCase();
  if (low.length === s.length) return low;
  let out = '';
  for (const ch of s) {
    const l = ch.toLowerCase();
    out += l.length === ch.length ? l : ch;
  }
  return out;
}

/**
 * A search hit's context in `text`: up to 40 units before the match at `at` and 60 after its
 * `length`, by whole characters, with `…` where the text goes on.
 */
export function hitContext(
  text: string,
  at: number,
  length: number,
): { before: string; match: string; after: string } {
  let start = Math.max(0, at - 40);
  if (splitsPair(text, start)) start++;
  let end = Math.min(text.length, at + length + 60);
  if (splitsPair(text, end) && end - 1 >= at + length) end--;
  return {
    before: `${start > 0 ? '…' : ''}${text.slice(start, at)}`,
    match: text.slice(at, at + length),
    after: `${text.slice(at + length, end)}${end < text.length ? '…' : ''}`,
  };
}

/** Only links the report itself makes: a transcript file inside the output folder. */
const SAFE_LOG = /^(main|agents\/[A-Za-z0-9_.~-]{1,200})\.log$/;

// ---------------------------------------------------------------------------------------
// The page. Everything below touches the DOM.

const SVG = 'http://www.w3.org/2000/svg';
const ROW_H = 20;
const BAR_H = 12;
const AXIS_H = 22;
const LABEL_W = 250;
/** Above this many rows the tree and the timeline draw only the rows in view, plus a margin. */
const WINDOW_ABOVE = 400;
const WINDOW_MARGIN = 60;

type Key = string;
const keyOf = (id: string | null): Key => (id === null ? '' : `a:${id}`);

interface State {
  data: ReportData;
  byKey: Map<Key, ChannelView>;
  rows: Row[];
  visible: Row[];
  collapsed: Set<Key>;
  selected: Key | null;
  view: { from: number; to: number } | null;
  /** Height of a tree row as laid out (measured once rows exist). */
  treeRowH: number;
  ended: boolean;
  lower: WeakMap<Entry, string>;
  /** The tree's column widths (px), the room its names keep, the number columns sized so far. */
  columns?: { widths: number[]; nameRoom: number; sized: Set<number> };
}

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  cls?: string,
  text?: string,
): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function svg<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | number>,
): SVGElementTagNameMap[K] {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
}

function $(id: string): HTMLElement {
  return document.getElementById(id)!;
}

function badge(status: string): HTMLElement {
  return el('span', `badge ${status}`, status);
}

function boot(): void {
  const app = $('app');
  const data = JSON.parse($('subtee-data').textContent ?? '{}') as ReportData;
  const state: State = {
    data,
    byKey: new Map(),
    rows: [],
    visible: [],
    collapsed: new Set(),
    selected: null,
    view: null,
    treeRowH: 25,
    ended: !data.live,
    lower: new WeakMap(),
  };
  for (const ch of data.channels) if (!state.byKey.has(keyOf(ch.id))) state.byKey.set(keyOf(ch.id), ch);

  let frame = 0;
  const render = () => {
    frame = 0;
    state.rows = treeRows(state.data.channels);
    renderHeader(state);
    renderTree(state);
    renderTimeline(state);
    if (state.data.live) renderCards(state);
    renderTranscript(state, false);
    app.dataset.channels = String(state.data.channels.length);
    app.dataset.entries = String(state.data.channels.reduce((n, c) => n + c.entries.length, 0));
    // Said once the page shows what the run ended with, not when the end arrives.
    if (state.ended) app.dataset.state = 'ended';
  };
  const schedule = () => {
    frame ||= requestAnimationFrame(render);
  };

  const select = (key: Key | null, focusEntry?: number) => {
    state.selected = key;
    const ch = key === null ? undefined : state.byKey.get(key);
    if (ch && location.hash !== linkFor(ch)) history.replaceState(null, '', linkFor(ch));
    const at = state.visible.findIndex((r) => keyOf(r.ch.id) === key);
    if (at >= 0) {
      bringIntoView($('tree-wrap'), at * state.treeRowH, state.treeRowH);
      bringIntoView($('timeline-wrap'), AXIS_H + at * ROW_H, ROW_H);
    }
    renderTree(state);
    renderTimeline(state);
    renderTranscript(state, true, focusEntry);
  };
  const fromHash = () => {
    const t = targetOf(location.hash);
    if (t && state.byKey.has(keyOf(t.id))) select(keyOf(t.id));
  };
  wireTimeline(state, select, () => renderTimeline(state));
  wireTree(state, select, render);
  onScroll($('tree-wrap'), () => renderTree(state, false));
  onScroll($('timeline-wrap'), () => renderTimeline(state));
  wireCards(select);
  wireSearch(state, select);
  addEventListener('hashchange', fromHash);

  render();
  fromHash();
  if (data.live) connect(state, schedule, app);
  else app.dataset.state = 'ready';
}

/** Redraws on scroll, once per frame: long lists draw only the rows in view. */
function onScroll(box: HTMLElement, redraw: () => void): void {
  let frame = 0;
  box.addEventListener(
    'scroll',
    () => {
      frame ||= requestAnimationFrame(() => {
        frame = 0;
        redraw();
      });
    },
    { passive: true },
  );
}

function bringIntoView(box: HTMLElement, top: number, height: number): void {
  if (top < box.scrollTop || top + height > box.scrollTop + box.clientHeight)
    box.scrollTop = Math.max(0, top - box.clientHeight / 3);
}

/** The rows to draw: all of them when there are few, else those in view and a margin. */
function windowOf(box: HTMLElement, total: number, rowH: number, offset: number): [number, number] {
  if (total <= WINDOW_ABOVE) return [0, total];
  const first = Math.max(0, Math.floor((box.scrollTop - offset) / rowH) - WINDOW_MARGIN);
  return [first, Math.min(total, first + Math.ceil(box.clientHeight / rowH) + 2 * WINDOW_MARGIN)];
}

// ---- header ------------------------------------------------------------------------------

function renderHeader(state: State): void {
  const { run, channels, live, page } = state.data;
  const subs = channels.filter((c) => c.id !== null);
  const n = (s: string) => subs.filter((c) => c.status === s).length;
  $('mode').textContent = live ? (state.ended ? 'live · run ended' : 'live') : '';
  const leftOut = page.leftOutChannels ?? 0;
  const missing = leftOut > 0 ? ` in this page (${formatCount(leftOut)} left out)` : '';
  $('summary').textContent =
    `${counted(subs.length, 'subagent')}${missing}: ` +
    `${formatCount(n('completed'))} completed, ${formatCount(n('failed'))} failed, ` +
    (n('stopped') > 0 ? `${formatCount(n('stopped'))} stopped, ` : '') +
    `${formatCount(n('running'))} running · ` +
    `${counted(run.input.lines, 'line')} · ${formatCount(run.input.quarantined)} quarantined`;
  const banner = $('banner');
  // The STALL warning says what was in flight and for how long.
  const stall = run.warnings.find((w) => w.code === 'STALL');
  const why = run.stalled
    ? `This run stalled: the idle watchdog fired (${stall ? stall.message : 'no details recorded'}).`
    : run.interrupted
      ? 'This run was interrupted before its input ended.'
      : '';
  banner.hidden = why === '';
  banner.textContent = why ? `${why} Agents still running at that point are marked running.` : '';
  const ul = $('warnings');
  ul.replaceChildren(
    ...run.warnings.map((w) => {
      const li = el('li');
      li.dataset.code = w.code;
      li.append(el('code', '', w.code), document.createTextNode(w.message));
      return li;
    }),
  );
  $('facts').textContent = factsLine(run);
  // Channels of unknown usage: those under each root, the ones the page leaves out included.
  const unknown = state.rows.reduce((sum, r) => sum + (r.parentRow < 0 ? r.subUsd.unknown : 0), 0);
  const main = state.data.channels.find((ch) => ch.id === null);
  $('cost').textContent = costLine(run, unknown, main ? main.status : 'running');
  $('pageinfo').textContent = live
    ? ''
    : `page ${formatBytes(page.bytes)} (limit ${formatBytes(page.limitBytes)})` +
      (page.cutChannels > 0
        ? ` · ${counted(page.cutChannels, 'transcript')} cut to fit, the full ones are in the .log files`
        : ' · no transcript cut') +
      (page.fieldChars === undefined
        ? ''
        : ` · prompts, final reports and descriptions shortened to ${counted(page.fieldChars, 'char')}`) +
      (leftOut > 0
        ? ` · ${formatCount(leftOut)} of ${counted(channels.length + leftOut, 'agent')} left out to fit ` +
          '(the deepest; index.json and the .log files have them all)'
        : '');
}

function factsLine(run: RunView): string {
  return [
    `subtee ${run.subtee}`,
    `Claude Code ${run.claudeCode ?? 'unknown'}`,
    run.session ? `session ${run.session}` : null,
    `${formatBytes(run.input.bytes)} read`,
    run.quarantine ? `quarantine: ${run.quarantine}` : null,
  ]
    .filter(Boolean)
    .join(' · ');
}

// ---- tree ------------------------------------------------------------------------------

function visibleRows(state: State): Row[] {
  const out: Row[] = [];
  let hideBelow = Infinity;
  for (const r of state.rows) {
    if (r.level > hideBelow) continue;
    hideBelow = Infinity;
    out.push(r);
    if (r.hasChildren && state.collapsed.has(keyOf(r.ch.id))) hideBelow = r.level;
  }
  return out;
}

function spacer(height: number): HTMLElement {
  const tr = el('tr', 'spacer');
  const td = el('td');
  td.colSpan = 8;
  td.style.height = `${height}px`;
  tr.append(td);
  return tr;
}

/** Levels of the tree shown by indentation; deeper rows are indented as much as this. */
const INDENT_LEVELS = 4;

function renderTree(state: State, again = true): void {
  if (again) state.visible = visibleRows(state);
  const body = document.querySelector('#tree tbody')!;
  const frag = document.createDocumentFragment();
  const [from, to] = windowOf($('tree-wrap'), state.visible.length, state.treeRowH, 0);
  if (from > 0) frag.append(spacer(from * state.treeRowH));
  for (const r of state.visible.slice(from, to)) {
    const ch = r.ch;
    const key = keyOf(ch.id);
    const tr = el('tr', 'tree-row');
    tr.dataset.key = key;
    tr.dataset.status = ch.status;
    tr.dataset.level = String(r.level);
    tr.setAttribute('aria-level', String(r.level + 1));
    if (key === state.selected) tr.classList.add('selected');
    const name = el('td', 'name');
    // Indented by depth up to INDENT_LEVELS: deeper rows keep the room for their names (the
    // depth column says how deep they are).
    name.style.paddingLeft = `${6 + Math.min(r.level, INDENT_LEVELS) * 16}px`;
    const toggle = el('button', 'toggle', r.hasChildren ? (state.collapsed.has(key) ? '▸' : '▾') : '');
    toggle.type = 'button';
    toggle.tabIndex = r.hasChildren ? 0 : -1;
    // The description tells agents of one type apart, so it leads.
    if (ch.description)
      name.append(toggle, el('span', 'agent', ch.description), el('span', 'desc dim', channelLabel(ch)));
    else name.append(toggle, el('span', 'agent', channelLabel(ch)));
    if (ch.orphan) name.append(el('span', 'dim', ' (spawn not seen)'));
    name.title = `${channelLabel(ch)} ${ch.description ?? ''} ${ch.id ?? ''}`;
    const status = el('td');
    status.append(badge(ch.status));
    if (ch.background) {
      const bg = el('span', 'bgtag', 'bg');
      bg.title = 'ran in the background';
      status.append(' ', bg);
    }
    const num = (v: string) => el('td', 'num', v);
    tr.append(
      name,
      status,
      num(ch.depth === null ? '?' : String(ch.depth)),
      num(formatCount(r.own.tokens)),
      num(formatCount(r.sub.tokens)),
      num(formatDuration(elapsed(r.own))),
      num(formatDuration(elapsed(r.sub))),
      num(formatCount(ch.lines)),
      num((ch.costBasis === 'estimated' || ch.costBasis === 'stream' ? '~' : '') + formatUsd(r.own.usd)),
      num(usdLeavingOut(r.sub.usd, r.subUsd.unknown)),
    );
    frag.append(tr);
  }
  if (to < state.visible.length) frag.append(spacer((state.visible.length - to) * state.treeRowH));
  body.replaceChildren(frag);
  fitNumberColumns(state, body);
  const row = body.querySelector<HTMLElement>('tr.tree-row');
  if (row && row.offsetHeight > 0) state.treeRowH = row.offsetHeight;
}

/** Horizontal padding of a tree cell (REPORT_CSS: `padding: 3px 5px`), and a pixel for rounding. */
const CELL_PAD = 11;

/**
 * Sizes each number column of the tree to its widest figure drawn and its head (a Σ cost that
 * leaves out agents, `$0.0012 + 2 unknown`; counts in the billions) and the table's least
 * width with them, so no figure is cut short and the names keep the room the style sheet gave
 * them. Columns only grow once sized: the tree does not jump back and forth as rows are drawn.
 */
function fitNumberColumns(state: State, body: Element): void {
  const table = $('tree');
  const heads = [...table.querySelectorAll<HTMLTableCellElement>('thead th')];
  if (table.getBoundingClientRect().width === 0) return;
  // Read once, as the style sheet lays the table out: the columns' widths and the names' room.
  state.columns ??= (() => {
    const widths = heads.map((th) => th.getBoundingClientRect().width);
    const least = parseFloat(getComputedStyle(table).minWidth) || 0;
    return { widths, nameRoom: least - widths.slice(1).reduce((n, w) => n + w, 0), sized: new Set() };
  })();
  const cols = state.columns;
  const range = document.createRange();
  const need = new Map<number, number>();
  const measure = (cell: HTMLTableCellElement) => {
    range.selectNodeContents(cell);
    const px = Math.ceil(range.getBoundingClientRect().width) + CELL_PAD;
    need.set(cell.cellIndex, Math.max(need.get(cell.cellIndex) ?? 0, px));
  };
  for (const th of heads) if (th.classList.contains('num')) measure(th);
  for (const td of body.querySelectorAll<HTMLTableCellElement>('tr.tree-row td.num')) measure(td);
  let changed = false;
  for (const [column, px] of need) {
    if (cols.sized.has(column) && px <= cols.widths[column]) continue;
    cols.sized.add(column);
    cols.widths[column] = px;
    heads[column].style.width = `${px}px`;
    changed = true;
  }
  if (changed)
    table.style.minWidth = `${Math.ceil(cols.nameRoom + cols.widths.slice(1).reduce((n, w) => n + w, 0))}px`;
}

function wireTree(state: State, select: (k: Key) => void, rerender: () => void): void {
  document.querySelector('#tree tbody')!.addEventListener('click', (ev) => {
    const target = ev.target as HTMLElement;
    const tr = target.closest<HTMLElement>('tr.tree-row');
    if (!tr) return;
    const key = tr.dataset.key!;
    if (target.closest('.toggle')) {
      if (state.collapsed.has(key)) state.collapsed.delete(key);
      else state.collapsed.add(key);
      rerender();
      return;
    }
    select(key);
  });
}

// ---- timeline ----------------------------------------------------------------------------

function runSpan(state: State): { from: number; to: number } | null {
  let from = Infinity;
  let to = -Infinity;
  for (const r of state.rows) {
    if (r.own.first !== null) from = Math.min(from, r.own.first);
    if (r.own.last !== null) to = Math.max(to, r.own.last);
  }
  if (!Number.isFinite(from)) return null;
  // A little room after the last line, so the shortest bars at the very end stay visible.
  const pad = Math.max(1, (to - from) * 0.02);
  return { from, to: Math.max(to, from) + pad };
}

function niceStep(span: number, px: number): number {
  const raw = span / Math.max(1, px / 90);
  const pow = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * pow >= raw) return m * pow;
  return 10 * pow;
}

function renderTimeline(state: State): void {
  const box = $('timeline');
  const width = Math.max(600, ($('timeline-wrap').clientWidth || 900) - 2);
  const rows = state.visible;
  const height = AXIS_H + rows.length * ROW_H + 6;
  box.setAttribute('width', String(width));
  box.setAttribute('height', String(height));
  const span = runSpan(state);
  const view = state.view ?? span;
  const plotW = width - LABEL_W - 10;
  const x = (t: number) => LABEL_W + ((t - view!.from) / (view!.to - view!.from)) * plotW;
  const frag = document.createDocumentFragment();
  const defs = svg('defs', {});
  const pat = svg('pattern', {
    id: 'bg-hatch',
    width: 6,
    height: 6,
    patternUnits: 'userSpaceOnUse',
    patternTransform: 'rotate(45)',
  });
  pat.append(svg('rect', { width: 3, height: 6, fill: 'rgba(255,255,255,0.45)' }));
  defs.append(pat);
  const clip = svg('clipPath', { id: 'plot-clip' });
  clip.append(svg('rect', { x: LABEL_W, y: 0, width: plotW, height }));
  defs.append(clip);
  frag.append(defs);
  const axis = svg('g', { class: 'axis' });
  const plot = svg('g', { 'clip-path': 'url(#plot-clip)' });
  if (view && span) {
    const step = niceStep(view.to - view.from, plotW);
    for (let t = Math.ceil((view.from - span.from) / step) * step + span.from; t <= view.to; t += step) {
      const gx = x(t);
      axis.append(svg('line', { class: 'grid', x1: gx, x2: gx, y1: AXIS_H - 4, y2: height }));
      const label = svg('text', { x: gx + 2, y: 14 });
      label.textContent = `+${formatDuration(t - span.from)}`;
      axis.append(label);
    }
    $('range').textContent =
      `${clock(view.from)} – ${clock(view.to)} ` +
      `(${formatDuration(view.to - view.from)} shown of ${formatDuration(span.to - span.from)})`;
  } else {
    $('range').textContent = state.data.live ? 'no timestamps yet' : 'no timestamps in this stream';
  }
  frag.append(axis);
  const labels = svg('g', {});
  const [from, to] = windowOf($('timeline-wrap'), rows.length, ROW_H, AXIS_H);
  rows.slice(from, to).forEach((r, k) => {
    const i = from + k;
    const y = AXIS_H + i * ROW_H;
    const ch = r.ch;
    const key = keyOf(ch.id);
    if (key === state.selected)
      plot.append(svg('rect', { class: 'sel', x: LABEL_W, y, width: plotW, height: ROW_H }));
    const indent = Math.min(r.level, TIMELINE_INDENT_LEVELS);
    const text = svg('text', { x: 4 + indent * 12, y: y + 14 });
    const label = ch.description ? `${ch.description} · ${channelLabel(ch)}` : channelLabel(ch);
    text.textContent = timelineLabel(label, indent);
    labels.append(text);
    if (!view || r.own.first === null) return;
    const x0 = x(r.own.first);
    const x1 = Math.max(x0 + 4, x(r.own.last ?? r.own.first));
    const g = svg('g', { class: 'bar-row' });
    const bar = svg('rect', {
      class: `bar ${ch.status}`,
      x: x0,
      y: y + (ROW_H - BAR_H) / 2,
      width: x1 - x0,
      height: BAR_H,
      rx: 2,
    });
    bar.dataset.key = key;
    bar.dataset.status = ch.status;
    bar.dataset.background = String(ch.background === true);
    g.append(bar);
    if (ch.background)
      g.append(
        svg('rect', {
          class: 'bgover',
          x: x0,
          y: y + (ROW_H - BAR_H) / 2,
          width: x1 - x0,
          height: BAR_H,
          rx: 2,
        }),
      );
    if (ch.status === 'running' && span && (r.own.last ?? 0) < span.to) {
      g.append(svg('line', { class: 'tail', x1, x2: x(span.to), y1: y + ROW_H / 2, y2: y + ROW_H / 2 }));
    }
    if (ch.ticks.length > 0) {
      let d = '';
      for (const t of ch.ticks) d += `M${x(t).toFixed(1)} ${y + 2}V${y + ROW_H - 2}`;
      g.append(svg('path', { class: 'ticks', d }));
    }
    plot.append(g);
  });
  frag.append(plot, labels);
  box.replaceChildren(frag);
}

function tipText(r: Row): string {
  const ch = r.ch;
  const u = ch.usage;
  return [
    `${channelLabel(ch)}${ch.description ? ` · ${ch.description}` : ''}`,
    `${ch.status}${ch.background ? ', background' : ch.background === false ? ', foreground' : ''}`,
    `start ${clock(r.own.first)}   end ${clock(r.own.last)}`,
    `elapsed ${formatDuration(elapsed(r.own))}   subtree ${formatDuration(elapsed(r.sub))}`,
    `tokens ${formatCount(tokensOf(ch))} ` +
      `(in ${formatCount(u.input)}, out ${formatCount(u.output)}, cache read ${formatCount(u.cacheRead)})`,
    `subtree tokens ${formatCount(r.sub.tokens)}   tool calls ${formatCount(ch.counts.tool_use ?? 0)}`,
  ].join('\n');
}

function wireTimeline(state: State, select: (k: Key) => void, redraw: () => void): void {
  const box = $('timeline') as unknown as SVGSVGElement;
  const tip = $('tip');
  const wrap = $('timeline-wrap');
  const rowAt = (ev: MouseEvent): Row | null => {
    const rect = box.getBoundingClientRect();
    const i = Math.floor((ev.clientY - rect.top - AXIS_H) / ROW_H);
    return i >= 0 && i < state.visible.length ? state.visible[i] : null;
  };
  const zoom = (factor: number, centerX?: number) => {
    const span = runSpan(state);
    if (!span) return;
    const v = state.view ?? span;
    const plotW = box.clientWidth - LABEL_W - 10;
    const frac = centerX === undefined ? 0.5 : Math.min(1, Math.max(0, (centerX - LABEL_W) / plotW));
    const at = v.from + frac * (v.to - v.from);
    const w = Math.max(5, Math.min(span.to - span.from, (v.to - v.from) * factor));
    state.view = { from: at - frac * w, to: at - frac * w + w };
    redraw();
  };
  $('zoom-in').addEventListener('click', () => zoom(0.5));
  $('zoom-out').addEventListener('click', () => zoom(2));
  $('zoom-fit').addEventListener('click', () => {
    state.view = null;
    redraw();
  });
  box.addEventListener('keydown', (ev) => {
    if (ev.key === '+' || ev.key === '=') zoom(0.5);
    else if (ev.key === '-') zoom(2);
    else if (ev.key === '0') $('zoom-fit').click();
    else if (ev.key === 'ArrowLeft' || ev.key === 'ArrowRight')
      pan((ev.key === 'ArrowLeft' ? -1 : 1) * 0.2 * (box.clientWidth - LABEL_W));
  });
  box.addEventListener(
    'wheel',
    (ev) => {
      if (!ev.ctrlKey && !ev.metaKey) return;
      ev.preventDefault();
      zoom(ev.deltaY < 0 ? 0.8 : 1.25, ev.clientX - box.getBoundingClientRect().left);
    },
    { passive: false },
  );
  const pan = (dx: number) => {
    const span = runSpan(state);
    if (!span) return;
    const v = state.view ?? span;
    const dt = (dx / Math.max(1, box.clientWidth - LABEL_W - 10)) * (v.to - v.from);
    state.view = { from: v.from + dt, to: v.to + dt };
    redraw();
  };
  let drag: { x: number; moved: boolean } | null = null;
  box.addEventListener('mousedown', (ev) => {
    drag = { x: ev.clientX, moved: false };
    box.classList.add('dragging');
  });
  addEventListener('mouseup', () => {
    box.classList.remove('dragging');
    setTimeout(() => (drag = null));
  });
  box.addEventListener('mousemove', (ev) => {
    if (drag && ev.buttons === 1 && Math.abs(ev.clientX - drag.x) > 2) {
      pan(drag.x - ev.clientX);
      drag.x = ev.clientX;
      drag.moved = true;
    }
    const r = rowAt(ev);
    if (!r) {
      tip.hidden = true;
      return;
    }
    tip.textContent = tipText(r);
    tip.hidden = false;
    const wr = wrap.getBoundingClientRect();
    const left = ev.clientX - wr.left + wrap.scrollLeft + 14;
    tip.style.left = `${Math.min(left, wrap.scrollLeft + wrap.clientWidth - tip.offsetWidth - 4)}px`;
    tip.style.top = `${ev.clientY - wr.top + wrap.scrollTop + 14}px`;
  });
  box.addEventListener('mouseleave', () => (tip.hidden = true));
  box.addEventListener('click', (ev) => {
    if (drag?.moved) return;
    const r = rowAt(ev);
    if (r) select(keyOf(r.ch.id));
  });
}

// ---- transcript ----------------------------------------------------------------------------

function entryHead(e: Entry, from: number | null): string {
  const label =
    e.k === 'tool'
      ? `tool call · ${e.n ?? 'tool'}`
      : e.k === 'result'
        ? e.err
          ? 'tool result · error'
          : 'tool result'
        : e.k === 'run'
          ? 'run result'
          : e.k;
  const when = e.t !== null && from !== null ? `  +${formatDuration(e.t - from)}` : '';
  return `${label}${when}${e.cut ? `  (${counted(e.cut, 'char')} cut)` : ''}`;
}

/**
 * One transcript entry. A tool call that spawned a subagent on this page (its id is the
 * subagent's id) links to that subagent's transcript.
 */
function entryElement(e: Entry, idx: number, from: number | null, spawned?: ChannelView): HTMLElement {
  const div = el('div', `entry k-${e.k}${e.err ? ' err' : ''}`);
  div.dataset.idx = String(idx);
  if (e.k === 'thinking') {
    const details = el('details');
    details.append(el('summary', 'head', entryHead(e, from)), el('pre', '', e.s));
    div.append(details);
  } else {
    const head = el('div', 'head', entryHead(e, from));
    if (spawned) {
      const about = spawned.description ? ` ${spawned.description}` : '';
      const a = el('a', 'spawned', `→ ${channelLabel(spawned)}${about}`);
      a.href = linkFor(spawned);
      head.append(a);
    }
    div.append(head, el('pre', '', e.s));
  }
  return div;
}

function block(title: string, text: string, cls: string): HTMLElement {
  const div = el('div', `block ${cls}`);
  div.append(el('div', 'head dim', title), el('pre', '', text));
  return div;
}

function renderTranscript(state: State, scroll: boolean, focusEntry?: number): void {
  const art = $('transcript');
  const ch = state.selected === null ? undefined : state.byKey.get(state.selected);
  if (!ch) {
    art.hidden = true;
    return;
  }
  const row = state.rows.find((r) => r.ch === ch);
  art.hidden = false;
  art.dataset.key = keyOf(ch.id);
  const parts: Node[] = [];
  const title = el('h2');
  title.append(
    el('span', 'agent', channelLabel(ch)),
    el('span', 'desc', ch.description ?? ''),
    ' ',
    badge(ch.status),
  );
  parts.push(title);
  const dl = el('dl');
  const item = (k: string, v: string | Node) => {
    const dd = el('dd');
    dd.append(v);
    dl.append(el('dt', '', k), dd);
  };
  item('id', ch.id ?? 'main conversation');
  if (ch.id !== null)
    item(
      'parent',
      ch.orphan
        ? 'spawn not seen'
        : ch.parent === null
          ? 'main'
          : `${ch.parent}${state.byKey.has(keyOf(ch.parent)) ? '' : ' (not in this page)'}`,
    );
  item('depth', ch.depth === null ? 'unknown' : String(ch.depth));
  item('background', ch.background === null ? 'unknown' : ch.background ? 'yes' : 'no');
  if (row) {
    item(
      'time',
      `${clock(row.own.first)} – ${clock(row.own.last)} ` +
        `(${formatDuration(elapsed(row.own))}; subtree ${formatDuration(elapsed(row.sub))})`,
    );
    item(
      'tokens',
      `${formatCount(tokensOf(ch))} ` +
        `(in ${formatCount(ch.usage.input)}, out ${formatCount(ch.usage.output)}); ` +
        `subtree ${formatCount(row.sub.tokens)}`,
    );
  }
  item('lines', `${formatCount(ch.lines)}; tool calls ${formatCount(ch.counts.tool_use ?? 0)}`);
  if (ch.log) {
    if (!state.data.live && SAFE_LOG.test(ch.log)) {
      const a = el('a', '', ch.log);
      a.href = ch.log;
      item('transcript file', a);
    } else {
      item('transcript file', ch.log);
    }
  }
  parts.push(dl);
  if (ch.prompt) parts.push(block('prompt received', ch.prompt, 'prompt'));
  if (ch.summary) parts.push(block('final report', ch.summary, 'final'));
  const list = el('div', 'entries');
  const from = row?.own.first ?? null;
  const tools = new Map<string, HTMLElement>();
  ch.entries.forEach((e, i) => {
    const spawned = e.k === 'tool' && e.id ? state.byKey.get(keyOf(e.id)) : undefined;
    const node = entryElement(e, i, from, spawned);
    if (e.k === 'tool' && e.id) tools.set(e.id, node);
    const call = e.k === 'result' && e.id ? tools.get(e.id) : undefined;
    (call ?? list).append(node);
  });
  if (ch.entries.length === 0)
    list.append(el('p', 'dim', state.data.live ? 'No text yet.' : 'No content blocks.'));
  parts.push(list);
  if (ch.cut) {
    const where = ch.log ?? 'its .log file';
    parts.push(
      el(
        'div',
        'cutnote',
        `${counted(ch.cut.lines, 'more line')} (${counted(ch.cut.chars, 'char')}) ` +
          `${ch.cut.lines === 1 ? 'is' : 'are'} not shown, to keep this ` +
          `page small; the whole transcript is in ${where}.`,
      ),
    );
  }
  art.replaceChildren(...parts);
  if (focusEntry !== undefined) {
    const target = art.querySelector<HTMLElement>(`.entry[data-idx="${focusEntry}"]`);
    if (target) {
      target.classList.add('flash');
      target.querySelector('details')?.setAttribute('open', '');
      target.scrollIntoView({ block: 'center' });
    }
  } else if (scroll) {
    $('right').scrollTop = art.offsetTop - 8;
  }
}

// ---- search ----------------------------------------------------------------------------------

function wireSearch(state: State, select: (k: Key, entry?: number) => void): void {
  const input = $('search') as HTMLInputElement;
  const status = $('search-status');
  const hits = $('hits');
  let timer = 0;
  const run = () => {
    const q = foldCase(input.value.trim());
    hits.replaceChildren();
    if (q.length < 2) {
      status.textContent = q.length === 0 ? '' : 'type at least 2 characters';
      return;
    }
    let total = 0;
    const shown: HTMLElement[] = [];
    const add = (ch: ChannelView, where: string, text: string, at: number, entry?: number) => {
      total++;
      if (shown.length >= 200) return;
      const li = el('li', 'hit');
      li.dataset.key = keyOf(ch.id);
      if (entry !== undefined) li.dataset.entry = String(entry);
      const hit = hitContext(text, at, q.length);
      li.append(
        el('span', 'agent', channelLabel(ch)),
        el('span', 'desc', `${ch.description ?? ''} · ${where}: `),
        hit.before,
        el('mark', '', hit.match),
        hit.after,
      );
      shown.push(li);
    };
    for (const r of state.rows) {
      const ch = r.ch;
      for (const [where, text] of [
        ['description', ch.description],
        ['id', ch.id],
        ['prompt', ch.prompt],
        ['final report', ch.summary],
      ] as const) {
        const at = text ? foldCase(text).indexOf(q) : -1;
        if (text && at >= 0) add(ch, where, text, at);
      }
      ch.entries.forEach((e, i) => {
        let low = state.lower.get(e);
        if (low === undefined) state.lower.set(e, (low = foldCase(e.s)));
        const at = low.indexOf(q);
        if (at >= 0) add(ch, e.k === 'tool' ? `tool call ${e.n ?? ''}` : e.k, e.s, at, i);
      });
    }
    status.textContent =
      total === 0
        ? 'no match'
        : `${formatCount(total)} match${total === 1 ? '' : 'es'}` +
          (total > shown.length ? `, first ${shown.length} shown` : '');
    hits.replaceChildren(...shown);
  };
  input.addEventListener('input', () => {
    clearTimeout(timer);
    timer = window.setTimeout(run, 120);
  });
  hits.addEventListener('click', (ev) => {
    const li = (ev.target as HTMLElement).closest<HTMLElement>('li.hit');
    if (li) select(li.dataset.key!, li.dataset.entry === undefined ? undefined : Number(li.dataset.entry));
  });
}

// ---- live --------------------------------------------------------------------------------------

const cards = new Map<
  Key,
  { card: HTMLElement; status: HTMLElement; last: HTMLElement; meta: HTMLElement }
>();

function renderCards(state: State): void {
  $('cards-section').hidden = false;
  const box = $('cards');
  for (const ch of state.data.channels) {
    if (ch.id === null) continue;
    const key = keyOf(ch.id);
    let c = cards.get(key);
    if (!c) {
      const card = el('div', 'card');
      card.dataset.key = key;
      const title = el('div');
      title.append(el('span', 'agent', channelLabel(ch)), el('span', 'desc', ch.description ?? ''));
      const status = el('span');
      const meta = el('div', 'dim');
      const last = el('div', 'last');
      card.append(title, meta, last);
      title.append(' ', status);
      box.append(card);
      c = { card, status, last, meta };
      cards.set(key, c);
    }
    c.card.className = `card ${ch.status}`;
    c.card.dataset.status = ch.status;
    c.status.replaceChildren(badge(ch.status));
    c.meta.textContent =
      `${ch.background ? 'background · ' : ''}depth ${ch.depth ?? '?'} · ` +
      `${counted(tokensOf(ch), 'token')} · ${counted(ch.lines, 'line')}`;
    let text = '';
    for (let i = ch.entries.length - 1; i >= 0; i--) {
      if (ch.entries[i].k === 'text') {
        text = ch.entries[i].s;
        break;
      }
    }
    const shown = ch.status !== 'running' && ch.summary ? ch.summary : text;
    c.last.textContent = lastWords(shown);
  }
}

function wireCards(select: (k: Key) => void): void {
  $('cards').addEventListener('click', (ev) => {
    const card = (ev.target as HTMLElement).closest<HTMLElement>('.card');
    if (card) select(card.dataset.key!);
  });
}

type ChannelUpdate = Omit<ChannelView, 'entries' | 'ticks'>;

function placeholder(id: string | null): ChannelView {
  return {
    id,
    parent: null,
    orphan: false,
    depth: null,
    agent: null,
    description: null,
    status: 'running',
    background: null,
    summary: null,
    lines: 0,
    counts: {},
    usage: { input: 0, output: 0, cacheRead: 0, cacheCreation: 0, tokens: 0 },
    cost: null,
    costBasis: null,
    first: null,
    last: null,
    spawned: null,
    log: null,
    prompt: null,
    ticks: [],
    entries: [],
    cut: null,
  };
}

function connect(state: State, schedule: () => void, app: HTMLElement): void {
  const es = new EventSource('events');
  const parse = (ev: Event) => JSON.parse((ev as MessageEvent<string>).data);
  // A channel's transcript can arrive before its fields: a replaced fields event is dropped
  // from the log, and its replacement comes later.
  const liveChannel = (id: string | null): ChannelView => {
    let ch = state.byKey.get(keyOf(id));
    if (!ch) {
      ch = placeholder(id);
      state.byKey.set(keyOf(id), ch);
      state.data.channels.push(ch);
    }
    return ch;
  };
  let opens = 0;
  es.addEventListener('open', () => {
    app.dataset.state = 'live';
    app.dataset.connections = String(++opens);
  });
  es.addEventListener('error', () => {
    if (!state.ended) app.dataset.state = 'reconnecting';
  });
  es.addEventListener('run', (ev) => {
    state.data.run = parse(ev) as RunView;
    schedule();
  });
  es.addEventListener('channel', (ev) => {
    const u = parse(ev) as ChannelUpdate;
    Object.assign(liveChannel(u.id), u);
    schedule();
  });
  es.addEventListener('entries', (ev) => {
    const u = parse(ev) as { id: string | null; entries: Entry[]; ticks: number[] };
    const ch = liveChannel(u.id);
    for (const e of u.entries) ch.entries.push(e);
    for (const t of u.ticks) ch.ticks.push(t);
    schedule();
  });
  es.addEventListener('end', () => {
    es.close();
    state.ended = true;
    schedule();
  });
}

if (typeof document !== 'undefined' && document.getElementById('subtee-data')) boot();
