/**
 * A seeded generator of realistic Claude Code stream-json: a main conversation and N
 * subagents nested to depth 3, spawned by Agent tool_use blocks on the parent's channel,
 * interleaved; one line per content block with the message's id and usage repeated; task_*
 * lifecycle lines; ~1% noise lines. `large` averages ~7 KB a line (thinking 2–20 KB, big
 * tool results now and then); `small` averages ~500 B (token deltas, short blocks).
 *
 *   node dist/bench/gen.js --size-mb 200 --fanout 2000 --shape large --seed 1 --out FILE
 */
import { createWriteStream } from 'node:fs';
import { once } from 'node:events';
import { parseArgs } from 'node:util';

export interface GenOptions {
  sizeBytes: number;
  fanout: number;
  shape: 'large' | 'small';
  seed: number;
}

function mulberry32(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = [
  'the of and to in is that for it with as was on be by this are from at or an have not they which',
  'you one all were we when there can if more use out about so what their up into some time would',
  'make like then them these other its has two see could no than been call who now find long down',
  'day did get come made may part over new sound take only little work know place year live me back',
  'give most very after thing our just name good sentence man think say great where help through',
  'much before line right too mean old any same tell boy follow came want show also around form',
  'three small set put end does another well large must big even such because turn here why ask',
  'went men read need land different home us move try kind hand picture again change off play spell',
  'air away animal house point page letter mother answer found study still learn should world',
]
  .join(' ')
  .split(' ');
const EXOTIC = ['é', '—', '→', '✓', '日本語', '🚀', 'naïve', 'Ωmega'];

export function* generate(o: GenOptions): Generator<string> {
  const rnd = mulberry32(o.seed);
  const int = (a: number, b: number) => a + Math.floor(rnd() * (b - a + 1));
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)];
  const prose = (n: number) => {
    let s = '';
    while (s.length < n) s += (rnd() < 0.01 ? pick(EXOTIC) : pick(WORDS)) + (rnd() < 0.08 ? '.\n' : ' ');
    return s.slice(0, n);
  };
  const code = (n: number) => {
    let s = '';
    while (s.length < n)
      s +=
        `const v${int(0, 99)} = "${pick(WORDS)}\\t${pick(WORDS)}";\n` +
        `\tif (x) { return "${pick(WORDS)}"; }\n`;
    return s.slice(0, n);
  };
  const sid = '5f1c2b8e-0000-4000-8000-00000000beef';
  let bytes = 0;
  let msg = 0;
  let tool = 0;
  const ts = () => new Date(Date.UTC(2026, 10, 30, 12, 0, 0) + bytes / 1000).toISOString();
  const emit = (v: Record<string, unknown>) => {
    const line = JSON.stringify(v);
    bytes += line.length + 1;
    return line;
  };
  type Ch = {
    id: string | null;
    depth: number;
    taskId: string;
    spawned: boolean;
    pendingTool: string | null;
  };
  const main: Ch = { id: null, depth: 0, taskId: '', spawned: true, pendingTool: null };
  const live: Ch[] = [main];
  let spawned = 0;
  const toolId = () =>
    `toolu_01${(++tool).toString(36).padStart(6, '0')}${Math.floor(rnd() * 1e12).toString(36)}`;

  const assistant = (ch: Ch, blocks: Record<string, unknown>[]) => {
    const id = `msg_${++msg}`;
    const usage = {
      input_tokens: int(10, 5000),
      output_tokens: int(1, 2000),
      cache_read_input_tokens: int(0, 10000),
    };
    return blocks.map((b) =>
      emit({
        type: 'assistant',
        message: {
          id,
          type: 'message',
          role: 'assistant',
          model: 'claude-sonnet-4-5',
          content: [b],
          stop_reason: null,
          usage,
        },
        parent_tool_use_id: ch.id,
        session_id: sid,
        uuid: `u${bytes}`,
        timestamp: ts(),
      }),
    );
  };
  const user = (ch: Ch, content: unknown, extra: Record<string, unknown> = {}) =>
    emit({
      type: 'user',
      message: { role: 'user', content },
      parent_tool_use_id: ch.id,
      session_id: sid,
      uuid: `u${bytes}`,
      timestamp: ts(),
      ...extra,
    });
  const system = (subtype: string, fields: Record<string, unknown>) =>
    emit({ type: 'system', subtype, ...fields, uuid: `u${bytes}`, session_id: sid });

  yield emit({
    type: 'system',
    subtype: 'init',
    cwd: '/srv/build/checkout',
    session_id: sid,
    tools: ['Task', 'Bash', 'Read'],
    model: 'claude-sonnet-4-5',
    permissionMode: 'bypassPermissions',
    claude_code_version: '2.1.328',
    // A stream's first uuid is its run's identity (index.json run_id): one per kind of stream made.
    uuid: `init-${o.seed}-${o.shape}-${o.fanout}-${o.sizeBytes}`,
  });
  const small = o.shape === 'small';
  while (bytes < o.sizeBytes) {
    // Spawns are spread over the first 35% of the bytes.
    if (
      spawned < o.fanout &&
      rnd() <
        Math.max(
          0.05,
          (o.fanout - spawned) / Math.max(1, (o.sizeBytes * 0.35 - bytes) / (small ? 500 : 7000)),
        )
    ) {
      const parents = live.filter((c) => c.depth < 3 && c.spawned);
      const parent = pick(parents);
      const id = toolId();
      const child: Ch = {
        id,
        depth: parent.depth + 1,
        taskId: `a${spawned.toString(16).padStart(16, '0')}`,
        spawned: true,
        pendingTool: null,
      };
      spawned++;
      yield* assistant(parent, [
        {
          type: 'tool_use',
          id,
          name: 'Agent',
          input: {
            description: `task ${spawned}`,
            prompt: prose(int(80, 400)),
            subagent_type: pick(['general-purpose', 'Explore', 'Plan']),
          },
        },
      ]);
      yield system('task_started', {
        task_id: child.taskId,
        tool_use_id: id,
        description: `task ${spawned}`,
        subagent_type: 'general-purpose',
        is_backgrounded: child.depth === 1,
        spawn_depth: child.depth,
        task_type: 'local_agent',
      });
      yield user(child, [{ type: 'text', text: prose(int(80, 400)) }]);
      live.push(child);
      continue;
    }
    const r = rnd();
    if (r < 0.01) {
      yield pick([
        'npm WARN deprecated glob@7.2.3: Glob versions prior to v9 are no longer supported',
        '\x1b[33mhook: pre-commit passed\x1b[0m',
        `{"type":"assistant","message":{"id":"msg_x","content":[{"type":"text","text":"${prose(60)}`,
        '42',
        '',
      ]);
      bytes += 60;
      continue;
    }
    const ch = pick(live);
    if (r < 0.03 && ch.id !== null && live.length > 1 && spawned >= Math.min(o.fanout, 1)) {
      // A subagent ends: its notification, and the parent's tool_result for foreground ones.
      yield system('task_notification', {
        task_id: ch.taskId,
        tool_use_id: ch.id,
        status: rnd() < 0.05 ? 'failed' : 'completed',
        summary: prose(int(40, 200)),
        usage: { total_tokens: int(100, 9000) },
      });
      live.splice(live.indexOf(ch), 1);
      continue;
    }
    if (r < 0.05) {
      yield system('task_progress', {
        task_id: ch.taskId || 'main',
        tool_use_id: ch.id,
        usage: { total_tokens: int(10, 9000), tool_uses: int(0, 9), duration_ms: int(10, 99999) },
        last_tool_name: 'Bash',
      });
      continue;
    }
    if (small && r < 0.6) {
      yield emit({
        type: 'stream_event',
        event: {
          type: 'content_block_delta',
          index: 0,
          delta: { type: 'text_delta', text: prose(int(20, 200)) },
        },
        parent_tool_use_id: null,
        session_id: sid,
        uuid: `u${bytes}`,
      });
      continue;
    }
    if (ch.pendingTool) {
      const big = rnd() < (small ? 0.002 : 0.03);
      const out = code(big ? int(50_000, 200_000) : small ? int(50, 600) : int(200, 8000));
      yield user(
        ch,
        [{ type: 'tool_result', tool_use_id: ch.pendingTool, content: out, is_error: rnd() < 0.03 }],
        { tool_use_result: { stdout: out, stderr: '', interrupted: false } },
      );
      ch.pendingTool = null;
      continue;
    }
    const blocks: Record<string, unknown>[] = [];
    if (rnd() < (small ? 0.05 : 0.5))
      blocks.push({
        type: 'thinking',
        thinking: prose(small ? int(200, 1500) : int(2000, 20_000)),
        signature: 'c2lnbmF0dXJl',
      });
    blocks.push({ type: 'text', text: prose(small ? int(50, 500) : int(50, 3000)) });
    if (rnd() < 0.5) {
      ch.pendingTool = toolId();
      const input =
        rnd() < 0.001
          ? { command: 'echo', note: { parent_tool_use_id: 'toolu_trap' } }
          : { command: code(int(20, 300)), description: prose(30) };
      blocks.push({
        type: 'tool_use',
        id: ch.pendingTool,
        name: pick(['Bash', 'Read', 'Grep', 'Edit']),
        input,
      });
    }
    yield* assistant(ch, blocks);
  }
  for (const ch of live)
    if (ch.id !== null)
      yield system('task_notification', {
        task_id: ch.taskId,
        tool_use_id: ch.id,
        status: 'completed',
        summary: 'done',
      });
  yield emit({
    type: 'result',
    subtype: 'success',
    is_error: false,
    result: 'All done.',
    session_id: sid,
    num_turns: msg,
    // No total_cost_usd: a stated bill would have to agree with the generated usage, or subtee
    // rightly warns that it does not (COST_DISAGREES); without one the price table prices it.
  });
}

