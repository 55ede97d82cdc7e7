/**
 * Re-records every end-to-end scenario from the real CLI into test/fixtures/, so unit tests
 * run on real framing and the fixtures can be re-made when the CLI changes:
 *   npm run record
 * Names after the command record only those scenarios: `node dist/test/e2e/record.js long-bash-heartbeat`.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runClaude, CLAUDE } from './claude.js';
import { startFakeApi } from './fake-api.js';
import { SCENARIOS, TIMED_SCENARIOS } from './scenarios.js';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const FIXTURES = fileURLToPath(new URL('../../../test/fixtures/', import.meta.url));

const version = execFileSync(CLAUDE, ['--version'], { encoding: 'utf8' }).trim();
const only = process.argv.slice(2);
const api = await startFakeApi();
try {
  for (const s of [...SCENARIOS, ...TIMED_SCENARIOS]) {
    if (only.length > 0 && !only.includes(s.name)) continue;
    const r = await runClaude({ prompt: s.prompt, apiUrl: api.url, forward: s.forward, partial: s.partial });
    if (r.code !== 0) throw new Error(`${s.name}: claude exited ${r.code}: ${r.stderr}`);
    // Machine-specific temporary paths become neutral ones, so re-recording changes only what the CLI changed.
    const text = r.stdout
      .toString('utf8')
      .replace(/\/[^"\s]*?subtee-cwd-[A-Za-z0-9]+/g, '/srv/build/checkout')
      .replace(/\/[^"\s]*?subtee-home-[A-Za-z0-9]+/g, '/home/ci')
      .replace(/-[^"\s/]*?subtee-cwd-[A-Za-z0-9]+/g, '-srv-build-checkout');
    writeFileSync(join(FIXTURES, `${s.name}.jsonl`), text);
    process.stdout.write(`${s.name}: ${text.split('\n').length - 1} lines\n`);
  }
  writeFileSync(join(FIXTURES, 'VERSION'), `${version}\n`);
} finally {
  await api.close();
}
