/**
 * Records real Claude Code runs together with the transcripts the CLI writes
 * (`CLAUDE_CONFIG_DIR` a fresh folder): test/fixtures/transcripts/<name>/stream.jsonl and
 * config/projects/… , machine paths made neutral as in record.ts.
 *   node dist/test/e2e/record-transcripts.js
 */
import { spawn } from 'node:child_process';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { claudeCommand } from './claude.js';
import { startFakeApi } from './fake-api.js';

const FIXTURES = fileURLToPath(new URL('../../../test/fixtures/transcripts/', import.meta.url));

/** The shapes recorded: nested, a tree, and a background fan-out. */
export const TRANSCRIPT_SCENARIOS = [
  { name: 'nested-depth-3', prompt: 'SCRIPT:nest:3' },
  { name: 'binary-tree-depth-2', prompt: 'SCRIPT:tree:2' },
  { name: 'background-fanout-3', prompt: 'SCRIPT:fanout:3:bg' },
  // Without --forward-subagent-text the stream shows no subagent's messages: only the transcripts do.
  { name: 'forwarding-off-2', prompt: 'SCRIPT:fanout:2:bg', forward: false },
] as const;

const neutral = (text: string) =>
  text
    .replace(/\/[^"\s]*?subtee-cwd-[A-Za-z0-9]+/g, '/srv/build/checkout')
    .replace(/\/[^"\s]*?subtee-home-[A-Za-z0-9]+/g, '/home/ci')
    .replace(/-[^"\s/]*?subtee-cwd-[A-Za-z0-9]+/g, '-srv-build-checkout');

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : [path];
  });
}

const api = await startFakeApi();
try {
  for (const s of TRANSCRIPT_SCENARIOS) {
    const config = mkdtempSync(join(tmpdir(), 'subtee-claude-config-'));
    const { argv, env, cleanup } = claudeCommand({
      prompt: s.prompt,
      apiUrl: api.url,
      forward: 'forward' in s ? s.forward : true,
      extraEnv: { CLAUDE_CONFIG_DIR: config },
    });
    const child = spawn(argv[0], argv.slice(1), {
      env,
      cwd: env.SUBTEE_E2E_CWD,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const out: Buffer[] = [];
    child.stdout.on('data', (d: Buffer) => out.push(d));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    if (code !== 0) throw new Error(`${s.name}: claude exited ${code}`);
    const target = join(FIXTURES, s.name);
    rmSync(target, { recursive: true, force: true });
    mkdirSync(target, { recursive: true });
    writeFileSync(join(target, 'stream.jsonl'), neutral(Buffer.concat(out).toString('utf8')));
    for (const file of files(join(config, 'projects'))) {
      const to = join(target, 'config', 'projects', neutral(relative(join(config, 'projects'), file)));
      mkdirSync(dirname(to), { recursive: true });
      writeFileSync(to, neutral(readFileSync(file, 'utf8')));
    }
    cleanup();
    rmSync(config, { recursive: true, force: true });
    process.stdout.write(`${s.name}: recorded with its transcripts\n`);
  }
} finally {
  await api.close();
}
