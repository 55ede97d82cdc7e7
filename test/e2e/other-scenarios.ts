/**
 * The scenarios run on the Codex and Gemini CLIs, and what their streams must show. Counts are
 * of what the stream reveals: Codex's `exec --json` shows the main thread's spawns and waits
 * (a grandchild's spawn is only in its parent's rollout file); Gemini CLI shows each
 * `invoke_agent` call and its result, and offers subagents no `invoke_agent` (no nesting).
 */
export interface OtherScenario {
  name: string;
  prompt: string;
  expect: {
    /** Subagents started by the main agent, as the stream shows them. */
    subagents: number;
    /** Of those, how many the stream reports failed. */
    failedSubagents: number;
    /** Shell commands in the stream, and how many of them failed. */
    commands: number;
    failedCommands: number;
  };
}

export const CODEX_SCENARIOS: readonly OtherScenario[] = [
  {
    name: 'plain',
    prompt: 'SCRIPT:say',
    expect: { subagents: 0, failedSubagents: 0, commands: 0, failedCommands: 0 },
  },
  {
    name: 'shell',
    prompt: 'SCRIPT:shell:1',
    expect: { subagents: 0, failedSubagents: 0, commands: 1, failedCommands: 0 },
  },
  {
    name: 'two-subagents',
    prompt: 'SCRIPT:spawn:leaf.0:leaf.1',
    expect: { subagents: 2, failedSubagents: 0, commands: 0, failedCommands: 0 },
  },
  {
    name: 'nested-subagent',
    prompt: 'SCRIPT:nest:2',
    expect: { subagents: 1, failedSubagents: 0, commands: 0, failedCommands: 0 },
  },
  {
    name: 'failing-command',
    prompt: 'SCRIPT:fail',
    expect: { subagents: 0, failedSubagents: 0, commands: 1, failedCommands: 1 },
  },
  {
    name: 'failing-subagent',
    prompt: 'SCRIPT:spawn:leaf.0:broken',
    expect: { subagents: 2, failedSubagents: 1, commands: 0, failedCommands: 0 },
  },
];

export const GEMINI_SCENARIOS: readonly OtherScenario[] = [
  {
    name: 'plain',
    prompt: 'SCRIPT:say',
    expect: { subagents: 0, failedSubagents: 0, commands: 0, failedCommands: 0 },
  },
  {
    name: 'shell',
    prompt: 'SCRIPT:shell:1',
    expect: { subagents: 0, failedSubagents: 0, commands: 1, failedCommands: 0 },
  },
  {
    name: 'two-subagents',
    prompt: 'SCRIPT:spawn:leaf.0:leaf.1',
    expect: { subagents: 2, failedSubagents: 0, commands: 0, failedCommands: 0 },
  },
  // The command exits 3, but the stream's tool_result says `success` with the output only.
  {
    name: 'failing-command',
    prompt: 'SCRIPT:fail',
    expect: { subagents: 0, failedSubagents: 0, commands: 1, failedCommands: 0 },
  },
  // The subagent's model request fails; the CLI tells the main agent so, but the stream's
  // tool_result still says `success` (the failure is in the subagent's chat file only).
  {
    name: 'failing-subagent',
    prompt: 'SCRIPT:spawn:leaf.0:broken',
    expect: { subagents: 2, failedSubagents: 0, commands: 0, failedCommands: 0 },
  },
  // A call for an agent the CLI does not have fails as a tool call: the stream says `error`.
  {
    name: 'unknown-subagent',
    prompt: 'SCRIPT:spawn:leaf.0:missing',
    expect: { subagents: 2, failedSubagents: 1, commands: 0, failedCommands: 0 },
  },
];
