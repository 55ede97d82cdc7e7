import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { claudeAvailable, claudeCommand, CLAUDE } from './e2e/claude.js';
import { startFakeApi, type FakeApi } from './e2e/fake-api.js';
import { BIN, tmpDir } from './helpers/helpers.js';
import { codeBlocks, readDoc } from './helpers/docs.js';

interface Step {
  name?: string;
  uses?: string;
  if?: string;
  run?: string;
  env: Record<string, string>;
  with: Record<string, string>;
}

/**
 * The steps of the workflow in docs/ci.md: each `- ` item under `steps:`, with its scalar
 * keys, its `env` and `with` maps, and block scalars (`run: |`, `path: |`) as their text.
 */
function stepsOf(yaml: string): Step[] {
  const lines = yaml.split('\n');
  const start = lines.findIndex((l) => l.trim() === 'steps:');
  assert.ok(start >= 0, 'the workflow has steps');
  const indent = lines[start + 1].indexOf('- ');
  const steps: Step[] = [];
  let map: Record<string, string> | null = null;
  for (let i = start + 1; i < lines.length; i++) {
    const line = lines[i];
    if (line.trim() === '') continue;
    if (line.indexOf('- ') === indent && line.slice(0, indent).trim() === '') {
      steps.push({ env: {}, with: {} });
      map = null;
    }
    const step = steps.at(-1)!;
    const m = /^(\s*)(?:- )?([\w-]+):(?: (.*))?$/.exec(line);
    assert.ok(m, `a key on line: ${line}`);
    const [, , key, value] = m;
    const depth = line.length - line.trimStart().length + (line.trimStart().startsWith('- ') ? 2 : 0);
    let text = value ?? '';
    if (text === '|') {
      const body: string[] = [];
      while (i + 1 < lines.length && (lines[i + 1].trim() === '' || indentOf(lines[i + 1]) > depth)) {
        body.push(lines[++i]);
      }
      const cut = Math.min(...body.filter((l) => l.trim()).map(indentOf));
      text = body.map((l) => l.slice(cut)).join('\n').trimEnd() + '\n';
    }
    if (depth === indent + 2) {
      map = key === 'env' || key === 'with' ? step[key] : null;
      if (key === 'name' || key === 'uses' || key === 'if' || key === 'run') step[key] = text;
    } else if (map) {
      map[key] = text;
    }
  }
  return steps;
}

function indentOf(line: string): number {
  return line.length - line.trimStart().length;
}

function recipe(): { steps: Step[]; config: string } {
  const page = readDoc('docs/ci.md');
  const [workflow] = codeBlocks(page, 'yaml');
  const [config] = codeBlocks(page, 'json');
  assert.ok(workflow && config, 'docs/ci.md holds a workflow and a config');
  return { steps: stepsOf(workflow), config };
}

test('the CI recipe: pipefail, subtee run around claude, the step summary, the folder as an artifact', () => {
  const { steps, config } = recipe();
  const run = steps.find((s) => s.run?.includes('subtee run'));
  assert.ok(run?.run, 'a step runs subtee run');
  assert.match(run.run, /^set -o pipefail$/m);
  const wrapped = /subtee run [^]*--out \S+[^]* -- \\\n\s*claude -p "\$PROMPT" --output-format stream-json --verbose/;
  assert.match(run.run, wrapped);
  assert.ok(JSON.parse(config).plugins.includes('github-step-summary'));
  const out = /--out (\S+)/.exec(run.run)![1];
  const upload = steps.find((s) => s.uses?.startsWith('actions/upload-artifact@'));
  assert.ok(upload, 'an upload-artifact step');
  assert.equal(upload.if, 'always()', 'the folder is uploaded when the agent failed too');
  assert.ok(upload.with.path.split('\n').includes(`${out}/`), `the artifact holds ${out}/`);
  const install = steps.find((s) => s.run?.startsWith('npm i -g subtee'));
  assert.ok(install, 'subtee is installed as the README says');
});

const noClaude = !claudeAvailable() && 'the Claude Code CLI is not installed (`npm test` installs it)';

