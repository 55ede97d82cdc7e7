import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable, type Writable } from 'node:stream';
import { builtinsWith } from './chain/builtins.js';
import { DEFAULT_STAGES, runChain, type ChainSpec, type ComponentSpec } from './chain/chain.js';
import {
  checkSpec,
  configShape,
  lacksRouter,
  readConfigProblems,
  registerPlugins,
  unusedPlugins,
} from './chain/config.js';
import { defineBuiltin, KIT_VERSION, optionProblem, Registry, type OptionSpec } from './chain/plugin.js';
import { filesSinkPlugin } from './chain/sinks/files.js';
import { createProjectionSink } from './chain/sinks/projection.js';
import { idleWatchdogPlugin } from './chain/stages/idle-watchdog.js';
import { NULL_INPUT } from './chain/stages/object-source.js';
import { EXIT, OutputError, SubteeError, UsageError } from './errors.js';
import { decompressed } from './decompress.js';
import { openInputFile } from './input-file.js';
import { isProtocolEvent } from './adapters/langgraph.js';
import { Session } from './model/session.js';
import { buildIndex, type IndexDocument } from './views/index-file.js';
import type { Message } from './views/message-stream.js';
import {
  Projection,
  messagesOf,
  toolCallsOf,
  type ProjectionOptions,
  type RunEvent,
  type RunOutput,
  type SubagentHandle,
  type ToolCall,
} from './views/projection.js';

/** open()'s options; an option given as `undefined` is left out (as under exactOptionalPropertyTypes). */
export interface OpenOptions extends ProjectionOptions {
  /** Also write the output folder (transcripts, `.jsonl` files, `index.json`) here. */
  out?: string | undefined;
  /** Write into an `out` folder that already holds files. */
  force?: boolean | undefined;
  /**
   * The chain to run, as in a config file; the projection is added as its last sink. By
   * default every built-in stage, plus the files sink when `out` is given. It must route
   * (list the `channel-router` stage); `out` adds the files sink unless it lists one.
   */
  spec?: ChainSpec | undefined;
  /**
   * A config instead of a spec: the path of a config file, or its content as an object
   * (`stages`, `sinks`, `plugins`, `leaveOut`, as in the file); its plugins are loaded (paths
   * relative to the file, or to the working folder for an object).
   */
  config?:
    | undefined
    | string
    | {
        $schema?: string;
        stages?: ComponentSpec[];
        sinks?: ComponentSpec[];
        plugins?: string[];
        leaveOut?: string[];
      };
  /**
   * A registry with plugins registered: the run can use its stages and sinks besides the
   * built-in ones (one of its own may not take a built-in's name).
   */
  registry?: Registry | undefined;
  /**
   * Stops the run as an interrupt (Ctrl-C) stops the command line: reading stops, what was
   * read reaches every sink, `index.json` says `"interrupted": true` (channels still running
   * stay `running`), every iterator ends, and `done` rejects with an `AbortError`.
   */
  signal?: AbortSignal | undefined;
  /**
   * How a late reader opens a channel's `.jsonl` file to replay it (`fs.createReadStream` by
   * default): a program can watch how far each replay reads.
   */
  openChannelFile?: ((path: string) => Readable) | undefined;
  /** The idle watchdog's limits (see docs/watchdog.md); its defaults otherwise. */
  idleTimeoutMs?: number | undefined;
  modelTimeoutMs?: number | undefined;
  toolTimeoutMs?: number | undefined;
  stallGraceMs?: number | undefined;
  /** `fail` (the default): a stall rejects `done` with `ERR_STALL`; `warn`: recorded, the run goes on. */
  onStall?: 'fail' | 'warn' | undefined;
  /**
   * The environment stages and sinks read (the OTLP sink's `OTEL_EXPORTER_OTLP_*`, a plugin's
   * `checkEnvironment`); `process.env` by default.
   */
  env?: NodeJS.ProcessEnv | undefined;
  /**
   * Where stages and sinks write what they tell a person (the report sink's live address, a
   * plugin's `ctx.stderr`); `process.stderr` by default.
   */
  stderr?: Writable | undefined;
  /**
   * Once the input has ended, how long a plugin's promise (its function's for a record, or its
   * `end()`'s) may stay pending before `done` rejects with ERR_PLUGIN_FAILED naming it (30,000),
   * as `--plugin-end-timeout-ms` does for the command line.
   */
  pluginEndTimeoutMs?: number | undefined;
}

