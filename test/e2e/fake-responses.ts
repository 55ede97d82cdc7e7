import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { writeFileSync } from 'node:fs';

/**
 * A scripted stand-in for the OpenAI Responses API (`POST /v1/responses`, SSE), for running
 * the real Codex CLI (`codex exec --json`) on loopback. Stateless like fake-api.ts: each
 * request is answered from the script named by the `SCRIPT:name:arg…` directive in the
 * conversation's task and from how many model turns the conversation already has, so
 * concurrent subagent threads need no coordination.
 */

export type CodexStep =
  | { type: 'text'; text: string }
  | { type: 'reasoning'; text: string }
  | { type: 'call'; name: string; args: Record<string, unknown>; namespace?: string };

export type CodexReply =
  | { kind: 'steps'; steps: CodexStep[] }
  | { kind: 'error'; status: number; message: string }
  | { kind: 'silent' };

export interface CodexTurn {
  script: string;
  args: string[];
  /** Model replies the conversation already has. */
  turn: number;
  /** Thread ids the spawn calls returned, and those a wait reported finished. */
  spawned: string[];
  finished: string[];
}

const say = (text: string): CodexReply => ({ kind: 'steps', steps: [{ type: 'text', text }] });
const shell = (cmd: string): CodexStep => ({ type: 'call', name: 'exec_command', args: { cmd } });

/**
 * Codex offers its collaboration tools in a namespace and a call names it. A model outside
 * Codex's own catalog gets the first version (`spawn_agent` returns the new thread's id,
 * `wait_agent` takes ids), whose calls `exec --json` shows as `collab_tool_call` items.
 */
const collab = (name: string, args: Record<string, unknown>): CodexStep => ({
  type: 'call',
  name,
  args,
  namespace: 'multi_agent_v1',
});
const THREAD_ID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;

/** Starts one subagent per directive, waits until each has finished, then reports. */
function delegate(t: CodexTurn, directives: string[], label: string): CodexReply {
  if (t.turn === 0) {
    const calls = directives.map((d) => collab('spawn_agent', { message: `SCRIPT:${d}` }));
    return {
      kind: 'steps',
      steps: [{ type: 'text', text: `Delegating ${directives.length} parts.` }, ...calls],
    };
  }
  const pending = t.spawned.filter((id) => !t.finished.includes(id));
  // Bounded: a wait that never sees a child finish cannot loop for ever.
  if (pending.length > 0 && t.turn <= directives.length + 1) {
    return { kind: 'steps', steps: [collab('wait_agent', { targets: pending, timeout_ms: 120_000 })] };
  }
  return say(`All ${directives.length} parts reported. [${label}]`);
}

