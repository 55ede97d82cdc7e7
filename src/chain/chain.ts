import { Writable, type Duplex, type Readable } from 'node:stream';
import { finished, pipeline } from 'node:stream/promises';
import { builtinRegistry, chainRegistry } from './builtins.js';
import { BATCH_HIGH_WATER_MARK, type RecordBatch, type SubteeRecord } from '../model/record.js';
import { CutShortError } from '../decompress.js';
import { EXIT, SubteeError, UsageError } from '../errors.js';
import {
  isBuiltin,
  checkPluginEnvironment,
  codeCheckOf,
  indexRoleOf,
  optionProblem,
  optionsProblemOf,
  packagesOf,
  type PluginContext,
  type BuiltinContext,
  type PluginDefinition,
  type Registry,
} from './plugin.js';
import {
  createPluginStream,
  linesOfRecord,
  neverSettled,
  PLUGIN_STREAM_DEFAULTS,
  pluginFailure,
  type PendingPluginCall,
  type RecordHandlers,
  type RecordPlugin,
} from './plugin-stream.js';
import { pluginRunOf, Session } from '../model/session.js';
import type { HeldRecords } from '../model/in-flight.js';
import { displayPolicy, type DisplayPolicy } from '../model/display.js';
import { THINKING_TRUNCATOR_DEFAULTS } from './stages/thinking-truncator.js';
import { filesSinkPlugin } from './sinks/files.js';
import { FileChannelStore, type OpenChannelFile } from './sinks/channel-store.js';
import type { PreparedRun, PreparedWrites } from './sinks/prepared.js';

export interface ComponentSpec {
  use: string;
  [option: string]: unknown;
}

export interface ChainSpec {
  stages: ComponentSpec[];
  sinks: ComponentSpec[];
}

export const DEFAULT_STAGES: readonly ComponentSpec[] = Object.freeze(
  [
    'line-parser',
    'input-format',
    'version-guard',
    'channel-router',
    'thinking-truncator',
    'idle-watchdog',
  ].map((use) => ({ use })),
);

/**
 * The default stages a config's `leaveOut` may name. The input edge and the channel router
 * are never left out: without them no line is read, or none reaches its subagent.
 */
export const OPTIONAL_STAGES: readonly string[] = Object.freeze(
  DEFAULT_STAGES.map((s) => s.use).filter((use) => use !== 'line-parser' && use !== 'channel-router'),
);

/** The chain the CLI runs without a config: every built-in stage, the files and stdout sinks. */
export function defaultSpec(out: string, stdout: 'text' | 'main' | 'raw' | 'none' = 'text'): ChainSpec {
  return {
    stages: DEFAULT_STAGES.map((s) => ({ ...s })),
    sinks: [
      { use: 'files', out },
      { use: 'stdout', mode: stdout },
    ],
  };
}

export interface ChainOptions {
  /**
   * The stages and sinks a spec may name besides the built-in ones (a `Registry` with plugins
   * added); a stage or sink of a built-in's name in it is ERR_PLUGIN_DUPLICATE.
   */
  registry?: Registry;
  session?: Session;
  /** Aborts the chain at once: every stream is destroyed (sinks still flush what they hold). */
  signal?: AbortSignal;
  /** Stops reading input: what was read still flows through every stage and sink, then the chain ends. */
  stop?: AbortSignal;
  /**
   * Called once when the input is stopped (the caller's `stop`, or a stage's `stopInput`: a
   * stall, a refused version, a failed write); the input ends, and the sinks finish, only once
   * it settles. `subtee run` stops its command here, so that `index.json` records its end.
   * It must settle in bounded time: the chain waits for it.
   */
  settleInput?: () => Promise<void>;
  env?: NodeJS.ProcessEnv;
  stderr?: Writable;
  /** How a late reader's replay opens a channel's `.jsonl` file (`fs.createReadStream`). */
  openChannelFile?: OpenChannelFile;
  /**
   * Once the input has ended, how long a plugin's promise (its function's for a record, or its
   * `end()`'s) may stay pending before the run fails as ERR_PLUGIN_FAILED naming it (30 s).
   */
  pluginEndTimeoutMs?: number;
}

