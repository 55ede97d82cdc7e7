import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { request, type IncomingMessage } from 'node:http';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { writeStream } from '../bench/gen.js';
import { readReportData } from '../src/views/report/build.js';
import {
  counted as pageCounted,
  foldCase,
  formatCount,
  headOf,
  hitContext,
  lastWords,
  tailOf,
  timelineLabel,
  treeRows,
  usdLeavingOut,
} from '../src/views/report/client.js';
import { channelUpdate, ReportFeed, type ChannelFields } from '../src/views/report/live.js';
import { pageBytes, pageHtml, pagePieces, REPORT_CSS } from '../src/views/report/page.js';
import { indexPageRow } from '../src/views/report/index-page.js';
import { entryChars, lineFacts, TranscriptBudget, type ChannelView } from '../src/views/report/model.js';
import { parseServe } from '../src/chain/sinks/report.js';
import { counted } from '../src/views/summary.js';
import { startSubtee } from './helpers/browser.js';
import { COPILOT_TOTALS, copilotTokens } from './helpers/chat-reading.js';
import { BIN, FIXTURES, linesOf, tmpDir } from './helpers/helpers.js';

function subtee(args: string[], input?: string) {
  return spawnSync(process.execPath, [BIN, ...args], { input, encoding: 'utf8', timeout: 60_000 });
}

function runFixture(name: string, extra: string[] = []): string {
  const out = join(tmpDir(), 'o');
  const r = subtee(['--out', out, '--stdout', 'none', '-q', ...extra, join(FIXTURES, `${name}.jsonl`)]);
  assert.equal(r.status, 0, r.stderr);
  return out;
}

/** The JSON embedded in a report page. */
function pageData(html: string): any {
  const m = /<script type="application\/json" id="subtee-data">([^<]*)<\/script>/.exec(html);
  assert.ok(m, 'the page embeds its data');
  return JSON.parse(m[1]);
}

function channel(over: Partial<ChannelView>): ChannelView {
  return {
    id: null,
    parent: null,
    orphan: false,
    depth: null,
    agent: null,
    description: null,
    status: 'completed',
    background: null,
    summary: null,
    lines: 1,
    counts: {},
    usage: { input: 0, output: 0, cacheRead: 0, cacheCreation: 0, tokens: 0 },
    cost: 0,
    costBasis: null,
    first: null,
    last: null,
    spawned: null,
    log: null,
    prompt: null,
    ticks: [],
    entries: [],
    cut: null,
    ...over,
  };
}

test('lineFacts: text, thinking, tool calls, results, prompts, spawns; control characters shown', () => {
  const t = '2026-11-30T11:49:20.242Z';
  const a = lineFacts({
    type: 'assistant',
    timestamp: t,
    message: {
      content: [
        { type: 'thinking', thinking: 'plan\x1b[2J' },
        { type: 'text', text: 'hello \u202eevil\u2028[text] forged\u2029' },
        { type: 'tool_use', id: 'toolu_child', name: 'Agent', input: { prompt: 'do it', description: 'd' } },
        { type: 'tool_use', id: 'toolu_b', name: 'Bash', input: { command: 'x'.repeat(5000) } },
      ],
    },
  });
  assert.deepEqual(
    a.entries.map((e) => e.k),
    ['thinking', 'text', 'tool', 'tool'],
  );
  assert.equal(a.entries[0].s, 'plan\\x1b[2J');
  assert.equal(a.entries[1].s, 'hello \\u202eevil\\u2028[text] forged\\u2029');
  assert.equal(a.tools, 2);
  assert.equal(a.time, Date.parse(t));
  assert.deepEqual(a.spawns, [{ id: 'toolu_child', prompt: 'do it' }]);
  assert.ok(a.entries[3].cut! > 3000 && a.entries[3].s.includes('chars cut'));
  const u = lineFacts({
    type: 'user',
    message: {
      content: [
        {
          type: 'tool_result',
          tool_use_id: 'toolu_b',
          is_error: true,
          content: [{ type: 'text', text: 'boom' }],
        },
        { type: 'text', text: 'the task' },
      ],
    },
  });
  assert.deepEqual(u.entries, [
    { k: 'result', t: null, s: 'boom', id: 'toolu_b', err: true },
    { k: 'prompt', t: null, s: 'the task' },
  ]);
  assert.equal(
    lineFacts({ type: 'system', subtype: 'init', claude_code_version: '2.1.328' }).version,
    '2.1.328',
  );
});

test('TranscriptBudget keeps what happened first and counts what it cut', () => {
  const b = new TranscriptBudget(1000, 2);
  b.addLine([{ k: 'text', t: null, s: 'a'.repeat(600) }]);
  b.addLine([{ k: 'text', t: null, s: 'b'.repeat(600) }]);
  b.addLine([{ k: 'text', t: null, s: 'c' }]);
  b.skipLine(50);
  assert.equal(b.entries.length, 2);
  // 644 taken by the first (its text and what it takes around it on the page); of the 356 left,
  // the second's start: 288 characters, the one marker included (17 for a count of 600).
  assert.equal(entryChars(b.entries[0]), 644);
  assert.equal(b.entries[1].s, `${'b'.repeat(270)} […330 chars cut…]`);
  assert.equal(b.entries[1].cut, 330);
  assert.ok(entryChars(b.entries[1]) <= 356);
  assert.equal(b.room, 0);
  assert.deepEqual(b.cut(), { lines: 3, chars: 330 + 1 + 50 });
  for (const t of [1, 2, 3]) b.tick(t);
  assert.deepEqual(b.ticks, [1, 2]);
  b.shrink(700, 1);
  assert.equal(b.entries.length, 1);
  assert.deepEqual(b.ticks, [1]);
});

