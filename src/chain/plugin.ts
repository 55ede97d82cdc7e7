import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import type { Duplex, Writable } from 'node:stream';
import type { RecordPlugin } from './plugin-stream.js';
import { pathToFileURL } from 'node:url';
import { SubteeError, UsageError } from '../errors.js';
import type { ChannelStore, PluginRun, Session } from '../model/session.js';
import type { DisplayPolicy } from '../model/display.js';
import type { HeldRecords } from '../model/in-flight.js';
import type { PreparedWrites } from './sinks/prepared.js';
import { isValidRange, satisfies } from '../semver.js';

/** The kit version plugins declare support for. Kept in step with package.json by a test. */
export const KIT_VERSION = '0.1.0';

/** The kit range the built-in stages and sinks declare. */
export const BUILTIN_KIT = `^${KIT_VERSION}`;

export interface PluginContext {
  /**
   * The run as a plugin reads it: the tree, counts and warnings (frozen copies), and `warn`.
   * subtee's own stages and sinks get the chain's Session (BuiltinContext).
   */
  session: PluginRun;
  /**
   * How every view shows what the run said (`--thinking`): the one policy of the run, as
   * `session.display` reads it.
   */
  display: DisplayPolicy;
  env: NodeJS.ProcessEnv;
  /** Human-readable diagnostics (never stdout). */
  stderr: Writable;
  signal?: AbortSignal;
  /**
   * Under runChain: stops reading input, lets what was read reach every stage and sink (a
   * partial last line goes to the quarantine), then fails the chain with `reason`. Absent
   * for a chain a program runs itself (buildChain): a stage then destroys the chain.
   */
  stopInput?: (reason: Error) => void;
  /**
   * The output folder of the chain's files sink, when it has one: where long lines are
   * spooled and the ClickHouse sink keeps what it could not send.
   */
  out?: string;
  /**
   * Where a channel's routed lines are read back from (the files sink's `.jsonl` files),
   * built with the chain from the files sink's options; null when the chain has none.
   */
  channelStore: ChannelStore | null;
}

/** What the chain hands subtee's own stages and sinks: the session itself, to count into. */
export interface BuiltinContext extends PluginContext {
  session: Session;
  /**
   * Under runChain: resolves once the input has ended (after a stop, once the caller's
   * `settleInput` has settled): what was read is then on its way down the chain.
   */
  inputEnded?: Promise<void>;
  /**
   * The calls of plugins placed above this component that are pending now (a stage plugin's
   * function or `end()` whose promise has not settled), each with how long it has been: the
   * records they hold reach nothing below them. The idle watchdog names them when it fires.
   */
  pluginCallsAbove?: () => readonly HeldRecords[];
  /** Where the chain writes, made ready before its input started, for its sinks to take. */
  prepared?: PreparedWrites;
  /**
   * Settles once every sink after this component has ended (or failed), those that wait for
   * the folder's index.json (`indexWritten`) aside: the files sink writes index.json then, so
   * that it holds what they warned as they ended.
   */
  sinksAfterEnded?: Promise<void>;
  /**
   * Settles once every files sink before this component has ended, index.json written (or
   * failed): a report sink builds its page from the folder then.
   */
  indexWritten?: Promise<void>;
}

/**
 * One option of a stage or sink, every fact about it in one place: the config check, the
 * JSON Schema, and the command-line flag that sets it (its type, bounds, default and help)
 * all read this. `V` is what its values are (`OptionSpecs<O>` gives each key of O its own):
 * `check` is called only with a value of the option's type.
 */
/** The types an option may have. */
const OPTION_TYPES = ['string', 'integer', 'number', 'boolean', 'object', 'array'] as const;