/** How a problem names the entry at `index` of a spec's `section`. */
export type PlaceOf = (section: 'stages' | 'sinks', index: number) => string;

const placeInSpec: PlaceOf = (section, index) => `${section}[${index}]`;

/**
 * Checks a chain spec against the registry and returns every problem at once, so a config
 * is fixed in one round: unknown stage or sink names, unknown option keys, wrong types, a
 * built-in's option that needs another (a report's `html` without `out`). Each names its entry
 * by `placeOf` (its index in the spec, unless told: the command line names a config's entries
 * by their index in the file, see configPlaces).
 */
export function chainProblems(spec: ChainSpec, registry: Registry, placeOf = placeInSpec): string[] {
  const problems: string[] = [];
  const builtins = builtinRegistry();
  // A built-in stage twice would apply each line twice to the one Session: a second router
  // counted every line again.
  const builtinStageAt = new Map<string, number>();
  for (const [section, kind] of [
    ['stages', 'stage'],
    ['sinks', 'sink'],
  ] as const) {
    const list = spec[section];
    if (!Array.isArray(list)) {
      problems.push(`${section}: must be a list`);
      continue;
    }
    list.forEach((c, i) => {
      const at = placeOf(section, i);
      if (typeof c !== 'object' || c === null || typeof c.use !== 'string') {
        problems.push(`${at}: needs "use": the name of a ${kind}`);
        return;
      }
      const def = registry.get(c.use);
      if (!def) {
        problems.push(`${at}: unknown ${kind} "${c.use}" (known: ${registry.names().join(', ')})`);
        return;
      }
      if (def.kind !== kind) problems.push(`${at}: "${c.use}" is a ${def.kind}, not a ${kind}`);
      if (kind === 'stage' && builtins.get(c.use) === def) {
        const first = builtinStageAt.get(c.use);
        if (first !== undefined)
          problems.push(`${at}: "${c.use}" is already ${placeOf('stages', first)} (once per chain)`);
        else builtinStageAt.set(c.use, i);
      }
      const before = problems.length;
      for (const [key, o] of Object.entries(def.options))
        if (o.required && c[key] === undefined) problems.push(`${at}.${key}: required`);
      for (const [key, value] of Object.entries(c)) {
        if (key === 'use') continue;
        // Own keys only: `__proto__` or `constructor` in a config would find Object's own members.
        const o = Object.hasOwn(def.options, key) ? def.options[key] : undefined;
        if (!o) {
          problems.push(
            `${at}.${key}: unknown option for "${c.use}" ` +
              `(known: ${Object.keys(def.options).join(', ') || 'none'})`,
          );
          continue;
        }
        const problem = optionProblem(o, value, isBuiltin(def) ? undefined : { plugin: def.name, key });
        if (problem) problems.push(`${at}.${key}: ${problem}`);
      }
      // Taken together once each is of its own type and passed its own check.
      if (problems.length === before) {
        const { use: _use, ...given } = c;
        const together = optionsProblemOf(def, given);
        if (together) problems.push(`${at}: ${together}`);
      }
    });
  }
  return problems;
}

/**
 * The run's one display policy, from the thinking truncator's options (`--thinking`): every
 * view applies it, reading it from the run (`Session.display`). A chain without that stage
 * shows thinking whole.
 */
export function displayPolicyOf(spec: ChainSpec): DisplayPolicy {
  const stage = spec.stages.find((c) => c.use === 'thinking-truncator');
  if (stage === undefined) return displayPolicy();
  const mode = (stage.mode as DisplayPolicy['thinking'] | undefined) ?? THINKING_TRUNCATOR_DEFAULTS.mode;
  const chars = (stage.maxChars as number | undefined) ?? THINKING_TRUNCATOR_DEFAULTS.maxChars;
  return displayPolicy({ thinking: mode, thinkingChars: chars });
}

