import assert from 'node:assert/strict';
import { test } from 'node:test';
import { join } from 'node:path';
import fc from 'fast-check';
import { boundedText, headOf, tailOf } from '../src/model/bounded-text.js';
import { truncateMiddle } from '../src/chain/stages/thinking-truncator.js';
import { clip, field, REPORT_DEFAULTS, lineFacts, type LineFacts } from '../src/views/report/model.js';
import { PINO_SINK_DEFAULTS, pinoEvents, streamTime, type PinoEvent } from '../src/chain/sinks/pino.js';
import { CUT_LENGTHS, cutText, displayPolicy, type CutClass } from '../src/model/display.js';
import { channelLabel, ChannelLabels, renderRecord, statusLine } from '../src/views/text.js';
import { summaryText } from '../src/views/summary.js';
import { channelUpdate, type ChannelFields } from '../src/views/report/live.js';
import { blocksOfLine, type MessageBlock } from '../src/views/message-stream.js';
import { RowBuilder, type EventRow } from '../src/chain/sinks/clickhouse-rows.js';
import { TraceBuilder, type SpanData } from '../src/chain/sinks/otlp-spans.js';
import { routeThrough } from './helpers/otlp-tree.js';
import { ROOT } from './helpers/helpers.js';
import { importsUnder } from './helpers/imports.js';

const LONE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Text of letters and astral characters (two UTF-16 units each), so a cut can fall inside a pair. */
const pairsText = fc
  .array(fc.constantFrom('a', 'é', '😀', '𝄞', '\n'), { minLength: 1, maxLength: 400 })
  .map((chars) => chars.join(''));

test('no cutter splits a surrogate pair, at any length (property)', () => {
  fc.assert(
    fc.property(pairsText, fc.nat(500), (text, max) => {
      const cuts: Array<[string, string]> = [
        ['headOf', headOf(text, max)],
        ['tailOf', tailOf(text, max)],
        ['boundedText', boundedText(text, max)],
        ['truncateMiddle', truncateMiddle(text, max).text],
        ['clip', clip(text, max).s],
        ['field', field(text, 'preview', Math.max(1, max)) ?? ''],
        ...(Object.keys(CUT_LENGTHS) as CutClass[]).map(
          (cls): [string, string] => [`cutText ${cls}`, cutText(text, cls, max).text],
        ),
        ['cutText of a start', cutText(text, 'preview', max, null).text],
      ];
      for (const [name, cut] of cuts) assert.doesNotMatch(cut, LONE, `${name} at ${max}`);
      assert.ok(headOf(text, max).length <= max && text.startsWith(headOf(text, max)));
      assert.ok(tailOf(text, max).length <= max && text.endsWith(tailOf(text, max)));
      // What a middle cut reports as cut is exactly what is missing.
      const middle = truncateMiddle(text, max);
      if (middle.cut > 0)
        assert.equal(middle.text.replace(/ \[…\d+ chars cut…\] /, '').length, text.length - middle.cut);
    }),
    { numRuns: 500, seed: 20261201 },
  );
});

test('a one-line cut fits its length with its marker, counts what it left out, is never cut twice', () => {
  const MARK = / \[…(\d+) chars cut…\]$/;
  const oneLine = fc.constantFrom<CutClass>('label', 'preview', 'stored');
  fc.assert(
    fc.property(pairsText, fc.nat(300), oneLine, (text, max, cls) => {
      const { text: shown, cut } = cutText(text, cls, max);
      if (text.length <= max) return assert.deepEqual([shown, cut], [text, 0]);
      assert.ok(shown.length <= max, `${cls} at ${max}: ${shown.length}`);
      // A cut text fits its class: cutting it again changes nothing.
      assert.equal(cutText(shown, cls, max).text, shown);
      const kept = shown.replace(MARK, '').replace(/…$/, '');
      assert.ok(text.startsWith(kept.trimEnd()) || kept === '', `${cls}: a head of the text`);
      const counted = MARK.exec(shown);
      if (counted) assert.equal(Number(counted[1]), text.length - kept.length, 'the count is the rest');
      assert.equal(cut, text.length - kept.length);
    }),
    { numRuns: 1000, seed: 20261206 },
  );
  assert.equal(cutText('abcdef', 'stored', 0).text, '');
  assert.equal(cutText('x'.repeat(30), 'preview', 10).text, 'xxxxxxxxx…');
  assert.equal(cutText('x'.repeat(30), 'preview', 28).text, 'xxxxxxxxxxx […19 chars cut…]');
  assert.equal(cutText('x'.repeat(30), 'field', 10).text, 'xxxxxxx […20 chars cut…] xxx');
  // Only a start was read: no count, and the marker still fits.
  assert.equal(cutText('x'.repeat(10), 'preview', 20, null).text, `${'x'.repeat(10)} […cut…]`);
});

