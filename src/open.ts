import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { builtinRegistry } from './chain/builtins.js';
import { DEFAULT_STAGES, runChain, type ChainSpec } from './chain/chain.js';
import { definePlugin, KIT_VERSION, Registry } from './chain/plugin.js';
import { createProjectionSink } from './chain/sinks/projection.js';
import { NULL_INPUT } from './chain/stages/object-source.js';
import { Session } from './model/session.js';
import { buildIndex } from './views/index-file.js';
import {
  Projection,
  messagesOf,
  toolCallsOf,
  type Message,
  type ProjectionOptions,
  type RunEvent,
  type SubagentHandle,
  type ToolCall,
} from './views/projection.js';

export interface OpenOptions extends ProjectionOptions {
  /** Also write the output folder (transcripts, `.jsonl` files, `index.json`) here. */
  out?: string;
  /** Write into an `out` folder that already holds files. */
  force?: boolean;
  /**
   * The chain to run, as in a config file; the projection is added as its last sink. By
   * default every built-in stage, plus the files sink when `out` is given.
   */
  spec?: ChainSpec;
  /** A registry with plugins registered; the built-in one by default. */
  registry?: Registry;
  /** Aborts the run: every iterator ends and `done` rejects. */
  signal?: AbortSignal;
  /** The idle watchdog's limits (see the README's "When silence is a hang"); its defaults otherwise. */
  idleTimeoutMs?: number;
  modelTimeoutMs?: number;
  toolTimeoutMs?: number;
  stallGraceMs?: number;
  /** `fail` (the default): a stall rejects `done` with `ERR_STALL`; `warn`: recorded, the run goes on. */
  onStall?: 'fail' | 'warn';
  env?: NodeJS.ProcessEnv;
}

/** What each name of `interleave()` yields. */
export interface Projections {
  messages: Message;
  toolCalls: ToolCall;
  subagents: SubagentHandle;
  events: RunEvent;
}

export type ProjectionName = keyof Projections;

export interface RunProjection {
  /** The run's shared state: counters, warnings, the live tree. */
  readonly session: Session;
  /** Every subagent, at any depth, as it is first seen; from the run's start on every loop. */
  readonly subagents: AsyncIterable<SubagentHandle>;
  /** The main conversation's messages. */
  readonly messages: AsyncIterable<Message>;
  /** The main conversation's tool calls, paired with their results. */
  readonly toolCalls: AsyncIterable<ToolCall>;
  /** Every record routed after the loop starts, in arrival order, with its path. */
  readonly events: AsyncIterable<RunEvent>;
  /** Several projections merged in arrival order, each value tagged with its name. */
  interleave<K extends ProjectionName>(...names: K[]): AsyncIterable<{ [N in K]: [N, Projections[N]] }[K]>;
  /** The run's `index.json` document; rejects with the run's coded error. */
  readonly done: Promise<Record<string, unknown>>;
}

/** What `open()` reads: bytes (a stream, chunks), or message objects (an SDK `query()`, a LangGraph run). */
export type OpenInput = Readable | AsyncIterable<Buffer | Uint8Array | string> | AsyncIterable<unknown>;

/**
 * Runs a stream-json input through subtee's chain and projects it live: subagent handles,
 * messages, tool calls and events as async iterables. The input may be bytes or message
 * objects (the Claude Agent SDK's `query()`, a LangGraph v3 run stream): the first value
 * decides, and objects enter the chain through the object source instead of the line
 * parser. The chain starts at once; iterating is optional, and a projection nobody iterates
 * costs nothing beyond the tree.
 */