/**
 * Claude Code's background pattern: `fanout` subagents spawned in the background, the main
 * turn's result (its usage and dollars those of every line, so nothing disagrees), then each
 * subagent's message and its task_notification: every subagent ends after the result.
 */
export function* generateBackground(fanout: number): Generator<string> {
  const sid = '5f1c2b8e-0000-4000-8000-0000000bac46';
  const model = 'claude-sonnet-4-5';
  const line = (v: Record<string, unknown>) => JSON.stringify({ ...v, session_id: sid });
  const assistant = (id: string, parent: string | null, content: unknown[], input: number) => {
    const usage = { input_tokens: input, output_tokens: 1 };
    const message = { id, type: 'message', role: 'assistant', model, content, usage };
    return line({ type: 'assistant', parent_tool_use_id: parent, message });
  };
  const cwd = '/srv/build/checkout';
  yield line({ type: 'system', subtype: 'init', cwd, model, uuid: `init-bg-${fanout}` });
  for (let i = 0; i < fanout; i++) {
    const input = { description: `task ${i}`, prompt: 'look into it', run_in_background: true };
    yield assistant(`msg_m${i}`, null, [{ type: 'tool_use', id: `toolu_bg${i}`, name: 'Agent', input }], 10);
  }
  for (let i = 0; i < fanout; i++) {
    const content = [{ tool_use_id: `toolu_bg${i}`, type: 'tool_result', content: 'Async agent launched' }];
    yield line({ type: 'user', parent_tool_use_id: null, message: { role: 'user', content } });
  }
  const usd = fanout / 1000;
  const modelUsage = { [model]: { inputTokens: 15 * fanout, outputTokens: 40 * fanout, costUSD: usd } };
  yield line({ type: 'result', subtype: 'success', is_error: false, total_cost_usd: usd, modelUsage });
  for (let i = 0; i < fanout; i++) {
    const text = 'found it '.repeat(1 + (i % 9));
    yield assistant(`msg_s${i}`, `toolu_bg${i}`, [{ type: 'text', text }], 5);
    const end = { type: 'system', subtype: 'task_notification', tool_use_id: `toolu_bg${i}` };
    yield line({ ...end, status: 'completed', summary: 'done' });
  }
}

