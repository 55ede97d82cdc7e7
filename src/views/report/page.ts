import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { jsonForScript, type ReportData } from './model.js';

/**
 * The page around the data: one HTML file with its style and script inline, a strict
 * Content-Security-Policy (the script and style allowed by hash, nothing else, no network
 * but the live page's own event stream, Trusted Types so no string can reach an HTML sink),
 * and the data as JSON in a `<script type="application/json">` that is never executed.
 */

export const REPORT_CSS = `
:root { --ok: #1f8a4c; --fail: #c62f2f; --run: #2f6fd0; --stop: #8a6a2a; --muted: #667; --line: #dde;
  --bg: #fff; --hl: #fff6c8; }
* { box-sizing: border-box; }
body { margin: 0; font: 13px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1c1c24;
  background: #f6f6f9; }
header { padding: 10px 16px; background: var(--bg); border-bottom: 1px solid var(--line); }
h1 { font-size: 17px; margin: 0 0 4px; }
h2 { font-size: 14px; margin: 0 0 6px; }
#mode { font-size: 12px; font-weight: normal; color: var(--muted); margin-left: 8px; }
#facts, #pageinfo { color: var(--muted); }
#banner { margin: 6px 0; padding: 6px 10px; border-radius: 4px; background: #fde8e8; color: #7a1010;
  font-weight: 600; }
#warnings { margin: 6px 0 0; padding: 0; list-style: none; }
#warnings li { padding: 3px 8px; margin: 2px 0; background: #fff4e0; border-left: 3px solid #e0a030;
  white-space: pre-wrap; word-break: break-word; }
#warnings code { font-weight: 600; margin-right: 6px; }
main { display: flex; gap: 12px; padding: 12px; align-items: flex-start; }
#left { flex: 1 1 0; min-width: 0; }
#right { flex: 0 1 380px; min-width: 320px; position: sticky; top: 8px; max-height: calc(100vh - 16px);
  overflow: auto; }
@media (max-width: 1199px) {
  main { flex-direction: column; align-items: stretch; }
  #right { flex: none; min-width: 0; position: static; max-height: none; }
}
section.panel, aside > div, #transcript { background: var(--bg); border: 1px solid var(--line);
  border-radius: 6px; padding: 10px; margin-bottom: 12px; }
.toolbar { display: flex; gap: 6px; align-items: center; margin-bottom: 6px; flex-wrap: wrap; }
.toolbar button { min-width: 28px; }
#range { color: var(--muted); margin-left: 6px; }
.legend { margin-left: auto; color: var(--muted); display: flex; gap: 10px; align-items: center; }
.sw { display: inline-block; width: 14px; height: 9px; border-radius: 2px; vertical-align: middle;
  margin-right: 3px; }
.sw.completed { background: var(--ok); }
.sw.failed { background: var(--fail); }
.sw.running { background: var(--run); }
.sw.stopped { background: var(--stop); }
.sw.bgsw { background: repeating-linear-gradient(135deg, #888 0 3px, #ddd 3px 6px); }
#timeline-wrap { position: relative; max-height: 520px; overflow: auto; border: 1px solid var(--line);
  border-radius: 4px; }
#timeline { display: block; cursor: grab; user-select: none; }
#timeline.dragging { cursor: grabbing; }
#timeline text { font-size: 11px; fill: #333; }
#timeline .axis text { fill: var(--muted); }
#timeline .grid { stroke: #eef; }
#timeline .bar.completed { fill: var(--ok); }
#timeline .bar.failed { fill: var(--fail); }
#timeline .bar.running { fill: var(--run); }
#timeline .bar.stopped { fill: var(--stop); }
#timeline .bgover { fill: url(#bg-hatch); pointer-events: none; }
#timeline .tail { stroke: var(--run); stroke-dasharray: 3 3; stroke-width: 2; }
#timeline .ticks { stroke: #111; stroke-width: 1; opacity: .65; pointer-events: none; }
#timeline .sel { fill: var(--hl); }
#tip { position: absolute; pointer-events: none; background: #222; color: #fff; padding: 6px 8px;
  border-radius: 4px; font-size: 12px; white-space: pre; z-index: 5; }
table { border-collapse: collapse; width: 100%; table-layout: fixed; }
#tree { min-width: 960px; }
#tree th:nth-child(2) { width: 100px; }
#tree th:nth-child(3) { width: 52px; }
#tree th:nth-child(4), #tree th:nth-child(6), #tree th:nth-child(7) { width: 84px; }
#tree th:nth-child(5) { width: 92px; }
#tree th:nth-child(8) { width: 60px; }
#tree th:nth-child(9), #tree th:nth-child(10) { width: 100px; }
tr.tree-row td { height: 25px; padding-top: 0; padding-bottom: 0; overflow: hidden; text-overflow: ellipsis; }
tr.tree-row td.num { text-overflow: clip; }
#tree td.name, #tree th:nth-child(1) { position: sticky; left: 0; background: var(--bg); z-index: 1; }
#tree th:nth-child(1) { z-index: 2; }
tr.tree-row:hover td.name { background: #f2f4fb; }
tr.tree-row.selected td.name { background: var(--hl); }
.entry a.spawned { margin-left: 8px; font-size: 11px; }
tr.spacer td { padding: 0; border: none; }
th, td { text-align: left; padding: 3px 5px; border-bottom: 1px solid #eef; white-space: nowrap; }
th { font-weight: 600; color: var(--muted); position: sticky; top: 0; background: var(--bg); }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
#tree-wrap { max-height: 560px; overflow: auto; }
tr.tree-row { cursor: pointer; }
tr.tree-row:hover { background: #f2f4fb; }
tr.tree-row.selected { background: var(--hl); }
.toggle { border: none; background: none; width: 18px; padding: 0; cursor: pointer; color: var(--muted); }
.badge { display: inline-block; padding: 0 6px; border-radius: 8px; color: #fff; font-size: 11px; }
.badge.completed { background: var(--ok); }
.badge.failed { background: var(--fail); }
.badge.running { background: var(--run); }
.badge.stopped { background: var(--stop); }
.bgtag { display: inline-block; padding: 0 5px; border-radius: 8px; font-size: 11px; background: #e6e6ee;
  color: #444; }
.agent { font-weight: 600; }
.desc { color: #444; margin-left: 4px; }
.dim { color: var(--muted); }
#search { width: 100%; padding: 6px 8px; font-size: 13px; }
#search-status { color: var(--muted); margin: 4px 0; }
#hits { margin: 0; padding-left: 20px; max-height: 260px; overflow: auto; }
#hits li { cursor: pointer; padding: 2px 0; word-break: break-word; }
#hits li:hover { background: #f2f4fb; }
mark { background: #ffe066; }
#transcript h2 { font-size: 15px; word-break: break-word; }
#transcript dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 10px; margin: 6px 0 10px; }
#transcript dt { color: var(--muted); }
#transcript dd { margin: 0; word-break: break-all; }
.entry { border-left: 3px solid #ccd; padding: 2px 8px; margin: 6px 0; }
.entry .head { color: var(--muted); font-size: 11px; }
.entry pre, .block pre { margin: 2px 0 0; white-space: pre-wrap; word-break: break-word;
  font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; }
.entry.k-text { border-color: #7a8; }
.entry.k-thinking { border-color: #b9b; }
.entry.k-tool { border-color: #89c; }
.entry.k-result { border-color: #9ab; margin-left: 10px; }
.entry.err { border-color: var(--fail); }
.entry.k-prompt { border-color: #ca7; }
.entry.k-run { border-color: #555; }
.entry.flash { background: var(--hl); }
.block { background: #f7f7fb; border-radius: 4px; padding: 6px 8px; margin: 6px 0; }
.cutnote { background: #eef3ff; padding: 6px 8px; border-radius: 4px; margin: 8px 0; }
#cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(230px, 1fr)); gap: 8px; }
.card { border: 1px solid var(--line); border-top: 4px solid var(--run); border-radius: 5px;
  padding: 6px 8px; background: #fff; cursor: pointer; }
.card.completed { border-top-color: var(--ok); }
.card.failed { border-top-color: var(--fail); }
.card.stopped { border-top-color: var(--stop); }
.card .last { color: #333; font-size: 12px; white-space: pre-wrap; word-break: break-word;
  max-height: 5.6em; overflow: hidden; margin-top: 4px; }
`;

