import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import type { LineRecord } from '../src/model/record.js';
import { ChannelTree } from '../src/model/tree.js';
import { LiveReport, ReportFeed } from '../src/views/report/live.js';
import { pageHtml } from '../src/views/report/page.js';
import { startReportServer } from '../src/chain/sinks/report-server.js';
import {
  chromiumAvailable,
  launchBrowser,
  newPage,
  openReport,
  screenshot,
  startSubtee,
  type Started,
} from './helpers/browser.js';
import { COPILOT_TOTALS, copilotTokens } from './helpers/chat-reading.js';
import { FIXTURES, linesOf, tmpDir } from './helpers/helpers.js';

const skip =
  !chromiumAvailable() && 'Chromium is not installed (.ci/run installs it: apt-get install chromium)';

const fanout = linesOf(readFileSync(join(FIXTURES, 'background-fanout-12.jsonl')));
/** Lines up to and including the n-th spawn call. */
const throughSpawn = (lines: string[], n: number) => {
  let seen = 0;
  return lines.findIndex((l) => l.includes('"name":"Agent"') && ++seen === n) + 1;
};

async function counts(page: Page) {
  return page.evaluate(() => ({
    cards: document.querySelectorAll('#cards .card').length,
    completed: document.querySelectorAll('#cards .card[data-status="completed"]').length,
    bars: document.querySelectorAll('#timeline rect.bar').length,
    rows: document.querySelectorAll('#tree tr.tree-row').length,
  }));
}