test('a pino headline cut at its limit keeps whole characters', () => {
  for (const pad of ['', 'a']) {
    // The headline's cut falls on each half of a pair in turn.
    const text = pad + '😀'.repeat(3000);
    const value = {
      type: 'assistant',
      parent_tool_use_id: null,
      message: { id: 'm', content: [{ type: 'text', text }] },
    };
    const record = { kind: 'line' as const, lineNo: 1, raw: Buffer.from(JSON.stringify(value)), value };
    const events = pinoEvents(record, 100_000);
    assert.equal(events.length, 1);
    assert.match(events[0].msg, / \[…\d+ chars cut…\]$/);
    assert.ok(events[0].msg.length <= CUT_LENGTHS.preview.chars);
    assert.doesNotMatch(events[0].msg, LONE);
  }
});

/** The longest run of whole characters from one end of `text` within `max` UTF-16 units. */
function wholeCharacters(text: string, max: number, fromEnd: boolean): string {
  const chars = Array.from(text);
  if (fromEnd) chars.reverse();
  let kept = '';
  for (const c of chars) {
    if (kept.length + c.length > max) break;
    kept = fromEnd ? c + kept : kept + c;
  }
  return kept;
}

test('the cutters keep exactly the whole characters that ' +
  'fit, and boundedText marks a cut and mends lone halves', () => {
  // Lone halves of a pair too, as a broken input holds them.
  const text = fc
    .array(
      fc.constantFrom('a', 'é', 'ｱ', '😀', '\uD800\uDC00', '\uDBFF\uDFFF', '\uD83D', '\uDE00', '\uDFFF'),
      {
        minLength: 0,
        maxLength: 60,
      },
    )
    .map((chars) => chars.join(''));
  fc.assert(
    fc.property(text, fc.integer({ min: -2, max: 130 }), (s, max) => {
      const wellFormed = !LONE.test(s);
      // Text that fits is kept as it is, whatever it holds.
      if (max > 0 && s.length <= max) assert.deepEqual([headOf(s, max), tailOf(s, max)], [s, s]);
      if (wellFormed) {
        assert.equal(headOf(s, max), max <= 0 ? '' : wholeCharacters(s, max, false));
        assert.equal(tailOf(s, max), max <= 0 ? '' : wholeCharacters(s, max, true));
      }
      const mend = (t: string) => t.replace(new RegExp(LONE.source, 'g'), '\uFFFD');
      const expected = max <= 0 ? '' : s.length <= max ? mend(s) : mend(headOf(s, max)) + '…';
      assert.equal(boundedText(s, max), expected);
    }),
    { numRuns: 2000, seed: 20261202 },
  );
  assert.equal(boundedText('ab\uD83D', 3), 'ab\uFFFD');
  assert.equal(boundedText('abcd', 4), 'abcd');
  assert.equal(boundedText('abcde', 4), 'abcd…');
  assert.equal(headOf('a😀', 2), 'a');
  assert.equal(tailOf('😀a', 2), 'a');
});

/*
 * One text through every view: each shows the cut of its length class, in that class's
 * shape, with the one marker. The text holds a surrogate pair across every class's cut point
 * and a control character in every head and tail; the expected cut is counted here by whole
 * code points, not by the cutter.
 */
const WHOLE = 30_000;
const BELL = '\x07';

/** Where a class's head cut falls, and (for `both`) its tail cut, in UTF-16 units. */
function cutPoints(cls: CutClass, chars: number, length: number): { head: number; tail: number } {
  const { keep } = CUT_LENGTHS[cls];
  if (keep === 'width') return { head: chars - 1, tail: 0 };
  if (keep === 'head') return { head: chars - 1 - `[…${length} chars cut…]`.length, tail: 0 };
  return { head: Math.ceil(chars * 0.7), tail: chars - Math.ceil(chars * 0.7) };
}

