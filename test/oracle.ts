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
  const chOf = (v: any): string | null => (typeof v.parent_tool_use_id === 'string' && v.parent_tool_use_id !== '' ? v.parent_tool_use_id : null);
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
    get(chOf(v)).lines.push(l);
    parsed.push(v);
  });
  // Walks up the spawns seen so far: is `id` the channel `from` or one of its ancestors?
  const isAncestor = (id: string, from: string | null) => {
    for (let at = from; at !== null; at = spawnParent.get(at) ?? null) if (at === id) return true;
    return false;
  };
  // Spawns: the first Agent/Task tool_use with an id opens that channel under the line's
  // channel, unless the channel is that line's own channel or one of its ancestors (a cycle).
  for (const v of parsed) {
    const ch = chOf(v);
    if (v.type !== 'assistant') continue;
    for (const b of v.message?.content ?? []) {
      if (b?.type === 'tool_use' && (b.name === 'Agent' || b.name === 'Task') && typeof b.id === 'string' && b.id !== '' && !spawnParent.has(b.id) && !isAncestor(b.id, ch)) {
        spawnParent.set(b.id, ch);
        const c = get(b.id);
        c.parent = ch;
        c.agent = b.input?.subagent_type ?? c.agent;
      }
    }
  }
  // Statuses, in arrival order: a channel exists from its first line or its spawn.
  const known = new Set<string | null>([null]);
  for (const v of parsed) {
    const ch = chOf(v);
    known.add(ch);
    if (v.type === 'assistant') for (const b of v.message?.content ?? []) if (b?.type === 'tool_use' && spawnParent.get(b.id) === ch) known.add(b.id);
    if (v.type === 'system' && v.subtype === 'init') get(null).status = 'running';
    if (v.type === 'result') get(null).status = v.is_error === true ? 'failed' : 'completed';
    if (v.type === 'system' && v.subtype === 'task_started' && known.has(v.tool_use_id) && typeof v.is_backgrounded === 'boolean') {
      if (v.is_backgrounded) background.add(v.tool_use_id);
      else background.delete(v.tool_use_id);
    }
    if (v.type === 'system' && v.subtype === 'task_notification' && known.has(v.tool_use_id) && (v.status === 'completed' || v.status === 'failed')) {
      get(v.tool_use_id).status = v.status;
    }
    if (v.type === 'user') {
      for (const b of v.message?.content ?? []) {
        if (b?.type !== 'tool_result' || !known.has(b.tool_use_id) || b.tool_use_id === null) continue;
        const c = get(b.tool_use_id);
        if (c.status !== 'running') continue;
        const text = typeof b.content === 'string' ? b.content : (Array.isArray(b.content) ? b.content : []).map((x: any) => x?.text ?? '').join('\n');
        if (/^\s*Async agent launched/.test(text)) background.add(b.tool_use_id);
        else if (!background.has(b.tool_use_id)) c.status = b.is_error === true ? 'failed' : 'completed';
      }
    }
  }
  // Steps up to main; a chain that ends at a channel whose spawn was never seen has no depth.
  const depthOf = (id: string | null): number | null => {
    let depth = 0;
    for (let at = id; at !== null; at = spawnParent.get(at)!, depth++) if (!spawnParent.has(at)) return null;
    return depth;
  };
  for (const c of channels.values()) c.depth = depthOf(c.id);
  return { channels, quarantined, nonBlank };
}
