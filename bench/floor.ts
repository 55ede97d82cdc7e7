/**
 * The least a tool with subtee's output can do per line, for the benchmark tables: split the
 * input into lines, judge each one a JSON object or not (a line that is not goes to one
 * quarantine file), route it by `parent_tool_use_id`, append it to its channel's `.jsonl` and
 * its content blocks' text to the channel's `.log`, batched per input chunk:
 *   node dist/bench/floor.js parse-all|by-need|bytes OUT < FILE
 *
 * `parse-all` judges every line with `JSON.parse`, as `demux.mjs` does. `by-need` judges every
 * line with subtee's scanner and builds an object only for the lines whose text it writes (a
 * `stream_event` line is routed by the bytes of its `parent_tool_use_id`). `bytes` judges
 * nothing and writes no `.log`: every line is routed by those bytes. None keeps a tree, a cost
 * ledger, what is in flight, an index, a display policy or escapes: each bounds how fast
 * subtee could be with its line judged that way.
 */
import { createReadStream, mkdirSync, openSync, writevSync } from 'node:fs';
import { join } from 'node:path';
import { lineText } from '../src/model/line-view.js';
import { scanJson, Tape, UNDECIDED } from '../src/model/scan.js';

const [mode, out] = process.argv.slice(2);
if (!['parse-all', 'by-need', 'bytes'].includes(mode!) || !out) {
  process.stderr.write('usage: node dist/bench/floor.js parse-all|by-need|bytes OUT < FILE\n');
  process.exit(2);
}
mkdirSync(join(out, 'agents'), { recursive: true });

type Block = { type?: string; text?: string; thinking?: string; name?: string; input?: unknown };
type Channel = { jsonl: number; log: number; lines: Buffer[]; text: string[] };
const channels = new Map<string, Channel>();
const quarantine: Channel = open('quarantine');
const tape = new Tape(1 << 14);
const STREAM_EVENT = Buffer.from('{"type":"stream_event"');
const PARENT = Buffer.from('"parent_tool_use_id":"');
let lines = 0;

function open(name: string): Channel {
  const at = name === 'main' || name === 'quarantine' ? join(out!, name) : join(out!, 'agents', name);
  return { jsonl: openSync(`${at}.jsonl`, 'wx'), log: openSync(`${at}.log`, 'wx'), lines: [], text: [] };
}

function channel(id: string): Channel {
  let c = channels.get(id);
  if (c === undefined) channels.set(id, (c = open(id.replace(/[^\w-]/g, '_'))));
  return c;
}

function parsed(line: Buffer): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(lineText(line));
    const isObject = typeof v === 'object' && v !== null && !Array.isArray(v);
    return isObject ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function idOf(line: Buffer): string {
  const p = line.lastIndexOf(PARENT);
  if (p === -1) return 'main';
  return line.toString('latin1', p + PARENT.length, line.indexOf(0x22, p + PARENT.length));
}

function blockText(b: Block): string {
  if (b.type === 'text') return `${b.text}\n`;
  if (b.type === 'thinking') return `[thinking] ${b.thinking}\n`;
  if (b.type === 'tool_use') return `[tool] ${b.name} ${JSON.stringify(b.input).slice(0, 200)}\n`;
  if (b.type === 'tool_result') {
    const c = (b as { content?: unknown }).content;
    const text = typeof c === 'string' ? c : Array.isArray(c) ? c.map((x) => x?.text ?? '').join('') : '';
    return `[result] ${text.slice(0, 500)}\n`;
  }
  return '';
}

function take(line: Buffer): void {
  lines++;
  let value: Record<string, unknown> | undefined;
  let id: string | undefined;
  if (mode === 'parse-all') value = parsed(line);
  else if (mode === 'bytes') id = idOf(line);
  else {
    tape.reset(1 << 14);
    const at = line[0] === 0x7b ? scanJson(line, 0, line.length, tape) : -1;
    if (at === UNDECIDED) value = parsed(line);
    else if (at >= 0) {
      if (line.subarray(0, STREAM_EVENT.length).equals(STREAM_EVENT)) id = idOf(line);
      else value = parsed(line);
    }
  }
  if (id === undefined && value === undefined) return void quarantine.lines.push(line);
  if (id === undefined) {
    const p = value!.parent_tool_use_id;
    id = typeof p === 'string' && p !== '' ? p : 'main';
  }
  const c = channel(id);
  c.lines.push(line);
  const content = (value?.message as { content?: unknown } | undefined)?.content;
  if (Array.isArray(content)) for (const b of content) c.text.push(blockText(b as Block));
}

const NL = Buffer.from('\n');
function flush(c: Channel): void {
  if (c.lines.length > 0) {
    const parts: Buffer[] = [];
    for (const l of c.lines) parts.push(l, NL);
    for (let k = 0; k < parts.length; k += 1024) writevSync(c.jsonl, parts.slice(k, k + 1024));
    c.lines = [];
  }
  if (c.text.length > 0) {
    writevSync(c.log, [Buffer.from(c.text.join(''))]);
    c.text = [];
  }
}

let rest: Buffer | undefined;
for await (const chunk of createReadStream('', { fd: 0, highWaterMark: 1 << 20 }) as AsyncIterable<Buffer>) {
  const buf = rest ? Buffer.concat([rest, chunk]) : chunk;
  let start = 0;
  for (let nl = buf.indexOf(10); nl !== -1; start = nl + 1, nl = buf.indexOf(10, start))
    if (nl > start) take(buf.subarray(start, nl));
  rest = start < buf.length ? Buffer.from(buf.subarray(start)) : undefined;
  flush(quarantine);
  for (const c of channels.values()) flush(c);
}
if (rest) take(rest);
flush(quarantine);
for (const c of channels.values()) flush(c);
process.stderr.write(`${lines} lines, ${channels.size} channels\n`);
