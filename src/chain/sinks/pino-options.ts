import type { Logger } from 'pino';
import { CUT_LENGTHS } from '../../model/display.js';
import type { SinkRun } from '../../model/session.js';
import { BUILTIN_KIT, type PluginManifest } from '../plugin.js';

/**
 * The pino sink's options (defaults, types, specs) and definition without its code: at hand for
 * the command line, configs and the schema. Its code (pino.ts) is imported only by a chain that
 * names it (builtins.ts).
 */

export const PINO_SINK_DEFAULTS = Object.freeze({
  /** A file path, or `-` for stdout. Ignored when `transport` is set. */
  destination: '-',
  /** Longest content logged per event, in characters (the display policy's `content` class). */
  maxContentChars: CUT_LENGTHS.content.chars,
});

/**
 * What is wrong with a transport config, or null: the check of the option. Only its shape, one
 * of the three forms pino takes; whether pino finds its targets is checked with the sink's code
 * (checkTransportTargets), before the chain is made, and whether they load when the sink starts it.
 */
export function transportProblem(transport: Record<string, unknown>): string | null {
  const forms = [
    typeof transport.target === 'string' && transport.target !== '',
    Array.isArray(transport.targets),
    Array.isArray(transport.pipeline),
  ].filter(Boolean).length;
  return forms === 1 ? null : 'must have one of target (a module), targets (a list) or pipeline (a list)';
}

export interface PinoSinkOptions {
  destination?: string;
  /** Any pino transport config (`{ target, options }`, `{ targets }` or `{ pipeline }`). */
  transport?: Record<string, unknown>;
  /**
   * A pino logger (or child) of the host application to log through instead of a destination
   * of subtee's own. Its `time` stays the host's; the line's `timestamp` is added as a field.
   * subtee flushes it at the end but never ends it. The host's logger serialises the lines, so
   * C1 and bidi controls, U+2028 and U+2029 stand raw in its JSON strings unless it escapes
   * them (pino's `hooks.streamWrite`, as subtee's own transport logger does).
   */
  logger?: Logger;
  maxContentChars?: number;
  /** The chain's session, shared by every stage (required). */
  session: SinkRun;
}

export const pinoSinkDefinition: PluginManifest<Omit<PinoSinkOptions, 'session' | 'logger'>> = {
  name: 'pino',
  kind: 'sink',
  kit: BUILTIN_KIT,
  options: {
    destination: {
      type: 'string',
      minLength: 1,
      default: PINO_SINK_DEFAULTS.destination,
      description: 'also log one pino line per event to this file (appended to; - for stdout)',
    },
    transport: {
      type: 'object',
      check: transportProblem,
      description:
        'a pino transport config: { "target": …, "options": … }, { "targets": […] } ' +
        'or { "pipeline": […] }',
    },
    maxContentChars: {
      type: 'integer',
      min: 1,
      default: PINO_SINK_DEFAULTS.maxContentChars,
      description: 'longest content per event',
    },
  },
};