export function open(input: OpenInput, options: OpenOptions = {}): RunProjection {
  const session = new Session();
  const projection = new Projection(session, options);
  // A copy: the caller's registry may serve several runs, each with its own projection sink.
  const registry = new Registry();
  const given = options.registry ?? builtinRegistry();
  for (const name of given.names()) registry.add(given.get(name)!);
  registry.add(
    definePlugin({
      name: 'projection',
      kind: 'sink',
      kit: `^${KIT_VERSION}`,
      options: {},
      create: (_options, ctx) => createProjectionSink({ session: ctx.session, projection }),
    }),
  );
  const base: ChainSpec = options.spec ?? {
    stages: DEFAULT_STAGES.map((stage) => ({ ...stage })),
    sinks:
      options.out === undefined ? [] : [{ use: 'files', out: options.out, force: options.force ?? false }],
  };
  const filesOut = base.sinks.find((sink) => sink.use === 'files')?.out;
  const watchdog = {
    idleTimeoutMs: options.idleTimeoutMs,
    modelTimeoutMs: options.modelTimeoutMs,
    toolTimeoutMs: options.toolTimeoutMs,
    graceMs: options.stallGraceMs,
    onStall: options.onStall,
  };
  const watchdogGiven = Object.fromEntries(Object.entries(watchdog).filter(([, value]) => value !== undefined));

  const done = (async () => {
    try {
      const { source, edge } = await inputOf(input);
      const stages = base.stages.map((stage) =>
        INPUT_EDGES.has(stage.use) && stage.use !== edge
          ? { use: edge }
          : stage.use === 'idle-watchdog'
            ? { ...stage, ...watchdogGiven }
            : stage,
      );
      const spec: ChainSpec = { stages, sinks: [...base.sinks, { use: 'projection' }] };
      await runChain(source, spec, { registry, session, signal: options.signal, env: options.env });
    } finally {
      projection.finish();
    }
    if (typeof filesOut === 'string') {
      return JSON.parse(await readFile(join(filesOut, 'index.json'), 'utf8')) as Record<string, unknown>;
    }
    return buildIndex(session, () => undefined, null);
  })();
  // Errors are reported through `done`; iterators just end. A program that never awaits
  // `done` must not crash on an unhandled rejection.
  done.catch(() => {});

  const byName = {
    messages: () => messagesOf(projection, null),
    toolCalls: () => toolCallsOf(projection, null),
    subagents: () => projection.subagentList.read(),
    events: () => projection.events(),
  } satisfies { [K in ProjectionName]: () => AsyncIterable<Projections[K]> };

  return {
    session,
    get subagents() {
      return byName.subagents();
    },
    get messages() {
      return byName.messages();
    },
    get toolCalls() {
      return byName.toolCalls();
    },
    get events() {
      return byName.events();
    },
    interleave<K extends ProjectionName>(...names: K[]) {
      return merge(names.map((name) => [name, byName[name]()] as const)) as AsyncIterable<
        { [N in K]: [N, Projections[N]] }[K]
      >;
    },
    done,
  };
}

const INPUT_EDGES: ReadonlySet<string> = new Set(['line-parser', 'object-source']);

const isBytes = (value: unknown) => typeof value === 'string' || value instanceof Uint8Array;

/**
 * The input as a stream, and the chain edge that reads it. A byte stream is taken as it is;
 * otherwise the first value is looked at: bytes or strings go to the line parser, anything
 * else (message objects) to the object source. The value looked at is not lost.
 */
async function inputOf(
  input: OpenInput,
): Promise<{ source: Readable; edge: 'line-parser' | 'object-source' }> {
  if (input instanceof Readable && !input.readableObjectMode) return { source: input, edge: 'line-parser' };
  const iterator = (input as AsyncIterable<unknown>)[Symbol.asyncIterator]();
  const first = await iterator.next();
  const values = async function* () {
    try {
      if (first.done) return;
      yield first.value ?? NULL_INPUT;
      for (let next = await iterator.next(); !next.done; next = await iterator.next())
        yield next.value ?? NULL_INPUT;
    } finally {
      await iterator.return?.();
    }
  };
  const objects = !first.done && !isBytes(first.value);
  return {
    source: Readable.from(values(), { objectMode: objects }),
    edge: objects ? 'object-source' : 'line-parser',
  };
}

/** Values of several async iterables as they come, tagged with their source's name. */
async function* merge<N extends string>(
  sources: ReadonlyArray<readonly [N, AsyncIterable<unknown>]>,
): AsyncGenerator<[N, unknown]> {
  const iterators = sources.map(([name, iterable]) => [name, iterable[Symbol.asyncIterator]()] as const);
  const pending = new Map<number, Promise<{ slot: number; result: IteratorResult<unknown> }>>();
  const pull = (slot: number) =>
    pending.set(
      slot,
      iterators[slot][1].next().then((result) => ({ slot, result })),
    );
  iterators.forEach((_, slot) => pull(slot));
  try {
    while (pending.size > 0) {
      const { slot, result } = await Promise.race(pending.values());
      if (result.done) {
        pending.delete(slot);
        continue;
      }
      pull(slot);
      yield [iterators[slot][0], result.value];
    }
  } finally {
    for (const [, iterator] of iterators) await iterator.return?.();
  }
}
