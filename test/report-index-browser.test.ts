import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, describe, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { chromiumAvailable, launchBrowser, newPage, screenshot } from './helpers/browser.js';
import { BIN, FIXTURES, tmpDir } from './helpers/helpers.js';

const skip =
  !chromiumAvailable() && 'Chromium is not installed (.ci/run installs it: apt-get install chromium)';

const HOSTILE_NAME = '"><img src=x onerror=document.title=1>';
const HOSTILE_VERSION = '<script>document.title="pwned"</script>';

/** What a row must show, counted here from the run's index.json. */
function expectedRow(index: any) {
  const subagents = index.channels.filter((c: any) => c.id !== null);
  const firsts = index.channels
    .map((c: any) => c.first_seen)
    .filter(Boolean)
    .map((t: string) => Date.parse(t));
  const lasts = index.channels
    .map((c: any) => c.last_seen)
    .filter(Boolean)
    .map((t: string) => Date.parse(t));
  return {
    subagents: String(subagents.length),
    failed: String(subagents.filter((c: any) => c.status === 'failed').length),
    tokens: String(
      index.channels.reduce(
        (s: number, c: any) => s + (c.usage.input_tokens ?? 0) + (c.usage.output_tokens ?? 0),
        0,
      ),
    ),
    durationMs: String(Math.max(...lasts) - Math.min(...firsts)),
    cost: typeof index.cost?.usd === 'number' ? String(index.cost.usd) : '',
    start: Math.min(...firsts),
  };
}

describe('the index page over many runs, in Chromium', { skip }, () => {
  let browser: Browser;
  let root: string;
  let stderr: string;
  const runs = ['nested-depth-3', 'failing-beside-healthy', 'binary-tree-depth-3', 'background-fanout-12'];

  before(async () => {
    root = join(tmpDir(), 'fleet');
    const inputs = runs.map((f) => join(FIXTURES, `${f}.jsonl`));
    const r = spawnSync(
      process.execPath,
      [BIN, '--out', join(root, 'ci'), '--stdout', 'none', '-q', ...inputs],
      {
        encoding: 'utf8',
      },
    );
    assert.equal(r.status, 0, r.stderr);
    // A run whose folder name and index.json carry markup, with a cost.
    const hostile = join(root, HOSTILE_NAME);
    cpSync(join(root, 'ci', 'nested-depth-3'), hostile, { recursive: true });
    const index = JSON.parse(readFileSync(join(hostile, 'index.json'), 'utf8'));
    index.claude_code_version = HOSTILE_VERSION;
    index.session_id = '"><b>session</b>';
    index.cost = { usd: 0.0123, basis: 'result' };
    writeFileSync(join(hostile, 'index.json'), JSON.stringify(index));
    // A run whose index.json is cut short.
    const half = join(root, 'half-written');
    mkdirSync(half);
    const text = readFileSync(join(root, 'ci', 'nested-depth-3', 'index.json'), 'utf8');
    writeFileSync(join(half, 'index.json'), text.slice(0, 300));
    const report = spawnSync(process.execPath, [BIN, 'report', root], { encoding: 'utf8', timeout: 120_000 });
    assert.equal(report.status, 0, report.stderr);
    stderr = report.stderr;
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
  });

  test('one row per run with its status, subagents, tokens, ' +
    'cost and duration; newest first; a link to each page', async () => {
    assert.match(stderr, /skipped .*half-written\/index\.json: not valid JSON/);
    assert.match(stderr, /wrote .*index\.html: 6 runs/);
    const { page, console } = await newPage(browser);
    await page.goto(pathToFileURL(join(root, 'index.html')).href);
    const rows = await page.evaluate(() =>
      [...document.querySelectorAll<HTMLTableRowElement>('#runs tbody tr')].map((tr) => ({
        status: tr.dataset.status!,
        name: tr.cells[0].innerText,
        href: tr.cells[0].querySelector('a')?.getAttribute('href') ?? null,
        subagents: tr.cells[3].dataset.subagents!,
        failed: tr.cells[3].dataset.failed!,
        tokens: tr.cells[4].dataset.tokens!,
        cost: tr.cells[5].dataset.cost!,
        costText: tr.cells[5].innerText,
        durationMs: tr.cells[6].dataset.durationMs!,
        version: tr.cells[7].innerText,
      })),
    );
    await screenshot(page, 'index-page');
    assert.equal(rows.length, runs.length + 2);
    const folders = [...runs.map((r) => `ci/${r}`), HOSTILE_NAME];
    const expected = folders.map((f) => ({
      f,
      ...expectedRow(JSON.parse(readFileSync(join(root, f, 'index.json'), 'utf8'))),
    }));
    expected.sort((a, b) => b.start - a.start || (a.f < b.f ? -1 : 1));
    const shown = rows.filter((r) => r.status !== 'unreadable');
    assert.deepEqual(
      shown.map((r) => [r.name, r.subagents, r.failed, r.tokens, r.cost, r.durationMs]),
      expected.map((e) => [e.f, e.subagents, e.failed, e.tokens, e.cost, e.durationMs]),
    );
    assert.ok(shown.every((r) => r.status === 'completed'));
    const cut = rows.find((r) => r.status === 'unreadable')!;
    assert.equal(cut.name, 'half-written');
    assert.equal(cut.href, null, 'no link to a page that was not written');
    // Markup from the data is text: shown as written, nothing of it runs or renders.
    const evil = rows.find((r) => r.name === HOSTILE_NAME)!;
    assert.equal(evil.version, HOSTILE_VERSION);
    assert.equal(evil.costText, '$0.0123');
    assert.equal(await page.evaluate(() => document.querySelectorAll('img, script, b').length), 0);
    assert.equal(await page.title(), 'subtee runs');
    assert.deepEqual(console, []);

    // The link opens that run's own page.
    const nested = rows.find((r) => r.name === 'ci/nested-depth-3')!;
    assert.equal(nested.href, 'ci/nested-depth-3/report.html');
    await page.click(`a[href="${nested.href}"]`);
    await page.waitForSelector('#app[data-state="ready"]');
    assert.equal(await page.locator('#tree tr.tree-row').count(), 4);
    await page.goBack();
    await page.click(`#runs a >> text=${HOSTILE_NAME}`);
    await page.waitForSelector('#app[data-state="ready"]');
    assert.equal(await page.evaluate(() => document.title), 'subtee report');
    assert.ok(decodeURIComponent(page.url()).endsWith(`${HOSTILE_NAME}/report.html`));
    await page.close();
  });
});