/** Every option `open()` takes: a program in JavaScript can pass anything, so others are refused. */
const OPEN_OPTIONS: Readonly<Record<keyof OpenOptions, true>> = Object.freeze({
  out: true,
  force: true,
  spec: true,
  config: true,
  registry: true,
  signal: true,
  idleTimeoutMs: true,
  modelTimeoutMs: true,
  toolTimeoutMs: true,
  stallGraceMs: true,
  onStall: true,
  env: true,
  stderr: true,
  pluginEndTimeoutMs: true,
  openChannelFile: true,
  maxBufferedBytes: true,
  readerHighWaterLines: true,
  readerStallMs: true,
});

function checkOptionNames(options: object): void {
  const unknown = Object.keys(options).filter((key) => !Object.hasOwn(OPEN_OPTIONS, key));
  if (unknown.length === 0) return;
  throw new UsageError(
    'ERR_OPEN_OPTIONS',
    `open(): unknown option${unknown.length > 1 ? 's' : ''} ` +
      unknown.map((k) => JSON.stringify(k)).join(', ') +
      ` (it takes ${Object.keys(OPEN_OPTIONS).join(', ')})`,
  );
}

/**
 * A registry and a spec have their shape checked here: a program in JavaScript can pass
 * anything, and a wrong one would fail later as a TypeError with no code.
 */
function checkRegistryAndSpec(options: OpenOptions): void {
  const registry: unknown = options.registry;
  const methods = registry as Partial<Registry> | null;
  if (registry !== undefined && (typeof methods?.names !== 'function' || typeof methods.get !== 'function'))
    throw new UsageError(
      'ERR_OPEN_OPTIONS',
      `open(): registry must be a Registry (new Registry() from subtee/chain), not ${describe(registry)}`,
    );
  const spec: unknown = options.spec;
  const lists = spec as Partial<ChainSpec> | null;
  if (spec !== undefined && !(Array.isArray(lists?.stages) && Array.isArray(lists.sinks)))
    throw new UsageError(
      'ERR_OPEN_OPTIONS',
      'open(): spec must be a chain as a config file lists one, { stages: [...], sinks: [...] }, not ' +
        (Array.isArray(spec) || typeof spec !== 'object' || spec === null
          ? describe(spec)
          : 'an object without both lists'),
    );
}

/**
 * open()'s options that are a stage's or a sink's (the files sink's folder, the idle watchdog's
 * limits), checked as that component checks them and named as open() names them, at once:
 * left to the chain, they failed the run later under the chain's own names (`sinks[0].out`).
 */
function checkForwardedOptions(options: OpenOptions): void {
  const files = filesSinkPlugin.options;
  const watchdog = idleWatchdogPlugin.options;
  const forwarded: Array<[string, OptionSpec, unknown]> = [
    ['out', files.out, options.out],
    ['force', files.force, options.force],
    ['idleTimeoutMs', watchdog.idleTimeoutMs, options.idleTimeoutMs],
    ['modelTimeoutMs', watchdog.modelTimeoutMs, options.modelTimeoutMs],
    ['toolTimeoutMs', watchdog.toolTimeoutMs, options.toolTimeoutMs],
    ['stallGraceMs', watchdog.graceMs, options.stallGraceMs],
    ['onStall', watchdog.onStall, options.onStall],
  ];
  const problems = forwarded.flatMap(([name, spec, value]) => {
    const problem = value === undefined ? null : optionProblem(spec, value);
    return problem === null ? [] : [`${name} ${problem}`];
  });
  if (problems.length > 0) throw new UsageError('ERR_OPEN_OPTIONS', `open(): ${problems.join('; ')}`);
}

/** What each name of `interleave()` yields. */
export interface Projections {
  messages: Message;
  toolCalls: ToolCall;
  subagents: SubagentHandle;
  allSubagents: SubagentHandle;
  events: RunEvent;
}

