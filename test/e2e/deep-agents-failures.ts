/**
 * A failing Deep Agents run read at once through Deep Agents' own projection and through
 * subtee's, as a program does: the seed's lifecycle pattern (`output` in a try) at every
 * depth, and each spawning call's status. Run as a script (`node deep-agents-failures.js
 * CASE`), it prints what each projection told as JSON: LangChain leaves rejected promises of
 * its own when a run fails, which only a process-wide handler catches.
 */
import { open, SubagentError } from '../../src/index.js';
import { startRun, type Script } from './deep-agents.js';
import { codeBlocks, section } from '../helpers/docs.js';

/** What a program learns of each subagent and of the call that spawned it. */
export interface Told {
  name: string | null;
  id: string;
  /** The spawning call's status, from the parent's `toolCalls`. */
  call: string;
  callError: string | null;
  /** What `output` rejected with; null when it resolved. */
  rejected: {
    message: string;
    subagentError: boolean;
    code?: string;
    status?: string;
    error?: string;
    summary?: string | null;
    outputStatus?: string;
  } | null;
}

interface CallLike {
  readonly callId: string;
  readonly status: Promise<string>;
  readonly error: Promise<unknown>;
}
interface HandleLike {
  readonly name: string | null;
  readonly cause: { readonly tool_call_id: string };
  readonly subagents: AsyncIterable<HandleLike>;
  readonly toolCalls: AsyncIterable<CallLike>;
  readonly output: Promise<unknown>;
}
interface RunLike {
  readonly subagents: AsyncIterable<HandleLike>;
  readonly toolCalls: AsyncIterable<CallLike>;
}

function rejection(err: unknown): NonNullable<Told['rejected']> {
  if (!(err instanceof SubagentError)) return { message: String((err as Error)?.message ?? err), subagentError: false };
  return {
    message: err.message,
    subagentError: true,
    code: err.code,
    status: err.status,
    error: err.error,
    summary: err.summary,
    outputStatus: err.output.status,
  };
}

/**
 * Every subagent at every depth and its spawning call, every projection read at once; and
 * how many of the loops ended by rejecting.
 */
async function tell(run: RunLike): Promise<{ told: Told[]; loopsRejected: number }> {
  const told: Told[] = [];
  let loopsRejected = 0;
  const rejected = () => void loopsRejected++;
  const calls = new Map<string, Promise<{ status: string; error: unknown }>>();
  const work: Promise<unknown>[] = [];
  const readCalls = (iterable: AsyncIterable<CallLike>) =>
    work.push(
      (async () => {
        for await (const call of iterable) {
          calls.set(
            call.callId,
            Promise.all([call.status, call.error]).then(([status, error]) => ({ status, error })),
          );
        }
      })().catch(rejected), // Deep Agents: the run's failure rejects its iterators
    );
  const visit = (sub: HandleLike): void => {
    readCalls(sub.toolCalls);
    work.push(
      (async () => {
        for await (const nested of sub.subagents) visit(nested);
      })().catch(rejected),
    );
    const entry: Told = { name: sub.name, id: sub.cause.tool_call_id, call: '', callError: null, rejected: null };
    told.push(entry);
    work.push(sub.output.then(() => {}, (err: unknown) => (entry.rejected = rejection(err))));
  };
  readCalls(run.toolCalls);
  try {
    for await (const sub of run.subagents) visit(sub);
  } catch {
    rejected();
  }
  for (let seen = 0; seen < work.length; ) {
    const now = work.length;
    await Promise.all(work.slice(seen));
    seen = now;
  }
  for (const entry of told) {
    const call = await calls.get(entry.id);
    entry.call = call?.status ?? 'unseen';
    entry.callError = call?.error === undefined || call.error === null ? null : String(call.error);
  }
  return { told: told.sort((a, b) => a.id.localeCompare(b.id)), loopsRejected };
}

export const FAILURES: Record<string, Script> = {
  'a subagent whose model throws at depth 2': {
    root: { text: 'Delegating.', spawn: [{ type: 'analyst', step: 'a1' }, { type: 'writer', step: 'w-top' }] },
    a1: { text: 'Analyst: asking a researcher.', spawn: [{ type: 'researcher', step: 'r1' }] },
    r1: { text: '', fail: 'factchecker exploded' },
    'w-top': { text: 'Writer top: summary.' },
  },
  'a parallel failure': {
    root: { text: 'Delegating.', spawn: [{ type: 'writer', step: 'wa' }, { type: 'writer', step: 'wb' }] },
    wa: { text: '', fail: 'writer a exploded' },
    wb: { text: 'Writer b: fine.' },
  },
};

/** One run, both projections: Deep Agents' on the run stream, subtee's on the same stream. */
export async function compare(script: Script) {
  const stream = await startRun(script);
  const run = open(stream);
  const runError = (stream.output as Promise<unknown>).then(
    () => null,
    (err: Error) => err.message,
  );
  const [deepAgents, subtee] = await Promise.all([
    tell(stream as unknown as RunLike),
    tell(run as unknown as RunLike),
  ]);
  let done: { resolved: boolean; statuses?: Record<string, string>; code?: string };
  try {
    const index = await run.done;
    const statuses = Object.fromEntries(index.channels.map((c) => [c.id ?? 'main', c.status]));
    done = { resolved: true, statuses };
  } catch (err) {
    done = { resolved: false, code: (err as { code?: string }).code };
  }
  const output = await run.output;
  return {
    own: deepAgents.told,
    ours: subtee.told,
    loopsRejected: { own: deepAgents.loopsRejected, ours: subtee.loopsRejected },
    ownRunError: await runError,
    output: { status: output.status, error: output.error, result: output.result },
    done,
  };
}

/** The lines docs/producers.md gives a Deep Agents program for LangChain's own rejected promises. */
export function rejectionHandler(): string {
  const blocks = codeBlocks(section('docs/producers.md', '## Deep Agents / LangGraph JS'), 'js');
  const handler = blocks.find((block) => block.includes("process.on('unhandledRejection'"));
  if (!handler) throw new Error('docs/producers.md shows no unhandledRejection handler');
  return handler;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  // The program runs the docs' own two lines: without them LangChain's rejections end it.
  new Function('process', 'console', rejectionHandler())(process, console);
  const script = FAILURES[process.argv[2] ?? ''];
  if (!script) throw new Error(`no case ${process.argv[2]}`);
  process.stdout.write(JSON.stringify(await compare(script)) + '\n');
}
