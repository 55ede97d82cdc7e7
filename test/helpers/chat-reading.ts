/**
 * An independent reading of GitHub Copilot CLI (`--output-format json`) and opencode
 * (`run --format json`) streams, written plainly and sharing no code with subtee: which agents
 * the stream shows, how they nest and end, their tool calls (shell exit codes), their token
 * counts and the lines each one owns, for the end-to-end tests to compare subtee's output with.
 */

export interface ReadToolCall {
  id: string;
  name: string;
  /** A shell command's exit code, where the stream states it. */
  exitCode: number | null;
  /** Whether the call ended badly (an error, or a shell exit code other than 0); null while running. */
  failed: boolean | null;
}

export interface ReadChannel {
  /** The spawning tool call's id; null for the main agent. */
  id: string | null;
  parent: string | null;
  depth: number;
  status: 'running' | 'completed' | 'failed';
  /** The tool calls this agent made, in order. */
  tools: ReadToolCall[];
  /** Token counts the stream states for this agent (Copilot: a subagent's total; opencode: per step). */
  usage: { input: number; output: number; total: number };
  /** The raw lines of the stream that are this agent's own events. */
  lines: string[];
  /** The agent's last whole message. */
  lastText: string | null;
  /** The prompt it was given (a subagent's: the spawning call's). */
  prompt: string | null;
}

export interface ChatReading {
  producer: 'copilot' | 'opencode';
  /** The CLI's version where the stream states it. */
  version: string | null;
  channels: Map<string | null, ReadChannel>;
  nonBlank: string[];
  /** Lines that are not a JSON object. */
  notObjects: string[];
}

function newChannel(id: string | null, parent: string | null, depth: number): ReadChannel {
  return {
    id,
    parent,
    depth,
    status: 'running',
    tools: [],
    usage: { input: 0, output: 0, total: 0 },
    lines: [],
    lastText: null,
    prompt: null,
  };
}

function splitLines(text: string): {
  nonBlank: string[];
  events: Array<{ line: string; event: any }>;
  notObjects: string[];
} {
  const nonBlank: string[] = [];
  const notObjects: string[] = [];
  const events: Array<{ line: string; event: any }> = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    nonBlank.push(line);
    let event: any;
    try {
      event = JSON.parse(line);
    } catch {
      event = null;
    }
    if (event === null || typeof event !== 'object' || Array.isArray(event)) notObjects.push(line);
    else events.push({ line, event });
  }
  return { nonBlank, events, notObjects };
}

/**
 * Copilot: a `subagent.started` event opens an agent for its `data.toolCallId`; the agent's own
 * events carry its `agentId` (and mostly `data.parentToolCallId`). Its parent is the agent whose
 * `tool.execution_start` started that task call.
 */
