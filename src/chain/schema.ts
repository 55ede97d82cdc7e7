import type { OptionSpec, Registry } from './plugin.js';

function optionSchema(o: OptionSpec): Record<string, unknown> {
  const s: Record<string, unknown> = { type: o.type === 'number' ? 'integer' : o.type, description: o.description };
  if (o.choices) s.enum = [...o.choices];
  if (o.min !== undefined) s.minimum = o.min;
  return s;
}

/**
 * The JSON Schema of a config file, derived from the registered stages and sinks so it cannot
 * drift from what the loader accepts (a test compares it with the shipped file).
 */
export function configSchema(registry: Registry): Record<string, unknown> {
  const component = (kind: 'stage' | 'sink') =>
    registry
      .names()
      .map((n) => registry.get(n)!)
      .filter((d) => d.kind === kind)
      .map((d) => ({
        type: 'object',
        title: d.name,
        required: ['use', ...Object.entries(d.options).filter(([, o]) => o.required).map(([k]) => k)],
        additionalProperties: false,
        properties: { use: { const: d.name }, ...Object.fromEntries(Object.entries(d.options).map(([k, o]) => [k, optionSchema(o)])) },
      }));
  return {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    title: 'subtee config',
    type: 'object',
    additionalProperties: false,
    properties: {
      $schema: { type: 'string' },
      plugins: { type: 'array', items: { type: 'string' }, description: 'plugin modules: paths relative to this file, package names, or bundled plugin names' },
      stages: { type: 'array', description: 'the stages in order; the line parser comes first', items: { oneOf: component('stage') } },
      sinks: { type: 'array', description: 'the sinks; each receives every record', items: { oneOf: component('sink') } },
    },
  };
}
