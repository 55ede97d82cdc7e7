import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { boundedText, headOf, tailOf } from '../src/model/bounded-text.js';
import { shorten } from '../src/views/escape.js';
import { truncateMiddle } from '../src/chain/stages/thinking-truncator.js';
import { clip, field } from '../src/views/report/model.js';
import { pinoEvents, streamTime } from '../src/chain/sinks/pino.js';

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
        ['shorten', shorten(text, max)],
        ['truncateMiddle', truncateMiddle(text, max).text],
        ['clip', clip(text, max).s],
        ['field', field(text, Math.max(1, max)) ?? ''],
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
    assert.match(events[0].msg, /… \(\d+ more chars\)$/);
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

test('the cutters keep exactly the whole characters that fit, and boundedText marks a cut and mends lone halves', () => {
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
