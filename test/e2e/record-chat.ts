/**
 * Re-records every Chat Completions scenario from the real GitHub Copilot CLI and opencode
 * into test/fixtures/other-agents/<cli>/<scenario>.jsonl, with each CLI's version beside them:
 *   npm run record            (every CLI, Claude Code included)
 *   node dist/test/e2e/record-chat.js copilot
 *   node dist/test/e2e/record-chat.js killed-mid-step     (one of the timed scenarios)
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chatCliCommand, runChatCli, type ChatCli } from './chat-clis.js';
import { CHAT_SCENARIOS, TIMED_CHAT_SCENARIOS, startFakeChat } from './fake-chat.js';

const FIXTURES = fileURLToPath(new URL('../../../test/fixtures/other-agents/', import.meta.url));
const CLIS: readonly ChatCli[] = ['copilot', 'opencode'];

/**
 * Machine-specific temporary paths become neutral ones, so re-recording changes only what the
 * CLI changed.
 */
export function neutralPaths(text: string): string {
  return text
    .replace(/\/[^"\s]*?subtee-chat-cli-cache/g, '/home/ci/.cache')
    .replace(/\/[^"\s]*?subtee-cwd-[A-Za-z0-9]+/g, '/srv/build/checkout')
    .replace(/\/[^"\s]*?subtee-home-[A-Za-z0-9]+/g, '/home/ci');
}

/** The first line `CLI --version` prints, run the way the recordings run it. */
export function chatCliVersion(cli: ChatCli): string {
  const { argv, env, cwd, cleanup } = chatCliCommand(cli, '', 'http://127.0.0.1:9/v1');
  try {
    return execFileSync(argv[0], ['--version'], { env, cwd, encoding: 'utf8' }).trim().split('\n')[0];
  } finally {
    cleanup();
  }
}

const wanted = process.argv.slice(2);
const api = await startFakeChat();
try {
  for (const cli of CLIS.filter((name) => wanted.length === 0 || wanted.includes(name))) {
    const folder = join(FIXTURES, cli);
    mkdirSync(folder, { recursive: true });
    // Scenarios run one after another: opencode alone keeps both cores of a small machine busy.
    for (const scenario of CHAT_SCENARIOS) {
      const run = await runChatCli(cli, scenario.prompt, api.url);
      if (run.code !== 0) throw new Error(`${cli} ${scenario.name}: exited ${run.code}: ${run.stderr}`);
      const text = neutralPaths(run.stdout.toString('utf8'));
      writeFileSync(join(folder, `${scenario.name}.jsonl`), text);
      process.stdout.write(`${cli}/${scenario.name}: ${text.split('\n').length - 1} lines\n`);
    }
    writeFileSync(join(folder, 'VERSION'), `${chatCliVersion(cli)}\n`);
  }
  for (const scenario of TIMED_CHAT_SCENARIOS) {
    if (wanted.length > 0 && !wanted.includes(scenario.cli) && !wanted.includes(scenario.name)) continue;
    const run = await runChatCli(scenario.cli, scenario.prompt, api.url, 180_000, scenario.killOn);
    if (scenario.killOn ? !run.killed : run.code !== 0)
      throw new Error(`${scenario.cli} ${scenario.name}: exited ${run.code}: ${run.stderr}`);
    const text = neutralPaths(run.stdout.toString('utf8'));
    writeFileSync(join(FIXTURES, scenario.cli, `${scenario.name}.jsonl`), text);
    process.stdout.write(`${scenario.cli}/${scenario.name}: ${text.split('\n').length - 1} lines\n`);
  }
} finally {
  await api.close();
}