export type ProjectionName = keyof Projections;

export interface RunProjection {
  /** The run's shared state: counters, warnings, the live tree. */
  readonly session: Session;
  /**
   * The subagents the main conversation spawned, as each is first seen; nested ones come
   * from each handle's `subagents` (as in Deep Agents). Every loop starts from the first.
   */
  readonly subagents: AsyncIterable<SubagentHandle>;
  /** Every subagent at any depth, as it is first seen; every loop starts from the first. */
  readonly allSubagents: AsyncIterable<SubagentHandle>;
  /** The main conversation's messages, one per model call. */
  readonly messages: AsyncIterable<Message>;
  /** The main conversation's tool calls, paired with their results. */
  readonly toolCalls: AsyncIterable<ToolCall>;
  /** Every record in arrival order, with its path; every loop starts from the run's first. */
  readonly events: AsyncIterable<RunEvent>;
  /** Several projections merged in arrival order, each value tagged with its name. */
  interleave<K extends ProjectionName>(...names: K[]): AsyncIterable<{ [N in K]: [N, Projections[N]] }[K]>;
  /** How the run ended (its result line); settles when the run does, never rejects. */
  readonly output: Promise<RunOutput>;
  /** The run's `index.json` document; rejects with the run's coded error. */
  readonly done: Promise<IndexDocument>;
}

/**
 * What `open()` reads: the path of a recorded stream (gzip or zstd is decompressed), bytes
 * (a stream, chunks), or message objects (an SDK `query()`, a LangGraph run).
 */
export type OpenInput =
  string | Readable | AsyncIterable<Buffer | Uint8Array | string> | AsyncIterable<unknown>;

/**
 * Runs a stream-json input through subtee's chain and projects it live: subagent handles,
 * messages, tool calls and events as async iterables. The input may be bytes or message
 * objects (the Claude Agent SDK's `query()`, a LangGraph v3 run stream): the first value
 * decides, and objects enter the chain through the object source instead of the line
 * parser. The chain starts at once; iterating is optional, and a projection nobody iterates
 * costs nothing beyond the tree. Options that cannot work together throw a UsageError here.
 */
