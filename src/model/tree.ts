import type { ChannelEvent } from './record.js';

export type ChannelStatus = 'running' | 'completed' | 'failed';
export type BlockKind = 'text' | 'thinking' | 'tool_use' | 'tool_result';

export interface Channel {
  /** The spawning tool_use id; null for the main conversation. */
  readonly id: string | null;
  parent: string | null;
  /** Lines arrived for this id before (or without) its spawn call. */
  orphan: boolean;
  depth: number | null;
  agent: string | null;
  description: string | null;
  status: ChannelStatus;
  /** From task_started / the spawn input / the launch result; null while unknown. */
  background: boolean | null;
  summary: string | null;
  lines: number;
  counts: Record<BlockKind, number>;
  usage: Record<string, number>;
  firstSeen: string | null;
  lastSeen: string | null;
  children: string[];
  /** A short tag unique within the run, for labels such as `[Explore·a1b2c3]`. */
  readonly tag: string;
  /** Creation order, for stable listings. */
  readonly seq: number;
}

/** Names of the tool that spawns a subagent: `Agent`, and `Task` before 2.1.63. */
export const SPAWN_TOOLS: ReadonlySet<string> = new Set(['Agent', 'Task']);

const ASYNC_LAUNCH = /^\s*Async agent launched/;

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string | null => (typeof v === 'string' && v.length > 0 ? v : null);

/** The channel id of a line: its non-empty `parent_tool_use_id`, else null (main). */
export function channelIdOf(value: Obj): string | null {
  return str(value.parent_tool_use_id);
}

export function contentBlocks(value: Obj): Obj[] {
  const message = value.message;
  if (!isObj(message) || !Array.isArray(message.content)) return [];
  return message.content.filter(isObj);
}

/** Text of a tool_result's content, which is a string or a list of blocks. */
export function resultText(block: Obj): string {
  const c = block.content;
  if (typeof c === 'string') return c;
  if (!Array.isArray(c)) return '';
  let s = '';
  for (const part of c) if (isObj(part) && typeof part.text === 'string') s += (s ? '\n' : '') + part.text;
  return s;
}

/**
 * The subagent tree, rebuilt from the stream alone. Plain logic with no I/O: `route()` takes
 * one parsed line and returns the channel it belongs to plus the tree changes it caused.
 */
export class ChannelTree {
  readonly main: Channel;
  private readonly byId = new Map<string, Channel>();
  /** Per channel, the API message whose lines are arriving and the usage counted for it. */
  private readonly lastMessage = new Map<Channel, { id: string; usage: Record<string, number> }>();
  private readonly tags = new Set<string>();
  private seq = 0;
  sessionId: string | null = null;
  version: string | null = null;
  /** How many `result` lines the run had; only the last one closes it. */
  results = 0;

  constructor() {
    this.main = this.newChannel(null);
    this.main.depth = 0;
  }

  get(id: string | null): Channel | undefined {
    return id === null ? this.main : this.byId.get(id);
  }

  /** Every channel, main first, then in creation order. */
  channels(): Channel[] {
    return [this.main, ...this.byId.values()];
  }

  get size(): number {
    return this.byId.size + 1;
  }

  route(value: Obj): { channel: Channel; events: ChannelEvent[] } {
    const events: ChannelEvent[] = [];
    const channel = this.channelFor(channelIdOf(value), events);
    channel.lines++;
    const ts = str(value.timestamp);
    if (ts) {
      channel.firstSeen ??= ts;
      channel.lastSeen = ts;
    }
    switch (value.type) {
      case 'assistant':
        this.assistant(value, channel, events);
        break;
      case 'user':
        this.user(value, channel, events);
        break;
      case 'system':
        this.system(value, events);
        break;
      case 'result':
        this.results++;
        this.main.status = value.is_error === true ? 'failed' : 'completed';
        break;
    }
    return { channel, events };
  }

  private newChannel(id: string | null): Channel {
    return {
      id,
      parent: null,
      orphan: false,
      depth: null,
      agent: null,
      description: null,
      status: 'running',
      background: null,
      summary: null,
      lines: 0,
      counts: { text: 0, thinking: 0, tool_use: 0, tool_result: 0 },
      usage: {},
      firstSeen: null,
      lastSeen: null,
      children: [],
      tag: id === null ? 'main' : this.uniqueTag(id),
      seq: this.seq++,
    };
  }

  /** The random part of an id starts after `toolu_01`; take 6 characters, more if taken. */
  private uniqueTag(id: string): string {
    const body = id.replace(/^toolu_(01)?/, '') || id;
    for (let n = 6; n < body.length; n++) {
      const tag = body.slice(0, n);
      if (!this.tags.has(tag)) {
        this.tags.add(tag);
        return tag;
      }
    }
    let tag = body;
    for (let i = 2; this.tags.has(tag); i++) tag = `${body}~${i}`;
    this.tags.add(tag);
    return tag;
  }