const SHELL = `<header>
<h1>subtee report<span id="mode"></span>
</h1>
<div id="summary"></div>
<div id="banner" hidden></div>
<ul id="warnings"></ul>
<div id="facts"></div>
<div id="cost"></div>
<div id="pageinfo"></div>
</header>
<main>
<div id="left">
<section class="panel" id="cards-section" hidden><h2>Subagents</h2><div id="cards"></div>
</section>
<section class="panel" id="timeline-section"><h2>Timeline</h2>
<div class="toolbar"><button type="button" id="zoom-in" title="Zoom in (+)">+</button>
<button type="button" id="zoom-out" title="Zoom out (-)">−</button>
<button type="button" id="zoom-fit" title="Show the whole run (0)">Fit</button>
<span id="range"></span>
<span class="legend"><span><span class="sw completed"></span>
completed</span>
<span><span class="sw failed"></span>
failed</span>
<span><span class="sw stopped"></span>
stopped</span>
<span><span class="sw running"></span>
running</span>
<span><span class="sw bgsw"></span>
background</span>
<span>| tool call</span>
</span>
</div>
<div id="timeline-wrap"><svg id="timeline" tabindex="0" aria-label="Timeline: one bar per agent"
  xmlns="http://www.w3.org/2000/svg"></svg><div id="tip" role="tooltip" hidden></div>
</div>
</section>
<section class="panel" id="tree-section"><h2>Agents</h2><div id="tree-wrap"><table
  id="tree"><thead><tr><th>agent</th>
<th>status</th>
<th class="num">depth</th>
<th class="num" title="input + output tokens of this agent">tokens</th>
<th class="num" title="tokens of this agent and everything it spawned">Σ tokens</th>
<th class="num" title="from its spawn to its report (main: the whole run)">elapsed</th>
<th class="num" title="first spawn to last report of this agent and all it spawned">Σ elapsed</th>
<th class="num">lines</th>
<th class="num" title="dollars of this agent">cost</th>
<th class="num" title="dollars of this agent and everything it spawned">Σ cost</th>
</tr></thead>
<tbody>
</tbody></table></div>
</section>
</div>
<aside id="right">
<div><input id="search" type="search" placeholder="Search all transcripts" autocomplete="off"
  aria-label="Search all transcripts"><div id="search-status"></div>
<ol id="hits"></ol>
</div>
<article id="transcript" hidden></article>
</aside>
</main>`;

