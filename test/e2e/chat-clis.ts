import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Where test/e2e/install.mjs (run by `npm test`) installs the agent CLIs. */
const AGENTS = join(fileURLToPath(new URL('../../../', import.meta.url)), 'test', 'e2e', 'node_modules');

/** The pinned GitHub Copilot CLI (its loader starts the platform binary). */
export const COPILOT = join(AGENTS, '.bin', 'copilot');
/** The pinned opencode CLI (the platform binary its install script put in place). */
export const OPENCODE = join(AGENTS, '.bin', 'opencode');

export type ChatCli = 'copilot' | 'opencode';

export const chatCliAvailable = (cli: ChatCli): boolean => existsSync(cli === 'copilot' ? COPILOT : OPENCODE);

/**
 * Long and unique: Copilot masks the provider key wherever it appears in its output, and a
 * short key would mask ordinary words.
 */
const API_KEY = 'subtee-scripted-chat-key-5f0c2a9e7d1b4836a0e9c7f2d4b61a38';

/**
 * Copilot unpacks its runtime (about 235 MB) into its cache folder on first run. That cache
 * holds nothing from a run, so every run shares one; home, config, state and data are a
 * scratch folder per run.
 */
const SHARED_CACHE = join(tmpdir(), 'subtee-chat-cli-cache');

export interface ChatCliCommand {
  argv: string[];
  env: NodeJS.ProcessEnv;
  cwd: string;
  cleanup: () => void;
}

/** The command line and environment that run one CLI headless, offline, against the stand-in server. */
export function chatCliCommand(cli: ChatCli, prompt: string, apiUrl: string): ChatCliCommand {
  const home = mkdtempSync(join(tmpdir(), 'subtee-home-'));
  const cwd = mkdtempSync(join(tmpdir(), 'subtee-cwd-'));
  mkdirSync(SHARED_CACHE, { recursive: true });
  const base: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: home,
    TMPDIR: process.env.TMPDIR,
    XDG_CONFIG_HOME: join(home, '.config'),
    XDG_DATA_HOME: join(home, '.local', 'share'),
    XDG_STATE_HOME: join(home, '.local', 'state'),
    NO_COLOR: '1',
  };
  let argv: string[];
  let env: NodeJS.ProcessEnv;
  if (cli === 'copilot') {
    argv = [
      COPILOT,
      '-p',
      prompt,
      '--output-format',
      'json',
      '--allow-all-tools',
      '--disable-client-telemetry',
    ];
    env = {
      ...base,
      XDG_CACHE_HOME: SHARED_CACHE,
      COPILOT_OFFLINE: 'true',
      COPILOT_PROVIDER_BASE_URL: apiUrl,
      COPILOT_PROVIDER_API_KEY: API_KEY,
      COPILOT_MODEL: 'gpt-5',
    };
  } else {
    argv = [OPENCODE, 'run', '--format', 'json', '-m', 'mock/mock-model', prompt];
    const config = {
      $schema: 'https://opencode.ai/config.json',
      autoupdate: false,
      share: 'disabled',
      provider: {
        mock: {
          npm: '@ai-sdk/openai-compatible',
          name: 'Scripted',
          options: { baseURL: apiUrl, apiKey: API_KEY },
          models: { 'mock-model': { name: 'Scripted model' } },
        },
      },
    };
    env = {
      ...base,
      XDG_CACHE_HOME: join(home, '.cache'),
      OPENCODE_CONFIG_CONTENT: JSON.stringify(config),
      OPENCODE_DISABLE_MODELS_FETCH: 'true',
      OPENCODE_DISABLE_AUTOUPDATE: 'true',
      OPENCODE_DISABLE_LSP_DOWNLOAD: 'true',
      OPENCODE_DISABLE_DEFAULT_PLUGINS: 'true',
      OPENCODE_DISABLE_SHARE: 'true',
    };
  }
  return {
    argv,
    env,
    cwd,
    cleanup: () => {
      rmSync(home, { recursive: true, force: true });
      rmSync(cwd, { recursive: true, force: true });
    },
  };
}

export interface ChatCliRun {
  stdout: Buffer;
  stderr: string;
  code: number | null;
}