/** subtee serving its live page on a free port, with `lines` written to its stdin (kept open). */
async function serveLines(lines: object[]): Promise<{ s: Started; url: string }> {
  const s = startSubtee(['--out', join(tmpDir(), 'o'), '--stdout', 'none', '-q', '--serve', '0']);
  const url = await s.url();
  s.child.stdin!.write(lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
  return { s, url };
}

/** Ends the input: the page shows the run ended and subtee exits 0. */
async function endRun(s: Started, page: Page): Promise<void> {
  s.child.stdin!.end();
  await page.waitForSelector('#app[data-state="ended"]');
  assert.equal(await s.closed, 0);
}

/** Main's line spawning `id` with these input fields, as an `Agent` call. */
const spawnLine = (id: string, input: Record<string, string>, text?: string) => ({
  type: 'assistant',
  parent_tool_use_id: null,
  message: {
    id: 'm1',
    content: [
      ...(text === undefined ? [] : [{ type: 'text', text }]),
      { type: 'tool_use', id, name: 'Agent', input },
    ],
  },
});

/** The page's tree rows, cell by cell (every figure of every channel), and its cost line. */
async function figures(page: Page) {
  return page.evaluate(() => ({
    cost: document.getElementById('cost')!.innerText,
    rows: [...document.querySelectorAll<HTMLTableRowElement>('#tree tr.tree-row')].map((r) =>
      [...r.cells].map((c) => c.innerText),
    ),
  }));
}

/** Content blocks of the lines: the live page's entries once it has had them all. */
const blocksOf = (lines: string[]) =>
  lines.reduce((n, l) => {
    const content = JSON.parse(l).message?.content;
    return n + (Array.isArray(content) ? content.length : 0);
  }, 0);

const NESTED_TRANSCRIPTS = join(FIXTURES, 'transcripts', 'nested-depth-3');

describe('the live page in Chromium', { skip }, () => {
  let browser: Browser;
  before(async () => {
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
  });

  test('the live page gains cards and bars while a slow ' +
    'replay feeds --serve, and ends with every status', async () => {
    const s = startSubtee(['--out', join(tmpDir(), 'o'), '--stdout', 'none', '-q', '--serve', '127.0.0.1:0']);
    const url = await s.url();
    const write = (from: number, to: number) =>
      s.child.stdin!.write(fanout.slice(from, to).join('\n') + '\n');
    const three = throughSpawn(fanout, 3);
    write(0, three);
    // Opened mid-run: the page shows everything so far.
    const { page, console } = await newPage(browser);
    await page.goto(url);
    await page.waitForSelector('#app[data-state="live"]');
    await page.waitForFunction(() => document.querySelectorAll('#cards .card').length === 3);
    assert.deepEqual(await counts(page), { cards: 3, completed: 0, bars: 4, rows: 4 });
    await screenshot(page, 'live-3');
    // The replay goes on line by line; each new subagent becomes a card as it is spawned.
    const eight = throughSpawn(fanout, 8);
    for (let i = three; i < eight; i++) write(i, i + 1);
    await page.waitForFunction(() => document.querySelectorAll('#cards .card').length === 8);
    assert.deepEqual(await counts(page), { cards: 8, completed: 0, bars: 9, rows: 9 });
    const firstWorker = page.locator('#cards .card').first();
    assert.equal(await firstWorker.getAttribute('data-status'), 'running');
    // The workers talk: a card streams its agent's latest text.
    const talking = fanout.findIndex((l) => l.includes('Worker w1 starting'));
    write(eight, talking + 1);
    await page.waitForFunction(
      () => document.querySelector('#cards .card .last')?.textContent === 'Worker w1 starting.',
    );
    write(talking + 1, fanout.length);
    await page.waitForFunction(
      () => document.querySelectorAll('#cards .card[data-status="completed"]').length === 12,
    );
    s.child.stdin!.end();
    await page.waitForSelector('#app[data-state="ended"]');
    assert.equal(await s.closed, 0, s.stderr());
    assert.deepEqual(await counts(page), { cards: 12, completed: 12, bars: 13, rows: 13 });
    assert.ok(
      (await firstWorker.locator('.last').innerText()).length > 0,
      'a finished card shows its final report',
    );
    assert.match(await page.locator('#mode').innerText(), /run ended/);
    await firstWorker.click();
    assert.match(await page.locator('#transcript').innerText(), /Worker w1 report: done\./);
    await screenshot(page, 'live-ended');
    assert.deepEqual(console, []);
    await page.close();
  });

  for (const c of [
    {
      why: 'the result line reprices every subagent',
      stream: join(FIXTURES, 'nested-depth-3.jsonl'),
      args: [],
      endChanges: false,
    },
    {
      why: "main's output made exact by its transcript, read at the run's end",
      stream: join(NESTED_TRANSCRIPTS, 'stream.jsonl'),
      args: ['--transcripts', join(NESTED_TRANSCRIPTS, 'config')],
      endChanges: true,
    },
  ])
    test(`the live page shows every channel's figures as report.html does: ${c.why}`, async () => {
      const out = join(tmpDir(), 'o');
      const s = startSubtee(['--out', out, '--html', '--stdout', 'none', '-q', '--serve', '0', ...c.args]);
      const url = await s.url();
      const lines = linesOf(readFileSync(c.stream));
      const result = lines.findIndex((l) => JSON.parse(l).type === 'result');
      assert.equal(result, lines.length - 1, 'the result line ends the stream');
      s.child.stdin!.write(lines.slice(0, result).join('\n') + '\n');
      const { page, console } = await newPage(browser);
      await page.goto(url);
      // A flush publishes channels' fields before their entries: once the page has every entry,
      // it has every field that flush sent.
      const entries = (n: number) =>
        page.waitForFunction((k) => document.getElementById('app')!.dataset.entries === String(k), n);
      await entries(blocksOf(lines.slice(0, result)));
      const beforeResult = await figures(page);
      s.child.stdin!.write(lines[result] + '\n');
      await entries(blocksOf(lines.slice(0, result)) + 1);
      const afterResult = await figures(page);
      await endRun(s, page);
      const live = await figures(page);
      const { page: report } = await openReport(browser, out);
      const shown = await figures(report);
      assert.deepEqual(live, shown);
      assert.notDeepEqual(beforeResult.rows, shown.rows, 'the figures shown before the result change');
      if (c.endChanges)
        assert.notDeepEqual(afterResult.rows, shown.rows, "what the run's end read changes them");
      else assert.deepEqual(afterResult.rows, shown.rows, 'the result line alone brings them');
      // Main's Σ columns against index.json: its tokens summed here, its dollars the run's agents'.
      const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
      const tokens = index.channels.reduce(
        (n: number, ch: any) => n + ch.usage.input_tokens + ch.usage.output_tokens,
        0,
      );
      const [main] = live.rows;
      assert.equal(main[4], tokens.toLocaleString('en-US'));
      assert.equal(`agents ${main.at(-1)}`, /agents \S+/.exec(live.cost)![0]);
      assert.deepEqual(console, []);
      await page.close();
      await report.close();
    });

  test('the live page of a run cut off with background subagents running ends with the elapsed ' +
    "times report.html shows: main and a running agent to the run's latest line", async () => {
    const out = join(tmpDir(), 'o');
    const s = startSubtee(['--out', out, '--html', '--stdout', 'none', '-q', '--serve', '0']);
    const url = await s.url();
    // Cut where main has spoken last and the workers go on: the run ends with them running.
    const cut = fanout.findIndex((l) => l.includes('Worker w1 report'));
    assert.ok(cut > 0);
    s.child.stdin!.write(fanout.slice(0, cut).join('\n') + '\n');
    const { page, console } = await newPage(browser);
    await page.goto(url);
    await page.waitForFunction(() => document.querySelectorAll('#cards .card').length === 12);
    await endRun(s, page);
    const live = await figures(page);
    const { page: report } = await openReport(browser, out);
    const shown = await figures(report);
    assert.ok(shown.rows.filter((r) => r[1].startsWith('running')).length > 1, 'subagents still running');
    assert.deepEqual(live, shown);
    assert.deepEqual(console, []);
    await page.close();
    await report.close();
  });

  test("a Copilot subagent's stated total is its tokens on the live page and on report.html, " +
    'own and Σ', async () => {
    for (const name of COPILOT_TOTALS.slice(0, 3)) {
      const input = readFileSync(join(FIXTURES, `${name}.jsonl`), 'utf8');
      const expected = [...copilotTokens(input).values()];
      const all = expected.reduce((a, b) => a + b, 0);
      assert.ok(all > 0, name);
      const out = join(tmpDir(), 'o');
      const s = startSubtee(['--out', out, '--html', '--stdout', 'none', '-q', '--serve', '0']);
      const url = await s.url();
      const { page, console } = await newPage(browser);
      await page.goto(url);
      await page.waitForSelector('#app[data-state="live"]');
      s.child.stdin!.write(input);
      await endRun(s, page);
      const live = await figures(page);
      const { page: report } = await openReport(browser, out);
      assert.deepEqual(live.rows, (await figures(report)).rows, name);
      const count = (cell: string) => Number(cell.replace(/,/g, ''));
      assert.deepEqual(
        live.rows.map((r) => count(r[3])).sort((a, b) => a - b),
        expected.sort((a, b) => a - b),
        `${name}: each agent's tokens`,
      );
      assert.equal(count(live.rows[0][4]), all, `${name}: main's Σ tokens`);
      assert.deepEqual(console, []);
      await page.close();
      await report.close();
    }
  });

  test('a dropped event stream reconnects with Last-Event-ID: ' +
    'the page ends with exactly what a fresh page gets', async () => {
    const feed = new ReportFeed();
    const live = new LiveReport(feed, undefined, 'test');
    const server = await startReportServer({
      host: '127.0.0.1',
      port: 0,
      feed,
      page: () => pageHtml(live.skeleton()),
      retryMs: 100,
    });
    const tree = new ChannelTree();
    const feedLines = (from: number, to: number) => {
      const batch: LineRecord[] = fanout.slice(from, to).map((line, i) => {
        const value = JSON.parse(line);
        const { channel, events } = tree.route(value);
        return { kind: 'line', lineNo: from + i + 1, raw: Buffer.from(line), value, channel, events };
      });
      live.observe(batch);
      live.flush();
    };
    try {
      const half = throughSpawn(fanout, 6);
      feedLines(0, half);
      const { page, console } = await newPage(browser);
      await page.goto(server.url);
      await page.waitForFunction(() => document.querySelectorAll('#cards .card').length === 6);
      assert.equal(await page.locator('#app').getAttribute('data-connections'), '1');
      server.dropClients();
      await page.waitForSelector('#app[data-state="reconnecting"]');
      // Everything else happens while the page is cut off.
      feedLines(half, fanout.length);
      feed.end();
      await page.waitForSelector('#app[data-state="ended"]');
      assert.equal(await page.locator('#app').getAttribute('data-connections'), '2', 'it reconnected once');
      const fresh = await newPage(browser);
      await fresh.page.goto(server.url);
      await fresh.page.waitForSelector('#app[data-state="ended"]');
      const state = (p: Page) =>
        p.evaluate(() => ({
          channels: document.getElementById('app')!.dataset.channels,
          entries: document.getElementById('app')!.dataset.entries,
          cards: [...document.querySelectorAll<HTMLElement>('#cards .card')].map(
            (c) => `${c.dataset.status} ${c.innerText}`,
          ),
          rows: [...document.querySelectorAll<HTMLElement>('#tree tr.tree-row')].map((r) => r.innerText),
        }));
      const resumed = await state(page);
      assert.deepEqual(resumed, await state(fresh.page), 'no gap and no repeat');
      assert.equal(resumed.channels, '13');
      // One entry per content block, and one for each `result` line.
      const blocks = fanout
        .map((l) => JSON.parse(l))
        .reduce(
          (n, v) =>
            n + (v.type === 'result' ? 1 : Array.isArray(v.message?.content) ? v.message.content.length : 0),
          0,
        );
      assert.equal(Number(resumed.entries), blocks);
      assert.deepEqual(
        [...console, ...fresh.console].filter((m) => !/EventSource|ERR_/.test(m)),
        [],
      );
      await page.close();
      await fresh.page.close();
    } finally {
      await server.close();
    }
  });

  test("text the live page cuts keeps surrogate pairs whole: a timeline label, a card's last words, " +
    'a search hit', async () => {
    const id = 'toolu_emoji';
    // Each cut falls inside a pair: the label's after 32 units, the card's 300 units from the
    // end, the hit's 40 units before and 60 after the match.
    const description = `x${'😀'.repeat(30)}`;
    const found = `${'😀'.repeat(30)}zneedlez${'😀'.repeat(40)}`;
    const last = `${'😀'.repeat(200)}z`;
    const { s, url } = await serveLines([
      spawnLine(id, { subagent_type: 'w', description }),
      ...[found, last].map((text, k) => ({
        type: 'assistant',
        parent_tool_use_id: id,
        message: { id: `m${k + 2}`, content: [{ type: 'text', text }] },
      })),
    ]);
    const { page, console } = await newPage(browser);
    await page.goto(url);
    await page.waitForFunction(() =>
      document.querySelector('#cards .card .last')?.textContent?.endsWith('z'),
    );
    await page.fill('#search', 'NEEDLE');
    await page.waitForSelector('#hits li.hit');
    const shown = await page.evaluate(() => {
      const lone = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
      const texts = {
        label: [...document.querySelectorAll('#timeline text')].map((t) => t.textContent ?? ''),
        last: document.querySelector('#cards .card .last')!.textContent ?? '',
        hit: document.querySelector('#hits li.hit')!.textContent ?? '',
        mark: document.querySelector('#hits li.hit mark')!.textContent ?? '',
      };
      const cut = Object.entries(texts).filter(([, v]) => [v].flat().some((t) => lone.test(t)));
      return { ...texts, lone: cut.map(([k]) => k) };
    });
    assert.deepEqual(shown.lone, [], 'no lone half of a pair on screen');
    const label = shown.label.find((t) => t.startsWith('x'))!;
    assert.ok(label.endsWith('…') && `${description} · w`.startsWith(label.slice(0, -1)), label);
    assert.ok(shown.last.startsWith('…') && last.endsWith(shown.last.slice(1)), 'the last words, cut');
    assert.equal(shown.mark, 'needle');
    assert.ok(shown.hit.includes(`…${'😀'.repeat(19)}zneedlez${'😀'.repeat(29)}…`), shown.hit);
    await endRun(s, page);
    assert.deepEqual(
      console.filter((m) => !/EventSource|ERR_/.test(m)),
      [],
    );
    await page.close();
  });

  test('hostile text through --serve stays text on the live page', async () => {
    const P = '<script>window.__pwned=1</script></script><img src=x onerror="window.__pwned=2">\u202e';
    const id = `toolu_"><svg onload=window.__pwned=3>`;
    const { s, url } = await serveLines([
      spawnLine(id, { subagent_type: P, description: P }, P),
      {
        type: 'assistant',
        parent_tool_use_id: id,
        message: { id: 'm2', content: [{ type: 'text', text: P }] },
      },
    ]);
    const { page, console } = await newPage(browser);
    await page.goto(url);
    await page.waitForFunction(() =>
      document.querySelector('#cards .card .last')?.textContent?.includes('<script>'),
    );
    await page.locator('#cards .card').click();
    await page.waitForSelector('#transcript:not([hidden])');
    await endRun(s, page);
    assert.ok(
      (await page.locator('#cards .card').innerText()).includes(
        '<img src=x onerror="window.__pwned=2">\\u202e',
      ),
    );
    assert.deepEqual(
      await page.evaluate(() => [(window as any).__pwned, document.querySelectorAll('img, svg svg').length]),
      [undefined, 0],
    );
    assert.deepEqual(
      console.filter((m) => !/EventSource|ERR_/.test(m)),
      [],
    );
    await page.close();
  });
});

test('the live page of a transcript of empty blocks stays under its size limit; ' +
  'the agent stays in it', () => {
  const feed = new ReportFeed();
  const maxPageBytes = 262_144;
  // Transcripts as long as the page allows: only the page's own limit bounds them.
  const live = new LiveReport(feed, undefined, 'test', { maxPageBytes, channelChars: 1 << 30 });
  const tree = new ChannelTree();
  const lines = [spawnLine('toolu_e', { prompt: 'p' })];
  const blocks = [
    { type: 'thinking', thinking: '', signature: 'c2ln' },
    ...Array.from({ length: 999 }, () => ({ type: 'text', text: '' })),
  ];
  for (let i = 0; i < 100; i++)
    lines.push({
      type: 'assistant',
      parent_tool_use_id: 'toolu_e',
      message: { id: `m${i}`, content: blocks },
    } as any);
  lines.forEach((value, i) => {
    const { channel, events } = tree.route(value as any);
    const raw = Buffer.from(JSON.stringify(value));
    live.observe([{ kind: 'line', lineNo: i + 1, raw, value: value as any, channel, events }]);
    live.flush();
  });
  live.flush(true);
  const events = feed.since(0);
  const sent = events.filter((e) => e.type === 'entries');
  const bytes = sent.reduce((n, e) => n + Buffer.byteLength(e.data), 0);
  assert.ok(bytes <= maxPageBytes, `${bytes} bytes of transcript sent`);
  const entries = sent.reduce((n, e) => n + JSON.parse(e.data).entries.length, 0);
  assert.ok(entries > 1000 && entries < 100_000, `${entries} entries sent`);
  const sub = events.filter((e) => e.type === 'channel').map((e) => JSON.parse(e.data));
  const last = sub.filter((c) => c.id === 'toolu_e').at(-1);
  assert.ok(last, 'the subagent is on the page');
  assert.ok(last.cut.lines > 0, 'its transcript says it was cut');
});