  private channelFor(id: string | null, events: ChannelEvent[]): Channel {
    if (id === null) return this.main;
    let ch = this.byId.get(id);
    if (!ch) {
      ch = this.newChannel(id);
      ch.orphan = true;
      this.byId.set(id, ch);
      events.push({ type: 'open', channel: ch });
    }
    return ch;
  }

  private spawn(block: Obj, parent: Channel, events: ChannelEvent[]): void {
    const id = str(block.id);
    if (!id || id === parent.id) return;
    const input = isObj(block.input) ? block.input : {};
    let ch = this.byId.get(id);
    const known = ch !== undefined;
    if (!ch) {
      ch = this.newChannel(id);
      this.byId.set(id, ch);
    } else if (!ch.orphan) {
      return; // a replayed spawn line: the tree already has it
    }
    ch.orphan = false;
    ch.parent = parent.id;
    parent.children.push(id);
    ch.agent = str(input.subagent_type) ?? ch.agent;
    ch.description = str(input.description) ?? ch.description;
    if (typeof input.run_in_background === 'boolean' && ch.background === null) ch.background = input.run_in_background;
    this.setDepth(ch, parent.depth === null ? null : parent.depth + 1);
    events.push({ type: known ? 'spawn' : 'open', channel: ch });
  }

  /** Depth flows down to children that were waiting on an unknown ancestor. */
  private setDepth(ch: Channel, depth: number | null): void {
    ch.depth = depth;
    for (const childId of ch.children) {
      const child = this.byId.get(childId);
      if (child) this.setDepth(child, depth === null ? null : depth + 1);
    }
  }

  private assistant(value: Obj, channel: Channel, events: ChannelEvent[]): void {
    for (const block of contentBlocks(value)) {
      const t = block.type;
      if (t === 'text' || t === 'thinking' || t === 'tool_use') channel.counts[t]++;
      if (t === 'tool_use' && typeof block.name === 'string' && SPAWN_TOOLS.has(block.name)) {
        this.spawn(block, channel, events);
      }
    }
    const message = value.message;
    if (isObj(message) && isObj(message.usage)) {
      const key = str(message.id);
      if (key) this.addUsage(channel, key, message.usage);
    }
  }

  /**
   * One API message arrives as consecutive lines, one per block, each repeating the
   * message's usage; the latest line's usage replaces what earlier lines of that message
   * contributed. Only the current message per channel is remembered, so memory does not
   * grow with the length of the run.
   */
  private addUsage(channel: Channel, messageId: string, usage: Obj): void {
    const last = this.lastMessage.get(channel);
    const before = last?.id === messageId ? last.usage : undefined;
    const now: Record<string, number> = {};
    for (const k in usage) {
      const v = usage[k];
      if (typeof v === 'number' && Number.isFinite(v)) {
        now[k] = v;
        channel.usage[k] = (channel.usage[k] ?? 0) + v - (before?.[k] ?? 0);
      }
    }
    if (before) for (const k in before) if (!(k in now)) channel.usage[k] -= before[k];
    if (last) {
      last.id = messageId;
      last.usage = now;
    } else {
      this.lastMessage.set(channel, { id: messageId, usage: now });
    }
  }

  private user(value: Obj, channel: Channel, events: ChannelEvent[]): void {
    for (const block of contentBlocks(value)) {
      if (block.type !== 'tool_result') continue;
      channel.counts.tool_result++;
      const target = this.byId.get(str(block.tool_use_id) ?? '');
      if (!target || target.status !== 'running') continue;
      const text = resultText(block);
      if (ASYNC_LAUNCH.test(text)) {
        target.background = true;
        continue;
      }
      if (target.background === true) continue;
      this.end(target, block.is_error === true ? 'failed' : 'completed', text, events);
    }
  }

  private system(value: Obj, events: ChannelEvent[]): void {
    switch (value.subtype) {
      case 'init':
        this.sessionId = str(value.session_id) ?? this.sessionId;
        this.version = str(value.claude_code_version) ?? this.version;
        if (this.main.status !== 'running') this.main.status = 'running';
        return;
      case 'task_started': {
        const ch = this.byId.get(str(value.tool_use_id) ?? '');
        if (!ch) return;
        if (typeof value.is_backgrounded === 'boolean') ch.background = value.is_backgrounded;
        ch.agent ??= str(value.subagent_type);
        ch.description ??= str(value.description);
        if (ch.depth === null && typeof value.spawn_depth === 'number') this.setDepth(ch, value.spawn_depth);
        return;
      }
      case 'task_notification': {
        const ch = this.byId.get(str(value.tool_use_id) ?? '');
        if (!ch) return;
        const status = value.status === 'completed' ? 'completed' : value.status === 'failed' ? 'failed' : null;
        if (status) this.end(ch, status, str(value.summary), events, true);
      }
    }
  }

  private end(ch: Channel, status: ChannelStatus, summary: string | null, events: ChannelEvent[], final = false): void {
    if (ch.status !== 'running' && !final) return;
    if (ch.status === status && ch.summary !== null) return;
    ch.status = status;
    ch.summary = summary ?? ch.summary;
    events.push({ type: 'status', channel: ch, summary });
  }
}