export async function writeStream(o: GenOptions, path: string): Promise<{ lines: number; bytes: number }> {
  return writeLines(generate(o), path);
}

/** Writes generated lines to `path`, a megabyte at a time. */
export async function writeLines(
  generated: Iterable<string>,
  path: string,
): Promise<{ lines: number; bytes: number }> {
  const ws = createWriteStream(path, { highWaterMark: 1 << 20 });
  let lines = 0;
  let bytes = 0;
  let batch: string[] = [];
  let batchLen = 0;
  for (const line of generated) {
    batch.push(line);
    batchLen += line.length;
    lines++;
    if (batchLen > 1 << 20) {
      const chunk = batch.join('\n') + '\n';
      bytes += Buffer.byteLength(chunk);
      if (!ws.write(chunk)) await once(ws, 'drain');
      batch = [];
      batchLen = 0;
    }
  }
  const chunk = batch.join('\n') + '\n';
  bytes += Buffer.byteLength(chunk);
  ws.end(chunk);
  await once(ws, 'finish');
  return { lines, bytes };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const usage =
    'usage: node dist/bench/gen.js [--size-mb 200] [--fanout 50] [--shape large|small] [--seed 1] ' +
    '[--out bench-stream.jsonl]\n';
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      options: {
        'size-mb': { type: 'string', default: '200' },
        fanout: { type: 'string', default: '50' },
        shape: { type: 'string', default: 'large' },
        seed: { type: 'string', default: '1' },
        out: { type: 'string', default: 'bench-stream.jsonl' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (err) {
    process.stderr.write(`gen: ${(err as Error).message}\n${usage}`);
    process.exit(2);
  }
  const numbers = ['size-mb', 'fanout', 'seed'].map((name) => Number(values[name]));
  if (
    values.help ||
    numbers.some((n) => !Number.isFinite(n) || n < 0) ||
    !/^(large|small)$/.test(String(values.shape))
  ) {
    (values.help ? process.stdout : process.stderr).write(usage);
    process.exit(values.help ? 0 : 2);
  }
  const r = await writeStream(
    {
      sizeBytes: numbers[0] * 1024 * 1024,
      fanout: numbers[1],
      shape: values.shape as 'large' | 'small',
      seed: numbers[2],
    },
    String(values.out),
  );
  process.stdout.write(`${r.lines} lines, ${r.bytes} bytes\n`);
}