describe('the CI recipe run as the job runs it, on the real Claude Code ' +
  'CLI', { skip: noClaude, timeout: 240_000 }, () => {
  let api: FakeApi;
  before(async () => {
    api = await startFakeApi();
  });
  after(() => api.close());

  /**
   * The "Run the agent" step in a checkout with the recipe's config, as GitHub runs a `run`
   * step (`bash -e`): subtee from this build and the pinned Claude Code on PATH (what the
   * install step puts there), the stand-in API behind `claude`.
   */
  async function runStep(prompt: string) {
    const { steps, config } = recipe();
    const step = steps.find((s) => s.run?.includes('subtee run'))!;
    const cwd = tmpDir();
    const configPath = /--config (\S+)/.exec(step.run!)![1];
    mkdirSync(join(cwd, dirname(configPath)), { recursive: true });
    writeFileSync(join(cwd, configPath), config);
    const bin = join(cwd, '.bin');
    mkdirSync(bin);
    writeFileSync(join(bin, 'subtee'), `#!/bin/sh\nexec "${process.execPath}" "${BIN}" "$@"\n`);
    writeFileSync(join(bin, 'claude'), `#!/bin/sh\nexec "${CLAUDE}" "$@"\n`);
    chmodSync(join(bin, 'subtee'), 0o755);
    chmodSync(join(bin, 'claude'), 0o755);
    const { env, cleanup } = claudeCommand({ prompt, apiUrl: api.url });
    const summary = join(cwd, 'summary.md');
    const script = join(cwd, 'step.sh');
    writeFileSync(script, step.run!);
    // Standard input stays open, as a pipe nobody writes to: the step must not wait on it. The
    // stand-in API answers from this process, so the step runs asynchronously.
    const child = spawn('bash', ['--noprofile', '--norc', '-e', script], {
      cwd,
      stdio: ['pipe', 'pipe', 'pipe'],
      env: {
        ...env,
        ...step.env,
        ANTHROPIC_API_KEY: 'sk-test-dummy',
        PROMPT: prompt,
        GITHUB_STEP_SUMMARY: summary,
        PATH: `${bin}:${env.PATH}`,
      },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const [status] = (await once(child, 'close')) as [number | null];
    cleanup();
    const r = { status, stdout, stderr };
    const upload = steps.find((s) => s.uses?.startsWith('actions/upload-artifact@'))!;
    const artifact = upload.with.path.trim().split('\n');
    return { r, cwd, summary, artifact };
  }

  test('a run that completes: exit 0, the tree in ' +
    'the step summary, every artifact path written', async () => {
    const { r, cwd, summary, artifact } = await runStep('SCRIPT:nest:2');
    assert.equal(r.status, 0, r.stderr);
    assert.doesNotMatch(r.stdout, /::error::/);
    for (const path of artifact) assert.ok(existsSync(join(cwd, path)), `${path} exists for the upload`);
    const index = JSON.parse(readFileSync(join(cwd, 'agent-out', 'index.json'), 'utf8'));
    assert.equal(index.channels.length, 3, 'main and a chain of two subagents');
    assert.ok(index.channels.every((c: any) => c.status === 'completed'));
    assert.ok(existsSync(join(cwd, 'agent-out', 'report.html')));
    assert.match(readFileSync(summary, 'utf8'), /^## subtee: 2 subagents — 2 completed, 0 failed/m);
    // What tee kept is what the job's log showed: subtee's stdout, the agents' text.
    assert.match(r.stdout, /report: done\./);
    assert.equal(readFileSync(join(cwd, 'agent-console.txt'), 'utf8'), r.stdout);
  });

  test("an agent that fails: its exit code fails the step, named on the job's page; the folder is " +
    "kept", async () => {
    const { r, cwd, summary, artifact } = await runStep('SCRIPT:fail');
    assert.notEqual(r.status, 0, 'the step fails');
    const subteeCodes = [124, 130, 143, 2, 3, 4];
    assert.ok(!subteeCodes.includes(r.status!), `the agent's own code, not subtee's: ${r.status}`);
    assert.match(r.stdout, new RegExp(`^::error::the agent failed with exit code ${r.status}$`, 'm'));
    for (const path of artifact) assert.ok(existsSync(join(cwd, path)), `${path} exists for the upload`);
    const index = JSON.parse(readFileSync(join(cwd, 'agent-out', 'index.json'), 'utf8'));
    assert.equal(index.channels[0].status, 'failed');
    assert.match(readFileSync(summary, 'utf8'), /^## subtee: /m);
  });
});