/** `WHOLE` units of `x`, a pair across each class's cut points, a bell near each end. */
function crossedText(): string {
  const units: string[] = Array.from({ length: WHOLE }, () => 'x');
  const pairAt = (i: number) => {
    assert.ok(units[i] === 'x' && units[i + 1] === 'x', `pairs overlap at ${i}`);
    units[i] = '\uD83D';
    units[i + 1] = '\uDE00';
  };
  for (const cls of Object.keys(CUT_LENGTHS) as CutClass[]) {
    const { head, tail } = cutPoints(cls, CUT_LENGTHS[cls].chars, WHOLE);
    pairAt(head - 1);
    if (tail > 0) pairAt(WHOLE - tail - 1);
  }
  units[5] = BELL;
  units[WHOLE - 5] = BELL;
  return units.join('');
}

/**
 * The expected cut of `text` as `cls`, by whole code points (independent of the cutter);
 * `start`: the view read only the start of it, so the marker has no count.
 */
function expectedCut(text: string, cls: CutClass, start = false): string {
  const chars = CUT_LENGTHS[cls].chars;
  if (start) return `${wholeCharacters(text, chars - 1 - '[…cut…]'.length, false)} […cut…]`;
  if (text.length <= chars) return text;
  const { keep } = CUT_LENGTHS[cls];
  const { head: h, tail: t } = cutPoints(cls, chars, text.length);
  const head = wholeCharacters(text, h, false);
  if (keep === 'width') return `${head.trimEnd()}…`;
  if (keep === 'head') return `${head} […${text.length - head.length} chars cut…]`;
  const tail = wholeCharacters(text, t, true);
  return `${head} […${text.length - head.length - tail.length} chars cut…] ${tail}`;
}

const control = (s: string) => s.replace(/\x07/g, '\\x07');

