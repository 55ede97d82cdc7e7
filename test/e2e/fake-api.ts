import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A scripted stand-in for the Anthropic Messages API, for running the real Claude Code CLI
 * on loopback. Stateless: each request is answered from the script named by a directive
 * (`SCRIPT:name:arg…`) in the conversation's first user message and from how many assistant
 * turns the conversation already has, so concurrent subagents need no coordination.
 */

export type Block =
  | { type: 'text'; text: string }
  | { type: 'thinking'; thinking: string }
  | { type: 'tool_use'; name: string; input: Record<string, unknown> };

export type Reply =
  | { kind: 'message'; blocks: Block[]; delayMs?: number }
  | { kind: 'error'; status: number; message: string }
  | { kind: 'hang' }
  /** Starts streaming the message, then holds the connection: deltas stop mid-message. */
  | { kind: 'cut'; blocks: Block[] };

export interface Turn {
  script: string;
  args: string[];
  /** Assistant turns the conversation already has. */
  turn: number;
  /** The spawning tool the CLI offers: `Agent`, or `Task` on older versions. */
  spawnTool: string;
  /** The text of the last user message (tool results included), for scripts that branch on it. */
  lastUser: string;
}

const agentCall = (t: Turn, script: string, description: string, background: boolean): Block => ({
  type: 'tool_use',
  name: t.spawnTool,
  input: {
    description,
    prompt: `SCRIPT:${script}${t.spawnTool === 'Task' ? ' TOOL:Task' : ''}`,
    subagent_type: 'general-purpose',
    run_in_background: background,
  },
});

/** What a worker subagent does: think, run Bash, report. */
function worker(t: Turn, name: string): Reply {
  if (t.turn === 0) {
    return {
      kind: 'message',
      blocks: [
        { type: 'thinking', thinking: `Worker ${name} plans: echo, then report.` },
        { type: 'text', text: `Worker ${name} starting.` },
        { type: 'tool_use', name: 'Bash', input: { command: `echo ${name}-ok`, description: 'echo' } },
      ],
    };
  }
  return { kind: 'message', blocks: [{ type: 'text', text: `Worker ${name} report: done.` }] };
}

