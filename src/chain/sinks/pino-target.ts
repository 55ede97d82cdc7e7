import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { isAbsolute, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { UsageError } from '../../errors.js';

// Whether pino finds the modules of a transport config, checked before a chain is made, as
// pino's transport() finds them when the sink starts it (a worker then loads each).

/**
 * The files pino finds a package name or relative path from when the config gives no `caller`:
 * the calls on the stack as the sink makes its transport, this folder's pino sink and, above
 * it, the chain's modules.
 */
const OWN_CALLERS: readonly string[] = [
  new URL('pino.js', import.meta.url).href,
  new URL('../chain.js', import.meta.url).href,
];

/** The targets a transport config names, for its errors: `pino transport pino/file, my-transport`. */
export function transportTargets(t: Record<string, unknown>): string {
  const names = transportTargetsOf(t).filter((x) => typeof x === 'string');
  return names.length > 0 ? names.join(', ') : '(no target)';
}

/** Every `target` pino resolves in a transport config: its own, or those of its lists. */
function transportTargetsOf(transport: Record<string, unknown>): unknown[] {
  const targetsOf = (list: unknown): unknown[] =>
    (Array.isArray(list) ? list : []).map((dest) => (dest as { target?: unknown } | null)?.target);
  if (Array.isArray(transport.targets)) {
    // pino skips an entry with neither a target nor a pipeline.
    const dests = transport.targets.filter((dest) => dest !== null && typeof dest === 'object');
    return [
      ...targetsOf(dests.filter((dest) => dest.target)),
      ...dests.filter((dest) => dest.pipeline).flatMap((dest) => targetsOf(dest.pipeline)),
    ];
  }
  if (Array.isArray(transport.pipeline)) return targetsOf(transport.pipeline);
  return [transport.target];
}

/** The name a bundler maps a target to (pino reads `globalThis.__bundlerPathsOverrides`). */
function bundled(target: string): string {
  const overrides = (globalThis as { __bundlerPathsOverrides?: unknown }).__bundlerPathsOverrides;
  const mapped =
    overrides !== null && typeof overrides === 'object' && Object.hasOwn(overrides, target)
      ? (overrides as Record<string, unknown>)[target]
      : undefined;
  return typeof mapped === 'string' && mapped !== '' ? mapped : target;
}

/**
 * Whether pino finds a target: `pino/file`; an absolute path or a `file://` URL, which its
 * worker imports (or requires, `.js` added) as it is; else a package name or a relative path
 * resolved from the first of its callers that resolves it (`node:repl`: the working folder).
 */
function found(given: unknown, callers: readonly unknown[]): boolean {
  if (typeof given !== 'string' || given === '') return false;
  const target = bundled(given);
  if (target === 'pino/file') return true;
  if (target.startsWith('file://')) {
    try {
      return existsSync(fileURLToPath(target));
    } catch {
      return false;
    }
  }
  if (isAbsolute(target)) return resolves(target, OWN_CALLERS[0]);
  return callers.some(
    (from) => typeof from === 'string' && resolves(target, from === 'node:repl' ? process.cwd() + sep : from),
  );
}

function resolves(target: string, from: string): boolean {
  try {
    createRequire(from).resolve(target);
    return true;
  } catch {
    return false;
  }
}

/**
 * Refuses a transport config a target of which pino would not find (a package not installed, a
 * path that does not exist): ERR_CONFIG, before anything is made or started. A target that is
 * found but fails as it loads is found when the sink starts it.
 */
export async function checkTransportTargets(transport: Record<string, unknown> | undefined): Promise<void> {
  if (transport === undefined) return;
  const { caller } = transport;
  const callers = caller === undefined ? OWN_CALLERS : typeof caller === 'string' ? [caller] : caller;
  if (!Array.isArray(callers) || !callers.every((c) => typeof c === 'string'))
    throw new UsageError('ERR_CONFIG', 'pino transport: caller must be a file path or a list of them');
  const lost = transportTargetsOf(transport).find((target) => !found(target, callers));
  if (lost === undefined) return;
  throw new UsageError(
    'ERR_CONFIG',
    `pino transport ${transportTargets(transport)}: cannot load (no module is found for target ` +
      `${JSON.stringify(lost) ?? String(lost)}: give pino/file, an installed package, ` +
      'or an absolute path or file:// URL that exists)',
  );
}
