/**
 * Re-records the Codex and Gemini CLI scenarios into test/fixtures/other-agents/<cli>/, from
 * the installed CLIs run against the stand-in APIs (part of `npm run record`; one CLI with
 * `node dist/test/e2e/record-other.js codex`).
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CODEX, codexCommand, runCli, type CliCommand } from './codex.js';
import { startFakeGemini } from './fake-gemini.js';
import { startFakeResponses } from './fake-responses.js';
import { GEMINI, geminiCommand } from './gemini.js';
import { CODEX_SCENARIOS, GEMINI_SCENARIOS, type OtherScenario } from './other-scenarios.js';

const FIXTURES = fileURLToPath(new URL('../../../test/fixtures/other-agents/', import.meta.url));

/** Machine-specific temporary paths become neutral ones, so re-recording changes only what the CLI changed. */
export function neutralPaths(text: string): string {
  return text
    .replace(/\/[^"\s]*?subtee-cwd-[A-Za-z0-9]+/g, '/srv/build/checkout')
    .replace(/\/[^"\s]*?subtee-home-[A-Za-z0-9]+/g, '/home/ci')
    .replace(/subtee-cwd-[A-Za-z0-9]+/gi, 'checkout');
}

async function record(
  cli: string,
  version: string,
  scenarios: readonly OtherScenario[],
  command: (prompt: string) => CliCommand,
) {
  const folder = join(FIXTURES, cli);
  mkdirSync(folder, { recursive: true });
  for (const s of scenarios) {
    const r = await runCli(command(s.prompt));
    if (r.code !== 0) throw new Error(`${cli} ${s.name}: exited ${r.code}: ${r.stderr}`);
    const text = neutralPaths(r.stdout.toString('utf8'));
    writeFileSync(join(folder, `${s.name}.jsonl`), text);
    process.stdout.write(`${cli}/${s.name}: ${text.split('\n').length - 1} lines\n`);
  }
  writeFileSync(join(folder, 'VERSION'), `${version}\n`);
}

const only = process.argv[2];
if (!only || only === 'codex') {
  const api = await startFakeResponses();
  try {
    const version = execFileSync(CODEX, ['--version'], { encoding: 'utf8' }).trim();
    await record('codex', version, CODEX_SCENARIOS, (prompt) => codexCommand({ prompt, apiUrl: api.url }));
  } finally {
    await api.close();
  }
}
if (!only || only === 'gemini') {
  const api = await startFakeGemini();
  try {
    const version = execFileSync(GEMINI, ['--version'], { encoding: 'utf8' }).trim();
    await record('gemini', version, GEMINI_SCENARIOS, (prompt) => geminiCommand({ prompt, apiUrl: api.url }));
  } finally {
    await api.close();
  }
}