export function open(input: OpenInput, options: OpenOptions = {}): RunProjection {
  checkInput(input);
  if (options === null || typeof options !== 'object' || Array.isArray(options))
    throw new UsageError('ERR_OPEN_OPTIONS', `open(): options must be an object, not ${describe(options)}`);
  checkOptionNames(options);
  if (options.openChannelFile !== undefined && typeof options.openChannelFile !== 'function')
    throw new UsageError('ERR_OPEN_OPTIONS', 'open(): openChannelFile must be a function of a path');
  if (options.signal !== undefined && !(options.signal instanceof AbortSignal))
    throw new UsageError(
      'ERR_OPEN_OPTIONS',
      `open(): signal must be an AbortSignal, not ${describe(options.signal)}`,
    );
  if (options.env !== undefined && (options.env === null || typeof options.env !== 'object'))
    throw new UsageError(
      'ERR_OPEN_OPTIONS',
      `open(): env must be an object of variables, not ${describe(options.env)}`,
    );
  const stderrGiven: unknown = options.stderr;
  if (stderrGiven !== undefined && typeof (stderrGiven as Partial<Writable> | null)?.write !== 'function')
    throw new UsageError(
      'ERR_OPEN_OPTIONS',
      `open(): stderr must be a writable stream, not ${describe(stderrGiven)}`,
    );
  const endTimeoutMs: unknown = options.pluginEndTimeoutMs;
  if (endTimeoutMs !== undefined && !(typeof endTimeoutMs === 'number' && endTimeoutMs >= 0))
    throw new UsageError(
      'ERR_OPEN_OPTIONS',
      'open(): pluginEndTimeoutMs must be a number of milliseconds of at least 0, ' +
        `not ${shownValue(endTimeoutMs)}`,
    );
  if (options.config !== undefined && options.spec !== undefined) {
    throw new UsageError('ERR_OPEN_OPTIONS', 'open(): pass a config or a spec, not both');
  }
  checkRegistryAndSpec(options);
  checkForwardedOptions(options);
  const session = new Session();
  const projection = new Projection(session, options);
  // A copy, always: the caller's registry may serve several runs, each with its own projection
  // sink. It starts with the built-in stages and sinks, so a registry a program extends keeps them.
  const registry = builtinsWith(options.registry);
  registry.add(
    defineBuiltin({
      name: 'projection',
      kind: 'sink',
      kit: `^${KIT_VERSION}`,
      options: {},
      create: (_options, ctx) => {
        return createProjectionSink({ session: ctx.session, projection, store: ctx.channelStore });
      },
    }),
  );  // A config is read (and its plugins loaded) once the run starts; a spec is checked now.
  const given = options.config === undefined ? chainSpecOf(options, registry) : null;

  // An abort is recorded as the command line records an interrupt: input stops, what was
  // read still reaches every sink, and index.json says so. Iterators end at once.
  const stop = new AbortController();
  const onAbort = () => {
    session.stateInterrupted();
    projection.finish();
    stop.abort();
  };
  if (options.signal?.aborted) onAbort();
  else options.signal?.addEventListener('abort', onAbort, { once: true });
  const watchdog = {
    idleTimeoutMs: options.idleTimeoutMs,
    modelTimeoutMs: options.modelTimeoutMs,
    toolTimeoutMs: options.toolTimeoutMs,
    graceMs: options.stallGraceMs,
    onStall: options.onStall,
  };
  const watchdogGiven = Object.fromEntries(
    Object.entries(watchdog).filter(([, value]) => value !== undefined),
  );

  let filesOut: unknown;
  const done = (async (): Promise<IndexDocument> => {
    try {
      const base = given ?? (await configSpec(options, registry));
      filesOut = base.sinks.find((sink) => sink.use === 'files')?.out;
      const { source, edge } = await inputOf(input, stop.signal);
      const stages = base.stages.map((stage) =>
        INPUT_EDGES.has(stage.use) && stage.use !== edge
          ? { use: edge }
          : stage.use === 'idle-watchdog'
            ? { ...stage, ...watchdogGiven }
            : stage,
      );
      const spec: ChainSpec = { stages, sinks: [...base.sinks, { use: 'projection' }] };
      // What the command line hands runChain besides: its `signal` (open()'s is the stop above,
      // an interrupt) and `settleInput` (it stops `subtee run`'s command; open() runs none).
      const { env, stderr, openChannelFile, pluginEndTimeoutMs } = options;
      await runChain(source, spec, {
        registry,
        session,
        stop: stop.signal,
        env,
        stderr,
        openChannelFile,
        pluginEndTimeoutMs,
      });
      // An abort after the run's end changes nothing: index.json is written.
      options.signal?.removeEventListener('abort', onAbort);
      if (session.interrupted) throw abortError(options.signal?.reason);
    } catch (err) {
      throw inLibraryWords(err);
    } finally {
      options.signal?.removeEventListener('abort', onAbort);
      projection.finish();
    }
    if (typeof filesOut === 'string') {
      return JSON.parse(await readFile(join(filesOut, 'index.json'), 'utf8')) as IndexDocument;
    }
    return buildIndex(session, () => undefined, null, session.display);
  })();
  // Errors are reported through `done`; iterators just end. A program that never awaits
  // `done` must not crash on an unhandled rejection.
  done.catch(() => {});

  const byName = {
    messages: () => messagesOf(projection, null),
    toolCalls: () => toolCallsOf(projection, null),
    subagents: () => projection.childrenOf(null),
    allSubagents: () => projection.subagentList.reader(),
    events: () => projection.events(),
  } satisfies { [K in ProjectionName]: () => AsyncIterable<Projections[K]> };

  return {
    session,
    get subagents() {
      return byName.subagents();
    },
    get allSubagents() {
      return byName.allSubagents();
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
      const unknown = names.filter((name) => !Object.hasOwn(byName, name));
      if (unknown.length > 0) {
        throw new UsageError(
          'ERR_OPEN_OPTIONS',
          `interleave(): no projection is named ${unknown.map((name) => JSON.stringify(name)).join(', ')} ` +
            `(it takes ${Object.keys(byName).join(', ')})`,
        );
      }
      return merge(names.map((name) => [name, byName[name]()] as const)) as AsyncIterable<
        { [N in K]: [N, Projections[N]] }[K]
      >;
    },
    output: projection.output,
    done,
  };
}