test('TranscriptBudget: blocks with no text still fill the budget, and shrinking takes them out', () => {
  const b = new TranscriptBudget(64 * 1024, 10);
  const empty = { k: 'text' as const, t: 1765432109876, s: '' };
  for (let i = 0; i < 10_000; i++) b.addLine(Array.from({ length: 100 }, () => empty));
  // Each counts at least what it takes on the page: the transcript stays within its budget.
  const onPage = (entries: unknown[]) => JSON.stringify(entries).length;
  assert.ok(onPage(b.entries) <= 64 * 1024, `${b.entries.length} entries, ${onPage(b.entries)} characters`);
  assert.ok(b.entries.length > 1000, `${b.entries.length} entries kept`);
  assert.equal(b.cut()!.lines, 10_000 - Math.floor(b.entries.length / 100));
  b.shrink(1000, 10);
  assert.ok(onPage(b.entries) <= 1000 && b.entries.length > 0, `${b.entries.length} entries after shrink`);
  b.shrink(0, 0);
  assert.equal(b.entries.length, 0);
});

test('a transcript of empty blocks is cut to fit the page: no agent is left out for it', () => {
  // One subagent whose lines carry 1000 text blocks each, all empty (and a thinking block that
  // came as its signature only): 120,000 entries, none with a character of text.
  const lines = [
    JSON.stringify({
      type: 'assistant',
      parent_tool_use_id: null,
      message: {
        id: 's',
        content: [{ type: 'tool_use', id: 'toolu_e', name: 'Agent', input: { prompt: 'p' } }],
      },
    }),
  ];
  const blocks = [
    { type: 'thinking', thinking: '', signature: 'c2ln' },
    ...Array.from({ length: 999 }, () => ({ type: 'text', text: '' })),
  ];
  for (let i = 0; i < 120; i++)
    lines.push(
      JSON.stringify({
        type: 'assistant',
        parent_tool_use_id: 'toolu_e',
        timestamp: '2026-01-01T00:00:00.000Z',
        message: { id: `m${i}`, content: blocks },
      }),
    );
  const out = join(tmpDir(), 'o');
  assert.equal(subtee(['--out', out, '--stdout', 'none', '-q'], lines.join('\n') + '\n').status, 0);
  const r = subtee(['report', '--max-page-bytes', '262144', out]);
  assert.equal(r.status, 0, r.stderr);
  const size = statSync(join(out, 'report.html')).size;
  assert.ok(size <= 262_144, `page ${size} bytes`);
  const data = pageData(readFileSync(join(out, 'report.html'), 'utf8'));
  assert.equal(data.page.leftOutChannels, undefined);
  assert.deepEqual(data.channels.map((c: any) => c.id), [null, 'toolu_e']);
  const sub = data.channels[1];
  assert.ok(sub.entries.length > 0, 'its transcript starts on the page');
  assert.ok(sub.cut.lines > 0 && sub.entries.length < 120_000, `${sub.entries.length} entries kept`);
  assert.match(r.stderr, /, 1 of 2 transcripts cut to fit \(the .log files have them whole\)\n$/);
});

test('treeRows: nesting, subtree rollups, orphans last, cycles, a 100,000-deep chain, no recursion', () => {
  const T = 1_000_000;
  const chans = [
    channel({
      id: null,
      first: T,
      last: T + 100,
      usage: { input: 1, output: 1, cacheRead: 0, cacheCreation: 0, tokens: 2 },
    }),
    channel({
      id: 'a',
      parent: null,
      first: T + 10,
      last: T + 50,
      usage: { input: 10, output: 0, cacheRead: 0, cacheCreation: 0, tokens: 10 },
    }),
    channel({
      id: 'b',
      parent: 'a',
      first: T + 20,
      last: T + 300,
      usage: { input: 100, output: 0, cacheRead: 0, cacheCreation: 0, tokens: 100 },
    }),
    channel({ id: 'o', orphan: true, first: T + 5, last: T + 6 }),
    channel({ id: 'x', parent: 'y' }),
    channel({ id: 'y', parent: 'x' }),
  ];
  const rows = treeRows(chans);
  assert.deepEqual(
    rows.map((r) => [r.ch.id, r.level]),
    [
      [null, 0],
      ['a', 1],
      ['b', 2],
      ['o', 0],
      ['x', 0],
      ['y', 1],
    ],
  );
  assert.equal(rows[0].sub.tokens, 112);
  assert.equal(rows[1].sub.tokens, 110);
  assert.deepEqual([rows[1].sub.first, rows[1].sub.last], [T + 10, T + 300], 'a subtree spans its children');
  assert.deepEqual([rows[0].sub.first, rows[0].sub.last], [T, T + 300]);
  const deep = [channel({ id: null })];
  for (let i = 0; i < 100_000; i++)
    deep.push(
      channel({
        id: `c${i}`,
        parent: i === 0 ? null : `c${i - 1}`,
        usage: { input: 1, output: 0, cacheRead: 0, cacheCreation: 0, tokens: 1 },
      }),
    );
  const d = treeRows(deep);
  assert.equal(d.length, 100_001);
  assert.equal(d[100_000].level, 100_000);
  assert.equal(d[0].sub.tokens, 100_000);
});

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

test("the page cuts shown text by whole characters: a timeline label, a card's last words and a " +
  "search hit's context never split a surrogate pair, at any offset", () => {
  // Each cut falls inside a pair for one of the paddings: a plain slice splits `split` of them.
  const split = { label: 0, last: 0, before: 0, after: 0 };
  const lone = (s: string) => LONE_SURROGATE.test(s);
  for (let pad = 0; pad < 2; pad++) {
    for (let shift = 0; shift < 2; shift++) {
      const text = `${'x'.repeat(pad)}${'😀'.repeat(250)}${'z'.repeat(pad)}needle` +
        `${'z'.repeat(shift)}${'😀'.repeat(250)}${'x'.repeat(shift)}`;
      const name = `pad ${pad}, shift ${shift}`;
      for (let level = 0; level < 4; level++) {
        const max = Math.max(8, 34 - level * 2);
        if (lone(text.slice(0, max))) split.label++;
        const label = timelineLabel(text, level);
        assert.doesNotMatch(label, LONE_SURROGATE, `label, level ${level}, ${name}`);
        assert.ok(label.endsWith('…') && text.startsWith(label.slice(0, -1)), 'a head of the text');
        assert.ok(label.length - 1 >= max - 1, 'one unit short at most');
      }
      if (lone(text.slice(-300))) split.last++;
      const last = lastWords(text);
      assert.doesNotMatch(last, LONE_SURROGATE, `last words, ${name}`);
      assert.ok(last.startsWith('…') && text.endsWith(last.slice(1)) && last.length - 1 >= 299);
      const at = text.indexOf('needle');
      if (lone(text.slice(at - 40, at))) split.before++;
      if (lone(text.slice(at + 6, at + 66))) split.after++;
      const hit = hitContext(text, at, 'needle'.length);
      assert.equal(hit.match, 'needle');
      assert.doesNotMatch(hit.before, LONE_SURROGATE, `before the hit, ${name}`);
      assert.doesNotMatch(hit.after, LONE_SURROGATE, `after the hit, ${name}`);
      assert.ok(text.slice(0, at).endsWith(hit.before.slice(1)) && hit.before.length - 1 >= 39);
      assert.ok(text.slice(at + 6).startsWith(hit.after.slice(0, -1)) && hit.after.length - 1 >= 59);
    }
  }
  assert.ok(Object.values(split).every((n) => n > 0), `sanity: cuts inside a pair ${JSON.stringify(split)}`);
  // Short text is shown whole.
  assert.equal(timelineLabel('😀 main', 0), '😀 main');
  assert.equal(lastWords('😀'), '😀');
  assert.deepEqual(hitContext('a needle b', 2, 6), { before: 'a ', match: 'needle', after: ' b' });
  assert.equal(headOf('a😀', 2), 'a');
  assert.equal(tailOf('😀a', 2), 'a');
});

