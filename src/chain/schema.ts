import { OPTIONAL_STAGES } from './chain.js';
import type { OptionSpec, PluginDefinition, Registry } from './plugin.js';

function optionSchema(o: OptionSpec): Record<string, unknown> {
  const s: Record<string, unknown> = { type: o.type };
  if (o.description !== undefined) s.description = o.description;
  if (o.choices) s.enum = [...o.choices];
  if (o.min !== undefined) s.minimum = o.min;
  // 1e300 is a whole number to JSON Schema; subtee takes only numbers that are exact.
  if (o.max !== undefined || o.type === 'integer') s.maximum = o.max ?? Number.MAX_SAFE_INTEGER;
  if (o.minLength !== undefined) s.minLength = o.minLength;
  if (o.default !== undefined && !o.defaultVaries) s.default = o.default;
  return s;
}

const defName = (d: PluginDefinition) => `${d.kind}-${d.name}`;

/**
 * The schema of one list entry: `use` names the stage or sink; for a registered one its
 * options are checked exactly (chosen with `if`/`then` on `use`, so an error points at that
 * entry's option, not at every branch of a `oneOf`), and any other name is left open for a
 * plugin the schema does not know.
 */
function entrySchema(
  kind: 'stage' | 'sink',
  defs: PluginDefinition[],
  others: PluginDefinition[],
): Record<string, unknown> {
  const mine = defs.filter((d) => d.kind === kind);
  return {
    type: 'object',
    required: ['use'],
    properties: {
      use: {
        type: 'string',
        minLength: 1,
        description: `the ${kind}: ${mine.map((d) => d.name).join(', ')}, or one a plugin registers`,
        ...(others.length > 0 ? { not: { enum: others.map((d) => d.name) } } : {}),
      },
    },
    allOf: mine.map((d) => ({
      if: { properties: { use: { const: d.name } }, required: ['use'] },
      then: { $ref: `#/$defs/${defName(d)}` },
    })),
  };
}

/**
 * The JSON Schema of a config file, derived from the registered stages and sinks so it cannot
 * drift from what the loader accepts (a test compares it with the shipped file).
 */
export function configSchema(registry: Registry): Record<string, unknown> {
  const defs = registry.names().map((n) => registry.get(n)!);
  const $defs = Object.fromEntries(
    defs.map((d) => [
      defName(d),
      {
        type: 'object',
        title: d.name,
        required: [
          'use',
          ...Object.entries(d.options)
            .filter(([, o]) => o.required)
            .map(([k]) => k),
        ],
        additionalProperties: false,
        properties: {
          use: { const: d.name },
          ...Object.fromEntries(Object.entries(d.options).map(([k, o]) => [k, optionSchema(o)])),
        },
      },
    ]),
  );
  return {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    title: 'subtee config',
    type: 'object',
    additionalProperties: false,
    properties: {
      $schema: { type: 'string' },
      plugins: {
        type: 'array',
        items: { type: 'string', minLength: 1 },
        description: 'plugin modules: paths relative to this file, package names, or bundled plugin names',
      },
      stages: {
        type: 'array',
        description:
          'the stages in order; each default stage not listed runs too, after the default one before it',
        items: entrySchema(
          'stage',
          defs,
          defs.filter((d) => d.kind === 'sink'),
        ),
      },
      leaveOut: {
        type: 'array',
        uniqueItems: true,
        items: { enum: [...OPTIONAL_STAGES] },
        description: 'default stages not to run',
      },
      sinks: {
        type: 'array',
        description: 'the sinks; each receives every record',
        items: entrySchema(
          'sink',
          defs,
          defs.filter((d) => d.kind === 'stage'),
        ),
      },
    },
    $defs,
  };
}
