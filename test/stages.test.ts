import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { runChain } from '../src/chain.js';
import { truncateMiddle } from '../src/stages/thinking-truncator.js';
import { ROOT, chunked, linesOf, readTree, tmpDir } from './helpers.js';

const thinkingLine = (parent: string | null, text: string) => JSON.stringify({ type: 'assistant', parent_tool_use_id: parent, message: { id: `m${Math.random()}`, content: [{ type: 'thinking', thinking: text, signature: 's' }, { type: 'text', text: 'after' }] } });
const long = 'A'.repeat(3000) + 'MIDDLE' + 'Z'.repeat(3000);
const input = Buffer.from([thinkingLine(null, long), thinkingLine(null, 'short one')].join('\n') + '\n');

async function withThinking(mode: string, maxChars = 100) {
  const out = join(tmpDir(), 'out');
  const run = await runChain(chunked([input]), {
    stages: [{ use: 'line-parser' }, { use: 'channel-router' }, { use: 'thinking-truncator', mode, maxChars }],
    sinks: [{ use: 'files', out }],
  });
  return { run, files: readTree(out), index: JSON.parse(readFileSync(join(out, 'index.json'), 'utf8')) };
}

test('truncateMiddle keeps head and tail and says how much was cut', () => {
  const t = truncateMiddle(long, 100);
  assert.equal(t.cut, long.length - 100);
  assert.ok(t.text.startsWith('A'.repeat(70)) && t.text.endsWith('Z'.repeat(30)));
  assert.match(t.text, new RegExp(`\\[…${long.length - 100} chars cut…\\]`));
  assert.deepEqual(truncateMiddle('abc', 100), { text: 'abc', cut: 0 });
});

for (const mode of ['keep', 'truncate', 'drop', 'file']) {
  test(`--thinking ${mode}: transcript, counts, raw .jsonl untouched`, async () => {
    const { files, index } = await withThinking(mode);
    const log = files.get('main.log')!.toString();
    assert.deepEqual(linesOf(files.get('main.jsonl')), linesOf(input), 'raw lines unchanged');
    const main = index.channels[0];
    if (mode === 'keep') {
      assert.ok(log.includes(long));
      assert.deepEqual(main.thinking, { kept_chars: long.length + 9, cut_chars: 0 });
    } else if (mode === 'truncate') {
      assert.ok(!log.includes('MIDDLE') && log.includes('chars cut'));
      assert.ok(log.includes('[thinking] short one'));
      assert.deepEqual(main.thinking, { kept_chars: 100 + 9, cut_chars: long.length - 100 });
    } else if (mode === 'drop') {
      assert.ok(!log.includes('[thinking]'));
      assert.deepEqual(main.thinking, { kept_chars: 0, cut_chars: long.length + 9 });
    } else {
      assert.match(log, /\[thinking\] \(6006 chars, in the \.thinking\.log beside this transcript\)/);
      // Moved out of the transcript: none of it is kept there.
      assert.deepEqual(main.thinking, { kept_chars: 0, cut_chars: long.length + 9 });
      assert.equal(main.thinking_log, 'main.thinking.log');
      assert.ok(files.get('main.thinking.log')!.toString().includes(long));
    }
    assert.ok(log.includes('after'));
  });
}

test('pino sink: one line per event with channel fields and levels; pino-pretty reads it', async () => {
  const out = join(tmpDir(), 'out');
  const pinoFile = join(tmpDir(), 'events.log');
  const lines = [
    { type: 'assistant', parent_tool_use_id: null, message: { id: 'm1', content: [{ type: 'text', text: 'hello' }, { type: 'tool_use', id: 'toolu_k', name: 'Agent', input: { subagent_type: 'Explore' } }] } },
    { type: 'assistant', parent_tool_use_id: 'toolu_k', message: { id: 'm2', content: [{ type: 'thinking', thinking: 'hmm', signature: 's' }] } },
    { type: 'user', parent_tool_use_id: null, message: { content: [{ type: 'tool_result', tool_use_id: 'toolu_k', content: 'bad', is_error: true }] } },
  ].map((l) => JSON.stringify(l));
  await runChain(chunked([Buffer.from(lines.join('\n') + '\nnoise\n')]), {
    stages: [{ use: 'line-parser' }, { use: 'channel-router' }],
    sinks: [{ use: 'files', out }, { use: 'pino', destination: pinoFile }],
  });
  const events = readFileSync(pinoFile, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  const kinds = events.map((e) => `${e.kind}:${e.channel}:${e.level}`);
  assert.deepEqual(kinds, ['text:main:30', 'tool_use:main:30', 'thinking:toolu_k:30', 'tool_result:main:40', 'status:toolu_k:50', 'quarantine:null:40']);
  const thinking = events[2];
  assert.deepEqual([thinking.parent, thinking.depth, thinking.agent, thinking.content], [null, 1, 'Explore', 'hmm']);
  const pretty = spawnSync(process.execPath, [join(ROOT, 'node_modules', 'pino-pretty', 'bin.js')], { input: readFileSync(pinoFile), encoding: 'utf8' });
  assert.equal(pretty.status, 0);
  assert.match(pretty.stdout, /ERROR.*\n(.*\n)*.*status/);
});