test('search folds case one unit for one, so a hit after a character whose lower case is longer is ' +
  'marked where it is', () => {
  const text = `İİ 😀 Needle`;
  assert.equal(foldCase(text).length, text.length);
  assert.equal(foldCase(text), `İİ 😀 needle`);
  const at = foldCase(text).indexOf(foldCase('NEEDLE'));
  assert.equal(hitContext(text, at, 6).match, 'Needle');
  assert.deepEqual(hitContext(text, at, 6), { before: 'İİ 😀 ', match: 'Needle', after: '' });
});

test('subtee report: one self-contained page, a CSP allowing exactly its own script, data escaped', () => {
  const out = runFixture('nested-depth-3');
  const r = subtee(['report', out]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, /wrote .*report\.html: [\d.]+ KB \(limit 8\.0 MB\), 4 transcripts, none cut/);
  const html = readFileSync(join(out, 'report.html'), 'utf8');
  assert.equal(
    statSync(join(out, 'report.html')).size,
    pageData(html).page.bytes,
    'the page knows its own size',
  );
  assert.equal(html.match(/<script/g)!.length, 2);
  assert.doesNotMatch(html, /\ssrc=|<link|@import|url\((?!#)/i, 'nothing is loaded from anywhere');
  assert.doesNotMatch(
    html.replace(/http:\/\/www\.w3\.org\/2000\/svg/g, ''),
    /https?:\/\//,
    'no address outside the page',
  );
  const csp = /<meta http-equiv="Content-Security-Policy" content="([^"]+)">/.exec(html)![1];
  const script = /<script type="module">([\s\S]*?)<\/script>/.exec(html)![1];
  const hash = createHash('sha256').update(script).digest('base64');
  assert.ok(csp.includes(`script-src 'sha256-${hash}'`), csp);
  for (const d of [
    "default-src 'none'",
    "connect-src 'none'",
    "base-uri 'none'",
    "require-trusted-types-for 'script'",
  ])
    assert.ok(csp.includes(d), d);
  assert.doesNotMatch(script, /innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function/);
  const data = pageData(html);
  assert.equal(data.channels.length, 4);
  assert.equal(data.run.claudeCode, '2.1.328');
  const leaf = data.channels.find((c: any) => c.depth === 3);
  assert.deepEqual(
    leaf.entries.map((e: any) => e.k),
    ['prompt', 'thinking', 'text', 'tool', 'result', 'text'],
  );
  assert.equal(leaf.prompt, 'SCRIPT:nest:0');
  assert.equal(leaf.summary, 'Worker leaf report: done.');
  assert.equal(leaf.ticks.length, 1);
});

test("the page's copy of counted agrees with views/summary.ts's: 1 subagent, 2 subagents, thousands " +
  'separated', () => {
  for (const n of [0, 1, 2, 1234, 1_000_001])
    for (const noun of ['subagent', 'more line'])
      assert.equal(pageCounted(n, noun), counted(n, noun).replace(/^\d+/, formatCount(n)), `${n}`);
  assert.deepEqual([pageCounted(1, 'line'), pageCounted(1234, 'line')], ['1 line', '1,234 lines']);
});

test("a run of one agent: subtee report says 1 transcript, and the runs' index page 1 run, " +
  '1 priced run', () => {
  const root = tmpDir();
  const input = join(FIXTURES, 'long-bash-heartbeat.jsonl');
  const r = subtee(['--out', join(root, 'run'), '--html', '--stdout', 'none', input]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, /report\.html: [\d.]+ KB \(limit 8\.0 MB\), 1 transcript, none cut\n/);
  const report = subtee(['report', root]);
  assert.equal(report.status, 0, report.stderr);
  assert.match(report.stderr, /index\.html: 1 run\n$/);
  const index = readFileSync(join(root, 'index.html'), 'utf8');
  assert.match(index, /<div id="summary">1 run, 0 not completed, \$[\d.]+ over 1 priced run · subtee /);
});

test('the line that names a written page shows control characters in its path as escapes, on one ' +
  'line: --html, subtee report OUT and the runs\' index page', () => {
  const root = join(tmpDir(), 'logs\x1b]0;title\x07\n::add-mask::x');
  const input = join(FIXTURES, 'long-bash-heartbeat.jsonl');
  const run = subtee(['--out', join(root, 'run'), '--html', '--stdout', 'none', input]);
  const report = subtee(['report', join(root, 'run')]);
  const index = subtee(['report', root]);
  for (const r of [run, report, index]) {
    assert.equal(r.status, 0, r.stderr);
    const wrote = r.stderr.split('\n').find((l) => l.startsWith('subtee: wrote '));
    assert.ok(wrote, r.stderr);
    assert.match(wrote, /logs\\x1b\]0;title\\x07\\n::add-mask::x\/(run\/report|index)\.html: /);
    assert.doesNotMatch(r.stderr, /[\x1b\x07]|\n::/);
  }
});