export const CODEX_SCRIPTS: Record<string, (t: CodexTurn) => CodexReply> = {
  /** say — one answer, no tools. */
  say: () => ({
    kind: 'steps',
    steps: [
      { type: 'reasoning', text: 'Nothing to run.' },
      { type: 'text', text: 'Plain answer from codex.' },
    ],
  }),
  /** shell:N — one command, then a report. */
  shell(t) {
    const n = t.args[0] ?? '1';
    if (t.turn === 0) {
      return {
        kind: 'steps',
        steps: [
          { type: 'reasoning', text: 'Plan: run one command.' },
          { type: 'text', text: 'Running a command.' },
          shell(`echo hello-from-codex-${n}`),
        ],
      };
    }
    return say(`Command finished. [shell ${n}]`);
  },
  /** long:MS — one command silent for MS (a node timer, recognisable by its text), then a report. */
  long(t) {
    const ms = Number(t.args[0] ?? 1000);
    if (t.turn === 0) {
      return {
        kind: 'steps',
        steps: [
          { type: 'text', text: 'Running a long command.' },
          shell(`node -e "setTimeout(() => console.log('slept ${ms}'), ${ms})"`),
        ],
      };
    }
    return say(`Command finished. [long ${ms}]`);
  },
  /** fail — one command that exits 3. */
  fail(t) {
    if (t.turn === 0)
      return {
        kind: 'steps',
        steps: [{ type: 'text', text: 'Running a failing command.' }, shell('echo doomed-output; exit 3')],
      };
    return say('The command failed. [fail]');
  },
  /** leaf:NAME — a subagent that runs one command and reports. */
  leaf(t) {
    const name = t.args[0] ?? '0';
    if (t.turn === 0)
      return {
        kind: 'steps',
        steps: [{ type: 'text', text: `Leaf ${name} starting.` }, shell(`echo leaf-${name}-ok`)],
      };
    return say(`Leaf ${name} report: done.`);
  },
  /** silent — a request never answered (the server's close ends it). */
  silent: () => ({ kind: 'silent' }),
  /** broken — a subagent whose model request fails. */
  broken: () => ({ kind: 'error', status: 400, message: 'scripted failure for this subagent' }),
  /** spawn:A:B… — the main agent starts one subagent per script (`leaf.0` is `SCRIPT:leaf:0`). */
  spawn: (t) =>
    delegate(t, t.args.length ? t.args.map((c) => c.replace(/\./g, ':')) : ['leaf:0', 'leaf:1'], 'spawn'),
  /** nest:K — a chain of subagents K levels deep below this agent. */
  nest(t) {
    const depth = Number(t.args[0] ?? 0);
    if (depth <= 0) return CODEX_SCRIPTS.leaf({ ...t, args: ['deep'] });
    return delegate(t, [`nest:${depth - 1}`], `nest ${depth}`);
  },
};

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  const textOfPart = (part: any) =>
    typeof part?.text === 'string'
      ? part.text
      : typeof part?.encrypted_content === 'string'
        ? part.encrypted_content
        : '';
  return content.map(textOfPart).join('\n');
}

const ASSISTANT_SIDE = new Set(['function_call', 'custom_tool_call', 'reasoning', 'local_shell_call']);
const isAssistantSide = (item: any) =>
  ASSISTANT_SIDE.has(item?.type) || (item?.type === 'message' && item.role === 'assistant');

/** Picks the script for one request, or null for a request without a directive. */
export function codexTurnOf(body: any): CodexTurn | null {
  const input: any[] = Array.isArray(body?.input) ? body.input : [];
  // A subagent's task is its latest user message carrying a directive; the main agent's is its prompt.
  let directive: RegExpExecArray | null = null;
  for (const item of input) {
    // A subagent's task comes as an `agent_message` item, the main agent's as a user message.
    if ((item?.type !== 'message' && item?.type !== 'agent_message') || item.role === 'assistant') continue;
    const m = /SCRIPT:([a-z]+)((?::[A-Za-z0-9_.-]+)*)/.exec(textOf(item.content));
    if (m && CODEX_SCRIPTS[m[1]]) directive = m;
  }
  if (!directive) return null;
  let turn = 0;
  let inReply = false;
  for (const item of input) {
    if (isAssistantSide(item) && !inReply) turn++;
    inReply = isAssistantSide(item);
  }
  const callNames = new Map<string, string>();
  for (const item of input) if (item?.type === 'function_call') callNames.set(item.call_id, item.name);
  const spawned: string[] = [];
  const finished: string[] = [];
  for (const item of input) {
    if (item?.type !== 'function_call_output') continue;
    const text = typeof item.output === 'string' ? item.output : JSON.stringify(item.output);
    const found = text.match(THREAD_ID) ?? [];
    if (callNames.get(item.call_id) === 'spawn_agent') spawned.push(...found);
    if (callNames.get(item.call_id) === 'wait_agent') finished.push(...found);
  }
  return {
    script: directive[1],
    args: directive[2] ? directive[2].slice(1).split(':') : [],
    turn,
    spawned,
    finished,
  };
}

let ids = 0;
const nextId = (prefix: string) => `${prefix}_${(++ids).toString(36).padStart(6, '0')}`;