/**
 * Builds the streams of one chain in data order. Byte stages (a raw stdout tee) go first,
 * then the one input edge (the line parser for bytes, the object source for message
 * objects), then record stages and sinks in the order given. Every component is created
 * through its plugin definition.
 */
export function buildChain(
  spec: ChainSpec,
  options: ChainOptions = {},
): { streams: Duplex[]; session: Session } {
  const registry = chainRegistry(options.registry);
  checkChain(spec, registry);
  checkEnvironments(spec, registry, options.env ?? process.env);
  return assembleChain(spec, options, undefined);
}

/** Each stage and sink of a checked spec: its definition, and its options as `create` gets them. */
function componentsOf(spec: ChainSpec, registry: Registry) {
  return [...spec.stages, ...spec.sinks].map((c) => {
    const def = registry.get(c.use) as PluginDefinition;
    const { use: _use, ...given } = c;
    return { def, opts: isBuiltin(def) ? given : withDefaults(def, given) };
  });
}

/** Calls every component's `checkEnvironment`, before any is made. */
function checkEnvironments(spec: ChainSpec, registry: Registry, env: NodeJS.ProcessEnv): void {
  for (const { def, opts } of componentsOf(spec, registry)) checkPluginEnvironment(def, opts, env);
}

declare const checkedBeforeStart: unique symbol;

/**
 * A chain checkChainBeforeStart passed, with the registry and environment it was checked
 * against and its sinks' packages imported. runPreparedChain runs it as it is, so the checks
 * (a plugin's `checkEnvironment` among them) run once per run whoever made them; only
 * checkChainBeforeStart makes one (the brand keeps a hand-made object from passing for it).
 */
export interface CheckedChain {
  readonly spec: ChainSpec;
  readonly registry: Registry;
  readonly env: NodeJS.ProcessEnv;
  readonly [checkedBeforeStart]: true;
}

/**
 * Checks a chain as far as it can be checked before anything is made or started, past its
 * options (chainProblems): imports the optional packages its sinks need (loadChainPackages),
 * calls every component's `checkEnvironment`, then each built-in's check of what only its code
 * can judge (the ClickHouse client's reading of the URL, whether pino finds a transport's
 * targets), none of them with a request. What it refuses leaves no output folder behind and,
 * under `subtee run`, no command started: the command line calls it before it makes the folder
 * ready, and runChain before the chain is made. Both hand what it returns to runPreparedChain,
 * which checks nothing again.
 */
export async function checkChainBeforeStart(
  spec: ChainSpec,
  options: Pick<ChainOptions, 'registry' | 'env'> = {},
): Promise<CheckedChain> {
  const registry = chainRegistry(options.registry);
  const env = options.env ?? process.env;
  await loadChainPackages(spec, registry);
  checkEnvironments(spec, registry, env);
  for (const { def, opts } of componentsOf(spec, registry)) await codeCheckOf(def)?.(opts);
  return { spec, registry, env } as CheckedChain;
}

/**
 * buildChain, with the function a stage calls to stop the input (runChain's), of a spec its
 * caller has checked (checkChain, and every component's environment).
 */