const sum = (ns: Iterable<number>) => [...ns].reduce((a, b) => a + b, 0);

test("a Copilot subagent's stated total is its tokens on report.html (own and Σ) and the runs' index " +
  'page, as in the summary', () => {
  for (const name of COPILOT_TOTALS) {
    const expected = copilotTokens(readFileSync(join(FIXTURES, `${name}.jsonl`), 'utf8'));
    assert.ok(sum(expected.values()) > 0, name);
    const root = tmpDir();
    const out = join(root, 'run');
    const r = subtee(['--out', out, '--html', '--stdout', 'none', join(FIXTURES, `${name}.jsonl`)]);
    assert.equal(r.status, 0, r.stderr);
    const summary = [...r.stderr.matchAll(/ {2}tokens (\d+) {2}/g)].map((m) => Number(m[1]));
    const data = pageData(readFileSync(join(out, 'report.html'), 'utf8'));
    const own = new Map(data.channels.map((c: ChannelView) => [c.id, c.usage.tokens]));
    assert.deepEqual(own, expected, name);
    assert.deepEqual(
      summary.sort((a, b) => a - b),
      [...expected.values()].sort((a, b) => a - b),
      `${name}: the summary's tree`,
    );
    const rows = treeRows(data.channels);
    assert.equal(rows[0].ch.id, null);
    assert.equal(rows[0].sub.tokens, sum(expected.values()), `${name}: main's Σ tokens`);
    assert.equal(subtee(['report', '-q', root]).status, 0);
    const index = readFileSync(join(root, 'index.html'), 'utf8');
    assert.deepEqual(
      [...index.matchAll(/data-tokens="(\d+)"/g)].map((m) => Number(m[1])),
      [sum(expected.values())],
      `${name}: the index page`,
    );
  }
});

test('the page stays under its size limit: transcripts cut with a pointer to their .log file', async () => {
  const dir = tmpDir();
  const input = join(dir, 'in.jsonl');
  await writeStream({ sizeBytes: 3 * 1024 * 1024, fanout: 40, shape: 'large', seed: 7 }, input);
  const out = join(dir, 'o');
  assert.equal(subtee(['--out', out, '--stdout', 'none', '-q', input]).status, 0);
  const r = subtee(['report', '--max-page-bytes', '600000', out]);
  assert.equal(r.status, 0, r.stderr);
  const size = statSync(join(out, 'report.html')).size;
  assert.ok(size <= 600_000, `page ${size} bytes`);
  const data = pageData(readFileSync(join(out, 'report.html'), 'utf8'));
  assert.equal(data.page.bytes, size);
  assert.equal(data.channels.length, 41);
  const cut = data.channels.filter((c: any) => c.cut);
  assert.ok(cut.length > 30, `${cut.length} cut`);
  for (const c of cut) assert.match(c.log, /^(main|agents\/[\w-]+)\.log$/);
  assert.match(r.stderr, new RegExp(`${cut.length} of 41 transcripts cut to fit`));
  // Ticks survive a cut: they are read from every line that holds a tool call.
  assert.ok(data.channels.filter((c: any) => c.ticks.length > 0).length > 30);
  assert.equal(
    subtee(['report', '--max-page-bytes', '100', out]).status,
    2,
    'a limit below a usable page is refused',
  );

  // Text that grows when escaped (each `<` takes six bytes in the page) still fits.
  const heavy = [
    JSON.stringify({
      type: 'assistant',
      parent_tool_use_id: null,
      message: { content: [{ type: 'text', text: '<'.repeat(3000) }] },
    }),
  ];
  for (let i = 0; i < 400; i++)
    heavy.push(
      JSON.stringify({
        type: 'assistant',
        parent_tool_use_id: i % 10 ? `toolu_${i % 10}` : null,
        message: { content: [{ type: 'text', text: `<tag>${'<é'.repeat(1500)}` }] },
      }),
    );
  const out2 = join(dir, 'o2');
  assert.equal(subtee(['--out', out2, '--stdout', 'none', '-q'], heavy.join('\n') + '\n').status, 0);
  assert.equal(subtee(['report', '--max-page-bytes', '400000', out2]).status, 0);
  const size2 = statSync(join(out2, 'report.html')).size;
  assert.ok(size2 <= 400_000 && size2 > 250_000, `page ${size2} bytes`);
  const heavyData = pageData(readFileSync(join(out2, 'report.html'), 'utf8'));
  assert.equal(heavyData.channels.length, 10);
  assert.ok(
    heavyData.channels.every((c: any) => c.cut && c.entries.length > 0),
    'every transcript cut, none emptied',
  );
});

/** A run of `wide` subagents spawned by main, each spawning one more, with long prompts. */
function twoLevelRun(wide: number): string {
  const spawn = (id: string, parent: string | null) =>
    JSON.stringify({
      type: 'assistant',
      parent_tool_use_id: parent,
      message: {
        id: `m_${id}`,
        role: 'assistant',
        content: [
          {
            type: 'tool_use',
            id,
            name: 'Agent',
            input: { subagent_type: 'g', description: `d ${id}`, prompt: `${id} `.repeat(400) },
          },
        ],
      },
    });
  const lines: string[] = [];
  // Interleaved, so index.json and the page's walk both list each child right after its parent.
  for (let i = 0; i < wide; i++) lines.push(spawn(`toolu_a${i}`, null), spawn(`toolu_b${i}`, `toolu_a${i}`));
  const out = join(tmpDir(), 'o');
  const r = subtee(['--out', out, '--stdout', 'none', '-q'], lines.join('\n') + '\n');
  assert.equal(r.status, 0, r.stderr);
  return out;
}

/** One run of 300 subagents with a child each, written once for the tests that make its page. */
let wideRun: string | null = null;
const wide300 = () => (wideRun ??= twoLevelRun(300));