export function readCopilot(text: string): ChatReading {
  const { nonBlank, events, notObjects } = splitLines(text);
  const channels = new Map<string | null, ReadChannel>([[null, newChannel(null, null, 0)]]);
  const callOwner = new Map<string, string | null>();
  const agentChannel = new Map<string, string>();
  let version: string | null = null;
  // First pass: which agent started which call, and which call each agent runs.
  for (const { event } of events) {
    const data = event.data ?? {};
    if (event.type === 'subagent.started' && typeof event.agentId === 'string')
      agentChannel.set(event.agentId, data.toolCallId);
  }
  const ownerOf = (event: any): string | null => {
    const data = event.data ?? {};
    // subagent.started/completed/failed name their task call; subagent.configured only its agent.
    if (
      typeof event.type === 'string' &&
      event.type.startsWith('subagent.') &&
      typeof data.toolCallId === 'string'
    ) {
      return data.toolCallId;
    }
    if (typeof data.parentToolCallId === 'string') return data.parentToolCallId;
    if (typeof event.agentId === 'string') return agentChannel.get(event.agentId) ?? null;
    return null;
  };
  for (const { event } of events) {
    const data = event.data ?? {};
    if (event.type === 'tool.execution_start') callOwner.set(data.toolCallId, ownerOf(event));
  }
  for (const { line, event } of events) {
    const data = event.data ?? {};
    const owner = ownerOf(event);
    if (event.type === 'subagent.started') {
      const parent = callOwner.get(data.toolCallId) ?? null;
      channels.set(data.toolCallId, newChannel(data.toolCallId, parent, channels.get(parent)!.depth + 1));
    }
    const channel = channels.get(owner)!;
    channel.lines.push(line);
    if (event.type === 'user.message' && channel.prompt === null) {
      channel.prompt = data.content;
    } else if (event.type === 'session.skills_loaded') {
      for (const skill of data.skills ?? []) {
        const found = /\/pkg\/[^/]+\/(\d+\.\d+\.\d+)\/builtin\//.exec(skill.path ?? '');
        if (found && version === null) version = found[1];
      }
    } else if (event.type === 'tool.execution_start') {
      channel.tools.push({ id: data.toolCallId, name: data.toolName, exitCode: null, failed: null });
    } else if (event.type === 'tool.execution_complete') {
      const call = channel.tools.find((tool) => tool.id === data.toolCallId)!;
      call.exitCode = data.shellExecution?.exitCode ?? null;
      call.failed = data.success === false || (call.exitCode !== null && call.exitCode !== 0);
    } else if (event.type === 'assistant.message' && !event.ephemeral) {
      if (data.content) channel.lastText = data.content;
    } else if (event.type === 'subagent.completed' || event.type === 'subagent.failed') {
      channel.status = event.type === 'subagent.completed' ? 'completed' : 'failed';
      channel.usage.total = data.totalTokens ?? 0;
    } else if (event.type === 'result') {
      channel.status = event.exitCode === 0 ? 'completed' : 'failed';
    }
  }
  return { producer: 'copilot', version, channels, nonBlank, notObjects };
}

/**
 * opencode: every line is the main session's (the children run in sessions of their own that
 * the stream does not print); each `task` tool call is a subagent, ended as its tool state says.
 */
export function readOpencode(text: string): ChatReading {
  const { nonBlank, events, notObjects } = splitLines(text);
  const main = newChannel(null, null, 0);
  const channels = new Map<string | null, ReadChannel>([[null, main]]);
  let failed = false;
  for (const { line, event } of events) {
    main.lines.push(line);
    const part = event.part ?? {};
    if (event.type === 'text') main.lastText = part.text;
    else if (event.type === 'error') failed = true;
    else if (event.type === 'step_finish') {
      main.usage.input += part.tokens?.input ?? 0;
      main.usage.output += part.tokens?.output ?? 0;
      main.usage.total += part.tokens?.total ?? 0;
    } else if (event.type === 'tool_use') {
      const state = part.state ?? {};
      const done = state.status === 'completed' || state.status === 'error';
      const exitCode = typeof state.metadata?.exit === 'number' ? state.metadata.exit : null;
      main.tools.push({
        id: part.callID,
        name: part.tool,
        exitCode,
        failed: done ? state.status === 'error' || (exitCode !== null && exitCode !== 0) : null,
      });
      if (part.tool === 'task') {
        const child = newChannel(part.callID, null, 1);
        child.prompt = state.input?.prompt ?? null;
        child.status =
          state.status === 'completed' ? 'completed' : state.status === 'error' ? 'failed' : 'running';
        const report = /<task_result>\n?([\s\S]*?)\n?<\/task_result>/.exec(state.output ?? '');
        child.lastText = report ? report[1].trim() : null;
        channels.set(part.callID, child);
      }
    }
  }
  main.status = failed ? 'failed' : 'completed';
  return { producer: 'opencode', version: null, channels, nonBlank, notObjects };
}

/** Copilot CLI recordings (under the fixtures) whose subagents state only a total (`totalTokens`). */
export const COPILOT_TOTALS = [
  'other-agents/copilot-spawn',
  ...['failing-subagent', 'late-subagent-output', 'nested-2', 'spawn-2'].map(
    (n) => `other-agents/copilot/${n}`,
  ),
];

/** Each agent's tokens as a Copilot recording states them (a subagent's total), by channel id. */
export function copilotTokens(text: string): Map<string | null, number> {
  const tokens = new Map<string | null, number>();
  for (const [id, c] of readCopilot(text).channels) {
    if (c.usage.input + c.usage.output !== 0) throw new Error('the recording states more than totals');
    tokens.set(id, c.usage.total);
  }
  return tokens;
}