export const SCRIPTS: Record<string, (t: Turn) => Reply> = {
  /** fanout:N:bg|fg — the main agent delegates to N workers at once. */
  fanout(t) {
    const n = Number(t.args[0] ?? 2);
    const bg = t.args[1] !== 'fg';
    if (t.turn === 0) {
      const calls = Array.from({ length: n }, (_, i) =>
        agentCall(t, `worker:w${i + 1}`, `worker ${i + 1}`, bg),
      );
      return { kind: 'message', blocks: [{ type: 'text', text: `Delegating to ${n} workers.` }, ...calls] };
    }
    return { kind: 'message', blocks: [{ type: 'text', text: `Main turn ${t.turn}: noted.` }] };
  },
  worker: (t) => worker(t, t.args[0] ?? 'w'),
  /** nest:K — a chain K levels deep below this agent. */
  nest(t) {
    const k = Number(t.args[0] ?? 0);
    if (k <= 0) return worker(t, 'leaf');
    if (t.turn === 0) {
      return {
        kind: 'message',
        blocks: [
          { type: 'text', text: `Level ${k}: delegating deeper.` },
          agentCall(t, `nest:${k - 1}`, `level ${k - 1}`, false),
        ],
      };
    }
    return { kind: 'message', blocks: [{ type: 'text', text: `Level ${k} report: done.` }] };
  },
  /** tree:K — a binary tree K levels deep below this agent (2 + 4 + … subagents). */
  tree(t) {
    const k = Number(t.args[0] ?? 0);
    const id = t.args[1] ?? 'r';
    if (k <= 0) return worker(t, id);
    if (t.turn === 0) {
      return {
        kind: 'message',
        blocks: [
          { type: 'text', text: `Node ${id}: splitting.` },
          agentCall(t, `tree:${k - 1}:${id}L`, `node ${id}L`, false),
          agentCall(t, `tree:${k - 1}:${id}R`, `node ${id}R`, false),
        ],
      };
    }
    return { kind: 'message', blocks: [{ type: 'text', text: `Node ${id} report: done.` }] };
  },
  /** mixed — one worker that fails on an API error beside one that completes. */
  mixed(t) {
    if (t.turn === 0) {
      return {
        kind: 'message',
        blocks: [
          { type: 'text', text: 'Two workers, one doomed.' },
          agentCall(t, 'fail', 'doomed worker', true),
          agentCall(t, 'worker:ok', 'healthy worker', true),
        ],
      };
    }
    return { kind: 'message', blocks: [{ type: 'text', text: `Main turn ${t.turn}: noted.` }] };
  },
  fail: () => ({ kind: 'error', status: 400, message: 'scripted failure for this subagent' }),
  /** quiet:MS — the main agent starts one background worker that answers after MS. */
  quiet(t) {
    if (t.turn === 0) {
      return {
        kind: 'message',
        blocks: [
          { type: 'text', text: 'Starting a slow worker.' },
          agentCall(t, `slow:${t.args[0] ?? 3000}`, 'slow worker', true),
        ],
      };
    }
    return { kind: 'message', blocks: [{ type: 'text', text: `Main turn ${t.turn}: noted.` }] };
  },
  slow(t) {
    const reply = worker(t, 'slow');
    if (t.turn === 0 && reply.kind === 'message') reply.delayMs = Number(t.args[0] ?? 3000);
    return reply;
  },
  /** late:MS — the first answer's first byte comes after MS (a slow API, a long thinking block). */
  late(t) {
    const reply: Reply = {
      kind: 'message',
      blocks: [{ type: 'text', text: `Answer after turn ${t.turn}.` }],
    };
    if (t.turn === 0) reply.delayMs = Number(t.args[0] ?? 3000);
    return reply;
  },
  /** bash:MS:TIMEOUT — one Bash command silent for MS, with a declared `timeout` of TIMEOUT ms. */
  bash(t) {
    if (t.turn === 0) {
      const ms = Number(t.args[0] ?? 1000);
      const input: Record<string, unknown> = {
        // A node timer: Claude Code refuses a standalone `sleep`.
        command: `node -e "setTimeout(() => console.log('slept ${ms}'), ${ms})"`,
        description: `silent for ${ms} ms`,
      };
      if (t.args[1]) input.timeout = Number(t.args[1]);
      return {
        kind: 'message',
        blocks: [
          { type: 'text', text: 'Running the long command.' },
          { type: 'tool_use', name: 'Bash', input },
        ],
      };
    }
    return {
      kind: 'message',
      blocks: [{ type: 'text', text: `Command finished: ${t.lastUser.slice(0, 200)}` }],
    };
  },
  /** fgbash:MS:TIMEOUT — a foreground subagent runs the bash script. */
  fgbash(t) {
    if (t.turn === 0) {
      const call = agentCall(t, `bash:${t.args.join(':')}`, 'long build', false);
      return { kind: 'message', blocks: [{ type: 'text', text: 'Delegating the build.' }, call] };
    }
    return { kind: 'message', blocks: [{ type: 'text', text: 'The build subagent reported.' }] };
  },
  /** cut — the answer starts streaming and stops mid-message for ever. */
  cut: () => ({
    kind: 'cut',
    blocks: [{ type: 'text', text: 'This answer never ends because the connection stalls.' }],
  }),
  /** hang — the API never answers (a hung connection). */
  hang: () => ({ kind: 'hang' }),
  /** say:TEXT — answer once with text. */
  say: (t) => ({ kind: 'message', blocks: [{ type: 'text', text: t.args.join(':') || 'ok' }] }),
};

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((b: any) =>
      typeof b?.text === 'string'
        ? b.text
        : typeof b?.content === 'string'
          ? b.content
          : Array.isArray(b?.content)
            ? textOf(b.content)
            : '',
    )
    .join('\n');
}

/** Picks the script for one request, or null for side requests (titles, summaries…). */
export function turnOf(body: any): Turn | null {
  const messages: any[] = Array.isArray(body?.messages) ? body.messages : [];
  const tools: any[] = Array.isArray(body?.tools) ? body.tools : [];
  const first = messages.find((m) => m?.role === 'user');
  if (!first || tools.length === 0) return null;
  const m = /SCRIPT:([a-z]+)((?::[A-Za-z0-9_.-]+)*)/.exec(textOf(first.content));
  if (!m || !SCRIPTS[m[1]]) return null;
  const names = new Set(tools.map((x) => x?.name));
  const users = messages.filter((x) => x?.role === 'user');
  return {
    script: m[1],
    args: m[2] ? m[2].slice(1).split(':') : [],
    turn: messages.filter((x) => x?.role === 'assistant').length,
    spawnTool: /\bTOOL:Task\b/.test(textOf(first.content)) ? 'Task' : names.has('Agent') ? 'Agent' : 'Task',
    lastUser: textOf(users[users.length - 1]?.content),
  };
}

let ids = 0;
// Every tool_use id ends in the same 8 characters: a consumer that tells channels apart by
// an id suffix merges them and fails the scenarios.
const SHARED_TAIL = 'sameTail';
const nextId = (prefix: string) =>
  `${prefix}_01${(++ids).toString(36).padStart(4, '0')}${Math.random().toString(36).slice(2, 10)}${prefix === 'toolu' ? SHARED_TAIL : ''}`;

function sse(res: ServerResponse, event: string, data: unknown): void {
  res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
}