test('many channels: the page keeps the tree top that fits and says how many agents it left out', () => {
  const out = wide300();
  const r = subtee(['report', '--max-page-bytes', '262144', out]);
  assert.equal(r.status, 0, r.stderr);
  const size = statSync(join(out, 'report.html')).size;
  assert.ok(size <= 262_144, `page ${size} bytes`);
  const data = pageData(readFileSync(join(out, 'report.html'), 'utf8'));
  assert.equal(data.page.bytes, size);
  const kept = data.channels.length;
  assert.ok(kept > 301 && kept < 601, `${kept} channels kept`);
  assert.equal(data.page.leftOutChannels, 601 - kept);
  assert.match(r.stderr, new RegExp(`, ${601 - kept} of 601 agents left out to fit \\(index.json`));
  // Main and every subagent it spawned are kept; what is left out is one level down.
  const ids = new Set(data.channels.map((c: any) => c.id));
  assert.ok(ids.has(null), 'main is in the page');
  for (let i = 0; i < 300; i++) assert.ok(ids.has(`toolu_a${i}`), `toolu_a${i} is in the page`);
  for (const c of data.channels) assert.ok(c.parent === null || ids.has(c.parent), `${c.id}'s parent`);
  // Prompts were shortened first, saying by how much.
  assert.equal(data.page.fieldChars, 100);
  const first = data.channels.find((c: any) => c.id === 'toolu_a0');
  assert.match(first.prompt, /^(toolu_a0 )+ *\[…\d+ chars cut…\]$/);
  assert.ok(data.channels.every((c: any) => c.ticks.length === 0 && c.entries.length === 0));
});

test('many channels that fit: the page is the data as read, nothing shortened or left out', () => {
  const out = wide300();
  const r = subtee(['report', out]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, / of 601 transcripts cut to fit \(the .log files have them whole\)\n$/);
  const html = readFileSync(join(out, 'report.html'), 'utf8');
  const { data } = readReportData(out, { subteeVersion: pageData(html).run.subtee });
  assert.equal(html, [...pagePieces(data, pageBytes(data))].join(''));
  assert.equal(pageData(html).page.leftOutChannels, undefined);
  assert.equal(pageData(html).page.fieldChars, undefined);
});

/**
 * A run of `wide` subagents spawned by main, each spawning one more that answers, every message
 * priced and timed; every fifth grandchild never answers (its usage unknown).
 */
function pricedTwoLevelRun(wide: number): string {
  const t0 = Date.parse('2026-11-30T12:00:00.000Z');
  let n = 0;
  const line = (parent: string | null, content: unknown[], input: number) =>
    JSON.stringify({
      type: 'assistant',
      parent_tool_use_id: parent,
      timestamp: new Date(t0 + 1000 * n).toISOString(),
      message: {
        id: `m_${n++}`,
        role: 'assistant',
        model: 'claude-opus-5-5',
        content,
        usage: { input_tokens: input, output_tokens: 2 },
      },
    });
  const spawn = (id: string) => ({
    type: 'tool_use',
    id,
    name: 'Agent',
    input: { subagent_type: 'g', description: `d ${id}`, prompt: `${id} `.repeat(40) },
  });
  const lines: string[] = [];
  for (let i = 0; i < wide; i++) {
    lines.push(line(null, [spawn(`toolu_a${i}`)], 10 + i), line(`toolu_a${i}`, [spawn(`toolu_b${i}`)], 5));
    if (i % 5 !== 0) lines.push(line(`toolu_b${i}`, [{ type: 'text', text: 'done' }], 3 + i));
  }
  const out = join(tmpDir(), 'o');
  const r = subtee(['--out', out, '--stdout', 'none', '-q'], lines.join('\n') + '\n');
  assert.equal(r.status, 0, r.stderr);
  return out;
}

test('a page that leaves agents out shows every kept agent\'s Σ tokens, Σ elapsed and Σ cost of its ' +
  'whole subtree, as index.json and the whole page do', () => {
  const out = pricedTwoLevelRun(600);
  const r = subtee(['report', '--max-page-bytes', '262144', out]);
  assert.equal(r.status, 0, r.stderr);
  const data = pageData(readFileSync(join(out, 'report.html'), 'utf8'));
  assert.ok(data.page.leftOutChannels > 100, `${data.page.leftOutChannels} left out`);
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  const own = new Map<string | null, any>(index.channels.map((c: any) => [c.id, c]));
  // Independent of the page: each channel's input + output tokens in index.json, over its subtree.
  const tokens = (c: any) => (c.usage.input_tokens ?? 0) + (c.usage.output_tokens ?? 0);
  const subtreeTokens = (id: string | null): number =>
    tokens(own.get(id)) +
    index.channels
      .filter((c: any) => c.id !== null && c.parent === id)
      .reduce((sum: number, c: any) => sum + subtreeTokens(c.id), 0);
  const whole = new Map(treeRows(readReportData(out).data.channels).map((w) => [w.ch.id, w]));
  let partial = 0;
  for (const row of treeRows(data.channels)) {
    const id = row.ch.id;
    const i = own.get(id);
    const kept = data.channels.filter((c: any) => c.parent === id && c.id !== null).length;
    const spawned = index.channels.filter((c: any) => c.parent === id && c.id !== null).length;
    if (kept < spawned) partial++;
    assert.equal(row.sub.tokens, subtreeTokens(id), `Σ tokens of ${id}`);
    assert.equal(
      usdLeavingOut(row.sub.usd, row.subUsd.unknown),
      usdLeavingOut(i.cost.subtree_usd, i.cost.subtree_unknown),
      `Σ cost of ${id}`,
    );
    assert.deepEqual([row.sub.first, row.sub.last], [whole.get(id)!.sub.first, whole.get(id)!.sub.last]);
  }
  // Main and the agents whose child was left out, at least.
  assert.ok(partial > 100, `${partial} kept agents have agents left out under them`);
  const main = index.channels[0];
  assert.equal(main.cost.subtree_unknown, 120);
  const all = index.channels.reduce((n: number, c: any) => n + tokens(c), 0);
  assert.equal(treeRows(data.channels)[0].sub.tokens, all);
});