export interface OptionSpec<V = unknown> {
  /** `integer`: a whole number that is exact in JSON and JavaScript (a safe integer). */
  type: (typeof OPTION_TYPES)[number];
  choices?: readonly (string | number)[];
  /** Smallest value of a number. */
  min?: number;
  /** Largest value of a number. */
  max?: number;
  /** Shortest string: 1 for a name or path that must not be empty. */
  minLength?: number;
  /**
   * What the component uses when the option is left out (shown in --help and the schema). A
   * plugin's `create` (and `checkEnvironment`) is given it for an option a config leaves out.
   */
  default?: string | number | boolean | readonly string[];
  /** The default depends on the machine (the open-file budget): --help shows it, the schema does not. */
  defaultVaries?: boolean;
  /**
   * A further check of a value of the right type: what is wrong with it, or null. (A method,
   * so a spec of any value type is an `OptionSpec`: its check is only called with its values.)
   */
  check?(value: V): string | null;
  /** The component cannot be built without it. */
  required?: boolean;
  /** What the option is for: the config's JSON Schema shows it (and --help, a built-in's flag). */
  description?: string;
}

/**
 * The spec types that can hold a value of type V: a whole-number option is `integer`, which
 * the type system cannot tell from `number`, so both are allowed for a number.
 */
export type OptionType<V> = V extends boolean
  ? 'boolean'
  : V extends number
    ? 'integer' | 'number'
    : V extends string
      ? 'string'
      : V extends readonly unknown[]
        ? 'array'
        : 'object';

/**
 * What the spec of option K says of its presence, by what O says: a default of the option's own
 * type, and for a key O says `create` always gets (not optional, no `undefined`) `required` or a
 * `default` (which the kit gives `create` when the option is left out), so the options `create`
 * is typed with never promise a key it may lack.
 */
type OptionPresence<O, K extends keyof O> = {} extends Pick<O, K>
  ? { default?: NonNullable<O[K]> }
  : undefined extends O[K]
    ? { default?: NonNullable<O[K]> }
    : { required: true; default?: NonNullable<O[K]> } | { default: NonNullable<O[K]> };

/**
 * The option specs of a stage or sink whose options are O: one spec per key of O, no more and
 * no fewer, each of a type that holds that key's values, so a spec cannot drift from the
 * factory's options interface.
 */
export type OptionSpecs<O> = {
  [K in keyof O]-?: OptionSpec<NonNullable<O[K]>> & {
    type: OptionType<NonNullable<O[K]>>;
  } & OptionPresence<O, K>;
};

const typeName = (value: unknown) =>
  Array.isArray(value) ? 'array' : value === null ? 'null' : typeof value;

/**
 * What is wrong with a value for an option, or null: the one check behind configs and flags.
 * `of` names a plugin's option: what its `check` throws fails the run naming the plugin.
 */
export function optionProblem(
  o: OptionSpec,
  value: unknown,
  of?: { plugin: string; key: string },
): string | null {
  const actual = typeName(value);
  const shown = actual === 'number' ? String(value) : actual;
  if (o.type === 'integer') {
    const least = o.min !== undefined ? ` of at least ${o.min}` : '';
    if (actual !== 'number' || !Number.isSafeInteger(value))
      return `must be a whole number${least}, not ${shown}`;
  } else if (o.type === 'number') {
    if (actual !== 'number' || !Number.isFinite(value)) return `must be a finite number, not ${shown}`;
  } else if (actual !== o.type) {
    return `must be ${o.type === 'array' || o.type === 'object' ? 'an' : 'a'} ${o.type}, not ${actual}`;
  }
  if (o.choices && !o.choices.includes(value as string | number))
    return `must be one of ${o.choices.join(', ')}`;
  if (typeof value === 'number' && o.min !== undefined && value < o.min) return `must be at least ${o.min}`;
  if (typeof value === 'number' && o.max !== undefined && value > o.max) return `must be at most ${o.max}`;
  if (typeof value === 'string' && o.minLength !== undefined && value.length < o.minLength) {
    return o.minLength === 1 ? 'must not be empty' : `must be at least ${o.minLength} characters`;
  }
  try {
    return o.check?.(value) ?? null;
  } catch (err) {
    if (of === undefined) throw err;
    throw callbackFailure(of.plugin, `the check of option ${of.key}`, err);
  }
}

