/**
 * An independent reading of a stream-json recording, written as plainly as possible and
 * sharing no code with subtee: the expected tree and per-channel lines for tests.
 */
export interface OracleChannel {
  id: string | null;
  parent: string | null;
  depth: number | null;
  agent: string | null;
  status: 'running' | 'completed' | 'failed' | 'stopped';
  /** From task_started, the spawn input or the launch result; null while unknown. */
  background: boolean | null;
  /** The report that ended it: the foreground tool_result's text or task_notification's summary. */
  summary: string | null;
  /** Content blocks of each kind, as far as their fields have the right types. */
  counts: { text: number; thinking: number; tool_use: number; tool_result: number };
  /** Numeric usage fields summed once per API message (message.id), from its last line. */
  usage: Record<string, number>;
  lines: string[];
}

export interface Oracle {
  channels: Map<string | null, OracleChannel>;
  quarantined: string[];
  nonBlank: string[];
}

/**
 * The content blocks of an assistant or user line whose fields have the types their kind
 * needs (a text block's text is a string…); others are not read.
 */
function blocksOf(v: any): any[] {
  const content = v.message?.content;
  if (!v.message || typeof v.message !== 'object' || !Array.isArray(content)) return [];
  return content.filter(
    (b: any) =>
      b !== null &&
      typeof b === 'object' &&
      ((b.type === 'text' && typeof b.text === 'string') ||
        (b.type === 'thinking' && (b.thinking === undefined || typeof b.thinking === 'string')) ||
        (b.type === 'tool_use' && typeof b.id === 'string' && typeof b.name === 'string') ||
        (b.type === 'tool_result' && typeof b.tool_use_id === 'string')),
  );
}

