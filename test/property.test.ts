import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import fc from 'fast-check';
import { ROOT, checkOutput, fixtureFiles, runToFiles } from './helpers/helpers.js';

/** A stream of channels, nesting, noise, CRLF, multi-byte text and maybe a truncated last line. */
const streamArb = fc
  .record({
    spawns: fc.array(fc.nat(), { maxLength: 8 }),
    events: fc.array(
      fc.record({
        kind: fc.constantFrom('text', 'noise', 'blank', 'result', 'notify', 'orphan', 'task'),
        who: fc.nat(),
        text: fc.string({
          unit: fc.constantFrom('a', 'é', '日', '🚀', '\\', '"', '\n', ' ', '\x1b', '\u202e'),
          maxLength: 40,
        }),
      }),
      { maxLength: 40 },
    ),
    crlf: fc.boolean(),
    bom: fc.boolean(),
    truncatedTail: fc.boolean(),
  })
  .map((s) => {
    const ids: Array<string | null> = [null];
    const lines: string[] = [];
    s.spawns.forEach((p, i) => {
      const parent = ids[p % ids.length];
      const id = `toolu_p${i}${i % 2 ? 'SAMEtail' : 'sameTAIL'}`;
      lines.push(
        JSON.stringify({
          type: 'assistant',
          parent_tool_use_id: parent,
          message: {
            id: `s${i}`,
            content: [
              { type: 'tool_use', id, name: i % 3 ? 'Agent' : 'Task', input: { subagent_type: 'x' } },
            ],
          },
        }),
      );
      ids.push(id);
    });
    s.events.forEach((e, i) => {
      const ch = ids[e.who % ids.length];
      if (e.kind === 'text')
        lines.push(
          JSON.stringify({
            type: 'assistant',
            parent_tool_use_id: ch,
            message: { id: `m${i}`, content: [{ type: 'text', text: e.text }] },
          }),
        );
      else if (e.kind === 'noise') lines.push(`npm WARN ${e.text.replace(/\n/g, ' ')}`);
      else if (e.kind === 'blank') lines.push(' ');
      else if (e.kind === 'result')
        lines.push(
          JSON.stringify({
            type: 'user',
            parent_tool_use_id: ch,
            message: {
              content: [
                {
                  type: 'tool_result',
                  tool_use_id: ids[(e.who + 1) % ids.length] ?? 'none',
                  content: e.text,
                  is_error: e.who % 2 === 0,
                },
              ],
            },
          }),
        );
      else if (e.kind === 'notify' && ch)
        lines.push(
          JSON.stringify({
            type: 'system',
            subtype: 'task_notification',
            tool_use_id: ch,
            status: e.who % 2 ? 'completed' : 'failed',
          }),
        );
      else if (e.kind === 'orphan')
        lines.push(
          JSON.stringify({
            type: 'assistant',
            parent_tool_use_id: `toolu_orphan${e.who % 3}`,
            message: { content: [] },
          }),
        );
      else if (e.kind === 'task' && ch)
        lines.push(
          JSON.stringify({
            type: 'system',
            subtype: 'task_started',
            tool_use_id: ch,
            is_backgrounded: e.who % 2 === 0,
          }),
        );
    });
    let text = lines.join(s.crlf ? '\r\n' : '\n') + (lines.length ? (s.crlf ? '\r\n' : '\n') : '');
    if (s.truncatedTail) text += '{"type":"assistant","message":{"content":[{"type":"te';
    return Buffer.concat([s.bom ? Buffer.from([0xef, 0xbb, 0xbf]) : Buffer.alloc(0), Buffer.from(text)]);
  });

function cut(buf: Buffer, points: number[]): Buffer[] {
  const sorted = [...new Set(points.map((p) => p % (buf.length + 1)))].sort((a, b) => a - b);
  const out: Buffer[] = [];
  let prev = 0;
  for (const p of sorted) {
    out.push(buf.subarray(prev, p));
    prev = p;
  }
  out.push(buf.subarray(prev));
  return out;
}

const tree = (index: any) =>
  index.channels.map((c: any) => [c.id, c.parent, c.depth, c.status, c.orphan, c.lines]);

test('conservation and the same tree under any chunking (property)', async () => {
  await fc.assert(
    fc.asyncProperty(
      streamArb,
      fc.array(fc.nat(), { maxLength: 30 }),
      fc.array(fc.nat(), { maxLength: 30 }),
      async (input, a, b) => {
        const r1 = await runToFiles(cut(input, a));
        checkOutput(input, r1.out, 'chunking A');
        const r2 = await runToFiles(cut(input, b));
        assert.deepEqual(tree(r2.index), tree(r1.index));
      },
    ),
    { numRuns: 60, seed: 20261130 },
  );
});

/** Fuzz cases per run: a count, not a time budget, so a loaded machine checks the same cases. */
const FUZZ_RUNS = Number(process.env.SUBTEE_FUZZ_RUNS ?? 200);

test('fuzz: mutated real recordings never crash and ' +
  'conserve every line (seeded, count-bounded)', async () => {
  const sources = fixtureFiles().map((f) => readFileSync(f));
  let seed = Number(process.env.SUBTEE_FUZZ_SEED ?? 12345);
  const rnd = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
  let runs = 0;
  let mutated = 0;
  while (runs < FUZZ_RUNS) {
    const src = Buffer.from(sources[Math.floor(rnd() * sources.length)]);
    const lines = src.toString('latin1').split('\n');
    for (let k = 0; k < 1 + Math.floor(rnd() * 8); k++) {
      const i = Math.floor(rnd() * lines.length);
      const op = Math.floor(rnd() * 6);
      if (op === 0)
        lines[i] = lines[i].slice(0, Math.floor(rnd() * lines[i].length)); // truncate a line
      else if (op === 1)
        lines.splice(i, 0, lines[Math.floor(rnd() * lines.length)]); // duplicate one
      else if (op === 2)
        lines.splice(i, 1); // drop one
      else if (op === 3)
        lines[i] = lines[i].replace(/toolu_[A-Za-z0-9]+/, 'toolu_../../evil'); // hostile id
      else if (op === 4)
        lines.splice(i, 0, String.fromCharCode(...Array.from({ length: 20 }, () => Math.floor(rnd() * 256)))); // binary noise
      else lines[i] = lines[i].replace('"parent_tool_use_id":null', '"parent_tool_use_id":""'); // empty parent
    }
    const input = Buffer.from(lines.join('\n'), 'latin1');
    if (!input.equals(src)) mutated++;
    const chunks = cut(
      input,
      Array.from({ length: 5 }, () => Math.floor(rnd() * input.length)),
    );
    const r = await runToFiles(chunks);
    checkOutput(input, r.out, `fuzz run ${runs} (seed ${process.env.SUBTEE_FUZZ_SEED ?? 12345})`);
    runs++;
  }
  assert.equal(runs, FUZZ_RUNS);
  assert.ok(mutated > FUZZ_RUNS * 0.9, `${mutated} of ${runs} inputs were mutated`);
});

test('the recordings shipped in test/fixtures are real CLI output', () => {
  assert.match(
    readFileSync(join(ROOT, 'test', 'fixtures', 'VERSION'), 'utf8'),
    /^\d+\.\d+\.\d+ \(Claude Code\)/,
  );
});