/**
 * The one contract for every stage and sink. A plugin is a function over records that the
 * kit makes a stream of (see createPluginStream): `create(options, ctx)` returns that function,
 * or `{ record, end }` handlers, and the kit owns batching, backpressure, and naming its
 * failures. A stage hands on what its function returns; a sink's records pass on unchanged.
 *
 * ```ts
 * export default definePlugin({
 *   name: 'drop-progress',
 *   kind: 'stage',
 *   kit: '^0.1.0',
 *   reads: ['system'],
 *   options: {},
 *   create: () => (record) =>
 *     record.kind === 'line' && record.value.subtype === 'task_progress' ? null : record,
 * });
 * ```
 *
 * subtee's own stages and sinks return a Node stream from `create` instead (record batches in
 * and out, or the raw input bytes when `input(options)` says `bytes`); that form is the
 * kit's own and is refused from a plugin.
 */
export interface PluginDefinition<O = any> {
  name: string;
  /** A `stage` hands on what its function returns; a `sink` only looks. */
  kind: 'stage' | 'sink';
  /** Kit versions supported, as a range (`^0.1.0`). */
  kit: string;
  /**
   * The line types the function is called for (`assistant`, `user`, …); other records pass it
   * by untouched. Absent: every record.
   */
  reads?: readonly string[];
  /** Accepted options; unknown keys are rejected when a config is validated. */
  options: OptionSpecs<O>;
  input?: (options: O) => 'bytes' | 'objects' | 'records';
  /**
   * Checks what the options leave to the environment (an endpoint from a variable); throws a
   * UsageError. Run for every component before any is created, so a bad value leaves no
   * output folder behind.
   */
  checkEnvironment?: (options: O, env: NodeJS.ProcessEnv) => void;
  create(options: O, ctx: PluginContext): RecordPlugin | Duplex;
}

/** The definitions of subtee's own stages and sinks: theirs alone may return a stream. */
const builtin = new WeakSet<object>();

/**
 * How a sink's end stands to the output folder's index.json, which the files sink writes once
 * the sinks after it have ended, so that it holds what they warned as they ended:
 * - `writes`: it writes index.json (the files sink);
 * - `reads`: it reads index.json once written, so index.json cannot wait for it (a report
 *   that builds its page from the folder);
 * - `unwaited`: its end warns nothing and may never come (a reader of stdout that stopped
 *   taking output, a pager left open): index.json does not wait for it;
 * - `warns`: any other sink, a plugin's too: index.json waits for its end.
 * A files sink's index.json waits for a later files sink's end too: that end may warn.
 */
export type IndexRole = 'writes' | 'reads' | 'unwaited' | 'warns';

/** What a built-in declares beside its definition. */
export interface BuiltinTraits<O> {
  /** Its role at index.json's writing, by its options (absent: `warns`). */
  indexRole?: (options: O) => IndexRole;
  /**
   * What is wrong with its options taken together (an option that needs another), or null.
   * The chain's check calls it once each option has passed its own, before anything is made.
   */
  optionsProblem?: (options: O) => string | null;
}

const indexRoles = new WeakMap<object, (options: any) => IndexRole>();
const optionsProblems = new WeakMap<object, (options: any) => string | null>();

/** What is wrong with a component's options taken together, or null (see BuiltinTraits). */
export const optionsProblemOf = (def: PluginDefinition, options: unknown): string | null =>
  optionsProblems.get(def)?.(options) ?? null;

/** A component's role at index.json's writing (see IndexRole): a plugin's is always `warns`. */
export const indexRoleOf = (def: PluginDefinition, options: unknown): IndexRole =>
  indexRoles.get(def)?.(options) ?? 'warns';

/** What a built-in needs imported before it is made (its optional peer dependencies). */
const packageLoaders = new WeakMap<object, () => Promise<unknown>>();