function assembleChain(
  spec: ChainSpec,
  options: ChainOptions,
  stopInput: ((reason: Error) => void) | undefined,
  inputEnded?: Promise<void>,
  pending?: Set<PendingPluginCall>,
  prepared?: PreparedWrites,
): { streams: Duplex[]; session: Session } {
  const registry = chainRegistry(options.registry);
  const session = options.session ?? new Session();
  // The truncator's policy is stated before any component is made, so a plugin made before the
  // truncator reads the same one; the truncator states the same again. Without one, the
  // session's stands (thinking whole, unless the program that made it stated another).
  if (spec.stages.some((c) => c.use === 'thinking-truncator')) session.stateDisplay(displayPolicyOf(spec));
  const calls = pending ?? new Set<PendingPluginCall>();
  const parts = componentsOf(spec, registry).map((p) => ({
    ...p,
    input: p.def.input?.(p.opts) ?? 'records',
  }));
  // The files sink writes each channel's `.jsonl`; the store that names and reads them back is
  // made here, from its options, and handed to it and to whoever replays (the projection).
  const out = parts.find((p) => p.def === filesSinkPlugin)?.opts.out as string | undefined;
  const ctx: BuiltinContext = {
    session,
    display: session.display,
    env: options.env ?? process.env,
    stderr: options.stderr ?? process.stderr,
    signal: options.signal,
    stopInput,
    inputEnded,
    prepared,
    out,
    channelStore:
      out === undefined
        ? null
        : new FileChannelStore(out, () => session.heldLineBytes, options.openChannelFile),
  };
  const { inputEnded: _inputEnded, prepared: _prepared, ...shared } = ctx;
  const pluginCtx: PluginContext = { ...shared, session: pluginRunOf(session) };
  const byteTaps = parts.filter((p) => p.input === 'bytes' && p.def.kind === 'sink');
  const rest = parts.filter((p) => !byteTaps.includes(p));
  const edges = rest.filter((p) => p.input === 'bytes' || p.input === 'objects');
  if (edges.length !== 1 || rest[0] !== edges[0]) {
    throw new UsageError(
      'ERR_CONFIG',
      'invalid chain: exactly one input edge (line-parser or object-source) must come first among the stages',
    );
  }
  if (edges[0].input === 'objects' && byteTaps.length > 0) {
    throw new UsageError(
      'ERR_CONFIG',
      `invalid chain: ${byteTaps[0].def.name} copies input bytes, and message objects have none`,
    );
  }
  const ordered = [...byteTaps, ...rest];
  // The files sink writes index.json once the sinks after it whose end may warn have ended, and
  // a sink reading index.json waits for that instead (each definition's IndexRole): each
  // stream's end, once all are made.
  const roles = ordered.map((p) => indexRoleOf(p.def, p.opts));
  let madeAll = (_ends: Promise<void>[]) => {};
  const ends = new Promise<Promise<void>[]>((resolve) => (madeAll = resolve));
  const endsOf = (which: (at: number) => boolean) =>
    ends.then((all) => Promise.all(all.filter((_, at) => which(at)))).then(() => undefined);
  const streams: Duplex[] = [];
  try {
    for (const p of ordered) {
      const builtin = isBuiltin(p.def);
      const place = streams.length;
      let made: ReturnType<PluginDefinition['create']>;
      try {
        const own: BuiltinContext = {
          ...ctx,
          pluginCallsAbove: () => callsAbove(calls, place),
          sinksAfterEnded: endsOf((at) => at > place && (roles[at] === 'warns' || roles[at] === 'writes')),
          indexWritten: endsOf((at) => at < place && roles[at] === 'writes'),
        };
        made = p.def.create(p.opts, builtin ? own : pluginContext(pluginCtx, p.def.name));
      } catch (err) {
        throw builtin ? err : pluginFailure(p.def.name, err);
      }
      if (builtin) {
        streams.push(made as Duplex);
        continue;
      }
      if (!isRecordPlugin(made)) throw invalidCreated(p.def.name, made);
      const sink = p.def.kind === 'sink';
      const dropped = (rec: SubteeRecord) => session.countDropped(linesOfRecord(rec));
      streams.push(
        createPluginStream(made, {
          name: p.def.name,
          sink,
          reads: p.def.reads,
          dropped,
          inputEnded,
          endTimeoutMs: options.pluginEndTimeoutMs ?? PLUGIN_STREAM_DEFAULTS.endTimeoutMs,
          pending: calls,
          place,
        }),
      );
    }
  } catch (err) {
    for (const s of streams) s.destroy();
    throw err;
  }
  // Ended: its input ended and it finished what it held (its writable side), or it failed.
  madeAll(streams.map((s) => finished(s, { readable: false }).catch(() => {})));
  return { streams, session };
}

