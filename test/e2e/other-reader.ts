/**
 * An independent reading of a Codex (`exec --json`) or Gemini CLI (`stream-json`) stream, from
 * the events' own fields and nothing of subtee's: which subagents the main agent started and
 * how each ended, the shell commands and their outcomes, the tool calls and results, the
 * tokens, how the run ended. Tests compare subtee's index.json with it.
 */

export interface Reading {
  /** Subagents by the id the stream gives them (Codex: thread id; Gemini: the call's tool_id). */
  subagents: Map<string, { prompt: string; status: 'running' | 'completed' | 'failed' }>;
  commands: Array<{ command: string; failed: boolean }>;
  /** The main agent's tool calls and their results (spawns included; a spawn's result is its agent's end). */
  toolUses: number;
  toolResults: number;
  usage: { input_tokens: number; output_tokens: number };
  mainStatus: 'running' | 'completed' | 'failed';
  /** Non-blank lines, as the bytes they were. */
  lines: string[];
}

/** Non-blank lines as byte strings: latin1 keeps every byte whatever the encoding. */
export function linesOf(bytes: Buffer): string[] {
  return bytes
    .toString('latin1')
    .split('\n')
    .filter((line) => line.trim().length > 0);
}

function parsed(lines: string[]): any[] {
  const out: any[] = [];
  for (const line of lines) {
    try {
      out.push(JSON.parse(Buffer.from(line, 'latin1').toString('utf8')));
    } catch {
      // A line that is not JSON is no event; conservation still counts it.
    }
  }
  return out;
}

const CODEX_FAILED_AGENT = new Set(['errored', 'failed', 'shutdown', 'not_found', 'interrupted']);

export function readCodex(bytes: Buffer): Reading {
  const lines = linesOf(bytes);
  const reading: Reading = {
    subagents: new Map(),
    commands: [],
    toolUses: 0,
    toolResults: 0,
    usage: { input_tokens: 0, output_tokens: 0 },
    mainStatus: 'running',
    lines,
  };
  const calls = new Set<string>();
  for (const event of parsed(lines)) {
    if (event.type === 'turn.completed' || event.type === 'turn.failed') {
      reading.mainStatus = event.type === 'turn.completed' ? 'completed' : 'failed';
      reading.usage.input_tokens += event.usage?.input_tokens ?? 0;
      reading.usage.output_tokens += event.usage?.output_tokens ?? 0;
    }
    const item = event.item;
    if (!item || (event.type !== 'item.started' && event.type !== 'item.completed')) continue;
    const isTool = item.type === 'command_execution' || item.type === 'collab_tool_call';
    if (isTool && !calls.has(item.id)) {
      calls.add(item.id);
      reading.toolUses++;
    }
    if (event.type !== 'item.completed') continue;
    if (item.type === 'command_execution') {
      reading.commands.push({ command: item.command, failed: item.exit_code !== 0 });
      reading.toolResults++;
    }
    if (item.type !== 'collab_tool_call') continue;
    if (item.tool === 'spawn_agent') {
      for (const thread of item.receiver_thread_ids)
        reading.subagents.set(thread, { prompt: item.prompt, status: 'running' });
    } else {
      reading.toolResults++;
    }
    for (const [thread, state] of Object.entries<any>(item.agents_states ?? {})) {
      const agent = reading.subagents.get(thread);
      if (!agent || agent.status !== 'running') continue;
      if (state.status === 'completed') agent.status = 'completed';
      else if (CODEX_FAILED_AGENT.has(state.status)) agent.status = 'failed';
      // The spawn's result: its agent has ended.
      if (agent.status !== 'running') reading.toolResults++;
    }
  }
  return reading;
}

export function readGemini(bytes: Buffer): Reading {
  const lines = linesOf(bytes);
  const reading: Reading = {
    subagents: new Map(),
    commands: [],
    toolUses: 0,
    toolResults: 0,
    usage: { input_tokens: 0, output_tokens: 0 },
    mainStatus: 'running',
    lines,
  };
  const shellCalls = new Map<string, string>();
  for (const event of parsed(lines)) {
    if (event.type === 'tool_use') {
      reading.toolUses++;
      if (event.tool_name === 'invoke_agent')
        reading.subagents.set(event.tool_id, { prompt: event.parameters?.prompt, status: 'running' });
      if (event.tool_name === 'run_shell_command') shellCalls.set(event.tool_id, event.parameters?.command);
    }
    if (event.type === 'tool_result') {
      reading.toolResults++;
      const agent = reading.subagents.get(event.tool_id);
      if (agent) agent.status = event.status === 'success' ? 'completed' : 'failed';
      const command = shellCalls.get(event.tool_id);
      if (command !== undefined) reading.commands.push({ command, failed: event.status !== 'success' });
    }
    if (event.type === 'result') {
      reading.mainStatus = event.status === 'success' ? 'completed' : 'failed';
      reading.usage.input_tokens += event.stats?.input_tokens ?? 0;
      reading.usage.output_tokens += event.stats?.output_tokens ?? 0;
    }
  }
  return reading;
}