/**
 * Runs the CLI to the end (or the timeout) and returns its stdout bytes. With `killOn`, the
 * CLI runs in a process group of its own, killed whole (SIGKILL) once its output matches.
 */
export async function runChatCli(
  cli: ChatCli,
  prompt: string,
  apiUrl: string,
  timeoutMs = 120_000,
  killOn?: RegExp,
): Promise<ChatCliRun & { killed: boolean }> {
  const { argv, env, cwd, cleanup } = chatCliCommand(cli, prompt, apiUrl);
  const detached = killOn !== undefined;
  const child = spawn(argv[0], argv.slice(1), { env, cwd, stdio: ['ignore', 'pipe', 'pipe'], detached });
  const out: Buffer[] = [];
  let stderr = '';
  let killed = false;
  child.stdout.on('data', (data: Buffer) => {
    out.push(data);
    if (killOn && !killed && killOn.test(Buffer.concat(out).toString('utf8'))) {
      killed = true;
      process.kill(-child.pid!, 'SIGKILL');
    }
  });
  child.stderr.on('data', (data) => (stderr += data));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const code = await new Promise<number | null>((resolve) => child.on('close', (status) => resolve(status)));
  clearTimeout(timer);
  cleanup();
  return { stdout: Buffer.concat(out), stderr, code, killed };
}

export interface PipedChatRun {
  /** The stream exactly as subtee received it (captured with --stdout raw). */
  raw: Buffer;
  cliCode: number | null;
  subteeCode: number | null;
  cliStderr: string;
  subteeStderr: string;
}

/** `CLI … | subtee --out OUT --stdout raw -q …`, both real processes joined by a pipe. */
export async function pipeChatCliIntoSubtee(
  bin: string,
  cli: ChatCli,
  prompt: string,
  apiUrl: string,
  out: string,
  subteeArgs: string[] = [],
  timeoutMs = 180_000,
): Promise<PipedChatRun> {
  const { argv, env, cwd, cleanup } = chatCliCommand(cli, prompt, apiUrl);
  const agent = spawn(argv[0], argv.slice(1), { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  const subtee = spawn(process.execPath, [bin, '--out', out, '--stdout', 'raw', '-q', ...subteeArgs], {
    stdio: [agent.stdout, 'pipe', 'pipe'],
  });
  // subtee holds its own copy of the pipe; ours would keep 'close' from ever firing.
  agent.stdout.destroy();
  const raw: Buffer[] = [];
  let subteeStderr = '';
  let cliStderr = '';
  subtee.stdout.on('data', (data: Buffer) => raw.push(data));
  subtee.stderr.on('data', (data) => (subteeStderr += data));
  agent.stderr.on('data', (data) => (cliStderr += data));
  const timer = setTimeout(() => {
    agent.kill('SIGKILL');
    subtee.kill('SIGKILL');
  }, timeoutMs);
  // Once subtee is gone the CLI has no reader; a real pipe would end it at its next write.
  subtee.on('close', () => agent.kill('SIGTERM'));
  const [cliCode, subteeCode] = await Promise.all([
    new Promise<number | null>((resolve) => agent.on('close', resolve)),
    new Promise<number | null>((resolve) => subtee.on('close', resolve)),
  ]);
  clearTimeout(timer);
  cleanup();
  return { raw: Buffer.concat(raw), cliCode, subteeCode, cliStderr, subteeStderr };
}

/** `subtee run [args] -- CLI …`: subtee starts the real CLI itself. */
export async function subteeRunsChatCli(
  bin: string,
  cli: ChatCli,
  prompt: string,
  apiUrl: string,
  out: string,
  subteeArgs: string[] = [],
  timeoutMs = 180_000,
): Promise<{ code: number | null; stderr: string; raw: Buffer }> {
  const { argv, env, cwd, cleanup } = chatCliCommand(cli, prompt, apiUrl);
  const child = spawn(
    process.execPath,
    [bin, 'run', '--out', out, '--stdout', 'raw', '-q', ...subteeArgs, '--', ...argv],
    {
      env,
      cwd,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let stderr = '';
  const raw: Buffer[] = [];
  child.stderr.on('data', (data) => (stderr += data));
  child.stdout.on('data', (data: Buffer) => raw.push(data));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  clearTimeout(timer);
  cleanup();
  return { code, stderr, raw: Buffer.concat(raw) };
}