/**
 * The chain of a config (file or object), its plugins registered. Checked as the command line
 * checks one: as the config lists its stages, so that a problem names the entry where it
 * stands, every problem in one message (ERR_CONFIG).
 */
async function configSpec(options: OpenOptions, registry: Registry): Promise<ChainSpec> {
  const where = typeof options.config === 'string' ? `config ${options.config}` : 'open() config';
  const read =
    typeof options.config === 'string'
      ? readConfigProblems(options.config)
      : { ...configShape(options.config, where), baseDir: process.cwd() };
  const loaded = await registerPlugins(registry, read.config.plugins, read.baseDir);
  const written = { stages: read.listed, sinks: read.config.sinks };
  checkSpec(written, registry, where, [...read.problems, ...unusedPlugins(written, loaded)]);
  const spec = { stages: read.config.stages, sinks: read.config.sinks };
  return chainSpecOf({ ...options, spec }, registry);
}

/** The chain `open()` runs, from its options; refuses options that cannot work together. */
function chainSpecOf(options: OpenOptions, registry: Registry): ChainSpec {
  const files =
    options.out === undefined ? [] : [{ use: 'files', out: options.out, force: options.force ?? false }];
  if (!options.spec) return { stages: DEFAULT_STAGES.map((stage) => ({ ...stage })), sinks: files };
  const { stages, sinks } = options.spec;
  // A stage or sink nobody registered is named first: it, not a missing router, is the mistake.
  const unknown = [...(Array.isArray(stages) ? stages : []), ...(Array.isArray(sinks) ? sinks : [])]
    .map((component) => component?.use)
    .filter((use) => typeof use === 'string' && registry.get(use) === undefined);
  if (unknown.length > 0) {
    throw new UsageError(
      'ERR_CONFIG',
      `open(): no stage or sink is named ${unknown.map((use) => JSON.stringify(use)).join(', ')} ` +
        `(known: ${registry.names().filter((name) => name !== 'projection').join(', ')})`,
    );
  }
  if (lacksRouter(stages)) {
    throw new UsageError(
      'ERR_ROUTER_REQUIRED',
      'open(): spec.stages has no channel-router, so no line would reach its subagent; ' +
        'add { use: "channel-router" }',
    );
  }
  if (!Array.isArray(sinks) || files.length === 0) return options.spec;
  if (sinks.some((sink) => sink?.use === 'files')) {
    throw new UsageError(
      'ERR_OUT_TWICE',
      'open(): both the out option and a files sink in spec name an output folder; keep one of them',
    );
  }
  return { stages, sinks: [...sinks, ...files] };
}

/** A path, a byte stream or an async iterable; anything else is a mistake in the program. */
function checkInput(input: unknown): void {
  if (typeof input === 'string' || input instanceof Readable) return;
  if (typeof (input as AsyncIterable<unknown> | null)?.[Symbol.asyncIterator] === 'function') return;
  throw new UsageError(
    'ERR_OPEN_INPUT',
    `open() reads a file path, a readable stream or an async iterable, not ${describe(input)}`,
  );
}

const describe = (value: unknown) =>
  value === null ? 'null' : Array.isArray(value) ? 'an array' : `a value of type ${typeof value}`;

/** A number as it is (NaN, -1), anything else by its type. */
const shownValue = (value: unknown) => (typeof value === 'number' ? String(value) : describe(value));

function abortError(reason: unknown): SubteeError {
  const err = new SubteeError('ABORT_ERR', 'the run was aborted (its signal fired)', {
    exitCode: EXIT.SIGINT,
    cause: reason,
  });
  err.name = 'AbortError';
  return err;
}

