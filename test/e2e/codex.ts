import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Where test/e2e/install.mjs (run by `npm test`) installs the agent CLIs. */
const AGENTS = join(fileURLToPath(new URL('../../../', import.meta.url)), 'test', 'e2e', 'node_modules');

/** The pinned Codex CLI (its launcher; the native binary is the platform package CI adds back). */
export const CODEX = join(AGENTS, '.bin', 'codex');

export function codexAvailable(): boolean {
  return (
    existsSync(CODEX) &&
    existsSync(join(AGENTS, '@openai', `codex-${process.platform}-${process.arch}`))
  );
}

export interface CodexRun {
  prompt: string;
  /** The stand-in API's base URL, ending in /v1. */
  apiUrl: string;
  extraEnv?: Record<string, string>;
  extraArgs?: string[];
  /**
   * A model outside Codex's catalog (the default) is offered the first version of the
   * collaboration tools, whose calls `exec --json` shows; a catalog model such as `gpt-5.5`
   * gets the second, whose spawns the stream does not show.
   */
  model?: string;
  /** Keep the scratch CODEX_HOME after the run (to read what the CLI wrote there). */
  keepHome?: boolean;
}

export interface CliCommand {
  argv: string[];
  env: NodeJS.ProcessEnv;
  cwd: string;
  /** The scratch folders the run uses. */
  home: string;
  cleanup: () => void;
}

/** The command line and environment that run `codex exec --json` headless against the stand-in API. */
export function codexCommand(o: CodexRun): CliCommand {
  const home = mkdtempSync(join(tmpdir(), 'subtee-home-'));
  const cwd = mkdtempSync(join(tmpdir(), 'subtee-cwd-'));
  mkdirSync(join(home, '.codex'));
  const provider = (key: string, value: string) => ['-c', `model_providers.mock.${key}=${value}`];
  const argv = [
    CODEX,
    'exec',
    '--json',
    '--skip-git-repo-check',
    '--dangerously-bypass-approvals-and-sandbox',
    '-m',
    o.model ?? 'mock-model',
    '-c',
    'model_provider=mock',
    ...provider('name', 'mock'),
    ...provider('base_url', o.apiUrl),
    ...provider('wire_api', 'responses'),
    ...provider('env_key', 'SUBTEE_FAKE_KEY'),
    // A failing request fails at once instead of after the default retries.
    ...provider('request_max_retries', '0'),
    ...provider('stream_max_retries', '0'),
    // Subagents may start their own (the default allows one level).
    '-c',
    'agents.max_depth=3',
    // Plugin and app sync (github.com, chatgpt.com), update checks and analytics off: nothing leaves loopback.
    '--disable',
    'plugins',
    '--disable',
    'remote_plugin',
    '--disable',
    'apps',
    '-c',
    'check_for_update_on_startup=false',
    '-c',
    'analytics.enabled=false',
    ...(o.extraArgs ?? []),
    o.prompt,
  ];
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: home,
    CODEX_HOME: join(home, '.codex'),
    TMPDIR: process.env.TMPDIR,
    SUBTEE_FAKE_KEY: 'sk-test-dummy',
    ...o.extraEnv,
  };
  return {
    argv,
    env,
    cwd,
    home,
    cleanup: () => {
      if (!o.keepHome) rmSync(home, { recursive: true, force: true });
      rmSync(cwd, { recursive: true, force: true });
    },
  };
}

/** Runs a CLI command to its end (or the timeout) and returns its stdout bytes. */
export async function runCli(
  command: CliCommand,
  timeoutMs = 90_000,
): Promise<{ stdout: Buffer; stderr: string; code: number | null }> {
  const child = spawn(command.argv[0], command.argv.slice(1), {
    env: command.env,
    cwd: command.cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const out: Buffer[] = [];
  let stderr = '';
  child.stdout.on('data', (d) => out.push(d));
  child.stderr.on('data', (d) => (stderr += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const code = await new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)));
  clearTimeout(timer);
  command.cleanup();
  return { stdout: Buffer.concat(out), stderr, code };
}