/**
 * A plugin's options as its `create` and `checkEnvironment` get them: each option left out that
 * has a `default` has it (a list, a copy of it). A built-in's factory applies its own defaults:
 * some options left out are read from the environment (the watchdog's `API_TIMEOUT_MS`, the
 * OTLP endpoint), which a default given here would hide.
 */
function withDefaults(def: PluginDefinition, given: Record<string, unknown>): Record<string, unknown> {
  const opts = { ...given };
  for (const [key, o] of Object.entries(def.options))
    if (o.default !== undefined && opts[key] === undefined)
      opts[key] = Array.isArray(o.default) ? [...(o.default as unknown[])] : o.default;
  return opts;
}

/** The calls of the plugins placed before `place` pending now, and how long each has been. */
function callsAbove(calls: ReadonlySet<PendingPluginCall>, place: number): HeldRecords[] {
  const now = performance.now();
  return [...calls]
    .filter((call) => call.place < place)
    .map((call) => ({
      plugin: call.name,
      what: call.what,
      heldMs: Math.max(0, Math.round(now - call.sinceMs)),
    }));
}

/**
 * A plugin's own context: its `stopInput` fails the run as the plugin's stop, named, with the
 * reason's message (a SubteeError it gives stays as it is).
 */
function pluginContext(shared: PluginContext, name: string): PluginContext {
  const { stopInput } = shared;
  if (stopInput === undefined) return shared;
  return {
    ...shared,
    stopInput: (reason: Error) => {
      if (reason instanceof SubteeError) return stopInput(reason);
      const why = reason instanceof Error ? reason.message : String(reason);
      const message = `plugin ${name} stopped the run: ${why}`;
      stopInput(new SubteeError('ERR_PLUGIN_FAILED', message, { cause: reason }));
    },
  };
}

function checkChain(spec: ChainSpec, registry: Registry): void {
  const problems = chainProblems(spec, registry);
  if (problems.length > 0) throw new UsageError('ERR_CONFIG', `invalid chain: ${problems.join('; ')}`);
}

/**
 * Imports the optional packages the chain's sinks need (the OpenTelemetry SDK, the ClickHouse
 * client), before anything is made or started: a missing one fails with one line naming it
 * (ERR_OPTIONAL_DEPENDENCY, exit 2) and leaves no output folder behind. A chain without those
 * sinks imports neither. `runChain` does it; so may a program before it starts what feeds a chain.
 */
export async function loadChainPackages(spec: ChainSpec, given?: Registry): Promise<void> {
  const registry = chainRegistry(given);
  checkChain(spec, registry);
  const defs = [...spec.stages, ...spec.sinks].map((c) => registry.get(c.use) as PluginDefinition);
  await Promise.all(defs.map((def) => packagesOf(def)?.()));
}

/** A plugin's function or its handlers; not a stream (the kit's own form). */
function isRecordPlugin(made: unknown): made is RecordPlugin {
  if (typeof made === 'function') return true;
  if (made === null || typeof made !== 'object' || typeof (made as Duplex).pipe === 'function') return false;
  if (isPromiseLike(made)) return false;
  const { record, end } = made as RecordHandlers;
  // Neither (`{}`, a misspelt `recrod`) would pass every record on as if the plugin were not there.
  if (record === undefined && end === undefined) return false;
  return (
    (record === undefined || typeof record === 'function') && (end === undefined || typeof end === 'function')
  );
}

const isPromiseLike = (value: unknown): value is PromiseLike<unknown> =>
  typeof (value as PromiseLike<unknown> | null)?.then === 'function';

/**
 * ERR_PLUGIN_INVALID for what a plugin's `create` returned that is no plugin. A promise (a
 * create that returns one without being async) is not waited for, and what it rejects with is
 * not the run's: its rejection is caught here.
 */