function streamMessage(res: ServerResponse, model: string, blocks: Block[], cut = false): void {
  const hasTool = blocks.some((b) => b.type === 'tool_use');
  res.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    'request-id': nextId('req'),
  });
  sse(res, 'message_start', {
    type: 'message_start',
    message: {
      id: nextId('msg'),
      type: 'message',
      role: 'assistant',
      model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: 10, output_tokens: 1 },
    },
  });
  if (cut) {
    // One block begun and one piece of it sent; the rest never comes.
    sse(res, 'content_block_start', {
      type: 'content_block_start',
      index: 0,
      content_block: { type: 'text', text: '' },
    });
    const text = blocks[0]?.type === 'text' ? blocks[0].text : '...';
    sse(res, 'content_block_delta', {
      type: 'content_block_delta',
      index: 0,
      delta: { type: 'text_delta', text: text.slice(0, 12) },
    });
    return;
  }
  blocks.forEach((b, index) => {
    if (b.type === 'text') {
      sse(res, 'content_block_start', {
        type: 'content_block_start',
        index,
        content_block: { type: 'text', text: '' },
      });
      for (const piece of b.text.match(/.{1,12}/gs) ?? [])
        sse(res, 'content_block_delta', {
          type: 'content_block_delta',
          index,
          delta: { type: 'text_delta', text: piece },
        });
    } else if (b.type === 'thinking') {
      sse(res, 'content_block_start', {
        type: 'content_block_start',
        index,
        content_block: { type: 'thinking', thinking: '', signature: '' },
      });
      sse(res, 'content_block_delta', {
        type: 'content_block_delta',
        index,
        delta: { type: 'thinking_delta', thinking: b.thinking },
      });
      sse(res, 'content_block_delta', {
        type: 'content_block_delta',
        index,
        delta: { type: 'signature_delta', signature: Buffer.from(b.thinking).toString('base64') },
      });
    } else {
      sse(res, 'content_block_start', {
        type: 'content_block_start',
        index,
        content_block: { type: 'tool_use', id: nextId('toolu'), name: b.name, input: {} },
      });
      const json = JSON.stringify(b.input);
      for (let i = 0; i < json.length; i += 20)
        sse(res, 'content_block_delta', {
          type: 'content_block_delta',
          index,
          delta: { type: 'input_json_delta', partial_json: json.slice(i, i + 20) },
        });
    }
    sse(res, 'content_block_stop', { type: 'content_block_stop', index });
  });
  sse(res, 'message_delta', {
    type: 'message_delta',
    delta: { stop_reason: hasTool ? 'tool_use' : 'end_turn', stop_sequence: null },
    usage: { output_tokens: 10 * blocks.length },
  });
  sse(res, 'message_stop', { type: 'message_stop' });
  res.end();
}

function jsonMessage(res: ServerResponse, model: string, text: string): void {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(
    JSON.stringify({
      id: nextId('msg'),
      type: 'message',
      role: 'assistant',
      model,
      content: [{ type: 'text', text }],
      stop_reason: 'end_turn',
      stop_sequence: null,
      usage: { input_tokens: 5, output_tokens: 2 },
    }),
  );
}

export interface FakeApi {
  url: string;
  port: number;
  /** Requests seen, for debugging a scenario. */
  log: Array<{ path: string; script: string | null; turn: number | null }>;
  close(): Promise<void>;
}

export async function startFakeApi(): Promise<FakeApi> {
  const log: FakeApi['log'] = [];
  const hung = new Set<ServerResponse>();
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const path = (req.url ?? '').split('?')[0];
      let body: any = {};
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
      } catch {
        body = {};
      }
      if (req.method !== 'POST' || path !== '/v1/messages') {
        log.push({ path, script: null, turn: null });
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(path.endsWith('count_tokens') ? '{"input_tokens":10}' : '{}');
        return;
      }
      const model = typeof body.model === 'string' ? body.model : 'claude-sonnet-4-5';
      const t = turnOf(body);
      log.push({ path, script: t?.script ?? null, turn: t?.turn ?? null });
      const reply: Reply = t
        ? SCRIPTS[t.script](t)
        : { kind: 'message', blocks: [{ type: 'text', text: 'OK' }] };
      if (reply.kind === 'cut') {
        hung.add(res);
        res.on('close', () => hung.delete(res));
        streamMessage(res, model, reply.blocks, true);
        return;
      }
      if (reply.kind === 'hang') {
        hung.add(res);
        res.on('close', () => hung.delete(res));
        return;
      }
      if (reply.kind === 'error') {
        res.writeHead(reply.status, { 'content-type': 'application/json', 'x-should-retry': 'false' });
        res.end(
          JSON.stringify({ type: 'error', error: { type: 'invalid_request_error', message: reply.message } }),
        );
        return;
      }
      const send = () => {
        if (body.stream) streamMessage(res, model, reply.blocks);
        else
          jsonMessage(
            res,
            model,
            reply.blocks
              .filter((b) => b.type === 'text')
              .map((b) => (b as { text: string }).text)
              .join('\n') || 'OK',
          );
      };
      if (reply.delayMs) setTimeout(send, reply.delayMs).unref();
      else send();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    log,
    close: async () => {
      for (const res of hung) res.destroy();
      server.closeAllConnections?.();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