/**
 * One of subtee's own stages or sinks (`create` returns its stream). `loadPackages` imports
 * the optional packages it needs; its stream waits for them too, when made without it.
 */
export function defineBuiltin<O>(
  def: Omit<PluginDefinition<O>, 'create'> &
    BuiltinTraits<O> & {
      create(options: O, ctx: BuiltinContext): RecordPlugin | Duplex;
    },
  loadPackages?: () => Promise<unknown>,
): Readonly<PluginDefinition<O>> {
  const { indexRole, optionsProblem, ...definition } = def;
  const checked = definePlugin(definition as PluginDefinition<O>);
  builtin.add(checked);
  if (loadPackages) packageLoaders.set(checked, loadPackages);
  if (indexRole) indexRoles.set(checked, indexRole);
  if (optionsProblem) optionsProblems.set(checked, optionsProblem);
  return checked;
}

/** The import of the optional packages a definition needs, if it needs any. */
export const packagesOf = (def: PluginDefinition): (() => Promise<unknown>) | undefined =>
  packageLoaders.get(def);

/** What a built-in checks of its options with its code imported (see defineLoadedBuiltin). */
const codeChecks = new WeakMap<object, (options: any) => Promise<void>>();

/**
 * A built-in's check of its options that needs its code and packages imported, if it has one:
 * it throws a UsageError for a value it refuses, and makes no request.
 */
export const codeCheckOf = (def: PluginDefinition): ((options: unknown) => Promise<void>) | undefined =>
  codeChecks.get(def);

/** A stage's or sink's definition without its code (`create`): what the options are. */
export type PluginManifest<O = any> = Omit<PluginDefinition<O>, 'create'>;

/**
 * One of subtee's own stages or sinks whose code is imported only by a chain that names it.
 * The definition (name, options, checks) is at hand at once for the command line, configs and
 * the schema; `code` imports the module that makes the stream and `packages` the optional
 * packages it needs. loadChainPackages imports both before a chain is made (runChain, open()
 * and the command line call it); buildChain, which cannot wait, makes it once its code is
 * supplied (the `subtee/chain` entry imports every built-in's and hands it over, see supplyCode).
 * `check` refuses options only the imported code can judge (a URL as the ClickHouse client
 * reads it, a pino transport target pino would not find); checkChainBeforeStart calls it before
 * anything is made or started.
 */
export function defineLoadedBuiltin<O, M>(
  manifest: PluginManifest<O> & BuiltinTraits<O>,
  load: {
    code: () => Promise<M>;
    packages?: (module: M) => Promise<unknown>;
    check?: (module: M, options: O) => Promise<void>;
  },
  create: (module: M, options: O, ctx: BuiltinContext) => Duplex,
): Readonly<PluginDefinition<O>> {
  let module: M | null = null;
  const code = async () => (module ??= await load.code());
  const checked = defineBuiltin<O>(
    {
      ...manifest,
      create: (options, ctx) => {
        if (module === null)
          throw new UsageError(
            'ERR_PLUGIN_LOAD',
            `${manifest.kind} ${manifest.name}: its code is not imported yet (await loadChainPackages first)`,
          );
        return create(module, options, ctx);
      },
    },
    async () => {
      const m = await code();
      await load.packages?.(m);
    },
  );
  codeSuppliers.set(checked, (m) => (module ??= m as M));
  const { check } = load;
  if (check) codeChecks.set(checked, async (options: O) => check(await code(), options));
  return checked;
}

/** Hands a built-in loaded when named the module a program imported itself (see supplyCode). */
const codeSuppliers = new WeakMap<object, (module: unknown) => void>();

/**
 * Gives a built-in loaded when named its code at once, from a module already imported: an
 * entry that imports the code statically lets buildChain make it without waiting.
 */
export function supplyCode<M>(def: Readonly<PluginDefinition>, module: M): void {
  codeSuppliers.get(def)?.(module);
}

