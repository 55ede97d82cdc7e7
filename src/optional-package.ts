import { UsageError } from './errors.js';

/**
 * The packages only some sinks use, as package.json names them (optional peer dependencies):
 * a program or a run that uses neither sink never loads them, and need not install them.
 */
export const OPTIONAL_PACKAGES = Object.freeze({
  otlp: Object.freeze({
    '@opentelemetry/api': '~1.9.1',
    '@opentelemetry/exporter-trace-otlp-http': '^0.223.1',
    '@opentelemetry/exporter-trace-otlp-proto': '^0.223.1',
    '@opentelemetry/resources': '^2.12.1',
    '@opentelemetry/sdk-trace-base': '^2.12.1',
  }),
  clickhouse: Object.freeze({ '@clickhouse/client': '^1.23.1' }),
});

export type OptionalFeature = keyof typeof OPTIONAL_PACKAGES;

const USERS: Record<OptionalFeature, string> = {
  otlp: 'the otlp sink (--otlp) needs',
  clickhouse: 'the clickhouse sink (--clickhouse) and stats --clickhouse need',
};

/** The line that installs what a feature needs, with the ranges subtee is tested with. */
export function installLine(feature: OptionalFeature): string {
  const wanted = Object.entries(OPTIONAL_PACKAGES[feature]).map(([name, range]) => `${name}@${range}`);
  return `npm install ${wanted.join(' ')}`;
}

/** The package an import failed to find, when that is why it failed. */
function missingPackage(err: unknown): string | null {
  const e = err as { code?: unknown; message?: unknown } | null;
  if (e?.code !== 'ERR_MODULE_NOT_FOUND' && e?.code !== 'MODULE_NOT_FOUND') return null;
  const named = /Cannot find (?:package|module) '((?:@[^/']+\/)?[^/']+)/.exec(String(e.message));
  return named ? named[1] : null;
}

/**
 * Imports what a feature needs (`load`, a dynamic `import()` of its packages), once. A package
 * that cannot be found fails with ERR_OPTIONAL_DEPENDENCY (exit 2), naming it and the line that
 * installs it; any other failure is the import's own.
 */
export async function importOptional<T>(feature: OptionalFeature, load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (err) {
    const missing = missingPackage(err);
    if (missing === null) throw err;
    throw new UsageError(
      'ERR_OPTIONAL_DEPENDENCY',
      `${USERS[feature]} ${missing}, which is not installed: ` +
        `${installLine(feature)} (beside subtee; -g for a global subtee)`,
      err,
    );
  }
}

/** One promise per feature: loaded at most once per process, whoever asks first. */
export function onceLoader<T>(feature: OptionalFeature, load: () => Promise<T>): () => Promise<T> {
  let loading: Promise<T> | null = null;
  return () => {
    // A failed load is not kept: a package installed since can still be found.
    loading ??= importOptional(feature, load).catch((err: unknown) => {
      loading = null;
      throw err;
    });
    return loading;
  };
}