test('a final report is cut to summaryChars on the page from a folder and on the live page', () => {
  const out = join(tmpDir(), 'o');
  mkdirSync(out, { recursive: true });
  const summary = `${'r'.repeat(150)}END`;
  writeFileSync(join(out, 'index.json'), JSON.stringify({ channels: [{ id: 'a', summary }] }));
  // 70 characters of head and 30 of tail around the one marker.
  const cut = `${'r'.repeat(70)} […53 chars cut…] ${'r'.repeat(27)}END`;
  assert.equal(readReportData(out, { summaryChars: 100 }).data.channels[0].summary, cut);
  assert.equal(readReportData(out).data.channels[0].summary, summary);
  const live = { id: 'a', summary, counts: {}, usage: {} } as unknown as ChannelFields;
  const extra = { spawned: null, prompt: null, log: null, cut: null, cost: null };
  assert.equal(channelUpdate(live, extra, 100).summary, cut);
  assert.equal(channelUpdate(live, extra).summary, summary);
});

test('a hostile index.json with 40,000 warnings: the page stays under its limit, lists at most 10 a ' +
  'code, and counts the rest', () => {
  const out = runFixture('nested-depth-3');
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  const many = Array.from({ length: 20_000 }, () => ({ code: 'SAME', message: 'm'.repeat(1000) }));
  const distinct = Array.from({ length: 20_000 }, (_, i) => ({ code: `C${i}`, message: 'd'.repeat(1000) }));
  index.warnings = [...many, ...distinct];
  writeFileSync(join(out, 'index.json'), JSON.stringify(index));
  const limit = 1024 * 1024;
  const r = subtee(['report', '--max-page-bytes', String(limit), out]);
  assert.equal(r.status, 0, r.stderr);
  const size = statSync(join(out, 'report.html')).size;
  assert.ok(size <= limit, `page ${size} bytes`);
  const shown: Array<{ code: string; message: string }> = pageData(
    readFileSync(join(out, 'report.html'), 'utf8'),
  ).run.warnings;
  assert.equal(shown.filter((w) => w.code === 'SAME').length, 10);
  const listed = shown.length - 1;
  assert.ok(listed > 10 && listed < 200, `${listed} listed`);
  assert.deepEqual(shown.at(-1), {
    code: 'WARNINGS_OMITTED',
    message: `${40_000 - listed} more warnings in index.json, not listed here`,
  });
});

test('a stopped subagent is drawn stopped, from a folder and live, in its own colour; ' +
  "the runs' index page counts it neither failed nor running", () => {
  const out = join(tmpDir(), 'o');
  mkdirSync(out, { recursive: true });
  const channels = [
    { id: null, status: 'completed' },
    { id: 'a', status: 'stopped', summary: 'Task stopped by user' },
    { id: 'b', status: 'killed' },
  ];
  writeFileSync(join(out, 'index.json'), JSON.stringify({ channels }));
  const shown = readReportData(out).data.channels.map((c) => [c.id, c.status]);
  assert.deepEqual(shown, [[null, 'completed'], ['a', 'stopped'], ['b', 'running']]);
  const live = { id: 'a', status: 'stopped', counts: {}, usage: {} } as unknown as ChannelFields;
  const extra = { spawned: null, prompt: null, log: null, cut: null, cost: null };
  assert.equal(channelUpdate(live, extra).status, 'stopped');
  for (const rule of ['.badge.stopped', '.card.stopped', '.sw.stopped', '#timeline .bar.stopped']) {
    const escaped = rule.replace(/\./g, '\\.');
    assert.match(REPORT_CSS, new RegExp(`^${escaped} \\{ \\S+: var\\(--stop\\); \\}$`, 'm'));
  }
  assert.match(pageHtml(readReportData(out).data), /<span class="sw stopped"><\/span>\nstopped<\/span>/);
  const row = indexPageRow('o', null, { channels });
  assert.deepEqual([row.status, row.subagents, row.failed, row.running], ['completed', 2, 0, 1]);
});

test('a hostile index.json: paths outside the folder are neither read nor linked', () => {
  const dir = tmpDir();
  const out = join(dir, 'o');
  mkdirSync(join(out, 'agents'), { recursive: true });
  writeFileSync(
    join(dir, 'secret.jsonl'),
    JSON.stringify({ type: 'assistant', message: { content: [{ type: 'text', text: 'SECRET' }] } }) + '\n',
  );
  writeFileSync(
    join(out, 'agents', 'ok.jsonl'),
    JSON.stringify({ type: 'assistant', message: { content: [{ type: 'text', text: 'fine' }] } }) + '\n',
  );
  writeFileSync(
    join(out, 'index.json'),
    JSON.stringify({
      channels: [
        { id: null, jsonl: '../secret.jsonl', log: 'javascript:alert(1)' },
        {
          id: 'a',
          parent: 'a',
          jsonl: '/etc/passwd',
          log: '../../x.log',
          usage: 'lots',
          counts: { '<b>': 1 },
          depth: 'deep',
        },
        { id: 'b', jsonl: 'agents/ok.jsonl', log: 'agents/ok.log' },
        'not a channel',
      ],
      warnings: [{ code: '<X>', message: 7 }],
    }),
  );
  const { data } = readReportData(out);
  assert.deepEqual(
    data.channels.map((c) => c.log),
    [null, null, 'agents/ok.log'],
  );
  assert.deepEqual(
    data.channels.map((c) => c.entries.map((e) => e.s)),
    [[], [], ['fine']],
  );
  assert.equal(data.channels[1].depth, null);
  assert.deepEqual(data.run.warnings, [{ code: '<X>', message: '' }]);
  assert.equal(treeRows(data.channels).length, 3);
});

