import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { chromiumAvailable, launchBrowser, openReport, screenshot, startSubtee } from './helpers/browser.js';
import { BIN, FIXTURES, linesOf, ROOT, tmpDir } from './helpers/helpers.js';
import { readStream } from './helpers/oracle.js';
import { writeStream } from '../bench/gen.js';
import { readReportData } from '../src/views/report/build.js';
import { treeRows, usdLeavingOut } from '../src/views/report/client.js';

const skip =
  !chromiumAvailable() && 'Chromium is not installed (.ci/run installs it: apt-get install chromium)';

/** `s` as a regular expression matching it alone. */
const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

function reportOf(input: string | Buffer, extra: string[] = []): string {
  const out = join(tmpDir(), 'o');
  const r = spawnSync(process.execPath, [BIN, '--out', out, '--stdout', 'none', '-q', '--html', ...extra], {
    input,
    timeout: 60_000,
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  assert.ok(existsSync(join(out, 'report.html')));
  return out;
}

/** What the page shows, read from the DOM the way a person reads it. */
async function seen(page: Page) {
  return page.evaluate(() => {
    const rows = [...document.querySelectorAll<HTMLTableRowElement>('#tree tr.tree-row')].map((tr) => ({
      key: tr.dataset.key!,
      status: tr.dataset.status!,
      level: Number(tr.dataset.level),
      text: tr.innerText,
      cells: [...tr.cells].map((c) => c.innerText),
    }));
    const bars = [...document.querySelectorAll<SVGElement>('#timeline rect.bar')].map((b) => ({
      key: b.dataset.key!,
      status: b.dataset.status!,
      background: b.dataset.background === 'true',
      width: Number(b.getAttribute('width')),
    }));
    return {
      rows,
      bars,
      hatched: document.querySelectorAll('#timeline rect.bgover').length,
      tickPaths: document.querySelectorAll('#timeline path.ticks').length,
      summary: document.getElementById('summary')!.innerText,
      facts: document.getElementById('facts')!.innerText,
      cost: document.getElementById('cost')!.innerText,
    };
  });
}

/** Each row's parent is the nearest row above it one level up; checks that against the recording. */
function assertNesting(rows: Array<{ key: string; level: number }>, expected: ReturnType<typeof readStream>) {
  rows.forEach((r, i) => {
    const id = r.key === '' ? null : r.key.slice(2);
    const e = expected.channels.get(id)!;
    assert.ok(e, `row ${r.key} is a channel of the recording`);
    assert.equal(r.level, e.depth, `level of ${r.key}`);
    if (r.level === 0) return;
    let p = i - 1;
    while (rows[p].level !== r.level - 1) p--;
    const parentKey = rows[p].key;
    assert.equal(parentKey === '' ? null : parentKey.slice(2), e.parent ?? null, `parent of ${r.key}`);
  });
}

describe('the static report in Chromium', { skip }, () => {
  let browser: Browser;
  before(async () => {
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
  });

  test('nested-depth-3: four rows and bars nested three deep, tokens rolled ' +
    'up, a transcript on click, search, deep link, zoom and hover', async () => {
    const input = readFileSync(join(FIXTURES, 'nested-depth-3.jsonl'));
    const expected = readStream(input.toString('utf8'));
    const out = reportOf(input);
    const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
    const { page, console } = await openReport(browser, out);
    const s = await seen(page);
    assert.equal(s.rows.length, 4);
    assert.equal(s.bars.length, 4);
    assert.deepEqual(
      s.rows.map((r) => r.level),
      [0, 1, 2, 3],
    );
    assertNesting(s.rows, expected);
    for (const r of s.rows) assert.equal(r.status, 'completed');
    assert.match(s.summary, /3 subagents: 3 completed, 0 failed, 0 running · 34 lines · 0 quarantined/);
    assert.match(s.facts, /subtee \d+\.\d+\.\d+ · Claude Code 2\.1\.328/);
    // Σ tokens of main is every channel's input + output.
    const total = index.channels.reduce(
      (n: number, c: any) => n + (c.usage.input_tokens ?? 0) + (c.usage.output_tokens ?? 0),
      0,
    );
    assert.equal(s.rows[0].cells[4], String(total));
    assert.equal(s.rows[3].cells[4], s.rows[3].cells[3], 'a leaf’s subtree is itself');
    // The cost columns: each agent at claude-opus-5-5's list price ($4 / $20 per million
    // tokens) of its own tokens, the Σ column rolled up; the run's total beside Claude Code's.
    const recorded = readFileSync(join(FIXTURES, 'nested-depth-3.jsonl'), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    const claudeUsd = recorded.filter((v) => v.type === 'result').pop().total_cost_usd as number;
    const usdOf = (c: any) => (c.usage.input_tokens * 4 + c.usage.output_tokens * 20) / 1e6;
    const byKey = new Map<string, any>(index.channels.map((c: any) => [c.id === null ? '' : `a:${c.id}`, c]));
    let rolled = 0;
    for (const r of [...s.rows].reverse()) {
      const c = byKey.get(r.key)!;
      rolled += usdOf(c);
      // An agent's own dollars carry `~` when its output tokens were estimated or a snapshot.
      const mark = c.cost.basis === 'estimated' || c.cost.basis === 'stream' ? '~' : '';
      assert.equal(r.cells[8], `${mark}$${usdOf(c).toFixed(6)}`, `cost of ${r.key}`);
      assert.equal(r.cells[9], `$${rolled.toFixed(6)}`, `Σ cost of ${r.key} (a chain: everything below it)`);
    }
    assert.match(
      s.cost,
      new RegExp(`^cost \\$${claudeUsd.toFixed(6)} \\(Claude Code \\$${claudeUsd.toFixed(6)}\\)`),
    );

    const leaf = index.channels.find((c: any) => c.depth === 3);
    await page.click(`#tree tr.tree-row[data-key="a:${leaf.id}"]`);
    const t = page.locator('#transcript');
    await t.waitFor();
    assert.match(await t.innerText(), /prompt received\s+SCRIPT:nest:0/);
    assert.match(await t.innerText(), /final report\s+Worker leaf report: done\./);
    assert.equal(
      await page.locator('#transcript .entry.k-tool .entry.k-result pre').innerText(),
      'leaf-ok',
      'the result sits under its tool call',
    );
    // Times in a transcript count from the agent's spawn (the line of its Agent call).
    const stampOf = (has: (v: any) => boolean) => recorded.find(has).timestamp as string;
    const calls = (v: any, test: (b: any) => boolean) => v.message?.content?.some?.(test);
    const spawnedAt = stampOf((v) => calls(v, (b: any) => b.type === 'tool_use' && b.id === leaf.id));
    const bashAt = stampOf(
      (v) =>
        v.parent_tool_use_id === leaf.id && calls(v, (b: any) => b.type === 'tool_use' && b.name === 'Bash'),
    );
    assert.equal(
      await page.locator('#transcript .entry.k-tool .head').first().innerText(),
      `tool call · Bash +${Date.parse(bashAt) - Date.parse(spawnedAt)} ms`,
    );
    assert.equal(new URL(page.url()).hash, `#agent=${leaf.id}`);
    await screenshot(page, 'nested-depth-3-transcript');

    await page.fill('#search', 'level 1 report');
    await page.waitForSelector('#hits li.hit');
    assert.match(await page.locator('#search-status').innerText(), /^\d+ match/);
    await page.locator('#hits li.hit').first().click();
    await page.waitForSelector('#transcript .entry.flash');
    assert.match(await page.locator('#transcript .entry.flash').innerText(), /Level 1 report/i);
    await page.fill('#search', 'no such phrase anywhere');
    await page.waitForFunction(() => document.getElementById('search-status')!.textContent === 'no match');

    // Zoom in halves the time shown: the main bar gets twice as wide (clipped to the plot).
    const before = s.bars[1].width;
    await page.click('#zoom-in');
    const zoomed = await page
      .locator(`#timeline rect.bar[data-key="${s.bars[1].key}"]`)
      .getAttribute('width');
    assert.ok(Math.abs(Number(zoomed) - 2 * before) < 1, `${before} → ${zoomed}`);
    await page.click('#zoom-fit');
    const bar = page.locator(`#timeline rect.bar[data-key="a:${leaf.id}"]`);
    await bar.hover();
    await page.waitForSelector('#tip:not([hidden])');
    const tip = await page.locator('#tip').innerText();
    // Its span: from its spawn to its report (its task_notification or the tool_result of its
    // Agent call, whichever comes first), at the latest time the stream showed by then.
    const reportAt = recorded.findIndex(
      (v) =>
        (v.subtype === 'task_notification' && v.tool_use_id === leaf.id) ||
        calls(v, (b: any) => b.type === 'tool_result' && b.tool_use_id === leaf.id),
    );
    const reportedAt = recorded
      .slice(0, reportAt + 1)
      .filter((v) => typeof v.timestamp === 'string')
      .at(-1).timestamp;
    assert.match(
      tip,
      new RegExp(
        'level 0\ncompleted, foreground\nstart \\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z ' +
          '{3}end \\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z\n' +
          `elapsed ${Date.parse(reportedAt) - Date.parse(spawnedAt)} ms`,
      ),
    );
    const leafTokens = leaf.usage.input_tokens + leaf.usage.output_tokens;
    assert.match(
      tip,
      new RegExp(`tokens ${leafTokens} \\(in ${leaf.usage.input_tokens}, out ${leaf.usage.output_tokens}`),
    );
    await screenshot(page, 'nested-depth-3-hover');

    const linked = await openReport(browser, out, `#agent=${encodeURIComponent(index.channels[1].id)}`);
    assert.match(await linked.page.locator('#transcript h2').innerText(), /general-purpose\s*level 2/);
    assert.equal(
      await linked.page.locator('#tree tr.selected').getAttribute('data-key'),
      `a:${index.channels[1].id}`,
    );
    assert.deepEqual([...console, ...linked.console], [], 'no console message: no CSP violation, no error');
    await linked.page.close();
    await page.close();
  });

  test('--thinking drop keeps thinking out of every view: report.html (built ' +
    'at the end and again by subtee report), .log, pino; .jsonl keeps it', async () => {
    const input = readFileSync(join(FIXTURES, 'nested-depth-3.jsonl'));
    const thought = 'Worker leaf plans: echo, then report.';
    assert.ok(input.toString('utf8').includes(thought), 'the recording thinks');
    for (const mode of ['drop', 'keep']) {
      const pino = join(tmpDir(), 'events.log');
      const out = reportOf(input, ['--thinking', mode, `--pino=${pino}`]);
      const shown = mode === 'keep';
      const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
      const leaf = index.channels.find((c: any) => c.depth === 3);
      const transcriptOf = async () => {
        const { page, console } = await openReport(browser, out);
        await page.click(`#tree tr.tree-row[data-key="a:${leaf.id}"]`);
        const t = page.locator('#transcript');
        await t.waitFor();
        assert.match(await t.innerText(), /final report\s+Worker leaf report: done\./, `${mode}: shown`);
        // Thinking sits in a closed <details>: its text is in the transcript's DOM, not its innerText.
        const text = (await t.evaluate((node) => node.textContent)) ?? '';
        assert.deepEqual(console, [], `${mode}: no console errors`);
        await page.close();
        return text;
      };
      for (const built of ['at the end of the run', 'by subtee report']) {
        if (built === 'by subtee report') {
          const r = spawnSync(process.execPath, [BIN, 'report', '-q', out], { encoding: 'utf8' });
          assert.equal(r.status, 0, r.stderr);
        }
        const html = readFileSync(join(out, 'report.html'), 'utf8');
        assert.equal(html.includes(thought), shown, `${mode}, ${built}: the page's bytes`);
        const seen = (await transcriptOf()).includes(thought);
        assert.equal(seen, shown, `${mode}, ${built}: what the page shows`);
      }
      const leafLog = readFileSync(join(out, leaf.log), 'utf8');
      assert.equal(leafLog.includes(thought), shown, `${mode}: the .log`);
      assert.equal(readFileSync(pino, 'utf8').includes(thought), shown, `${mode}: pino`);
      const kept = readFileSync(join(out, leaf.jsonl), 'utf8');
      assert.ok(kept.includes(thought), `${mode}: the .jsonl keeps bytes`);
      assert.deepEqual(index.display, { thinking: mode, thinking_chars: 2000 });
    }
  });

  test('background-fanout-12: thirteen rows, twelve ' +
    'hatched background bars under main, tool-call ticks', async () => {
    const input = readFileSync(join(FIXTURES, 'background-fanout-12.jsonl'));
    const expected = readStream(input.toString('utf8'));
    const { page, console } = await openReport(browser, reportOf(input));
    const s = await seen(page);
    assert.equal(s.rows.length, 13);
    assert.equal(s.bars.length, 13);
    assertNesting(s.rows, expected);
    assert.deepEqual(
      s.rows.map((r) => r.level),
      [0, ...Array(12).fill(1)],
    );
    assert.equal(s.bars.filter((b) => b.background).length, 12);
    assert.equal(s.hatched, 12);
    assert.ok(s.bars.every((b) => b.status === 'completed'));
    assert.equal(s.tickPaths, 13, 'main spawns with tool calls, each worker runs one');
    assert.equal(s.rows.filter((r) => /\bbg\b/.test(r.cells[1])).length, 12);
    await screenshot(page, 'background-fanout-12');
    assert.deepEqual(console, []);
    await page.close();
  });

  test('failing-beside-healthy: the failed subagent is red ' +
    'with its error as final report, the healthy one green', async () => {
    const input = readFileSync(join(FIXTURES, 'failing-beside-healthy.jsonl'));
    const expected = readStream(input.toString('utf8'));
    const out = reportOf(input);
    const { page, console } = await openReport(browser, out);
    const s = await seen(page);
    assert.equal(s.rows.length, 3);
    assertNesting(s.rows, expected);
    const statuses = Object.fromEntries(
      s.rows.map((r) => [r.text.match(/doomed|healthy|main/)![0], r.status]),
    );
    assert.deepEqual(statuses, { main: 'completed', doomed: 'failed', healthy: 'completed' });
    assert.deepEqual(s.bars.map((b) => b.status).sort(), ['completed', 'completed', 'failed']);
    assert.match(s.summary, /2 subagents: 1 completed, 1 failed, 0 running/);
    const doomed = s.rows.find((r) => r.text.includes('doomed'))!;
    await page.click(`#tree tr.tree-row[data-key="${doomed.key}"]`);
    assert.match(
      await page.locator('#transcript .block.final').innerText(),
      /scripted failure for this subagent/,
    );
    assert.equal(await page.locator('#timeline rect.bar.failed').count(), 1);
    const fill = await page.locator('#timeline rect.bar.failed').evaluate((e) => getComputedStyle(e).fill);
    assert.equal(fill, 'rgb(198, 47, 47)');
    await screenshot(page, 'failing-beside-healthy');
    assert.deepEqual(console, []);
    await page.close();
  });

  test("the header's counts agree with their nouns: 1 subagent, 0 subagents, " +
    'never 1 subagents', async () => {
    for (const [name, subagents] of [
      ['slow-background-helper', '1 subagent: 1 completed'],
      ['long-bash-heartbeat', '0 subagents: 0 completed'],
    ]) {
      const input = readFileSync(join(FIXTURES, `${name}.jsonl`));
      const { page, console } = await openReport(browser, reportOf(input));
      const s = await seen(page);
      const lines = linesOf(input).length;
      assert.ok(lines > 1, `${name}: ${lines} lines`);
      assert.equal(s.summary, `${subagents}, 0 failed, 0 running · ${lines} lines · 0 quarantined`, name);
      assert.deepEqual(console, []);
      await page.close();
    }
  });

  test('an old Claude Code: the version guard’s warnings ' +
    'are listed with their codes, the version shown', async () => {
    const input = readFileSync(join(FIXTURES, 'nested-depth-3.jsonl'), 'utf8').replaceAll(
      '"claude_code_version":"2.1.328"',
      '"claude_code_version":"2.1.205"',
    );
    const out = reportOf(input);
    const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
    assert.ok(index.warnings.length >= 3);
    const { page, console } = await openReport(browser, out);
    const shown = await page
      .locator('#warnings li')
      .evaluateAll((lis) => lis.map((li) => [(li as HTMLElement).dataset.code, li.textContent]));
    assert.deepEqual(
      shown,
      index.warnings.map((w: any) => [w.code, `${w.code}${w.message}`]),
    );
    assert.match(await page.locator('#facts').innerText(), /Claude Code 2\.1\.205/);
    assert.deepEqual(console, []);
    await page.close();
  });

  test('a run with 600 subagents: the tree and the timeline ' +
    'draw the rows in view; a deep link scrolls to its row', async () => {
    const dir = tmpDir();
    await writeStream(
      { sizeBytes: 4 * 1024 * 1024, fanout: 600, shape: 'small', seed: 3 },
      join(dir, 'in.jsonl'),
    );
    const out = reportOf(readFileSync(join(dir, 'in.jsonl')));
    const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
    assert.equal(index.channels.length, 601);
    const target = index.channels[590].id;
    const { page, console } = await openReport(browser, out, `#agent=${target}`);
    assert.equal(await page.locator('#tree tr.selected').getAttribute('data-key'), `a:${target}`);
    assert.equal(await page.locator('#transcript').getAttribute('data-key'), `a:${target}`);
    const drawn = await seen(page);
    assert.ok(
      drawn.rows.length < 300 && drawn.bars.length < 300,
      `${drawn.rows.length} rows, ${drawn.bars.length} bars drawn`,
    );
    assert.ok(drawn.bars.some((b) => b.key === `a:${target}`));
    // Scrolled to the end, the tree and the timeline draw the last row in tree order.
    const drawnAtEnd = await page.evaluate(() => {
      for (const id of ['tree-wrap', 'timeline-wrap']) document.getElementById(id)!.scrollTop = 1e9;
      return new Promise<string[]>((r) =>
        requestAnimationFrame(() =>
          requestAnimationFrame(() =>
            r([
              [...document.querySelectorAll<HTMLElement>('#tree tr.tree-row')].at(-1)!.dataset.key!,
              [...document.querySelectorAll<SVGElement>('#timeline rect.bar')].at(-1)!.dataset.key!,
            ]),
          ),
        ),
      );
    });
    const order = treeRows(readReportData(out).data.channels);
    const lastKey = `a:${order.at(-1)!.ch.id}`;
    assert.deepEqual(drawnAtEnd, [lastKey, lastKey]);
    assert.deepEqual(console, []);
    await page.close();
  });

  test('a page that leaves agents out says so, draws the ones it keeps with no error, and shows ' +
    "main's Σ tokens and Σ cost of the whole run, as index.json", async () => {
    const dir = tmpDir();
    await writeStream(
      { sizeBytes: 4 * 1024 * 1024, fanout: 600, shape: 'small', seed: 3 },
      join(dir, 'in.jsonl'),
    );
    const out = reportOf(readFileSync(join(dir, 'in.jsonl')));
    const r = spawnSync(process.execPath, [BIN, 'report', '--max-page-bytes', '262144', out], {
      timeout: 60_000,
      encoding: 'utf8',
    });
    assert.equal(r.status, 0, r.stderr);
    const html = readFileSync(join(out, 'report.html'), 'utf8');
    const data = JSON.parse(/id="subtee-data">([^<]*)<\/script>/.exec(html)![1]);
    const leftOut = data.page.leftOutChannels as number;
    assert.ok(leftOut > 0, 'some agents are left out');
    const { page, console } = await openReport(browser, out);
    const s = await seen(page);
    const subs = data.channels.length - 1;
    assert.match(s.summary, new RegExp(`^${subs} subagents in this page \\(${leftOut} left out\\): `));
    assert.match(
      await page.locator('#pageinfo').innerText(),
      new RegExp(
        `${leftOut} of 601 agents left out to fit \\(.*index\\.json and the \\.log files have them all\\)`,
      ),
    );
    assert.equal(await page.locator('#app').getAttribute('data-channels'), String(data.channels.length));
    // The Σ columns of main are its subtree's, every agent's, not a sum over the agents kept.
    const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
    const main = index.channels[0];
    const tokens = index.channels.reduce(
      (n: number, c: any) => n + (c.usage.input_tokens ?? 0) + (c.usage.output_tokens ?? 0),
      0,
    );
    const cells = s.rows[0].cells;
    assert.equal(s.rows[0].key, '');
    assert.equal(cells[4], tokens.toLocaleString('en-US'));
    assert.equal(cells[9], usdLeavingOut(main.cost.subtree_usd, main.cost.subtree_unknown));
    assert.notEqual(cells[9], '$?');
    assert.deepEqual(console, []);
    await page.close();
  });

  test("the header's counts have thousands separators and its cost line says what the run's dollars " +
    'leave out, as the end-of-run summary does', async () => {
    // 3,300 subagents: a third fail, a third never end; every seventh never answers.
    let n = 0;
    const said = (parent: string | null, content: unknown[], input: number) =>
      JSON.stringify({
        type: 'assistant',
        parent_tool_use_id: parent,
        message: {
          id: `m_${n++}`,
          role: 'assistant',
          model: 'claude-opus-5-5',
          content,
          usage: { input_tokens: input, output_tokens: 2 },
        },
      });
    const lines: string[] = [];
    for (let i = 0; i < 3300; i++) {
      const id = `toolu_a${i}`;
      const input = { subagent_type: 'g', description: `d${i}`, prompt: 'p' };
      lines.push(said(null, [{ type: 'tool_use', id, name: 'Agent', input }], 10));
      if (i % 7 !== 0) lines.push(said(id, [{ type: 'text', text: 'done' }], 3));
      const result = { type: 'tool_result', tool_use_id: id, content: 'r', is_error: i % 3 === 1 };
      const message = { role: 'user', content: [result] };
      if (i % 3 !== 2) lines.push(JSON.stringify({ type: 'user', parent_tool_use_id: null, message }));
    }
    const out = join(tmpDir(), 'o');
    const r = spawnSync(process.execPath, [BIN, '--out', out, '--stdout', 'none', '--html'], {
      input: lines.join('\n') + '\n',
      timeout: 60_000,
      encoding: 'utf8',
    });
    assert.equal(r.status, 0, r.stderr);
    // The summary's counts and dollars, read from stderr.
    const counts = /(\d+) subagents \((\d+) completed, (\d+) failed, (\d+) running\)/.exec(r.stderr)!;
    assert.deepEqual(counts.slice(1).map(Number), [3300, 1100, 1100, 1100]);
    const cost = /\ncost (.+): subagent tree (.+) \(no result line; /.exec(r.stderr)!;
    assert.match(cost[1], /^\$0\.\d+ \+ 472 unknown$/);
    const { page, console } = await openReport(browser, out);
    const s = await seen(page);
    const sep = (k: number) => Number(counts[k]).toLocaleString('en-US');
    assert.equal(
      s.summary,
      `${sep(1)} subagents: ${sep(2)} completed, ${sep(3)} failed, ${sep(4)} running · ` +
        `${lines.length.toLocaleString('en-US')} lines · 0 quarantined`,
    );
    const header = `cost ${esc(cost[1])} \\(no result line\\) · agents ${esc(cost[2])} · `;
    assert.match(s.cost, new RegExp(`^${header}`));
    assert.deepEqual(console, []);
    await page.close();
  });

  test('a stalled run (--html): the stall, what was in flight, and the agents still running', async () => {
    const dir = tmpDir();
    const config = join(dir, 'stall.json');
    writeFileSync(
      config,
      JSON.stringify({
        stages: [
          { use: 'line-parser' },
          { use: 'version-guard' },
          { use: 'channel-router' },
          { use: 'thinking-truncator' },
          {
            use: 'idle-watchdog',
            idleTimeoutMs: 1500,
            bgWaitCeilingMs: 1500,
            modelTimeoutMs: 1500,
            bashDefaultTimeoutMs: 1500,
            graceMs: 0,
            checkIntervalMs: 100,
          },
        ],
        sinks: [{ use: 'files', out: join(dir, 'unused') }],
      }),
    );
    const out = join(dir, 'o');
    const s = startSubtee(['--config', config, '--out', out, '--stdout', 'none', '-q', '--html']);
    // The slow worker is running in the background and the input stays open.
    const lines = linesOf(readFileSync(join(FIXTURES, 'quiet-background-worker.jsonl')));
    s.child.stdin!.write(
      lines.slice(0, lines.findIndex((l) => l.includes('echo slow-ok')) + 1).join('\n') + '\n',
    );
    assert.equal(await s.closed, 124, s.stderr());
    s.child.stdin!.destroy();
    assert.match(s.stderr(), /warning STALL/);
    const { page, console } = await openReport(browser, out);
    const banner = page.locator('#banner');
    assert.equal(await banner.isVisible(), true);
    // What was in flight, and for how long, in the banner itself.
    assert.match(
      await banner.innerText(),
      new RegExp(
        String.raw`^This run stalled: the idle watchdog fired \(no input for [\d.]+ s ` +
          String.raw`\(allowed 1\.50* s\): background general-purpose "slow worker" \(\w+\) ` +
          String.raw`silent [\d.]+ s of the ceiling 1\.5 s; .*Bash "echo slow-ok" silent [\d.]+ s ` +
          String.raw`of its allowed 1\.5 s in slow worker\)`,
        's',
      ),
    );
    assert.match(
      await page.locator('#warnings li[data-code="STALL"]').innerText(),
      /STALL.*background general-purpose "slow worker"/s,
    );
    const st = await seen(page);
    assert.equal(st.rows.length, 2);
    assert.deepEqual(
      st.rows.map((r) => r.status),
      ['running', 'running'],
    );
    assert.deepEqual(
      st.bars.map((b) => [b.status, b.background]),
      [
        ['running', false],
        ['running', true],
      ],
    );
    assert.ok(
      (await page.locator('#timeline line.tail').count()) >= 1,
      'a running agent’s bar runs on to the end of the run',
    );
    assert.match(st.summary, /^1 subagent: 0 completed, 0 failed, 1 running/);
    await screenshot(page, 'stalled');
    assert.deepEqual(console, []);
    await page.close();
  });

  test('hostile ids, descriptions and text render as ' +
    'text: nothing of theirs runs, no CSP violation', async () => {
    const P = {
      script: '<script>window.__pwned="script";console.log("PWNED script")</script>',
      close: '</script><script>window.__pwned="close";console.log("PWNED close")</script>',
      img: "\"><img src=x onerror=\"window.__pwned='img';console.log('PWNED img')\">",
      svg: '<svg/onload=window.__pwned="svg">',
      link: '[click me](javascript:window.__pwned="link")',
      js: 'javascript:window.__pwned="js"',
      bidi: 'safe\u202Eexe.txt\u2066x\u2069',
      comment: '<!-- <script>window.__pwned="comment"</script>',
    };
    const all = Object.values(P).join(' ');
    const outer = `toolu_${P.img}${P.close}`;
    const inner = `toolu_${P.script}\u202e`;
    const ts = (i: number) => new Date(Date.UTC(2026, 10, 30, 12, 0, i)).toISOString();
    const lines =
      [
        { type: 'system', subtype: 'init', session_id: P.script, claude_code_version: P.img },
        {
          type: 'assistant',
          parent_tool_use_id: null,
          timestamp: ts(0),
          message: {
            id: 'm1',
            content: [
              { type: 'text', text: all },
              {
                type: 'tool_use',
                id: outer,
                name: 'Agent',
                input: { subagent_type: P.svg, description: P.close + P.bidi, prompt: P.img },
              },
            ],
          },
        },
        {
          type: 'user',
          parent_tool_use_id: outer,
          timestamp: ts(1),
          message: { content: [{ type: 'text', text: P.img }] },
        },
        {
          type: 'assistant',
          parent_tool_use_id: outer,
          timestamp: ts(2),
          message: {
            id: 'm2',
            content: [
              { type: 'thinking', thinking: P.script },
              { type: 'text', text: all },
              {
                type: 'tool_use',
                id: inner,
                name: 'Agent',
                input: { subagent_type: P.link, description: P.img },
              },
            ],
          },
        },
        {
          type: 'assistant',
          parent_tool_use_id: inner,
          timestamp: ts(3),
          message: {
            id: 'm3',
            content: [
              { type: 'text', text: P.js },
              { type: 'tool_use', id: P.comment, name: P.script, input: { x: P.close } },
            ],
          },
        },
        {
          type: 'user',
          parent_tool_use_id: inner,
          timestamp: ts(4),
          message: { content: [{ type: 'tool_result', tool_use_id: P.comment, content: all }] },
        },
        {
          type: 'user',
          parent_tool_use_id: outer,
          timestamp: ts(5),
          message: { content: [{ type: 'tool_result', tool_use_id: inner, content: P.close }] },
        },
        {
          type: 'user',
          parent_tool_use_id: null,
          timestamp: ts(6),
          message: {
            content: [{ type: 'tool_result', tool_use_id: outer, is_error: true, content: P.img + P.bidi }],
          },
        },
        { type: 'result', subtype: 'success', is_error: false, result: all, timestamp: ts(7) },
      ]
        .map((l) => JSON.stringify(l))
        .join('\n') + '\n';
    const out = reportOf(lines);
    const html = readFileSync(join(out, 'report.html'), 'utf8');
    assert.equal(html.match(/<script/gi)!.length, 2, 'no script element but the page’s own two');
    const { page, console } = await openReport(browser, out);
    const rows = await seen(page);
    assert.equal(rows.rows.length, 3);
    assert.deepEqual(
      rows.rows.map((r) => r.status),
      ['completed', 'failed', 'completed'],
    );
    assert.ok(rows.rows[1].text.includes(P.close), 'the description is shown as the text it is');
    assert.ok(
      rows.rows[1].text.includes('safe\\u202eexe.txt\\u2066x\\u2069'),
      'bidi controls are shown escaped',
    );
    assert.ok(rows.rows[2].text.includes(P.link));
    // Open every transcript, search, hover, follow a deep link to the hostile id.
    for (const r of rows.rows)
      await page.click(`#tree tr.tree-row[data-key="${r.key.replace(/["\\]/g, '\\$&')}"]`);
    assert.ok((await page.locator('#transcript').innerText()).includes(P.js));
    await page.fill('#search', 'pwned');
    await page.waitForSelector('#hits li.hit');
    for (const hit of await page.locator('#hits li.hit').all()) await hit.click();
    await page.locator('#timeline rect.bar').last().hover();
    await page.evaluate(
      (id) => (location.hash = `#agent=${encodeURIComponent(id)}`),
      rows.rows[1].key.slice(2),
    );
    await page.waitForFunction(
      (k) => document.querySelector('#tree tr.selected')?.getAttribute('data-key') === k,
      rows.rows[1].key,
    );
    await screenshot(page, 'hostile');
    const state = await page.evaluate(() => ({
      pwned: (window as any).__pwned,
      foreign: document.querySelectorAll(
        'img, iframe, object, embed, svg svg, script:not([type]), body script[src]',
      ).length,
      scripts: document.scripts.length,
      jsLinks: [...document.querySelectorAll('a')].filter((a) => !a.href.startsWith('file:')).length,
      handlers: [...document.querySelectorAll('*')].filter((e) =>
        [...e.attributes].some((a) => a.name.startsWith('on')),
      ).length,
    }));
    assert.deepEqual(state, { pwned: undefined, foreign: 0, scripts: 2, jsLinks: 0, handlers: 0 });
    assert.deepEqual(console, [], 'no marker logged, no CSP violation, no error');
    await page.close();
  });
});

/** binary-tree-depth-3 with every API message's input tokens × 200,000: counts in the millions. */
function bigCountsInput(): Buffer {
  const lines = readFileSync(join(FIXTURES, 'binary-tree-depth-3.jsonl'), 'utf8').split('\n');
  return Buffer.from(
    lines
      .map((l) => {
        if (!l.trim()) return l;
        const v = JSON.parse(l);
        if (v.type !== 'assistant' || !v.message?.usage) return l;
        v.message.usage.input_tokens *= 200_000;
        return JSON.stringify(v);
      })
      .join('\n'),
  );
}

/** Per tree row: whether its name is shown whole, and each number cell cut or not; the header's too. */
async function layout(page: Page) {
  return page.evaluate(() => {
    const wrap = document.getElementById('tree-wrap')!.getBoundingClientRect();
    const rows = [...document.querySelectorAll<HTMLTableRowElement>('#tree tr.tree-row')].map((tr) => {
      const cell = tr.querySelector<HTMLElement>('td.name')!;
      const name = cell.querySelector<HTMLElement>('.agent')!;
      const box = cell.getBoundingClientRect();
      return {
        name: name.textContent!,
        nameWhole: name.getBoundingClientRect().right <= box.right + 0.5,
        nameInView: box.left >= wrap.left - 0.5 && box.width >= 150,
        cutNumbers: [...tr.querySelectorAll<HTMLElement>('td.num')]
          .filter((td) => td.scrollWidth > td.clientWidth)
          .map((td) => td.textContent),
      };
    });
    const cutHeads = [...document.querySelectorAll<HTMLElement>('#tree th')]
      .filter((th) => th.scrollWidth > th.clientWidth)
      .map((th) => th.textContent);
    const svg = document.getElementById('timeline')!.getBoundingClientRect().width;
    const timelineFits = svg <= document.getElementById('timeline-wrap')!.clientWidth + 1;
    return { rows, cutHeads, timelineFits, mainTokens: rows.length ? tr0() : '' };
    function tr0() {
      return document.querySelector<HTMLTableRowElement>('#tree tr.tree-row')!.cells[4].textContent!;
    }
  });
}

describe('the report layout at 900, 1400 and 1600 px in Chromium', { skip }, () => {
  let browser: Browser;
  before(async () => {
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
  });

  test('names whole at every depth, numbers in the ' +
    'millions never cut, the timeline within its panel', async () => {
    const out = reportOf(bigCountsInput());
    const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
    const total = index.channels.reduce(
      (n: number, c: any) => n + (c.usage.input_tokens ?? 0) + (c.usage.output_tokens ?? 0),
      0,
    );
    assert.ok(total > 10_000_000, `${total} tokens`);
    for (const width of [900, 1400, 1600]) {
      const { page, console } = await openReport(browser, out, '', { width, height: 900 });
      const l = await layout(page);
      await screenshot(page, `layout-${width}`);
      assert.equal(l.rows.length, 15, `${width} px: every row`);
      for (const r of l.rows) {
        assert.ok(r.nameWhole, `${width} px: "${r.name}" is shown whole`);
        assert.ok(r.nameInView, `${width} px: "${r.name}" is in view`);
        assert.deepEqual(r.cutNumbers, [], `${width} px: numbers of "${r.name}" shown whole`);
      }
      assert.deepEqual(l.cutHeads, [], `${width} px: column heads shown whole`);
      assert.ok(l.timelineFits, `${width} px: the timeline fits its panel`);
      // The main row's Σ tokens, whole: every channel's input + output.
      assert.equal(l.mainTokens, total.toLocaleString('en-US'));
      assert.deepEqual(console, []);
      await page.close();
    }
  });

  test("the timeline's labels stay in their column at every depth: a chain 60 deep", async () => {
    const lines: object[] = [];
    let parent: string | null = null;
    for (let i = 0; i < 60; i++) {
      const id = `toolu_${i}`;
      const input = { description: `level ${i + 1} worker`, prompt: 'p', subagent_type: 'general-purpose' };
      lines.push({
        type: 'assistant',
        parent_tool_use_id: parent,
        timestamp: new Date(Date.UTC(2026, 10, 30, 12, 0, i)).toISOString(),
        message: { id: `m${i}`, content: [{ type: 'tool_use', id, name: 'Agent', input }] },
      });
      parent = id;
    }
    const out = reportOf(lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
    const { page, console } = await openReport(browser, out);
    const labels = await page.evaluate(() => {
      const svg = document.getElementById('timeline')!;
      const left = svg.getBoundingClientRect().left;
      // The plot starts where the first grid line is drawn: the labels' column ends there.
      const plot = Number(svg.querySelector('line.grid')!.getAttribute('x1'));
      return [...svg.querySelectorAll('text')]
        .filter((t) => !t.closest('.axis'))
        .map((t) => ({ text: t.textContent, right: t.getBoundingClientRect().right - left, plot }));
    });
    assert.equal(labels.length, 61);
    for (const l of labels)
      assert.ok(l.right <= l.plot, `"${l.text}" ends at ${l.right}, the plot at ${l.plot}`);
    assert.deepEqual(console, []);
    await page.close();
  });

  test('a Σ cost that leaves out an agent of unknown usage ("+ 1 unknown") is shown whole at 900, ' +
    '1400 and 1600 px, in view once the tree is scrolled to its end', async () => {
    const out = reportOf(readFileSync(join(FIXTURES, 'failing-beside-healthy.jsonl')));
    const main = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8')).channels[0];
    const expected = usdLeavingOut(main.cost.subtree_usd, main.cost.subtree_unknown);
    assert.match(expected, /^\$0\.\d+ \+ 1 unknown$/);
    for (const width of [900, 1400, 1600]) {
      const { page, console } = await openReport(browser, out, '', { width, height: 900 });
      const l = await layout(page);
      for (const r of l.rows) {
        assert.deepEqual(r.cutNumbers, [], `${width} px: numbers of "${r.name}" shown whole`);
        assert.ok(r.nameWhole && r.nameInView, `${width} px: "${r.name}" whole and in view`);
      }
      assert.deepEqual(l.cutHeads, [], `${width} px: column heads shown whole`);
      // The figure's text lies within the tree's box, right of the names, scrolled to the end.
      const shown = await page.evaluate(() => {
        const wrap = document.getElementById('tree-wrap')!;
        wrap.scrollLeft = 1e9;
        const cell = document.querySelector<HTMLTableRowElement>('#tree tr.tree-row')!.cells[9];
        const range = document.createRange();
        range.selectNodeContents(cell);
        const text = range.getBoundingClientRect();
        const box = wrap.getBoundingClientRect();
        const names = cell.parentElement!.querySelector('td.name')!.getBoundingClientRect();
        return {
          text: cell.textContent,
          inside: text.left >= Math.max(box.left, names.right) && text.right <= box.left + wrap.clientWidth,
        };
      });
      assert.deepEqual(shown, { text: expected, inside: true }, `${width} px`);
      await screenshot(page, `sigma-cost-${width}`);
      assert.deepEqual(console, []);
      await page.close();
    }
  });

  test("main's Agent calls link to the subagent each spawned; the link opens its transcript", async () => {
    const out = reportOf(readFileSync(join(FIXTURES, 'binary-tree-depth-3.jsonl')));
    const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
    const children = index.channels.filter((c: any) => c.id !== null && c.parent === null);
    assert.equal(children.length, 2);
    const { page } = await openReport(browser, out, '#main');
    const links = await page.$$eval('#transcript .entry.k-tool a.spawned', (as) =>
      as.map((a) => ({ href: a.getAttribute('href'), text: a.textContent })),
    );
    assert.deepEqual(
      links.map((a) => a.href),
      children.map((c: any) => `#agent=${encodeURIComponent(c.id)}`),
    );
    for (const [i, a] of links.entries()) assert.match(a.text!, new RegExp(children[i].description));
    await page.click('#transcript .entry.k-tool a.spawned >> nth=1');
    await page.waitForSelector(`#transcript[data-key="a:${children[1].id}"]`);
    assert.equal(await page.$eval('#transcript h2 .desc', (d) => d.textContent), children[1].description);
    await page.close();
  });

  test('the screenshot the README shows: fourteen nested ' +
    'subagents, one transcript open, at 1400 px', async () => {
    const out = reportOf(readFileSync(join(FIXTURES, 'binary-tree-depth-3.jsonl')));
    const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
    const leaf = index.channels.find((c: any) => c.depth === 3);
    const { page, console } = await openReport(browser, out, `#agent=${encodeURIComponent(leaf.id)}`, {
      width: 1400,
      height: 900,
    });
    await page.waitForSelector(`#transcript[data-key="a:${leaf.id}"]`);
    const l = await layout(page);
    assert.equal(l.rows.length, 15);
    assert.ok(l.rows.every((r) => r.nameWhole && r.cutNumbers.length === 0));
    assert.deepEqual(console, []);
    const shot = await screenshot(page, 'readme');
    // `SUBTEE_UPDATE_SCREENSHOT=1` makes this the README's picture, docs/report.png.
    if (process.env.SUBTEE_UPDATE_SCREENSHOT === '1') copyFileSync(shot, join(ROOT, 'docs', 'report.png'));
    const png = readFileSync(shot);
    assert.equal(png.subarray(1, 4).toString('latin1'), 'PNG');
    assert.deepEqual([png.readUInt32BE(16), png.readUInt32BE(20)], [1400, 900]);
    await page.close();
  });

  test('a finished run whose lines carry no timestamps says so, not "no timestamps yet"', async () => {
    const lines = readFileSync(join(FIXTURES, 'nested-depth-3.jsonl'), 'utf8').split('\n');
    const untimed = (l: string) => JSON.stringify({ ...JSON.parse(l), timestamp: undefined });
    const bare = lines.map((l) => (l.trim() ? untimed(l) : l));
    const out = reportOf(bare.join('\n'));
    const { page } = await openReport(browser, out);
    assert.equal(await page.$eval('#range', (r) => r.textContent), 'no timestamps in this stream');
    await page.close();
  });
});
