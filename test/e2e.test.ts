import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { claudeAvailable } from './e2e/claude.js';
import { startFakeApi, type FakeApi } from './e2e/fake-api.js';
import { pipeClaudeIntoSubtee } from './e2e/pipe.js';
import { SCENARIOS } from './e2e/scenarios.js';
import { BIN, checkOutput, tmpDir } from './helpers.js';

describe('real Claude Code CLI piped into subtee', { skip: !claudeAvailable() && 'the Claude Code CLI is not installed (npm ci installs it)' }, () => {
  let api: FakeApi;
  before(async () => {
    api = await startFakeApi();
  });
  after(async () => {
    await api?.close();
  });

  for (const s of SCENARIOS) {
    test(s.name, async () => {
      const out = join(tmpDir(), 'out');
      const r = await pipeClaudeIntoSubtee(BIN, { prompt: s.prompt, apiUrl: api.url, forward: s.forward, partial: s.partial }, out);
      assert.equal(r.claudeCode, 0, r.claudeStderr);
      assert.equal(r.subteeCode, 0, r.subteeStderr);
      const { index } = checkOutput(r.raw, out, s.name);
      const subs = index.channels.filter((c: any) => c.id !== null);
      assert.equal(subs.length, s.expect.subagents, 'subagents');
      assert.equal(Math.max(...subs.map((c: any) => c.depth)), s.expect.maxDepth, 'max depth');
      assert.ok(subs.every((c: any) => c.depth >= 1 && !c.orphan), 'every subagent placed in the tree');
      assert.equal(subs.filter((c: any) => c.status === 'completed').length, s.expect.completed, 'completed');
      assert.equal(subs.filter((c: any) => c.status === 'failed').length, s.expect.failed, 'failed');
      assert.equal(index.channels[0].status, 'completed', 'main');
      assert.equal(index.claude_code_version, '2.1.328');
    });
  }
});