/** Tokens each reply reports, fixed so a reader can add them up. */
export const CODEX_USAGE = {
  input_tokens: 100,
  cached_input_tokens: 20,
  output_tokens: 20,
  reasoning_tokens: 5,
};

function sse(res: ServerResponse, type: string, data: Record<string, unknown>): void {
  res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
}

function streamReply(res: ServerResponse, model: string, steps: CodexStep[]): void {
  const responseId = nextId('resp');
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  sse(res, 'response.created', {
    response: { id: responseId, object: 'response', model, status: 'in_progress', output: [] },
  });
  steps.forEach((step, index) => {
    if (step.type === 'text') {
      const id = nextId('msg');
      sse(res, 'response.output_item.added', {
        output_index: index,
        item: { id, type: 'message', role: 'assistant', status: 'in_progress', content: [] },
      });
      for (const piece of step.text.match(/.{1,8}/gs) ?? []) {
        sse(res, 'response.output_text.delta', {
          output_index: index,
          item_id: id,
          content_index: 0,
          delta: piece,
        });
      }
      sse(res, 'response.output_item.done', {
        output_index: index,
        item: {
          id,
          type: 'message',
          role: 'assistant',
          status: 'completed',
          content: [{ type: 'output_text', text: step.text, annotations: [] }],
        },
      });
    } else if (step.type === 'reasoning') {
      const id = nextId('rs');
      const item = { id, type: 'reasoning', summary: [{ type: 'summary_text', text: step.text }] };
      sse(res, 'response.output_item.added', { output_index: index, item: { ...item, summary: [] } });
      sse(res, 'response.output_item.done', { output_index: index, item });
    } else {
      const item = {
        id: nextId('fc'),
        type: 'function_call',
        status: 'completed',
        call_id: nextId('call'),
        name: step.name,
        ...(step.namespace ? { namespace: step.namespace } : {}),
        arguments: JSON.stringify(step.args),
      };
      sse(res, 'response.output_item.added', {
        output_index: index,
        item: { ...item, status: 'in_progress', arguments: '' },
      });
      sse(res, 'response.output_item.done', { output_index: index, item });
    }
  });
  const u = CODEX_USAGE;
  sse(res, 'response.completed', {
    response: {
      id: responseId,
      object: 'response',
      model,
      status: 'completed',
      usage: {
        input_tokens: u.input_tokens,
        input_tokens_details: { cached_tokens: u.cached_input_tokens },
        output_tokens: u.output_tokens,
        output_tokens_details: { reasoning_tokens: u.reasoning_tokens },
        total_tokens: u.input_tokens + u.output_tokens,
      },
    },
  });
  res.end();
}

export interface FakeResponses {
  url: string;
  port: number;
  log: Array<{ path: string; script: string | null; turn: number | null }>;
  close(): Promise<void>;
}

export async function startFakeResponses(): Promise<FakeResponses> {
  const log: FakeResponses['log'] = [];
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
      if (process.env.FAKE_DUMP)
        writeFileSync(`${process.env.FAKE_DUMP}/${Date.now()}-${ids}.json`, JSON.stringify(body));
      if (req.method !== 'POST' || !path.endsWith('/responses')) {
        log.push({ path, script: null, turn: null });
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end('{}');
        return;
      }
      const model = typeof body.model === 'string' ? body.model : 'gpt-5.5';
      const t = codexTurnOf(body);
      log.push({ path, script: t?.script ?? null, turn: t?.turn ?? null });
      const reply = t ? CODEX_SCRIPTS[t.script](t) : say('OK');
      if (reply.kind === 'silent') return;
      if (reply.kind === 'error') {
        res.writeHead(reply.status, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            error: { type: 'invalid_request_error', code: 'scripted', message: reply.message },
          }),
        );
        return;
      }
      streamReply(res, model, reply.steps);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    port,
    log,
    close: async () => {
      server.closeAllConnections?.();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
