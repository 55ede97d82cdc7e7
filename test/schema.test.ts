import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { BUILTINS, builtinRegistry } from '../src/chain/builtins.js';
import { checkSpec } from '../src/chain/config.js';
import { optionProblem } from '../src/chain/plugin.js';
import { LINE_PARSER_DEFAULTS } from '../src/chain/stages/line-parser.js';
import { OBJECT_SOURCE_DEFAULTS } from '../src/chain/stages/object-source.js';
import { INPUT_FORMAT_DEFAULTS } from '../src/chain/stages/input-format.js';
import { VERSION_GUARD_DEFAULTS } from '../src/chain/stages/version-guard.js';
import { THINKING_TRUNCATOR_DEFAULTS } from '../src/chain/stages/thinking-truncator.js';
import { IDLE_WATCHDOG_DEFAULTS } from '../src/chain/stages/idle-watchdog.js';
import { FILES_SINK_DEFAULTS } from '../src/chain/sinks/files.js';
import { STDOUT_SINK_DEFAULTS } from '../src/chain/sinks/stdout.js';
import { PINO_SINK_DEFAULTS } from '../src/chain/sinks/pino.js';
import { OTLP_SINK_DEFAULTS } from '../src/chain/sinks/otlp.js';
import { CLICKHOUSE_SINK_DEFAULTS } from '../src/chain/sinks/clickhouse.js';
import { REPORT_SINK_DEFAULTS } from '../src/chain/sinks/report.js';
import { REPORT_DEFAULTS } from '../src/views/report/model.js';
import { namedAsFlags, OPTIONS, parseArgs } from '../src/cli/options.js';
import { BIN, ROOT, tmpDir } from './helpers/helpers.js';
import { allDocs } from './helpers/docs.js';

const schema = JSON.parse(readFileSync(join(ROOT, 'schema', 'subtee-config.schema.json'), 'utf8'));
const validate = new Ajv2020({ allErrors: true, strict: true }).compile(schema);

/** The errors a JSON Schema validator gives, as `path keyword` strings. */
function schemaErrors(config: unknown): string[] {
  return validate(config) ? [] : validate.errors!.map((e) => `${e.instancePath} ${e.keyword}`);
}

/** The JSON blocks of the documentation that are configs (they have stages or sinks). */
function readmeConfigs(): unknown[] {
  const readme = allDocs();
  return [...readme.matchAll(/```json\n([\s\S]*?)```/g)]
    .map((m) => JSON.parse(m[1]))
    .filter((c) => 'stages' in c || 'sinks' in c);
}

test('the shipped schema accepts the documented config, every ' +
  'example, and stages and sinks of plugins it does not know', () => {
  const configs = readmeConfigs();
  assert.ok(configs.length >= 2, `${configs.length} configs`);
  for (const c of configs) assert.deepEqual(schemaErrors(c), [], 'documented config');
  for (const name of readdirSync(join(ROOT, 'examples')).filter((f) => f.endsWith('.json'))) {
    assert.deepEqual(schemaErrors(JSON.parse(readFileSync(join(ROOT, 'examples', name), 'utf8'))), [], name);
  }
  const withPlugins = {
    plugins: ['./drop-progress.js', 'subtee-plugin-x'],
    stages: [{ use: 'line-parser' }, { use: 'drop-progress', level: 3, anything: ['goes'] }],
    sinks: [
      { use: 'files', out: 'logs' },
      { use: 'my-sink', url: 'http://127.0.0.1:1' },
    ],
  };
  assert.deepEqual(schemaErrors(withPlugins), []);
});

test('the schema still checks built-in stages and sinks, and its errors point at the option', () => {
  const cases: Array<[unknown, string[]]> = [
    [{ stages: [{ use: 'line-parser', maxLineBytes: 2048.5 }] }, ['/stages/0/maxLineBytes type', ' if']],
    [{ stages: [{ use: 'line-parser', maxLineBytes: 1e300 }] }, ['/stages/0/maxLineBytes maximum', ' if']],
    [
      { stages: [{ use: 'line-parser' }, { use: 'thinking-truncator', mode: 'loud' }] },
      ['/stages/1/mode enum', ' if'],
    ],
    [{ stages: [{ use: 'channel-router', colour: 1 }] }, ['/stages/0 additionalProperties', ' if']],
    [{ sinks: [{ use: 'files' }] }, ['/sinks/0 required', ' if']],
    [{ sinks: [{ use: 'files', out: '' }] }, ['/sinks/0/out minLength', ' if']],
    [{ sinks: [{ use: 'line-parser' }] }, ['/sinks/0/use not']],
    [{ stages: [{ mode: 'keep' }] }, ['/stages/0 required']],
  ];
  for (const [config, expected] of cases) {
    // ajv reports a failed `then` both at the option and as the `if` that chose it: both name the entry.
    assert.deepEqual(
      schemaErrors(config)
        .map((e) => e.replace(/^(\/\w+\/\d+) if$/, ' if'))
        .sort(),
      expected.sort(),
      JSON.stringify(config),
    );
  }
  assert.ok(!JSON.stringify(schema).includes('"oneOf"'));
});

function configCheck(config: unknown) {
  const p = join(tmpDir(), 'c.json');
  writeFileSync(p, JSON.stringify(config));
  return spawnSync(process.execPath, [BIN, '--config', p], { input: '', encoding: 'utf8', timeout: 30_000 });
}

