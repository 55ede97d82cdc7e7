import { spawn } from 'node:child_process';
import type { CliCommand } from './codex.js';

export interface PipedCli {
  /** The stream exactly as subtee received it (captured with --stdout raw). */
  raw: Buffer;
  cliCode: number | null;
  subteeCode: number | null;
  subteeStderr: string;
  cliStderr: string;
}

/** `CLI … | subtee --out OUT --stdout raw …`: both real processes joined by a pipe. */
export async function pipeCliIntoSubtee(
  bin: string,
  command: CliCommand,
  out: string,
  subteeArgs: string[] = [],
  timeoutMs = 120_000,
): Promise<PipedCli> {
  const cli = spawn(command.argv[0], command.argv.slice(1), {
    env: command.env,
    cwd: command.cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const subtee = spawn(process.execPath, [bin, '--out', out, '--stdout', 'raw', '-q', ...subteeArgs], {
    stdio: [cli.stdout, 'pipe', 'pipe'],
  });
  // subtee holds its own copy of the pipe; ours would keep 'close' from ever firing.
  cli.stdout.destroy();
  const raw: Buffer[] = [];
  let subteeStderr = '';
  let cliStderr = '';
  subtee.stdout.on('data', (d) => raw.push(d));
  subtee.stderr.on('data', (d) => (subteeStderr += d));
  cli.stderr.on('data', (d) => (cliStderr += d));
  const timer = setTimeout(() => {
    cli.kill('SIGKILL');
    subtee.kill('SIGKILL');
  }, timeoutMs);
  subtee.on('close', () => cli.kill('SIGTERM'));
  const [cliCode, subteeCode] = await Promise.all([
    new Promise<number | null>((r) => cli.on('close', r)),
    new Promise<number | null>((r) => subtee.on('close', r)),
  ]);
  clearTimeout(timer);
  command.cleanup();
  return { raw: Buffer.concat(raw), cliCode, subteeCode, subteeStderr, cliStderr };
}

/** `subtee run [args] -- CLI …`: subtee starts the real CLI itself. */
export async function subteeRunsCli(
  bin: string,
  command: CliCommand,
  out: string,
  subteeArgs: string[] = [],
  timeoutMs = 120_000,
) {
  const args = [bin, 'run', '--out', out, '--stdout', 'raw', '-q', ...subteeArgs, '--', ...command.argv];
  const child = spawn(process.execPath, args, {
    env: command.env,
    cwd: command.cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  const raw: Buffer[] = [];
  child.stderr.on('data', (d) => (stderr += d));
  child.stdout.on('data', (d) => raw.push(d));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const code = await new Promise<number | null>((r) => child.on('close', r));
  clearTimeout(timer);
  command.cleanup();
  return { code, stderr, raw: Buffer.concat(raw) };
}
