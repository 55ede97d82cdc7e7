/**
 * An independent reading of a stream-json recording, written as plainly as possible and
 * sharing no code with subtee: the expected tree and per-channel lines for tests.
 */
export interface OracleChannel {
  id: string | null;
  parent: string | null;
  depth: number | null;
  agent: string | null;
  status: 'running' | 'completed' | 'failed';
  lines: string[];
}

export interface Oracle {
  channels: Map<string | null, OracleChannel>;
  quarantined: string[];
  nonBlank: string[];
}

export function readStream(text: string): Oracle {
  const channels = new Map<string | null, OracleChannel>();
  const get = (id: string | null) => {
    if (!channels.has(id)) channels.set(id, { id, parent: null, depth: id === null ? 0 : null, agent: null, status: 'running', lines: [] });
    return channels.get(id)!;
  };
  get(null);
  const quarantined: string[] = [];
  const nonBlank: string[] = [];
  const spawnParent = new Map<string, string | null>();
  const background = new Set<string>();
  const parsed: any[] = [];
  const rawLines = text.replace(/^\uFEFF/, '').split('\n');
  rawLines.forEach((l0, i) => {
    const l = l0.endsWith('\r') ? l0.slice(0, -1) : l0;
    if (l.trim() === '') return;
    nonBlank.push(l);
    let v: any;
    try {
      v = JSON.parse(l);
    } catch {
      v = undefined;
    }
    const unterminated = i === rawLines.length - 1;
    if (v === null || typeof v !== 'object' || Array.isArray(v) || (unterminated && v === undefined)) {
      quarantined.push(l);
      return;
    }
    const ch = typeof v.parent_tool_use_id === 'string' && v.parent_tool_use_id !== '' ? v.parent_tool_use_id : null;
    get(ch).lines.push(l);
    parsed.push(v);
  });
  for (const v of parsed) {
    const ch = typeof v.parent_tool_use_id === 'string' && v.parent_tool_use_id !== '' ? v.parent_tool_use_id : null;
    for (const b of v.message?.content ?? []) {
      if (v.type === 'assistant' && b?.type === 'tool_use' && (b.name === 'Agent' || b.name === 'Task')) {
        spawnParent.set(b.id, ch);
        const c = get(b.id);
        c.parent = ch;
        c.agent = b.input?.subagent_type ?? c.agent;
      }
    }
    if (v.type === 'system' && v.subtype === 'task_started' && v.is_backgrounded) background.add(v.tool_use_id);
  }
  for (const v of parsed) {
    if (v.type === 'system' && v.subtype === 'init') get(null).status = 'running';
    if (v.type === 'result') get(null).status = v.is_error === true ? 'failed' : 'completed';
    if (v.type === 'system' && v.subtype === 'task_notification' && channels.has(v.tool_use_id)) {
      if (v.status === 'completed' || v.status === 'failed') get(v.tool_use_id).status = v.status;
    }
    if (v.type === 'user') {
      for (const b of v.message?.content ?? []) {
        if (b?.type !== 'tool_result' || !spawnParent.has(b.tool_use_id) || background.has(b.tool_use_id)) continue;
        const text = typeof b.content === 'string' ? b.content : (b.content ?? []).map((x: any) => x.text ?? '').join('');
        if (text.startsWith('Async agent launched')) continue;
        const c = get(b.tool_use_id);
        if (c.status === 'running') c.status = b.is_error ? 'failed' : 'completed';
      }
    }
  }
  const depthOf = (id: string | null, seen = new Set<string | null>()): number | null => {
    if (id === null) return 0;
    if (seen.has(id) || !spawnParent.has(id)) return null;
    seen.add(id);
    const p = depthOf(spawnParent.get(id)!, seen);
    return p === null ? null : p + 1;
  };
  for (const c of channels.values()) c.depth = depthOf(c.id);
  return { channels, quarantined, nonBlank };
}