let clientScript: string | null = null;

/** The compiled browser script (client.ts), without its source-map comment. */
export function reportScript(): string {
  clientScript ??= readFileSync(new URL('./client.js', import.meta.url), 'utf8').replace(
    /\n\/\/# sourceMappingURL=.*\s*$/,
    '\n',
  );
  return clientScript;
}

const sha256 = (s: string) => `'sha256-${createHash('sha256').update(s, 'utf8').digest('base64')}'`;

export function contentSecurityPolicy(live: boolean): string {
  return [
    "default-src 'none'",
    `script-src ${sha256(reportScript())}`,
    `style-src ${sha256(REPORT_CSS)}`,
    'img-src data:',
    `connect-src ${live ? "'self'" : "'none'"}`,
    "base-uri 'none'",
    "form-action 'none'",
    "require-trusted-types-for 'script'",
    "trusted-types 'none'",
  ].join('; ');
}

/** Width of the page-size field in the embedded JSON, so the size can be written in after the fact. */
const SIZE_WIDTH = 15;
const SIZE_PLACEHOLDER = `"bytes":${10 ** (SIZE_WIDTH - 1)}`;

/**
 * The page in pieces, each channel's data one piece: joined, they are the page, which is
 * never one string (with 10,000 channels the page, its JSON and their escaped copies were
 * tens of MB at once). `bytes` is the page's size to write into its fixed-width field; the
 * pieces have the same length whatever it is, so one pass with any value measures the page.
 */
export function* pagePieces(data: ReportData, bytes: number): Generator<string, void, undefined> {
  yield (
    '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">\n' +
    `<meta http-equiv="Content-Security-Policy" content="${contentSecurityPolicy(data.live)}">\n` +
    '<meta name="referrer" content="no-referrer">' +
    '<meta name="viewport" content="width=device-width, initial-scale=1">\n' +
    `<title>subtee report</title>\n<style>${REPORT_CSS}</style>\n</head><body>` +
    `<div id="app" data-state="loading">\n${SHELL}\n</div>\n` +
    '<script type="application/json" id="subtee-data">'
  );
  // JSON.stringify(data) member by member, in its order and leaving out what it leaves out.
  let lead = '{';
  for (const [key, value] of Object.entries(data)) {
    if (value === undefined) continue;
    yield `${lead}${JSON.stringify(key)}:`;
    lead = ',';
    if (key === 'channels') {
      yield '[';
      // Escaping is per character, so the escaped pieces join to the escaped whole.
      for (let i = 0; i < data.channels.length; i++)
        yield (i === 0 ? '' : ',') + jsonForScript(data.channels[i]);
      yield ']';
    } else if (key === 'page') {
      // The page's own size, in a fixed-width field: JSON allows the padding spaces.
      yield jsonForScript({ ...data.page, bytes: 10 ** (SIZE_WIDTH - 1) }).replace(
        SIZE_PLACEHOLDER,
        `"bytes":${String(bytes).padStart(SIZE_WIDTH)}`,
      );
    } else {
      yield jsonForScript(value);
    }
  }
  yield `}</script>\n<script type="module">${reportScript()}</script>\n</body></html>\n`;
}

/** The page's size in UTF-8, as `pagePieces` writes it; also set in `data.page.bytes`. */
export function pageBytes(data: ReportData): number {
  let bytes = 0;
  for (const piece of pagePieces(data, 0)) bytes += Buffer.byteLength(piece);
  data.page.bytes = bytes;
  return bytes;
}

/** The whole page as one string (the live page: a skeleton, small). Sets `data.page.bytes`. */
export function pageHtml(data: ReportData): string {
  return [...pagePieces(data, pageBytes(data))].join('');
}
