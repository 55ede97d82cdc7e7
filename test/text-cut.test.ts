import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { boundedText, headOf, tailOf } from '../src/model/bounded-text.js';
import { shorten } from '../src/views/escape.js';
import { truncateMiddle } from '../src/chain/stages/thinking-truncator.js';
import { clip, field } from '../src/views/report/model.js';
import { pinoEvents } from '../src/chain/sinks/pino.js';

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
      if (middle.cut > 0) assert.equal(middle.text.replace(/ \[…\d+ chars cut…\] /, '').length, text.length - middle.cut);
    }),
    { numRuns: 500, seed: 20261201 },
  );
});

test('a pino headline cut at its limit keeps whole characters', () => {
  for (const pad of ['', 'a']) {
    // The headline's cut falls on each half of a pair in turn.
    const text = pad + '😀'.repeat(3000);
    const value = { type: 'assistant', parent_tool_use_id: null, message: { id: 'm', content: [{ type: 'text', text }] } };
    const record = { kind: 'line' as const, lineNo: 1, raw: Buffer.from(JSON.stringify(value)), value };
    const events = pinoEvents(record, 100_000);
    assert.equal(events.length, 1);
    assert.match(events[0].msg, /… \(\d+ more chars\)$/);
    assert.doesNotMatch(events[0].msg, LONE);
  }
});