function invalidCreated(name: string, made: unknown): UsageError {
  const promised = isPromiseLike(made);
  if (promised) {
    try {
      made.then(undefined, () => {});
    } catch {
      // A thenable whose then throws: nothing to wait for.
    }
  }
  const handlers = made !== null && typeof made === 'object' && !promised;
  const what = promised
    ? ', not a promise: create is not awaited'
    : handlers && !('record' in made) && !('end' in made)
      ? ', not an object with neither record nor end'
      : '';
  return new UsageError(
    'ERR_PLUGIN_INVALID',
    `plugin ${name}: create must return a function over records (or { record, end })${what}`,
  );
}

/**
 * A sink at the very end of the chain: records have been written by then, so drop them, and
 * delete the files of spooled lines.
 */
export function createDiscard(): Writable {
  return new Writable({
    objectMode: true,
    highWaterMark: BATCH_HIGH_WATER_MARK,
    write: (batch: RecordBatch | Buffer, _enc, cb) => {
      if (Array.isArray(batch)) for (const rec of batch) if (rec.kind === 'spooled') rec.spool.release();
      cb();
    },
  });
}

const STOPPED = Symbol('stopped');

/**
 * The input until `stop` fires. A pending read is abandoned at once (the input may be a pipe
 * that stays silent), and once `settle` has settled (the caller's `settleInput`), the chain
 * drains what it already holds, as at end of input. `onEnd` is called as the input ends.
 */
function untilStopped(
  stop: AbortSignal,
  onInputFailure: (err: unknown) => void,
  settle: () => Promise<void>,
  onEnd: () => void,
) {
  return async function* (source: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
    const it = source[Symbol.asyncIterator]();
    try {
      while (!stop.aborted) {
        // A fresh promise per read: racing one long-lived promise would keep every chunk alive.
        let onAbort = () => {};
        const stopped = new Promise<typeof STOPPED>((resolve) => {
          onAbort = () => resolve(STOPPED);
          stop.addEventListener('abort', onAbort, { once: true });
        });
        let next: IteratorResult<Buffer> | typeof STOPPED;
        try {
          next = await Promise.race([it.next(), stopped]);
        } catch (err) {
          onInputFailure(err);
          return;
        } finally {
          stop.removeEventListener('abort', onAbort);
        }
        if (next === STOPPED || next.done) break;
        yield next.value;
      }
      if (stop.aborted) await settle();
    } finally {
      void it.return?.();
      onEnd();
    }
  };
}

/**
 * The pending plugin calls of each chain running in this process. Module state on purpose: an
 * empty event loop is a fact of the process, not of a chain, and one listener serves every
 * chain (a listener each gave a program running eleven chains Node's MaxListenersExceededWarning).
 * Each chain keeps its own calls and leaves the set as it ends; a chain's calls fail only when
 * the loop is empty, when no other chain has anything left running either.
 */
const runningChains = new Set<Set<PendingPluginCall>>();

/**
 * The event loop ran empty: nothing is left that could settle a plugin promise still pending,
 * so each fails naming its plugin (else the process would end with the chain unsettled, as
 * Node's exit 13, nothing said).
 */
function onEmptyLoop(): void {
  for (const pending of runningChains) for (const call of [...pending]) call.fail(neverSettled(call));
}

/** Watches a running chain's plugin calls; one process listener for every chain. */
function watchEmptyLoop(pending: Set<PendingPluginCall>): () => void {
  if (runningChains.size === 0) process.on('beforeExit', onEmptyLoop);
  runningChains.add(pending);
  return () => {
    runningChains.delete(pending);
    if (runningChains.size === 0) process.off('beforeExit', onEmptyLoop);
  };
}

