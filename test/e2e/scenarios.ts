/** The end-to-end scenarios: each a prompt for the stand-in API and the CLI flags it runs with. */
export interface Scenario {
  name: string;
  prompt: string;
  forward?: boolean;
  partial?: boolean;
  /** Subagents the run must have, and how each must end. */
  expect: { subagents: number; maxDepth: number; completed: number; failed: number };
}

export const SCENARIOS: readonly Scenario[] = [
  {
    name: 'background-fanout-12',
    prompt: 'SCRIPT:fanout:12:bg',
    expect: { subagents: 12, maxDepth: 1, completed: 12, failed: 0 },
  },
  {
    name: 'foreground-fanout-3',
    prompt: 'SCRIPT:fanout:3:fg',
    expect: { subagents: 3, maxDepth: 1, completed: 3, failed: 0 },
  },
  {
    name: 'nested-depth-3',
    prompt: 'SCRIPT:nest:3',
    expect: { subagents: 3, maxDepth: 3, completed: 3, failed: 0 },
  },
  {
    name: 'nested-depth-3-task-tool',
    prompt: 'SCRIPT:nest:3 TOOL:Task',
    expect: { subagents: 3, maxDepth: 3, completed: 3, failed: 0 },
  },
  {
    name: 'binary-tree-depth-3',
    prompt: 'SCRIPT:tree:3',
    expect: { subagents: 14, maxDepth: 3, completed: 14, failed: 0 },
  },
  {
    name: 'failing-beside-healthy',
    prompt: 'SCRIPT:mixed',
    expect: { subagents: 2, maxDepth: 1, completed: 1, failed: 1 },
  },
  {
    name: 'partial-messages',
    prompt: 'SCRIPT:fanout:2:bg',
    partial: true,
    expect: { subagents: 2, maxDepth: 1, completed: 2, failed: 0 },
  },
  {
    name: 'forwarding-off',
    prompt: 'SCRIPT:fanout:2:bg',
    forward: false,
    expect: { subagents: 2, maxDepth: 1, completed: 2, failed: 0 },
  },
  {
    name: 'quiet-background-worker',
    prompt: 'SCRIPT:quiet:2500',
    expect: { subagents: 1, maxDepth: 1, completed: 1, failed: 0 },
  },
];

/**
 * Scenarios whose point is time itself (a command silent past Claude Code's 30 s heartbeat, a
 * helper that reports 25 s after its spawn): recorded by `npm run record` like the others, and
 * read back from their recordings rather than re-run by every end-to-end pass.
 */
export const TIMED_SCENARIOS: readonly Scenario[] = [
  {
    name: 'long-bash-heartbeat',
    prompt: 'SCRIPT:bash:35000',
    expect: { subagents: 0, maxDepth: 0, completed: 0, failed: 0 },
  },
  {
    name: 'slow-background-helper',
    prompt: 'SCRIPT:quiet:25000',
    expect: { subagents: 1, maxDepth: 1, completed: 1, failed: 0 },
  },
];
