import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startFakeApi, type FakeApi } from './fake-api.js';

/** Where test/e2e/install.mjs (run by `npm test`) installs the agent CLIs. */
const AGENTS = join(fileURLToPath(new URL('../../../', import.meta.url)), 'test', 'e2e', 'node_modules');

/** The pinned Claude Code CLI installed by test/e2e/install.mjs (its native binary). */
export const CLAUDE = join(AGENTS, '.bin', 'claude');

/** The same binary by its place in the package, for programs that start it themselves (the Agent SDK). */
export const CLAUDE_BINARY = join(AGENTS, '@anthropic-ai', 'claude-code', 'bin', 'claude.exe');

export function claudeAvailable(): boolean {
  return existsSync(CLAUDE);
}

export interface ClaudeRun {
  prompt: string;
  apiUrl: string;
  forward?: boolean;
  partial?: boolean;
  extraEnv?: Record<string, string>;
}

/** The command line and environment that run the real CLI headless against the stand-in API. */
export function claudeCommand(o: ClaudeRun): { argv: string[]; env: NodeJS.ProcessEnv; cleanup: () => void } {
  const home = mkdtempSync(join(tmpdir(), 'subtee-home-'));
  const cwd = mkdtempSync(join(tmpdir(), 'subtee-cwd-'));
  const argv = [
    CLAUDE,
    '-p',
    o.prompt,
    '--output-format',
    'stream-json',
    '--verbose',
    '--permission-mode',
    'bypassPermissions',
  ];
  if (o.forward !== false) argv.push('--forward-subagent-text');
  if (o.partial) argv.push('--include-partial-messages');
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: home,
    TMPDIR: process.env.TMPDIR,
    IS_SANDBOX: '1',
    ANTHROPIC_BASE_URL: o.apiUrl,
    ANTHROPIC_API_KEY: 'sk-test-dummy',
    DISABLE_TELEMETRY: '1',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_AUTOUPDATER: '1',
    SUBTEE_E2E_CWD: cwd,
    ...o.extraEnv,
  };
  return {
    argv,
    env,
    cleanup: () => {
      rmSync(home, { recursive: true, force: true });
      rmSync(cwd, { recursive: true, force: true });
    },
  };
}

/** Runs the CLI to the end (or the timeout) and returns its stdout bytes. */
export async function runClaude(
  o: ClaudeRun & { timeoutMs?: number },
): Promise<{ stdout: Buffer; stderr: string; code: number | null }> {
  const { argv, env, cleanup } = claudeCommand(o);
  const child: ChildProcess = spawn(argv[0], argv.slice(1), {
    env,
    cwd: env.SUBTEE_E2E_CWD,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const out: Buffer[] = [];
  let stderr = '';
  child.stdout!.on('data', (d) => out.push(d));
  child.stderr!.on('data', (d) => (stderr += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), o.timeoutMs ?? 60_000);
  const code = await new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)));
  clearTimeout(timer);
  cleanup();
  return { stdout: Buffer.concat(out), stderr, code };
}

/**
 * A suite against the real CLI and one scripted Messages API shared by its tests (skipped,
 * saying why, when the CLI is not installed). `apiUrl()` is the API's address once it is up;
 * `concurrency` tests of the suite run at once (the API answers each conversation by its own
 * messages).
 */
export function describeWithClaude(
  title: string,
  body: (apiUrl: () => string) => void,
  { concurrency = 1 }: { concurrency?: number } = {},
): void {
  describe(
    title,
    {
      concurrency,
      skip: !claudeAvailable() && 'the Claude Code CLI is not installed (`npm test` installs it)',
    },
    () => {
      let api: FakeApi | undefined;
      before(async () => {
        api = await startFakeApi();
      });
      after(async () => {
        await api?.close();
      });
      body(() => api!.url);
    },
  );
}