test('every view shows the same cut and marker for a length class, pairs whole, escaped after', async () => {
  const TEXT = crossedText();
  const at = (s: number) => new Date(Date.UTC(2026, 11, 6, 5, 0, s)).toISOString();
  const json = (v: Record<string, unknown>) => JSON.stringify(v);
  const input = Buffer.from(
    [
      json({ type: 'system', subtype: 'init', session_id: TEXT, uuid: 'u0', timestamp: at(0) }),
      json({
        type: 'assistant',
        message: {
          id: 'm1',
          content: [
            {
              type: 'tool_use',
              id: 'a1',
              name: 'Agent',
              input: { subagent_type: 'Explore', description: TEXT, prompt: 'go' },
            },
          ],
        },
        parent_tool_use_id: null,
        uuid: 'u1',
        timestamp: at(1),
      }),
      json({
        type: 'user',
        message: { content: [{ type: 'text', text: TEXT }] },
        parent_tool_use_id: 'a1',
        uuid: 'u2',
        timestamp: at(2),
      }),
      json({
        type: 'assistant',
        message: { id: 'm3', content: [{ type: 'thinking', thinking: TEXT }] },
        parent_tool_use_id: 'a1',
        uuid: 'u3',
        timestamp: at(3),
      }),
      json({
        type: 'assistant',
        message: { id: 'm4', content: [{ type: 'tool_use', id: 't1', name: 'Bash', input: TEXT }] },
        parent_tool_use_id: 'a1',
        uuid: 'u4',
        timestamp: at(4),
      }),
      json({
        type: 'user',
        message: { content: [{ type: 'tool_result', tool_use_id: 't1', content: TEXT }] },
        parent_tool_use_id: 'a1',
        uuid: 'u5',
        timestamp: at(5),
      }),
      json({
        type: 'user',
        message: { content: [{ type: 'tool_result', tool_use_id: 'a1', content: TEXT, is_error: true }] },
        parent_tool_use_id: null,
        uuid: 'u6',
        timestamp: at(6),
      }),
    ].join('\n') + '\n',
  );
  const policy = displayPolicy({ thinking: 'truncate' });
  const rows = new RowBuilder({ display: policy });
  const trace = new TraceBuilder({ captureContent: true });
  const spans: SpanData[] = [];
  const events: EventRow[] = [];
  const log: string[] = [];
  const pino: PinoEvent[] = [];
  const facts: LineFacts[] = [];
  const blocks: MessageBlock[] = [];
  const { run } = await routeThrough(input, (batch) => {
    for (const rec of batch) {
      if (rec.kind !== 'line') continue;
      log.push(...renderRecord(rec, policy));
      pino.push(...pinoEvents(rec, PINO_SINK_DEFAULTS.maxContentChars, undefined, policy));
      facts.push(lineFacts(rec.value, REPORT_DEFAULTS, policy));
      blocks.push(...blocksOfLine(rec.value, policy));
      for (const e of rows.rows(rec)) if (e.t === 'events') events.push(e.r as EventRow);
      spans.push(...trace.add(rec));
    }
  });
  spans.push(...trace.finish(run.tree.channels(), run));
  const a1 = run.tree.channels().find((ch) => ch.id === 'a1')!;
  assert.equal(a1.status, 'failed');
  const live = channelUpdate(a1 as unknown as ChannelFields, {
    spawned: null,
    prompt: null,
    log: null,
    cut: null,
    cost: null,
  });
  const toolSpan = spans.find((s) => s.key === 'tool:t1')!;
  const agentSpan = spans.find((s) => s.key === 'agent:a1')!;
  const entry = (k: string, n?: string) =>
    facts.flatMap((f) => f.entries).find((e) => e.k === k && (n === undefined || e.n === n))!.s;
  const summary = summaryText(run, 'out');
  const thinkingBlock = (blocks.find((b) => b.type === 'thinking') as { text: string }).text;
  const inputJson = JSON.stringify(TEXT);
  const toolLine = log.find((l) => l.startsWith('[tool] Bash '))!.slice('[tool] Bash '.length);
  const ARGUMENTS = 'gen_ai.tool.call.arguments';

  const pinoText = pino.find((e) => e.kind === 'text')!;
  // The headline previews the event's content as the event holds it (cut as `content`).
  const headline = `[${channelLabel(a1)}] ${String(pinoText.fields.content)}`;
  const shownLabel = /(x\S*…)  failed/.exec(summary)?.[1] ?? summary;
  // [view, length class, what the view shows, how the view escapes it, the text it was given,
  // whether only its start was read]
  const table: Array<[string, CutClass, string, (s: string) => string, string?, boolean?]> = [
    ['stdout label', 'label', new ChannelLabels().of(a1), control],
    ['stderr summary label', 'label', shownLabel, control],
    ['pino headline', 'preview', pinoText.msg, control, headline],
    ['OTLP error detail', 'preview', agentSpan.error!.replace('subagent failed: ', ''), (s) => s],
    ['.log tool input', 'preview', toolLine, control, inputJson, true],
    ['.log prompt', 'field', log.find((l) => l.startsWith('[prompt] '))!.slice(9), control],
    ['.log result', 'field', log.find((l) => l.startsWith('[result] '))!.slice(9), control],
    ['.log/stdout status', 'field', statusLine('failed', TEXT).slice('[status] failed — '.length), control],
    ['.log thinking', 'thinking', log.find((l) => l.startsWith('[thinking] '))!.slice(11), control],
    ['report thinking', 'thinking', entry('thinking'), control],
    ['projection thinking', 'thinking', thinkingBlock, (s) => s],
    ['pino thinking', 'thinking', String(pino.find((e) => e.kind === 'thinking')!.fields.content), (s) => s],
    ['report tool input', 'input', entry('tool', 'Bash'), control, inputJson],
    ['report entry', 'block', entry('result'), control],
    ['report prompt', 'block', facts.find((f) => f.prompt !== null)!.prompt!, control],
    ['OTLP tool arguments', 'block', String(toolSpan.attributes[ARGUMENTS]), (s) => s, inputJson],
    ['OTLP tool result', 'block', String(toolSpan.attributes['gen_ai.tool.call.result']), (s) => s],
    ['live page summary', 'summary', live.summary!, control],
    ['pino content', 'content', String(pinoText.fields.content), (s) => s],
    ['ClickHouse content', 'stored', events.find((r) => r.kind === 'text')!.content, control],
    ['OTLP session id', 'stored', String(agentSpan.attributes['session.id']), (s) => s],
  ];
  for (const [view, cls, shown, escape, given = TEXT, start = false] of table) {
    assert.doesNotMatch(shown, LONE, view);
    assert.equal(shown, escape(expectedCut(given, cls, start)), `${view} (${cls})`);
    // Cut first, then escaped: the control character in the head is shown as the view shows it.
    if (given === TEXT) assert.ok(shown.includes(escape(BELL)), view);
    if (escape === control) assert.ok(!shown.includes(BELL), view);
  }
  // Every class is shown by some view.
  assert.deepEqual(
    [...new Set(table.map(([, cls]) => cls))].sort(),
    Object.keys(CUT_LENGTHS).sort(),
  );
});

