import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { query, type Options, type SDKMessage } from '@anthropic-ai/claude-agent-sdk';
import { CLAUDE_BINARY } from './claude.js';
import type { Scenario } from './scenarios.js';

/**
 * The Agent SDK's options that run a scenario on the Claude Code binary the project installs,
 * against the scripted API: the same flags and environment as the CLI pipe of that scenario.
 */
export function sdkOptions(
  s: Pick<Scenario, 'forward' | 'partial'>,
  apiUrl: string,
): { options: Options; cleanup: () => void } {
  const home = mkdtempSync(join(tmpdir(), 'subtee-home-'));
  const cwd = mkdtempSync(join(tmpdir(), 'subtee-cwd-'));
  const options: Options = {
    pathToClaudeCodeExecutable: CLAUDE_BINARY,
    cwd,
    forwardSubagentText: s.forward !== false,
    includePartialMessages: s.partial === true,
    permissionMode: 'bypassPermissions',
    allowDangerouslySkipPermissions: true,
    env: {
      PATH: process.env.PATH,
      HOME: home,
      TMPDIR: process.env.TMPDIR,
      IS_SANDBOX: '1',
      ANTHROPIC_BASE_URL: apiUrl,
      ANTHROPIC_API_KEY: 'sk-test-dummy',
      DISABLE_TELEMETRY: '1',
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      DISABLE_AUTOUPDATER: '1',
    },
  };
  return {
    options,
    cleanup: () => {
      rmSync(home, { recursive: true, force: true });
      rmSync(cwd, { recursive: true, force: true });
    },
  };
}

/** A scenario's prompt through the SDK: the `query()` result, its messages not yet read. */
export function sdkQuery(s: Pick<Scenario, 'prompt' | 'forward' | 'partial'>, apiUrl: string) {
  const { options, cleanup } = sdkOptions(s, apiUrl);
  return { messages: query({ prompt: s.prompt, options }), cleanup };
}

export type { SDKMessage };