/** The files sink words its refusals for the command line; a program passed options. */
function inLibraryWords(err: unknown): unknown {
  if (!(err instanceof OutputError)) return err;
  if (err.code === 'ERR_OUT_NOT_EMPTY') {
    return new OutputError(
      err.code,
      err.path,
      `out folder ${err.path} already holds files (a previous run?): ` +
        'choose a new folder, or pass force: true',
      err,
    );
  }
  if (err.code === 'ERR_OUT_BUSY') {
    return new OutputError(err.code, err.path, err.message.replace(/^--out /, 'out folder '), err);
  }
  if (err.code === 'ERR_OUT_NOT_DIR') {
    return new OutputError(err.code, err.path, `out ${JSON.stringify(err.path)} must name a folder`, err);
  }
  return err;
}

const INPUT_EDGES: ReadonlySet<string> = new Set(['line-parser', 'object-source']);

const isBytes = (value: unknown) => typeof value === 'string' || value instanceof Uint8Array;

/**
 * The input as a stream, and the chain edge that reads it. A byte stream is read as the
 * command line reads stdin (gzip or zstd decompressed, recognised by its first bytes);
 * otherwise the first value is looked at: bytes or strings go to the line parser the same way,
 * anything else (message objects) to the object source. The value looked at is not lost.
 */
async function inputOf(
  input: OpenInput,
  stop: AbortSignal,
): Promise<{ source: Readable; edge: 'line-parser' | 'object-source' }> {
  if (typeof input === 'string') return { source: await openInputFile(input), edge: 'line-parser' };
  if (input instanceof Readable && !input.readableObjectMode)
    return { source: decompressed(input, 'the input'), edge: 'line-parser' };
  const iterator = (input as AsyncIterable<unknown>)[Symbol.asyncIterator]();
  // The first value is waited for only until the run is stopped: then the input is an empty one,
  // let go of (a generator still waiting holds its return() until its value comes: not awaited).
  // A first read that fails is read as any later one is, through the chain (ERR_INPUT).
  let first: IteratorResult<unknown> = { done: true, value: undefined };
  let failed: { err: unknown } | null = null;
  try {
    const read = await untilStopped(Promise.resolve(iterator.next()), stop);
    if (read === STOPPED) {
      void (async () => iterator.return?.())().catch(() => {});
      if (input instanceof Readable) input.destroy();
      return { source: Readable.from([], { objectMode: false }), edge: 'line-parser' };
    }
    first = read;
  } catch (err) {
    failed = { err };
  }
  const values = async function* () {
    // A LangGraph run stream rejects once it has told its own failure (a root `failed`
    // event): that run failed, as a Claude run whose result line says so; its input did not.
    let told = false;
    try {
      if (failed !== null) throw failed.err;
      if (first.done) return;
      told = runFailureTold(first.value);
      yield first.value ?? NULL_INPUT;
      for (;;) {
        let next: IteratorResult<unknown>;
        try {
          next = await iterator.next();
        } catch (err) {
          if (told) return;
          throw err;
        }
        if (next.done) return;
        told ||= runFailureTold(next.value);
        yield next.value ?? NULL_INPUT;
      }
    } finally {
      await iterator.return?.();
    }
  };
  if (!first.done && !isBytes(first.value))
    return { source: Readable.from(values(), { objectMode: true }), edge: 'object-source' };
  const bytes = Readable.from(values(), { objectMode: false });
  return { source: decompressed(bytes, 'the input'), edge: 'line-parser' };
}

const STOPPED = Symbol('stopped');

/** A promise, or STOPPED once `stop` fires first. */
function untilStopped<T>(promise: Promise<T>, stop: AbortSignal): Promise<T | typeof STOPPED> {
  if (stop.aborted) {
    promise.catch(() => {});
    return Promise.resolve(STOPPED);
  }
  return new Promise((resolve, reject) => {
    const onStop = () => resolve(STOPPED);
    stop.addEventListener('abort', onStop, { once: true });
    void promise.then(resolve, reject).finally(() => stop.removeEventListener('abort', onStop));
  });
}

/** Whether a value is a LangGraph run's own `failed` event (the root's lifecycle). */
function runFailureTold(value: unknown): boolean {
  if (!isProtocolEvent(value) || value.method !== 'lifecycle') return false;
  if (value.params.namespace.length > 0) return false;
  const data = value.params.data as { event?: unknown } | null;
  return data?.event === 'failed';
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