/** Whether a definition is one of subtee's own. */
export const isBuiltin = (def: PluginDefinition): boolean => builtin.has(def);

const NAME = /^[a-z0-9][a-z0-9._-]*$/;

/**
 * The definition checked, frozen. A plain object (the usual definition) is copied, so the object
 * passed stays the caller's, as it was: the copy holds its own properties' values (a getter is
 * read once) and frozen copies of `reads`, `options` and each option's spec, so what was checked
 * is what the kit reads, whatever is done to the object passed after. An instance of a class is
 * frozen itself: a copy would not have its private fields.
 */
export function definePlugin<O>(def: PluginDefinition<O>): Readonly<PluginDefinition<O>> {
  const checked = checkDefinition(def, def?.name ?? '(unnamed)');
  const proto = Object.getPrototypeOf(checked) as unknown;
  if (proto !== Object.prototype && proto !== null) return Object.freeze(checked);
  const options = Object.entries(checked.options as Record<string, OptionSpec>).map(([key, spec]) => [
    key,
    frozenSpec(spec),
  ]);
  return Object.freeze({
    ...checked,
    options: Object.freeze(Object.fromEntries(options)) as OptionSpecs<O>,
    ...(checked.reads === undefined ? {} : { reads: Object.freeze([...checked.reads]) }),
  });
}

/** A frozen copy of an option's spec, its lists too. */
function frozenSpec(spec: OptionSpec): OptionSpec {
  const copy: Record<string, unknown> = { ...spec };
  for (const key of ['choices', 'default'])
    if (Array.isArray(copy[key])) copy[key] = Object.freeze([...(copy[key] as unknown[])]);
  return Object.freeze(copy) as unknown as OptionSpec;
}

function checkDefinition<O>(def: PluginDefinition<O>, source: string): PluginDefinition<O> {
  const problems: string[] = [];
  if (typeof def !== 'object' || def === null)
    throw new UsageError('ERR_PLUGIN_INVALID', `plugin ${source}: does not export a definition object`);
  if (typeof def.name !== 'string' || !NAME.test(def.name))
    problems.push('name must be a lowercase identifier');
  if (def.kind !== 'stage' && def.kind !== 'sink') problems.push('kind must be "stage" or "sink"');
  if (def.reads !== undefined && !(Array.isArray(def.reads) && def.reads.every((t) => typeof t === 'string')))
    problems.push('reads must be a list of line types');
  if (typeof def.kit !== 'string' || (def.kit !== BUILTIN_KIT && !isValidRange(def.kit)))
    problems.push('kit must be a version range such as "^0.1.0"');
  if (typeof def.create !== 'function') problems.push('create must be a function');
  // Its promise would reach the kit in place of the plugin: create is called, never awaited.
  else if (def.create.constructor?.name === 'AsyncFunction')
    problems.push('create must not be async: the kit does not await it');
  if (def.checkEnvironment !== undefined && typeof def.checkEnvironment !== 'function')
    problems.push('checkEnvironment must be a function');
  if (typeof def.options !== 'object' || def.options === null)
    problems.push('options must describe the accepted options');
  else problems.push(...optionSpecProblems(def.options));
  if (problems.length > 0)
    throw new UsageError('ERR_PLUGIN_INVALID', `plugin ${source}: ${problems.join('; ')}`);
  if (def.kit !== BUILTIN_KIT && !satisfies(KIT_VERSION, def.kit)) {
    throw new UsageError(
      'ERR_PLUGIN_VERSION',
      `plugin ${def.name} supports subtee ${def.kit}, this is ${KIT_VERSION}`,
    );
  }
  return def;
}

/**
 * What no option spec may be: not an object, of a type none of the six (`int`, `bool`: no value
 * could pass it), with a `check` that is not a function, or with a default its own option
 * refuses (`create` is given it whenever a config leaves the option out).
 */
