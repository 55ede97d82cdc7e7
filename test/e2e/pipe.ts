import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { claudeCommand, type ClaudeRun } from './claude.js';

export interface PipedRun {
  /** The stream exactly as subtee received it (captured with --stdout raw). */
  raw: Buffer;
  out: string;
  claudeCode: number | null;
  subteeCode: number | null;
  subteeStderr: string;
  claudeStderr: string;
}

/** `claude -p … | subtee --out OUT --stdout raw …`, both real processes joined by a pipe. */
export async function pipeClaudeIntoSubtee(
  bin: string,
  run: ClaudeRun,
  out: string,
  subteeArgs: string[] = [],
  timeoutMs = 60_000,
): Promise<PipedRun> {
  const { argv, env, cleanup } = claudeCommand(run);
  const claude = spawn(argv[0], argv.slice(1), { env, cwd: env.SUBTEE_E2E_CWD, stdio: ['ignore', 'pipe', 'pipe'] });
  const subtee = spawn(process.execPath, [bin, '--out', out, '--stdout', 'raw', '-q', ...subteeArgs], { stdio: [claude.stdout, 'pipe', 'pipe'] });
  // subtee holds its own copy of the pipe; ours would keep 'close' from ever firing.
  claude.stdout.destroy();
  const raw: Buffer[] = [];
  let subteeStderr = '';
  let claudeStderr = '';
  subtee.stdout.on('data', (d) => raw.push(d));
  subtee.stderr.on('data', (d) => (subteeStderr += d));
  claude.stderr.on('data', (d) => (claudeStderr += d));
  const timer = setTimeout(() => {
    claude.kill('SIGKILL');
    subtee.kill('SIGKILL');
  }, timeoutMs);
  const [claudeCode, subteeCode] = await Promise.all([
    new Promise<number | null>((r) => claude.on('close', r)),
    new Promise<number | null>((r) => subtee.on('close', r)),
  ]);
  clearTimeout(timer);
  cleanup();
  return { raw: Buffer.concat(raw), out: join(out), claudeCode, subteeCode, subteeStderr, claudeStderr };
}