export function readStream(text: string): Oracle {
  const channels = new Map<string | null, OracleChannel>();
  const get = (id: string | null) => {
    if (!channels.has(id)) {
      const counts = { text: 0, thinking: 0, tool_use: 0, tool_result: 0 };
      channels.set(id, {
        id,
        parent: null,
        depth: id === null ? 0 : null,
        agent: null,
        status: 'running',
        background: null,
        summary: null,
        counts,
        usage: {},
        lines: [],
      });
    }
    return channels.get(id)!;
  };
  get(null);
  const quarantined: string[] = [];
  const nonBlank: string[] = [];
  const spawnParent = new Map<string, string | null>();
  const parentOf = (v: any): string | null =>
    typeof v.parent_tool_use_id === 'string' && v.parent_tool_use_id !== '' ? v.parent_tool_use_id : null;
  // A parent naming an earlier call of a tool other than Agent/Task, an id no line opened as a
  // channel before, is that call's channel (a heartbeat of main's Bash belongs to main), until
  // a user line brings the call's result, unless the call runs in the background.
  const otherCalls = new Map<string, { ch: string | null; background: boolean }>();
  const opened = new Set<string>();
  // The tool_result blocks and task notifications that name such a call: no subagent's report.
  const answersCall = new Set<object>();
  const noticeOfCall = new Set<object>();
  const lineChannel = new Map<object, string | null>();
  const place = (v: any): string | null => {
    const parent = parentOf(v);
    let ch = parent;
    if (parent !== null && !opened.has(parent) && otherCalls.has(parent)) ch = otherCalls.get(parent)!.ch;
    else if (parent !== null) opened.add(parent);
    lineChannel.set(v, ch);
    if (v.type === 'assistant') {
      for (const b of blocksOf(v)) {
        if (b.type !== 'tool_use' || b.id === '') continue;
        if (b.name === 'Agent' || b.name === 'Task') opened.add(b.id);
        else if (!opened.has(b.id))
          otherCalls.set(b.id, { ch, background: b.input?.run_in_background === true });
      }
    }
    if (v.type === 'system' && v.subtype === 'task_notification' && otherCalls.has(v.tool_use_id))
      noticeOfCall.add(v);
    if (v.type === 'user') {
      for (const b of blocksOf(v)) {
        if (b.type !== 'tool_result') continue;
        if (otherCalls.has(b.tool_use_id)) answersCall.add(b);
        if (otherCalls.get(b.tool_use_id)?.background === false) otherCalls.delete(b.tool_use_id);
      }
    }
    return ch;
  };
  const chOf = (v: any): string | null => lineChannel.get(v) ?? null;
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
    get(place(v)).lines.push(l);
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
      if (
        b?.type === 'tool_use' &&
        (b.name === 'Agent' || b.name === 'Task') &&
        typeof b.id === 'string' &&
        b.id !== '' &&
        !spawnParent.has(b.id) &&
        !isAncestor(b.id, ch)
      ) {
        spawnParent.set(b.id, ch);
        const c = get(b.id);
        c.parent = ch;
        c.agent = b.input?.subagent_type ?? c.agent;
      }
    }
  }
  // Statuses, background and reports, in arrival order: a channel exists from its first
  // line or its spawn. A report on an id not known yet waits for it, and is read as the
  // channel appears, as if it came then (a launch result ends nothing and is not kept).
  const known = new Set<string | null>([null]);
  const early = new Map<string, Array<() => void>>();
  const later = (id: string, report: () => void) => {
    if (!early.has(id)) early.set(id, []);
    early.get(id)!.push(report);
  };
  const appear = (id: string | null) => {
    if (known.has(id)) return;
    known.add(id);
    for (const report of early.get(id!) ?? []) report();
    early.delete(id!);
  };
  const spawned = new Set<string>();
  const resultText = (b: any) =>
    typeof b.content === 'string'
      ? b.content
      : (Array.isArray(b.content) ? b.content : [])
          .filter((x: any) => typeof x?.text === 'string')
          .map((x: any) => x.text)
          .join('\n');
  const end = (c: OracleChannel, status: 'completed' | 'failed' | 'stopped', summary: string | null) => {
    if (c.status === status && c.summary !== null) return;
    c.status = status;
    c.summary = summary ?? c.summary;
  };
  for (const v of parsed) {
    const ch = chOf(v);
    appear(ch);
    if (v.type === 'assistant') {
      for (const b of blocksOf(v)) {
        if (b.type !== 'tool_use' || spawnParent.get(b.id) !== ch || spawned.has(b.id)) continue;
        spawned.add(b.id);
        const c = get(b.id);
        if (c.background === null && typeof b.input?.run_in_background === 'boolean')
          c.background = b.input.run_in_background;
        appear(b.id);
      }
    }
    if (v.type === 'system' && v.subtype === 'init') get(null).status = 'running';
    if (v.type === 'result') get(null).status = v.is_error === true ? 'failed' : 'completed';
    if (
      v.type === 'system' &&
      v.subtype === 'task_started' &&
      typeof v.tool_use_id === 'string' &&
      known.has(v.tool_use_id) &&
      typeof v.is_backgrounded === 'boolean'
    ) {
      get(v.tool_use_id).background = v.is_backgrounded;
    }
    if (
      v.type === 'system' &&
      v.subtype === 'task_notification' &&
      typeof v.tool_use_id === 'string' &&
      v.tool_use_id !== '' &&
      (v.status === 'completed' || v.status === 'failed' || v.status === 'stopped')
    ) {
      const id = v.tool_use_id;
      const summary = typeof v.summary === 'string' && v.summary !== '' ? v.summary : null;
      const report = () => end(get(id), v.status, summary);
      if (known.has(id)) report();
      else if (!noticeOfCall.has(v)) later(id, report);
    }
    if (v.type === 'user') {
      for (const b of blocksOf(v)) {
        if (b.type !== 'tool_result') continue;
        const text = resultText(b);
        const launch = /^\s*Async agent launched/.test(text);
        const report = () => {
          const c = get(b.tool_use_id);
          if (c.status !== 'running') return;
          if (launch) c.background = true;
          else if (c.background !== true) end(c, b.is_error === true ? 'failed' : 'completed', text);
        };
        if (known.has(b.tool_use_id)) report();
        else if (!answersCall.has(b) && !launch && b.tool_use_id !== '' && !early.has(b.tool_use_id))
          later(b.tool_use_id, report);
      }
    }
  }
  // Counts and usage, per channel. Lines of one API message repeat its usage: the last counts.
  // A message Claude Code wrote itself (model "<synthetic>", an API error as text) is no API
  // call: its usage counts nowhere (docs/cost.md).
  const messageUsage = new Map<OracleChannel, Map<string, Record<string, number>>>();
  for (const v of parsed) {
    const c = get(chOf(v));
    if (v.type === 'assistant') {
      for (const b of blocksOf(v))
        if (b.type in c.counts) c.counts[b.type as keyof OracleChannel['counts']]++;
      const usage = v.message?.usage;
      if (
        typeof v.message?.id === 'string' &&
        v.message.id !== '' &&
        v.message.model !== '<synthetic>' &&
        usage &&
        typeof usage === 'object' &&
        !Array.isArray(usage)
      ) {
        const numbers = Object.fromEntries(
          Object.entries(usage).filter(([, n]) => typeof n === 'number' && Number.isFinite(n)),
        ) as Record<string, number>;
        if (!messageUsage.has(c)) messageUsage.set(c, new Map());
        messageUsage.get(c)!.set(v.message.id, numbers);
      }
    }
    if (v.type === 'user') for (const b of blocksOf(v)) if (b.type === 'tool_result') c.counts.tool_result++;
  }
  for (const [c, byMessage] of messageUsage) {
    for (const numbers of byMessage.values())
      for (const [k, n] of Object.entries(numbers)) c.usage[k] = (c.usage[k] ?? 0) + n;
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
