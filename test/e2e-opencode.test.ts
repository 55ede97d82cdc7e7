import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { readOpencode } from './helpers/chat-reading.js';
import {
  checkIndex,
  checkProjection,
  checkReading,
  serverTokens,
  type ChatExpectation,
} from './e2e/chat-check.js';
import { chatCliAvailable, pipeChatCliIntoSubtee, subteeRunsChatCli } from './e2e/chat-clis.js';
import { CHAT_SCENARIOS, startFakeChat } from './e2e/fake-chat.js';
import { BIN, FIXTURES, tmpDir } from './helpers/helpers.js';

const RECORDED = join(FIXTURES, 'other-agents', 'opencode');
/** What `opencode --version` printed when the recordings were made (the stream never states it). */
const VERSION = readFileSync(join(RECORDED, 'VERSION'), 'utf8').trim();

/**
 * opencode streams the main session only: a subagent is its `task` call and result. A
 * subagent is offered no `task` tool, so the nested scenario stops at depth 1.
 */
const OPENCODE_EXPECT: Record<string, ChatExpectation> = {
  plain: {
    subagents: 0,
    maxDepth: 0,
    completed: 0,
    failed: 0,
    shellExits: [],
    lastText: 'The answer is 42. [plain]',
  },
  shell: {
    subagents: 0,
    maxDepth: 0,
    completed: 0,
    failed: 0,
    shellExits: [0],
    lastText: 'Command finished: hello-from-shell [shell]',
  },
  'spawn-2': {
    subagents: 2,
    maxDepth: 1,
    completed: 2,
    failed: 0,
    shellExits: [],
    lastText: 'All 2 parts reported. [spawn]',
  },
  'nested-2': {
    subagents: 1,
    maxDepth: 1,
    completed: 1,
    failed: 0,
    shellExits: [],
    lastText: 'Level 2 report: done.',
  },
  'failing-command': {
    subagents: 0,
    maxDepth: 0,
    completed: 0,
    failed: 0,
    shellExits: [3],
    lastText: 'The command failed as expected. [failcmd]',
  },
  'failing-subagent': {
    subagents: 2,
    maxDepth: 1,
    completed: 1,
    failed: 1,
    shellExits: [],
    lastText: 'One part failed, one reported. [failsub]',
  },
};

/** The reports the subagents gave, as the main session's task results hold them. */
const REPORTS: Record<string, string[]> = {
  'spawn-2': ['Leaf 0 report: done.', 'Leaf 1 report: done.'],
  'nested-2': ['Leaf level-1-cannot-spawn report: done.'],
  'failing-subagent': ['Leaf ok report: done.'],
};

function checkScenario(text: string, scenario: string, label: string) {
  const reading = readOpencode(text);
  checkReading(reading, OPENCODE_EXPECT[scenario], label);
  const reports = [...reading.channels.values()]
    .filter((c) => c.id !== null && c.lastText !== null)
    .map((c) => c.lastText);
  assert.deepEqual(reports.sort(), REPORTS[scenario] ?? [], `${label}: subagent reports`);
  return reading;
}

test('recorded opencode streams: each scenario as the ' +
  'independent reading sees it, and subtee agrees', async () => {
  for (const scenario of CHAT_SCENARIOS) {
    const file = join(RECORDED, `${scenario.name}.jsonl`);
    const reading = checkScenario(readFileSync(file, 'utf8'), scenario.name, `recorded ${scenario.name}`);
    const out = join(tmpDir(), 'out');
    const run = spawnSync(process.execPath, [BIN, '--out', out, '--stdout', 'none', '-q', file], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    assert.equal(run.status, 0, run.stderr);
    checkIndex(reading, out, `recorded ${scenario.name}`);
    await checkProjection(reading, readFileSync(file), `recorded ${scenario.name}`);
  }
});

describe(
  'real opencode into subtee',
  { skip: !chatCliAvailable('opencode') && 'opencode is not installed (`npm test` installs it)' },
  () => {
    for (const scenario of CHAT_SCENARIOS) {
      const underRun = scenario.name === 'spawn-2';
      test(
        `${scenario.name}${underRun ? ' (subtee run --require-version)' : ''}`,
        { timeout: 300_000 },
        async () => {
          const api = await startFakeChat();
          try {
            const out = join(tmpDir(), 'out');
            let raw: Buffer;
            if (underRun) {
              const run = await subteeRunsChatCli(BIN, 'opencode', scenario.prompt, api.url, out, [
                '--require-version',
                VERSION,
              ]);
              assert.equal(run.code, 0, run.stderr);
              raw = run.raw;
            } else {
              const run = await pipeChatCliIntoSubtee(BIN, 'opencode', scenario.prompt, api.url, out);
              assert.equal(run.cliCode, 0, run.cliStderr);
              assert.equal(run.subteeCode, 0, run.subteeStderr);
              raw = run.raw;
            }
            const reading = checkScenario(raw.toString('utf8'), scenario.name, scenario.name);
            // The main session's step tokens are what the server sent its own conversation.
            const main = reading.channels.get(null)!;
            const sent = serverTokens(api.log, reading, { ...main, prompt: scenario.prompt }, false);
            assert.deepEqual(main.usage, sent, `${scenario.name}: main tokens`);
            checkIndex(reading, out, scenario.name);
            await checkProjection(reading, raw, scenario.name);
          } finally {
            await api.close();
          }
        },
      );
    }
  },
);

describe(
  'real opencode under subtee run: the idle watchdog',
  { skip: !chatCliAvailable('opencode') && 'opencode is not installed (`npm test` installs it)' },
  () => {
    test('a task silent past the idle and model allowances (opencode prints it once it has ended) ' +
      'rides through under the tool allowance', { timeout: 180_000 }, async () => {
      const api = await startFakeChat();
      try {
        const out = join(tmpDir(), 'out');
        // opencode takes up to ~15 s to print its first line: the idle allowance covers that. The
        // subagent's one command then sleeps 32 s, and main's stream is silent all that time.
        const limits = ['--idle-timeout-ms', '25000', '--model-timeout-ms', '1000', '--stall-grace-ms', '0'];
        const flags = [...limits, '--tool-timeout-ms', '120000'];
        const r = await subteeRunsChatCli(BIN, 'opencode', 'CHAT:slowsub:32', api.url, out, flags);
        assert.equal(r.code, 0, r.stderr);
        const events = r.raw.toString('utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
        const text = events.findIndex((e) => e.type === 'text');
        const task = events.findIndex((e) => e.type === 'tool_use' && e.part.tool === 'task');
        assert.equal(task, text + 1, 'nothing printed between the text and the ended task');
        assert.ok(events[task].timestamp - events[text].timestamp >= 32_000, 'silent while the task ran');
        const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
        assert.equal(index.stalled, false);
        assert.deepEqual(
          index.channels.map((c: { status: string }) => c.status),
          ['completed', 'completed'],
        );
      } finally {
        await api.close();
      }
    });
  },
);
