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
  const claude = spawn(argv[0], argv.slice(1), {
    env,
    cwd: env.SUBTEE_E2E_CWD,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const subtee = spawn(process.execPath, [bin, '--out', out, '--stdout', 'raw', '-q', ...subteeArgs], {
    stdio: [claude.stdout, 'pipe', 'pipe'],
  });
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
  // Once subtee is gone the CLI has no reader; a real pipe would end it at its next write.
  subtee.on('close', () => claude.kill('SIGTERM'));
  const [claudeCode, subteeCode] = await Promise.all([
    new Promise<number | null>((r) => claude.on('close', r)),
    new Promise<number | null>((r) => subtee.on('close', r)),
  ]);
  clearTimeout(timer);
  cleanup();
  return { raw: Buffer.concat(raw), out: join(out), claudeCode, subteeCode, subteeStderr, claudeStderr };
}

/** `subtee run [args] -- claude -p …`: subtee starts the real CLI itself. */
export async function subteeRunsClaude(
  bin: string,
  run: ClaudeRun,
  out: string,
  subteeArgs: string[] = [],
  timeoutMs = 60_000,
) {
  const { argv, env, cleanup } = claudeCommand(run);
  const child = spawn(
    process.execPath,
    [bin, 'run', '--out', out, '--stdout', 'raw', '-q', ...subteeArgs, '--', ...argv],
    { env, cwd: env.SUBTEE_E2E_CWD, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stderr = '';
  const raw: Buffer[] = [];
  child.stderr.on('data', (d) => (stderr += d));
  child.stdout.on('data', (d) => raw.push(d));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const started = Date.now();
  const code = await new Promise<number | null>((r) => child.on('close', r));
  clearTimeout(timer);
  cleanup();
  return { code, stderr, ms: Date.now() - started, raw: Buffer.concat(raw) };
}