/** Runs input through the chain to the end; resolves with the run's state. */
export async function runChain(
  input: Readable,
  spec: ChainSpec,
  options: ChainOptions = {},
): Promise<Session> {
  let checked: CheckedChain;
  try {
    checked = await checkChainBeforeStart(spec, options);
  } catch (err) {
    // Never read: let go of it (an open file) now, not when the collector finds it.
    input.destroy();
    throw err;
  }
  return runPreparedChain(input, checked, options);
}

/**
 * runChain of a chain checkChainBeforeStart has checked (the command line checks it before it
 * makes the folder ready and starts the command), with the registry and environment it was
 * checked against, checking nothing again; its sinks take where they write from `prepared`
 * (`prepareWrites`: `subtee run` makes it ready before it starts the command) instead of
 * opening it; what none of them took is let go once the chain is made.
 */
export async function runPreparedChain(
  input: Readable,
  checked: CheckedChain,
  runOptions: Omit<ChainOptions, 'registry' | 'env'>,
  prepared?: PreparedRun,
): Promise<Session> {
  const options: ChainOptions = { ...runOptions, registry: checked.registry, env: checked.env };
  // Input stops on the caller's `stop` or when a stage asks (the watchdog on a stall).
  const stopped = new AbortController();
  let reason: Error | null = null;
  const stopInput = (why: Error) => {
    reason ??= why;
    stopped.abort();
  };
  // The input's end: at its last byte, or once a stop has settled (the generator may then still
  // wait on a stage that takes nothing, and the watchdog's drain deadline counts from here).
  let onEnd = () => {};
  const inputEnded = new Promise<void>((resolve) => (onEnd = resolve));
  let settling: Promise<void> | null = null;
  const settle = () =>
    (settling ??= (async () => {
      try {
        await options.settleInput?.();
      } finally {
        onEnd();
      }
    })());
  stopped.signal.addEventListener('abort', () => void settle().catch(() => {}), { once: true });
  let built: ReturnType<typeof buildChain>;
  // The plugin promises the chain waits on (see watchEmptyLoop).
  const pending = new Set<PendingPluginCall>();
  try {
    built = assembleChain(checked.spec, options, stopInput, inputEnded, pending, prepared);
  } catch (err) {
    // Never read: let go of it (an open file) now, not when the collector finds it.
    input.destroy();
    throw err;
  } finally {
    prepared?.release();
  }
  const { streams, session: run } = built;
  const onStop = () => stopped.abort();
  if (options.stop?.aborted) stopped.abort();
  options.stop?.addEventListener('abort', onStop, { once: true });
  // An input that fails ends the run as an input that ends does, so what was read reaches every
  // sink and index.json; the failure is recorded there and then fails the run. Left to
  // pipeline(), it would destroy every stream with the input's error, as if a sink had failed.
  let settled = false;
  const onInputFailure = (err: unknown) => {
    // Closing the input after the chain failed fails a read still pending: not the input's fault.
    if (settled) return;
    const why = err instanceof Error ? err.message : String(err);
    if (err instanceof CutShortError) run.warn('INPUT_CUT_SHORT', why);
    else run.warn('INPUT_FAILED', `the input failed after ${run.input.bytes} bytes: ${why}`);
    reason ??=
      err instanceof SubteeError
        ? err
        : new SubteeError('ERR_INPUT', `cannot read the input: ${why}`, { exitCode: EXIT.IO, cause: err });
  };
  // The typings have no overload for a list that mixes streams and a generator stage.
  // The input is read by the generator alone, so its error reaches onInputFailure only.
  const all = [
    untilStopped(stopped.signal, onInputFailure, settle, onEnd)(input),
    ...streams,
    createDiscard(),
  ] as unknown as NodeJS.ReadableStream[];
  const unwatch = watchEmptyLoop(pending);
  try {
    await pipeline(all, { signal: options.signal });
  } finally {
    unwatch();
    options.stop?.removeEventListener('abort', onStop);
    // Not a member of the pipeline, so close it here: a silent pipe would hold a read open.
    settled = true;
    input.destroy();
  }
  if (reason) throw reason;
  return run;
}