test('index.json read a channel at a time gives what a whole parse gives, duplicate keys and all', () => {
  const dir = tmpDir();
  const out = join(dir, 'o');
  mkdirSync(join(out, 'agents'), { recursive: true });
  writeFileSync(
    join(out, 'agents', 'b.jsonl'),
    JSON.stringify({ type: 'assistant', message: { content: [{ type: 'text', text: 'from b' }] } }) + '\n',
  );
  const entry = (id: string, extra = {}) =>
    JSON.stringify({ id, parent: null, status: 'completed', jsonl: `agents/${id}.jsonl`, ...extra });
  // JSON.parse keeps the last of a repeated key; so must the channel-at-a-time reading.
  const body =
    `"channels": [${entry('a')}], "session_id": "first", "__proto__": {"polluted": true},\n` +
    `"channels": [${entry('b', { summary: 'done \u2028 "quoted"' })}, 7, null], "session_id": "s\u00e9"`;
  const read = (text: string) => {
    writeFileSync(join(out, 'index.json'), text);
    return readReportData(out, { subteeVersion: 'test' }).data;
  };
  const scanned = read(`{${body}}`);
  // A member of many tiny values is past what the scanner records: the whole text is parsed.
  const parsed = read(`{"padding": [${'0,'.repeat(5000)}0], ${body}}`);
  assert.deepEqual(scanned, parsed);
  assert.deepEqual(
    scanned.channels.map((c) => [c.id, c.summary, c.entries.map((e) => e.s)]),
    [['b', 'done \\u2028 "quoted"', ['from b']]],
  );
  assert.equal(scanned.run.session, 'sé');
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
  for (const text of ['[]', '{"channels": {}}', '{"channel": []}', '{"channels": [] ']) {
    writeFileSync(join(out, 'index.json'), text);
    assert.throws(() => readReportData(out), { code: 'ERR_INPUT' }, text);
  }
});

test('subtee report and --serve: bad usage and unusable folders: one line, the exit code', async () => {
  const dir = tmpDir();
  writeFileSync(join(dir, 'index.json'), '{nope');
  for (const [args, code, status] of [
    [['report'], 'ERR_USAGE', 2],
    [['report', 'a', 'b'], 'ERR_USAGE', 2],
    [['report', '--bogus', dir], 'ERR_UNKNOWN_OPTION', 2],
    [['report', join(dir, 'missing')], 'ERR_INPUT', 3],
    [['report', dir], 'ERR_INPUT', 3],
    [['--out', join(dir, 'o1'), '--serve', 'localhost:99999'], 'ERR_BAD_OPTION', 2],
    [['--out', join(dir, 'o2'), '--serve', 'a b:80'], 'ERR_BAD_OPTION', 2],
  ] as const) {
    const r = subtee([...args], '');
    assert.equal(r.status, status, `${args.join(' ')}: ${r.stderr}`);
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    assert.ok(r.stderr.includes(`[${code}]`), r.stderr);
  }
  assert.deepEqual(parseServe('0'), { host: '127.0.0.1', port: 0 });
  assert.deepEqual(parseServe('[::1]:8080'), { host: '::1', port: 8080 });
  assert.deepEqual(parseServe('0.0.0.0:80'), { host: '0.0.0.0', port: 80 });
  const taken = createServer().listen(0, '127.0.0.1');
  await once(taken, 'listening');
  const port = (taken.address() as { port: number }).port;
  const r = subtee([
    '--out',
    join(dir, 'o3'),
    '--stdout',
    'none',
    '--serve',
    `127.0.0.1:${port}`,
    join(FIXTURES, 'nested-depth-3.jsonl'),
  ]);
  taken.close();
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /^subtee: --serve: cannot listen on 127[\d.]+:\d+: the address is already in use/);
  assert.match(r.stderr, /^[^\n]* \[ERR_BAD_OPTION\]\n$/);
  // Tried before any input is read: nothing is written.
  assert.ok(!existsSync(join(dir, 'o3')), 'no output folder');
});

test('ReportFeed: a replaced event leaves the log; resuming after any id gets every later event', () => {
  const feed = new ReportFeed();
  feed.publish('channel', '{"v":1}', 'a');
  feed.publish('entries', '{"e":1}');
  feed.publish('channel', '{"v":2}', 'a');
  feed.publish('channel', '{"b":1}', 'b');
  assert.deepEqual(
    feed.since(0).map((e) => e.id),
    [2, 3, 4],
  );
  assert.deepEqual(
    feed.since(1).map((e) => e.id),
    [2, 3, 4],
  );
  assert.deepEqual(
    feed.since(3).map((e) => e.id),
    [4],
  );
  for (let i = 0; i < 5000; i++) feed.publish('channel', `{"v":${i}}`, 'a');
  assert.equal(feed.size, 3, 'replaced events are compacted away');
  assert.deepEqual(
    feed.since(3).map((e) => e.data),
    ['{"b":1}', '{"v":4999}'],
  );
  feed.end();
  feed.publish('entries', '{}');
  assert.equal(feed.since(0).at(-1)!.type, 'end');
});

interface Sse {
  id: number;
  event: string;
  data: any;
}

/** Reads an event stream; `done` resolves on `end` (or when `until` is true) with the events read. */
function readEvents(
  url: string,
  headers: Record<string, string>,
  until: (evs: Sse[]) => boolean = () => false,
) {
  let connected!: () => void;
  const isConnected = new Promise<void>((r) => (connected = r));
  const done = new Promise<{ events: Sse[]; res: IncomingMessage }>((resolve, reject) => {
    const req = request(`${url}events`, { headers }, (res) => {
      connected();
      const events: Sse[] = [];
      let buf = '';
      let done = false;
      const finish = () => {
        if (done) return;
        done = true;
        resolve({ events, res });
      };
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        buf += d;
        let i;
        while ((i = buf.indexOf('\n\n')) !== -1) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const f: Record<string, string> = {};
          for (const line of block.split('\n')) {
            const m = /^(\w+): (.*)$/.exec(line);
            if (m) f[m[1]] = m[2];
          }
          if (f.id === undefined) continue;
          events.push({ id: Number(f.id), event: f.event, data: JSON.parse(f.data) });
          if (f.event === 'end' || until(events)) return finish();
        }
      });
      res.on('end', finish);
    });
    req.on('error', reject);
    req.end();
  });
  return { connected: isConnected, done };
}

/** What a page knows after applying events in order (as the page's script does). */
function applyEvents(events: Sse[], into = new Map<string, any>()): Map<string, any> {
  for (const e of events) {
    if (e.event !== 'channel' && e.event !== 'entries') continue;
    const key = String(e.data.id);
    const ch = into.get(key) ?? { entries: [], ticks: [] };
    into.set(key, ch);
    if (e.event === 'channel') Object.assign(ch, e.data);
    else {
      ch.entries.push(...e.data.entries);
      ch.ticks.push(...e.data.ticks);
    }
  }
  return into;
}