function optionSpecProblems(options: Record<string, OptionSpec>): string[] {
  const problems: string[] = [];
  for (const [key, o] of Object.entries(options)) {
    if (o === null || typeof o !== 'object') {
      const given = o === null ? 'null' : typeof o;
      problems.push(`option ${key}: its spec must be an object with a type, not ${given}`);
      continue;
    }
    if (!(OPTION_TYPES as readonly unknown[]).includes(o.type)) {
      const types = OPTION_TYPES.join(', ');
      problems.push(`option ${key}: its type must be one of ${types}, not ${JSON.stringify(o.type)}`);
      continue;
    }
    if (o.check !== undefined && typeof o.check !== 'function') {
      problems.push(`option ${key}: its check must be a function of a value`);
      continue;
    }
    if (o.default === undefined) continue;
    let problem: string | null;
    try {
      problem = optionProblem(o, o.default);
    } catch (err) {
      problem = `fails its check (${err instanceof Error ? err.message : String(err)})`;
    }
    if (problem !== null) problems.push(`option ${key}: its default ${problem}`);
  }
  return problems;
}

/** The conditions `import()` matches in a package's `exports`, in Node.js's order of preference. */
const IMPORT_CONDITIONS = new Set(['node', 'import', 'default']);

function notExported(name: string, subpath: string): Error {
  const err = new Error(`package ${name} does not export "${subpath}" to import()`);
  return Object.assign(err, { code: 'ERR_PACKAGE_PATH_NOT_EXPORTED' });
}

/** One `exports` target: a path, a list (first that resolves), or conditions (first that matches). */
function exportTarget(target: unknown, star: string | null): string | null {
  if (typeof target === 'string') {
    if (!target.startsWith('./')) return null;
    return star === null ? target : target.split('*').join(star);
  }
  if (Array.isArray(target)) {
    for (const t of target) {
      const r = exportTarget(t, star);
      if (r !== null) return r;
    }
    return null;
  }
  if (target && typeof target === 'object') {
    for (const [condition, t] of Object.entries(target)) {
      if (!IMPORT_CONDITIONS.has(condition)) continue;
      const r = exportTarget(t, star);
      if (r !== null) return r;
    }
  }
  return null;
}

/** The file `exports` maps `subpath` (`.` or `./x`) to under the import conditions, or null. */
export function resolveExports(exportsField: unknown, subpath: string): string | null {
  const isObject = exportsField !== null && typeof exportsField === 'object' && !Array.isArray(exportsField);
  const isMap = isObject && Object.keys(exportsField).some((k) => k.startsWith('.'));
  if (!isMap) return subpath === '.' ? exportTarget(exportsField, null) : null;
  const map = exportsField as Record<string, unknown>;
  if (subpath in map && !subpath.includes('*')) return exportTarget(map[subpath], null);
  // Subpath patterns (`./features/*`): the longest matching prefix wins.
  let best: { key: string; star: string } | null = null;
  for (const key of Object.keys(map)) {
    const at = key.indexOf('*');
    if (at === -1) continue;
    const [prefix, suffix] = [key.slice(0, at), key.slice(at + 1)];
    const matches = subpath.length >= key.length && subpath.startsWith(prefix) && subpath.endsWith(suffix);
    if (matches && (!best || prefix.length > best.key.indexOf('*'))) {
      best = { key, star: subpath.slice(prefix.length, subpath.length - suffix.length) };
    }
  }
  return best ? exportTarget(map[best.key], best.star) : null;
}

/**
 * Resolves a package name the way `import()` would from `baseDir`: the nearest
 * `node_modules/<name>` up the tree, and its `exports` under the import conditions, so ESM-only
 * packages (`"exports": { ".": { "import": … } }`) load. A package without `exports` is
 * resolved by Node's own resolver (its `main`). (`import.meta.resolve` takes a parent only
 * behind a flag in Node.js 20.)
 */
