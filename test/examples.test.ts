import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { writeStream } from '../bench/gen.js';
import { builtinRegistry } from '../src/chain/builtins.js';
import { runChain } from '../src/chain/chain.js';
import { registerPlugins } from '../src/chain/config.js';
import { Session } from '../src/model/session.js';
import { BIN, checkOutput, chunked, FIXTURES, linesOf, readTree, ROOT, tmpDir } from './helpers/helpers.js';
import { resolveSpec } from '../src/cli/config.js';
import { parseArgs } from '../src/cli/options.js';
import { allDocs, codeBlocks, section } from './helpers/docs.js';

const example = (name: string) => join(ROOT, 'dist', 'examples', `${name}.js`);

test('the documentation shows every example exactly as it is in examples/', () => {
  const readme = allDocs();
  const files = [
    'projection.ts',
    'compose.ts',
    'drop-progress.ts',
    'claude-agent-sdk.mjs',
    'deep-agents.mjs',
    'run-model.ts',
  ];
  for (const name of files) {
    const code = readFileSync(join(ROOT, 'examples', name), 'utf8').trim();
    assert.ok(readme.includes(code), `the documentation holds examples/${name}`);
  }
});

test('examples/projection: each subagent starts, speaks and ends, at every depth', () => {
  const out = execFileSync(
    process.execPath,
    [example('projection'), join(FIXTURES, 'nested-depth-3.jsonl')],
    {
      encoding: 'utf8',
    },
  );
  const starts = out.split('\n').filter((l) => l.includes('▶ general-purpose'));
  assert.deepEqual(
    starts.map((l) => l.indexOf('▶')),
    [2, 4, 6],
  );
  assert.equal(
    out.split('\n').filter((l) => /■ general-purpose completed in the (fore|back)ground/.test(l)).length,
    3,
  );
  assert.match(out, /Worker leaf report: done\./);
  assert.match(out, /22 tokens, 66 with its subagents/);
  assert.match(out, /^3 subagents$/m);
});

test('examples/compose: a pipeline() of the factories finishes a 5 MB input, nothing lost', async () => {
  const dir = tmpDir();
  const input = join(dir, 'in.jsonl');
  await writeStream({ sizeBytes: 5 * 1024 * 1024, fanout: 50, shape: 'small', seed: 9 }, input);
  const out = join(dir, 'out');
  const printed = execFileSync(process.execPath, [example('compose'), input, out], {
    encoding: 'utf8',
    timeout: 120_000,
  });
  assert.match(printed, /50 subagents/);
  checkOutput(readFileSync(input), out, 'compose example');
});

test('examples/drop-progress: the plugin loads by path and takes task_progress lines out', async () => {
  const file = join(FIXTURES, 'background-fanout-12.jsonl');
  const input = readFileSync(file);
  const progress = linesOf(input).filter((l) => l.includes('"subtype":"task_progress"'));
  assert.ok(progress.length > 0);
  const registry = builtinRegistry();
  await registerPlugins(registry, [example('drop-progress')], ROOT);
  const out = join(tmpDir(), 'out');
  await runChain(
    chunked([input]),
    {
      stages: [{ use: 'line-parser' }, { use: 'drop-progress' }, { use: 'channel-router' }],
      sinks: [{ use: 'files', out }],
    },
    { registry, session: new Session() },
  );
  const written = [...readTree(out)].filter(([f]) => f.endsWith('.jsonl')).flatMap(([, b]) => linesOf(b));
  assert.equal(written.length, linesOf(input).length - progress.length);
  assert.ok(!written.some((l) => l.includes('"subtype":"task_progress"')));
});

/** The chain a page states in prose after `runs`, as `a → b → c`, by name. */
function statedChain(text: string): string[] {
  const stated = /runs `([a-z-]+(?: →\s+[a-z-]+)+)`/.exec(text);
  assert.ok(stated, 'the page states the chain it runs');
  return stated[1].split(/\s*→\s*/);
}

