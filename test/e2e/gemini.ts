import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CliCommand } from './codex.js';

/** Where test/e2e/install.mjs (run by `npm test`) installs the agent CLIs. */
const AGENTS = join(fileURLToPath(new URL('../../../', import.meta.url)), 'test', 'e2e', 'node_modules');

/** The pinned Gemini CLI (plain JavaScript, run by the same Node). */
export const GEMINI = join(AGENTS, '.bin', 'gemini');

export function geminiAvailable(): boolean {
  return existsSync(GEMINI);
}

export interface GeminiRun {
  prompt: string;
  /** The stand-in API's origin (no path). */
  apiUrl: string;
  extraEnv?: Record<string, string>;
  /** Keep the scratch HOME after the run (to read what the CLI wrote there). */
  keepHome?: boolean;
}

/** The command line and environment that run `gemini -p … --output-format stream-json` headless. */
export function geminiCommand(o: GeminiRun): CliCommand {
  const home = mkdtempSync(join(tmpdir(), 'subtee-home-'));
  const cwd = mkdtempSync(join(tmpdir(), 'subtee-cwd-'));
  mkdirSync(join(home, '.gemini'));
  // An API key is the one authentication that needs no login; the base URL points it here.
  // Usage statistics (sent to play.googleapis.com) and update checks are off: nothing leaves loopback.
  const settings = {
    security: { auth: { selectedType: 'gemini-api-key' } },
    privacy: { usageStatisticsEnabled: false },
    telemetry: { enabled: false },
    general: { disableAutoUpdate: true, disableUpdateNag: true },
  };
  writeFileSync(join(home, '.gemini', 'settings.json'), JSON.stringify(settings));
  const argv = [
    GEMINI,
    '-p',
    o.prompt,
    '--output-format',
    'stream-json',
    '--yolo',
    '--skip-trust',
    '-m',
    'gemini-2.5-flash',
  ];
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: home,
    TMPDIR: process.env.TMPDIR,
    GOOGLE_GEMINI_BASE_URL: o.apiUrl,
    GEMINI_API_KEY: 'test-dummy-key',
    GEMINI_CLI_NO_RELAUNCH: 'true',
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