export function resolvePackage(spec: string, baseDir: string): string {
  const parts = spec.split('/');
  const name = spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
  const subpath = spec === name ? '.' : `./${spec.slice(name.length + 1)}`;
  for (let dir = resolve(baseDir); ; dir = dirname(dir)) {
    const pkgDir = join(dir, 'node_modules', name);
    const pkgJson = join(pkgDir, 'package.json');
    if (existsSync(pkgJson)) {
      const pkg = JSON.parse(readFileSync(pkgJson, 'utf8')) as { exports?: unknown };
      if (pkg.exports === undefined) break;
      const target = resolveExports(pkg.exports, subpath);
      if (target === null) throw notExported(name, subpath);
      return pathToFileURL(join(pkgDir, target)).href;
    }
    if (dirname(dir) === dir) break;
  }
  return pathToFileURL(createRequire(resolve(baseDir, 'package.json')).resolve(spec)).href;
}

/** Loads a plugin from a path (relative to `baseDir`) or a package name. */
export async function loadPlugin(spec: string, baseDir: string): Promise<PluginDefinition> {
  let mod: any;
  try {
    const isPath = spec.startsWith('.') || isAbsolute(spec);
    const url = isPath ? pathToFileURL(resolve(baseDir, spec)).href : resolvePackage(spec, baseDir);
    mod = await import(url);
  } catch (err) {
    // definePlugin refuses a definition as the module is imported: its code, not "cannot load".
    // Read by code, so a plugin built against another copy of subtee is told the same.
    const code = (err as { code?: unknown } | null)?.code;
    if (code === 'ERR_PLUGIN_INVALID' || code === 'ERR_PLUGIN_VERSION')
      throw new UsageError(code, (err as Error).message, err);
    const why =
      (err as NodeJS.ErrnoException)?.code === 'ERR_MODULE_NOT_FOUND' ||
      (err as NodeJS.ErrnoException)?.code === 'MODULE_NOT_FOUND'
        ? 'not found'
        : ((err as Error)?.message ?? String(err));
    throw new UsageError('ERR_PLUGIN_LOAD', `plugin ${spec}: cannot load (${why})`, err);
  }
  let def = mod?.default ?? mod?.plugin;
  if (def && typeof def === 'object' && 'default' in def && !('create' in def)) def = def.default;
  return checkDefinition(def, spec);
}

/**
 * What a plugin's callback threw, as the run's error: ERR_PLUGIN_FAILED naming the plugin and
 * the callback (even for `null`). A SubteeError stays as it is: `checkEnvironment` throws a
 * UsageError for a value it refuses.
 */
function callbackFailure(name: string, callback: string, err: unknown): SubteeError {
  if (err instanceof SubteeError) return err;
  const why = err instanceof Error ? err.message : String(err);
  return new SubteeError('ERR_PLUGIN_FAILED', `plugin ${name} failed: ${callback} threw: ${why}`, {
    cause: err,
  });
}

/**
 * Calls a plugin's `checkEnvironment`: what it throws fails the run naming the plugin (see
 * callbackFailure), as what its `create` and its function throw do, not as a bug of subtee's.
 */
export function checkPluginEnvironment(
  def: PluginDefinition,
  options: unknown,
  env: NodeJS.ProcessEnv,
): void {
  try {
    def.checkEnvironment?.call(def, options as never, env);
  } catch (err) {
    if (isBuiltin(def)) throw err;
    throw callbackFailure(def.name, 'checkEnvironment', err);
  }
}

export class Registry {
  private readonly defs = new Map<string, PluginDefinition>();

  add(def: PluginDefinition): this {
    if (this.defs.has(def.name))
      throw new UsageError(
        'ERR_PLUGIN_DUPLICATE',
        `plugin ${def.name}: a stage or sink of that name is already registered`,
      );
    this.defs.set(def.name, def);
    return this;
  }

  get(name: string): PluginDefinition | undefined {
    return this.defs.get(name);
  }

  names(): string[] {
    return [...this.defs.keys()];
  }
}