test('views and sinks cut shown text only through the one cutter: none imports the low-level cuts', () => {
  const low = importsUnder(join(ROOT, 'src'))
    .filter((i) => i.to === 'model/bounded-text.ts')
    .filter((i) => i.from.startsWith('views/') || i.from.startsWith('chain/sinks/'))
    .map((i) => i.from);
  // stdout keeps the start of a subagent's last text to compare its final report with: not shown.
  assert.deepEqual(low, ['chain/sinks/stdout.ts']);
});

test('a pino event time is the line timestamp read by Date.parse, in toISOString form (property)', () => {
  const expected = (ts: string) => {
    const ms = Date.parse(ts);
    return Number.isNaN(ms) ? null : new Date(ms).toISOString();
  };
  const two = (max: number) => fc.integer({ min: 0, max }).map((n) => String(n).padStart(2, '0'));
  // Near-ISO strings, invalid fields and days past a month's end included.
  const nearIso = fc
    .tuple(
      fc.integer({ min: 0, max: 9999 }),
      two(13),
      two(32),
      two(25),
      two(61),
      two(61),
      fc.integer({ min: 0, max: 999 }),
      fc.constantFrom('Z', '+00:00', '', 'z'),
    )
    .map(
      ([y, mo, d, h, mi, s, ms, zone]) =>
        `${String(y).padStart(4, '0')}-${mo}-${d}T${h}:${mi}:${s}.${String(ms).padStart(3, '0')}${zone}`,
    );
  fc.assert(
    fc.property(fc.oneof(nearIso, fc.string()), (ts) => {
      assert.equal(streamTime({ timestamp: ts }), expected(ts), ts);
    }),
    { numRuns: 20_000, seed: 23 },
  );
  for (const ts of ['2026-02-29T00:00:00.000Z', '2026-02-30T00:00:00.000Z', '2026-11-30T24:00:00.000Z'])
    assert.equal(streamTime({ timestamp: ts }), expected(ts), ts);
});

test('a line timestamp on the 29th, 30th or 31st is its own time exactly when its month has that day', () => {
  const roundTrip = (ts: string) => {
    const ms = Date.parse(ts);
    return Number.isNaN(ms) ? null : new Date(ms).toISOString();
  };
  let own = 0;
  for (const year of ['0000', '1900', '2000', '2024', '2026', '2100', '2400', '9999'])
    for (let month = 1; month <= 12; month++)
      for (const day of [28, 29, 30, 31]) {
        const ts = `${year}-${String(month).padStart(2, '0')}-${day}T23:59:59.999Z`;
        assert.equal(streamTime({ timestamp: ts }), roundTrip(ts), ts);
        if (roundTrip(ts) === ts) own++;
      }
  // 8 years × (12 months × the 28th, 29th and 30th but February's 30th, the 31st of 7 months,
  // February's 29th in the 4 leap years among them): the count the calendar gives.
  assert.equal(own, 8 * (12 + 11 + 11 + 7) + 4);
});

test('a label tagged to tell alike descriptions apart escapes the tag, which comes from a stream id', () => {
  const labels = new ChannelLabels();
  const alike = { agent: 'general-purpose', description: 'same' };
  assert.equal(labels.of({ ...alike, id: 'a', tag: 'a' }), 'same');
  const tagged = labels.of({ ...alike, id: '\x1b]0;X\x07b', tag: '\x1b]0;X\x07b' });
  assert.doesNotMatch(tagged, /[\x00-\x1f\x7f-\x9f]/);
  assert.equal(tagged, 'same·\\x1b]0;X\\x07b');
});

test('descriptions that differ only in invisible characters or compatibility forms get tags apart', () => {
  const labels = new ChannelLabels();
  const shown = ['review', 'review\u200b', 're\u2060view', 'ｒｅｖｉｅｗ'].map((description, i) =>
    labels.of({ id: `a${i}`, agent: 'general-purpose', description, tag: `t${i}` }),
  );
  assert.equal(shown[0], 'review');
  assert.deepEqual(
    shown.slice(1).map((label) => label.slice(label.lastIndexOf('·'))),
    ['·t1', '·t2', '·t3'],
  );
});
