/**
 * Options over defaults, where an option given as `undefined` keeps the default. No options
 * at all (a factory called from JavaScript with no argument) is taken as `{}`, so the
 * factory's own check (a missing session…) reports what is missing.
 */
export function withDefaults<D extends object, O extends object>(defaults: D, options: O): D & O {
  const out = { ...defaults } as Record<string, unknown>;
  for (const [k, v] of Object.entries(options ?? {})) if (v !== undefined) out[k] = v;
  return out as D & O;
}
