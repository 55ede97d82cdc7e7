import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { readCopilot } from './helpers/chat-reading.js';
import {
  checkIndex,
  checkProjection,
  checkReading,
  serverTokens,
  subagentsOf,
  type ChatExpectation,
} from './e2e/chat-check.js';
import { chatCliAvailable, pipeChatCliIntoSubtee, subteeRunsChatCli } from './e2e/chat-clis.js';
import { CHAT_SCENARIOS, startFakeChat } from './e2e/fake-chat.js';
import { BIN, FIXTURES, tmpDir } from './helpers/helpers.js';

const RECORDED = join(FIXTURES, 'other-agents', 'copilot');
/** What `copilot --version` printed when the recordings were made: `GitHub Copilot CLI 1.0.102.` */
const VERSION = /(\d+\.\d+\.\d+)/.exec(readFileSync(join(RECORDED, 'VERSION'), 'utf8'))![1];

/** Copilot runs nested subagents (a subagent is offered `task` too) and streams every one. */
export const COPILOT_EXPECT: Record<string, ChatExpectation> = {
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
    shellExits: [0, 0],
    lastText: 'All 2 parts reported. [spawn]',
  },
  'nested-2': {
    subagents: 2,
    maxDepth: 2,
    completed: 2,
    failed: 0,
    shellExits: [0],
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
    shellExits: [0],
    lastText: 'One part failed, one reported. [failsub]',
  },
};

test('recorded Copilot streams: each scenario as the ' +
  'independent reading sees it, and subtee agrees', async () => {
  for (const scenario of CHAT_SCENARIOS) {
    const file = join(RECORDED, `${scenario.name}.jsonl`);
    const reading = readCopilot(readFileSync(file, 'utf8'));
    checkReading(reading, COPILOT_EXPECT[scenario.name], `recorded ${scenario.name}`);
    assert.equal(
      reading.version,
      VERSION,
      `${scenario.name}: the stream states the version --version printed`,
    );
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
  'real GitHub Copilot CLI into subtee',
  { skip: !chatCliAvailable('copilot') && 'the Copilot CLI is not installed (`npm test` installs it)' },
  () => {
    for (const scenario of CHAT_SCENARIOS) {
      // One scenario runs under `subtee run` with the CLI's own version required; the rest on a pipe.
      const underRun = scenario.name === 'spawn-2';
      test(
        `${scenario.name}${underRun ? ' (subtee run --require-version)' : ''}`,
        { timeout: 240_000 },
        async () => {
          const api = await startFakeChat();
          try {
            const out = join(tmpDir(), 'out');
            let raw: Buffer;
            if (underRun) {
              const run = await subteeRunsChatCli(BIN, 'copilot', scenario.prompt, api.url, out, [
                '--require-version',
                VERSION,
              ]);
              assert.equal(run.code, 0, run.stderr);
              raw = run.raw;
            } else {
              const run = await pipeChatCliIntoSubtee(BIN, 'copilot', scenario.prompt, api.url, out);
              assert.equal(run.cliCode, 0, run.cliStderr);
              assert.equal(run.subteeCode, 0, run.subteeStderr);
              raw = run.raw;
            }
            const reading = readCopilot(raw.toString('utf8'));
            checkReading(reading, COPILOT_EXPECT[scenario.name], scenario.name);
            assert.equal(reading.version, VERSION);
            // The subagents' token totals are what the server sent them and their own subagents.
            for (const sub of subagentsOf(reading).filter((c) => c.status === 'completed')) {
              assert.equal(
                sub.usage.total,
                serverTokens(api.log, reading, sub, true).total,
                `${scenario.name}: tokens of ${sub.id}`,
              );
            }
            checkIndex(reading, out, scenario.name);
            await checkProjection(reading, raw, scenario.name);
          } finally {
            await api.close();
          }
        },
      );
    }

    test(
      '--require-version: a range the CLI does not satisfy is refused (exit 4), piped and under subtee run',
      { timeout: 240_000 },
      async () => {
        const api = await startFakeChat();
        try {
          const piped = await pipeChatCliIntoSubtee(
            BIN,
            'copilot',
            'CHAT:plain',
            api.url,
            join(tmpDir(), 'out'),
            ['--require-version', '>=99'],
          );
          assert.equal(piped.subteeCode, 4, piped.subteeStderr);
          assert.match(
            piped.subteeStderr,
            new RegExp(
              `GitHub Copilot CLI ${VERSION.replace(/\./g, '\\.')} does not satisfy --require-version >=99`,
            ),
          );
          const run = await subteeRunsChatCli(BIN, 'copilot', 'CHAT:plain', api.url, join(tmpDir(), 'out'), [
            '--require-version',
            '>=99',
          ]);
          assert.equal(run.code, 4, run.stderr);
          assert.match(
            run.stderr,
            new RegExp(
              `GitHub Copilot CLI ${VERSION.replace(/\./g, '\\.')} does not satisfy --require-version >=99`,
            ),
          );
        } finally {
          await api.close();
        }
      },
    );
  },
);

test("recorded: a subagent's command printing past Copilot's 30 s sync wait stays in its file", () => {
  const file = join(RECORDED, 'late-subagent-output.jsonl');
  const text = readFileSync(file, 'utf8');
  const reading = readCopilot(text);
  const subagent = subagentsOf(reading);
  assert.equal(subagent.length, 1);
  assert.equal(subagent[0].status, 'completed');
  // The lines after the subagent completed that still carry its agentId.
  const lines = text.split('\n').filter((line) => line !== '');
  const done = lines.findIndex((line) => JSON.parse(line).type === 'subagent.completed');
  const agentId = JSON.parse(lines[done]).agentId;
  const late = lines.slice(done + 1).filter((line) => JSON.parse(line).agentId === agentId);
  assert.ok(late.length >= 10, `late lines: ${late.length}`);
  const out = join(tmpDir(), 'out');
  const run = spawnSync(process.execPath, [BIN, '--out', out, '--stdout', 'none', '-q', file], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  assert.equal(run.status, 0, run.stderr);
  const index = checkIndex(reading, out, 'late-subagent-output');
  const sub = index.channels.find((c: any) => c.id === subagent[0].id);
  const kept = readFileSync(join(out, sub.jsonl), 'utf8');
  for (const line of late) assert.ok(kept.includes(line), 'a late line is in the subagent file');
  assert.ok(!readFileSync(join(out, 'main.jsonl'), 'utf8').includes(`"agentId":"${agentId}"`));
});