test('--serve: Last-Event-ID resumes without gaps; only the page and its stream, on loopback', async () => {
  const lines = linesOf(readFileSync(join(FIXTURES, 'background-fanout-12.jsonl')));
  const s = startSubtee(['--out', join(tmpDir(), 'o'), '--stdout', 'none', '-q', '--serve', '0']);
  const url = await s.url();
  assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\/$/, 'loopback unless a host is given');
  const get = (path: string, opts: { method?: string; host?: string } = {}) =>
    new Promise<{ status: number; headers: IncomingMessage['headers']; body: string }>((resolve, reject) => {
      const req = request(
        new URL(path, url),
        { method: opts.method ?? 'GET', headers: opts.host ? { host: opts.host } : {} },
        (res) => {
          let body = '';
          res.on('data', (d) => (body += d));
          res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
        },
      );
      req.on('error', reject);
      req.end();
    });
  const page = await get('/');
  assert.equal(page.status, 200);
  assert.match(
    String(page.headers['content-security-policy']),
    /default-src 'none'.*connect-src 'self'.*frame-ancestors 'none'/,
  );
  assert.equal(pageData(page.body).live, true);
  for (const p of [
    '/index.json',
    '/main.jsonl',
    '/../index.json',
    '/%2e%2e/index.json',
    '/events/../index.json',
  ])
    assert.equal((await get(p)).status, 404, p);
  assert.equal((await get('/', { method: 'POST' })).status, 405);
  assert.equal((await get('/', { host: 'attacker.example:80' })).status, 403, 'DNS rebinding is refused');

  // The first part of the run; a client reads until it has seen three subagents, then drops.
  const spawnsIn = (n: number) =>
    lines.findIndex(
      (l, i) => lines.slice(0, i + 1).filter((x) => x.includes('"name":"Agent"')).length === n,
    ) + 1;
  s.child.stdin!.write(lines.slice(0, spawnsIn(3)).join('\n') + '\n');
  const first = await readEvents(url, {}, (evs) => applyEvents(evs).size >= 4).done;
  first.res.destroy();
  const lastId = first.events.at(-1)!.id;
  // The rest arrives while nobody is connected; then one client resumes and one starts fresh.
  s.child.stdin!.write(lines.slice(spawnsIn(3)).join('\n') + '\n');
  const resumedR = readEvents(url, { 'Last-Event-ID': String(lastId) });
  const freshR = readEvents(url, {});
  await Promise.all([resumedR.connected, freshR.connected]);
  s.child.stdin!.end();
  const [resumed, fresh] = await Promise.all([resumedR.done, freshR.done]);
  assert.equal(await s.closed, 0, s.stderr());
  assert.ok(
    resumed.events.every((e) => e.id > lastId),
    'nothing before Last-Event-ID is sent again',
  );
  const ids = resumed.events.map((e) => e.id);
  assert.deepEqual(
    ids,
    [...ids].sort((a, b) => a - b),
  );
  const afterResume = applyEvents(resumed.events, applyEvents(first.events));
  const fromScratch = applyEvents(fresh.events);
  assert.equal(fromScratch.size, 13);
  assert.deepEqual(afterResume, fromScratch, 'resuming gives exactly what a fresh page gets');
  assert.equal([...fromScratch.values()].filter((c) => c.status === 'completed').length, 13);
  assert.equal(resumed.events.at(-1)!.event, 'end');
});

test('--serve leaves index.json as a plain run writes it: the live page reads the cost mid-run ' +
  'and tells no warning', async () => {
  // A real recording with an earlier `result` line (one per turn, as a multi-turn session prints)
  // stating less than its own per-model figures give: a disagreement only while it stands.
  const lines = linesOf(readFileSync(join(FIXTURES, 'nested-depth-3.jsonl')));
  const last = JSON.parse(lines.at(-1)!);
  assert.equal(last.type, 'result');
  lines.splice(14, 0, JSON.stringify({ ...last, total_cost_usd: 0.0001, uuid: 'early-result' }));
  const plain = join(tmpDir(), 'o');
  assert.equal(subtee(['--out', plain, '--stdout', 'none', '-q'], lines.join('\n') + '\n').status, 0);

  const served = join(tmpDir(), 'o');
  const s = startSubtee(['--out', served, '--stdout', 'none', '-q', '--serve', '0']);
  const url = await s.url();
  const early = readEvents(url, {}, (evs) =>
    evs.some((e) => e.event === 'run' && e.data.cost?.resultUsd === 0.0001),
  );
  await early.connected;
  s.child.stdin!.write(lines.slice(0, 15).join('\n') + '\n');
  // The live page has shown the run's cost while the early result stood.
  const { events, res } = await early.done;
  res.destroy();
  const mid = events.filter((e) => e.event === 'run').at(-1)!;
  assert.ok(mid.data.cost.channelsUsd > 0.0001, 'the figures disagreed when the page read them');
  assert.deepEqual(mid.data.warnings, []);
  s.child.stdin!.end(lines.slice(15).join('\n') + '\n');
  assert.equal(await s.closed, 0, s.stderr());
  const index = (out: string) => JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.deepEqual(index(served).warnings, []);
  assert.deepEqual(index(served), index(plain));
});

test('the live page names quarantine.log in its facts, as report.html does', async () => {
  for (const bad of [false, true]) {
    const out = join(tmpDir(), 'o');
    const s = startSubtee(['--out', out, '--stdout', 'none', '-q', '--serve', '0']);
    const url = await s.url();
    const stream = readEvents(url, {});
    await stream.connected;
    const line = JSON.stringify({ type: 'assistant', message: { content: [{ type: 'text', text: 'hi' }] } });
    s.child.stdin!.end(`${line}\n${bad ? '{not json\n' : ''}`);
    const { events } = await stream.done;
    assert.equal(await s.closed, 0, s.stderr());
    const run = events.filter((e) => e.event === 'run').at(-1)!.data;
    const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
    assert.equal(index.quarantine, bad ? 'quarantine.log' : null);
    assert.equal(run.quarantine, index.quarantine);
    assert.equal(run.input.quarantined, bad ? 1 : 0);
    assert.equal(subtee(['report', '-q', out]).status, 0);
    const page = pageData(readFileSync(join(out, 'report.html'), 'utf8'));
    assert.equal(run.quarantine, page.run.quarantine);
  }
});
