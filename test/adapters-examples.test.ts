import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { CLAUDE_BINARY, claudeAvailable } from './e2e/claude.js';
import { startFakeApi } from './e2e/fake-api.js';
import { BIN, ROOT, tmpDir } from './helpers/helpers.js';

/** Runs an example as a user would, from a folder of their own; resolves with its output. */
function runExample(name: string, args: string[], env: NodeJS.ProcessEnv, cwd: string) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, [join(ROOT, 'examples', name), ...args], {
      cwd,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** The recording an example wrote, replayed through the CLI, gives the example's index.json. */
function assertReplays(out: string) {
  const again = `${out}-again`;
  const r = spawnSync(process.execPath, [BIN, '--out', again, '--stdout', 'none', '-q', `${out}.jsonl`], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  const live = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.deepEqual(JSON.parse(readFileSync(join(again, 'index.json'), 'utf8')), live);
  return live;
}

test('examples/deep-agents.mjs runs offline: nested ' +
  'subagents live, transcripts, a recording that replays', async () => {
  const dir = tmpDir();
  const out = join(dir, 'run');
  const r = await runExample('deep-agents.mjs', [out], { PATH: process.env.PATH, HOME: dir }, dir);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(
    r.stdout,
    [
      'researcher started (call_research)',
      '  Asking a writer.',
      '  Findings: three sources agree.',
      '  writer started (call_write)',
      '    Draft: the sources agree.',
      '  writer completed',
      'researcher completed',
      `langgraph: 2 subagents, transcripts in ${out}/, recording in ${out}.jsonl`,
      '',
    ].join('\n'),
  );
  const index = assertReplays(out);
  assert.deepEqual(
    index.channels.map((c: any) => [c.id, c.parent, c.agent, c.status]),
    [
      [null, null, null, 'completed'],
      ['call_research', null, 'researcher', 'completed'],
      ['call_write', 'call_research', 'writer', 'completed'],
    ],
  );
  assert.match(readFileSync(join(out, 'agents', 'call_write.log'), 'utf8'), /Draft: the sources agree\./);
});

test(
  "examples/claude-agent-sdk.mjs runs the real SDK on the project's Claude Code against the scripted API",
  { skip: !claudeAvailable() && 'the Claude Code CLI is not installed (`npm test` installs it)' },
  async () => {
    const api = await startFakeApi();
    try {
      const dir = tmpDir();
      const home = tmpDir('subtee-home-');
      const out = join(dir, 'run');
      const env = {
        PATH: process.env.PATH,
        HOME: home,
        IS_SANDBOX: '1',
        ANTHROPIC_BASE_URL: api.url,
        ANTHROPIC_API_KEY: 'sk-test-dummy',
        DISABLE_TELEMETRY: '1',
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
        DISABLE_AUTOUPDATER: '1',
        CLAUDE_CODE_PATH: CLAUDE_BINARY,
      };
      const r = await runExample('claude-agent-sdk.mjs', ['SCRIPT:nest:2', out], env, dir);
      assert.equal(r.code, 0, r.stderr);
      const lines = r.stdout.trim().split('\n');
      assert.deepEqual(
        lines.filter((l) => / started /.test(l)).map((l) => l.replace(/\(.*\)/, '')),
        ['general-purpose started ', '  general-purpose started '],
      );
      assert.ok(lines.includes('  general-purpose completed: Worker leaf report: done.'), r.stdout);
      assert.ok(lines.includes('general-purpose completed: Level 1 report: done.'), r.stdout);
      assert.equal(lines.at(-1), `2 subagents, transcripts in ${out}/, recording in ${out}.jsonl`);
      const index = assertReplays(out);
      assert.equal(index.producer, 'claude');
      assert.deepEqual(
        index.channels.map((c: any) => [c.depth, c.status]),
        [
          [0, 'completed'],
          [1, 'completed'],
          [2, 'completed'],
        ],
      );
    } finally {
      await api.close();
    }
  },
);