test('a config and the command line refuse the same values: whole ' +
  'numbers that are exact, a version range, a folder name', () => {
  const out = join(tmpDir(), 'o');
  const cases: Array<[Record<string, unknown>, string[], RegExp]> = [
    [
      { stages: [{ use: 'line-parser', maxLineBytes: 2048.5 }] },
      ['--max-line-bytes', '2048.5'],
      /must be a whole number/,
    ],
    [
      { stages: [{ use: 'line-parser', maxLineBytes: 1e300 }] },
      ['--max-line-bytes', '1' + '0'.repeat(300)],
      /whole number/,
    ],
    [
      { stages: [{ use: 'line-parser' }, { use: 'version-guard', requireVersion: 'banana' }] },
      ['--require-version', 'banana'],
      /must be a version range/,
    ],
    [
      { stages: [{ use: 'line-parser' }, { use: 'idle-watchdog', onStall: 'panic' }] },
      ['--on-stall', 'panic'],
      /must be one of fail, warn/,
    ],
    [{ sinks: [{ use: 'files', out: '' }] }, ['--out', ''], /must not be empty|needs a value/],
  ];
  for (const [config, flags, message] of cases) {
    const c = configCheck({
      stages: [{ use: 'line-parser' }],
      ...config,
      sinks: config.sinks ?? [{ use: 'files', out }],
    });
    assert.equal(c.status, 2, `config ${JSON.stringify(config)}: ${c.stderr}`);
    assert.match(c.stderr, /\[ERR_CONFIG\]\n$/);
    assert.match(c.stderr, message);
    assert.throws(() => parseArgs(flags), { code: 'ERR_BAD_OPTION', message }, flags.join(' '));
  }
});

test('each flag that sets a stage option takes its type, ' +
  'bounds, choices, default and help from that option', () => {
  const targeted = OPTIONS.filter((o) => o.target);
  assert.ok(targeted.length >= 10);
  for (const o of targeted) {
    const spec = BUILTINS.find((d) => d.name === o.target!.use)!.options[o.target!.key];
    assert.ok(spec, o.name);
    const described = namedAsFlags(String(spec.description), o.target!.use);
    assert.ok(o.help.startsWith(described), `${o.name}: help is the option's description`);
    assert.deepEqual([o.choices, o.min], [spec.choices, spec.min], o.name);
    if (o.name !== 'out' && o.name !== 'pino') assert.equal(o.default, spec.default, `${o.name}: default`);
    assert.equal(o.type, spec.type === 'integer' ? 'number' : spec.type, o.name);
  }
  // Flags not given leave stage options to the stage's own defaults (one source for each).
  const o = parseArgs([]);
  for (const d of targeted)
    if (d.name !== 'out' && d.name !== 'force') assert.equal(o[d.name], undefined, d.name);
  assert.equal(o.out, 'subtee-out');
});

test('a whole-number option of any built-in refuses a fraction, in a config and in the schema', () => {
  // ClickHouse's batchRows of 2.5 was accepted while the files sink's maxOpenFiles of 8.5 was refused.
  const config = {
    stages: [{ use: 'line-parser' }, { use: 'channel-router' }],
    sinks: [{ use: 'clickhouse', url: 'http://ch:8123', batchRows: 2.5 }],
  };
  assert.throws(() => checkSpec(config, builtinRegistry(), 'config'), {
    code: 'ERR_CONFIG',
    message: /batchRows: must be a whole number/,
  });
  assert.ok(schemaErrors(config).includes('/sinks/0/batchRows type'), schemaErrors(config).join());
  for (const def of BUILTINS) {
    for (const [key, o] of Object.entries(def.options)) {
      if (o.type !== 'number' && o.type !== 'integer') continue;
      assert.ok(optionProblem(o, (o.min ?? 0) + 2.5), `${def.name}.${key} accepts a fraction`);
    }
  }
});

/** Each built-in's factory defaults: what it uses when an option is left out. */
const FACTORY_DEFAULTS: Record<string, object> = {
  'line-parser': LINE_PARSER_DEFAULTS,
  'object-source': OBJECT_SOURCE_DEFAULTS,
  'input-format': INPUT_FORMAT_DEFAULTS,
  'version-guard': VERSION_GUARD_DEFAULTS,
  'thinking-truncator': THINKING_TRUNCATOR_DEFAULTS,
  'idle-watchdog': IDLE_WATCHDOG_DEFAULTS,
  files: FILES_SINK_DEFAULTS,
  stdout: STDOUT_SINK_DEFAULTS,
  pino: PINO_SINK_DEFAULTS,
  otlp: OTLP_SINK_DEFAULTS,
  clickhouse: CLICKHOUSE_SINK_DEFAULTS,
  report: { ...REPORT_SINK_DEFAULTS, ...REPORT_DEFAULTS },
};

test('every built-in option its factory has a constant ' +
  'default for states it, in the spec and the schema', () => {
  let checked = 0;
  for (const def of BUILTINS) {
    const defaults = FACTORY_DEFAULTS[def.name] ?? {};
    const kind = def.kind === 'stage' ? 'stage' : 'sink';
    const shipped = schema.$defs[`${kind}-${def.name}`].properties;
    for (const [key, o] of Object.entries(def.options)) {
      const value = (defaults as Record<string, unknown>)[key];
      if (value === undefined || value === null) continue;
      checked++;
      assert.deepEqual(o.default, value, `${def.name}.${key}: default`);
      const text = String(o.description);
      assert.doesNotMatch(text, /\(default \d/, `${def.name}.${key}: default only in the text`);
      if (o.defaultVaries) continue;
      assert.deepEqual(shipped[key].default, value, `${def.name}.${key}: schema default`);
    }
  }
  assert.ok(checked >= 35, `${checked} defaults checked`);
});