test("the README's plugin config runs it after the default stages: task_progress lines out, " +
  "the stream read as Claude Code's", async () => {
  const page = section('README.md', '## A plugin');
  const config = JSON.parse(codeBlocks(page, 'json')[0]) as { plugins: string[] };
  assert.deepEqual(config.plugins, ['./drop-progress.js']);
  const dir = tmpDir();
  const file = join(dir, 'subtee.json');
  // The built example, where the README's config has it next to itself.
  writeFileSync(file, JSON.stringify({ ...config, plugins: [example('drop-progress')] }));
  const { spec } = await resolveSpec(parseArgs(['--config', file]));
  assert.deepEqual(
    spec.stages.map((stage) => stage.use),
    statedChain(page),
  );
  const input = join(FIXTURES, 'background-fanout-12.jsonl');
  const progress = linesOf(readFileSync(input)).filter((l) => l.includes('"subtype":"task_progress"'));
  const out = join(dir, 'out');
  execFileSync(process.execPath, [BIN, '-q', '--stdout', 'none', '--config', file, '--out', out, input]);
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.equal(index.input.dropped, progress.length);
  assert.equal(index.producer, 'claude');
});

test('the Plugins page config runs as it says: its stages among the default ones, less the one it ' +
  'leaves out, every sink written', async () => {
  const page = section('docs/plugins.md', '## Config');
  const dir = tmpDir();
  const file = join(dir, 'subtee.json');
  writeFileSync(file, codeBlocks(page, 'json')[0]);
  const { spec } = await resolveSpec(parseArgs(['--config', file]));
  assert.deepEqual(
    spec.stages.map((stage) => stage.use),
    statedChain(page),
  );
  const summary = join(dir, 'summary.md');
  const input = join(FIXTURES, 'nested-depth-3.jsonl');
  execFileSync(process.execPath, [BIN, '--config', file, input], {
    cwd: dir,
    env: { ...process.env, GITHUB_STEP_SUMMARY: summary },
    stdio: 'pipe',
  });
  for (const written of ['logs/index.json', 'events.log', 'summary.md'])
    assert.ok(existsSync(join(dir, written)), written);
});

test('examples/run-model: the model alone tells each subagent opened and ended as index.json has it', () => {
  const input = join(FIXTURES, 'nested-depth-3.jsonl');
  const printed = execFileSync(process.execPath, [example('run-model'), input], { encoding: 'utf8' });
  const out = join(tmpDir(), 'out');
  execFileSync(process.execPath, [BIN, '--quiet', '--stdout', 'none', '--out', out, input]);
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8')) as {
    channels: Array<{
      id: string | null;
      parent: string | null;
      status: string;
      counts: { tool_use: number };
      usage: { input_tokens?: number };
    }>;
    warnings: unknown[];
  };
  const subagents = index.channels.filter((c) => c.id !== null);
  assert.ok(subagents.length > 1, 'the recording has subagents');
  const lines = printed.trim().split('\n');
  assert.equal(lines.pop(), `${subagents.length} subagents, ${index.warnings.length} warnings`);
  const opened = lines.filter((l) => l.startsWith('open ') || l.startsWith('spawn '));
  const ended = lines.filter((l) => l.startsWith('status '));
  assert.deepEqual(
    new Set(opened.map((l) => l.split(' ')[1])),
    new Set(subagents.map((c) => c.id)),
  );
  assert.deepEqual(
    ended.map((l) => l.split(' ').slice(1).join(' ')).sort(),
    subagents.filter((c) => c.status !== 'running').map((c) => `${c.id} ${c.status}`).sort(),
  );
  // The last word on each subagent's parent is index.json's.
  const parentOf = new Map(opened.map((l) => [l.split(' ')[1], l.split(' ')[3]]));
  for (const c of subagents) assert.equal(parentOf.get(c.id!), c.parent ?? 'main', c.id!);
  // Its usage and tool call events add up to each channel's figures in index.json.
  const usage = lines.filter((l) => l.startsWith('usage '));
  assert.deepEqual(
    usage.sort(),
    index.channels
      .map((c) => {
        const [calls, input] = [c.counts.tool_use, c.usage.input_tokens ?? 0];
        return `usage ${c.id ?? 'main'} ${calls} tool calls, ${input} input tokens`;
      })
      .sort(),
  );
});
