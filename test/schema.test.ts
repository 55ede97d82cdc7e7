import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { BUILTINS } from '../src/chain/builtins.js';
import { OPTIONS, parseArgs } from '../src/chain/options.js';
import { BIN, ROOT, tmpDir } from './helpers.js';

const schema = JSON.parse(readFileSync(join(ROOT, 'schema', 'subtee-config.schema.json'), 'utf8'));
const validate = new Ajv2020({ allErrors: true, strict: true }).compile(schema);

/** The errors a JSON Schema validator gives, as `path keyword` strings. */
function schemaErrors(config: unknown): string[] {
  return validate(config) ? [] : validate.errors!.map((e) => `${e.instancePath} ${e.keyword}`);
}

/** The JSON blocks of README.md that are configs (they have stages or sinks). */
function readmeConfigs(): unknown[] {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  return [...readme.matchAll(/```json\n([\s\S]*?)```/g)].map((m) => JSON.parse(m[1])).filter((c) => 'stages' in c || 'sinks' in c);
}

test('the shipped schema accepts the README config, every example, and stages and sinks of plugins it does not know', () => {
  const configs = readmeConfigs();
  assert.equal(configs.length, 1);
  for (const c of configs) assert.deepEqual(schemaErrors(c), [], 'README config');
  for (const name of readdirSync(join(ROOT, 'examples')).filter((f) => f.endsWith('.json'))) {
    assert.deepEqual(schemaErrors(JSON.parse(readFileSync(join(ROOT, 'examples', name), 'utf8'))), [], name);
  }
  const withPlugins = {
    plugins: ['./drop-progress.js', 'subtee-plugin-x'],
    stages: [{ use: 'line-parser' }, { use: 'drop-progress', level: 3, anything: ['goes'] }],
    sinks: [{ use: 'files', out: 'logs' }, { use: 'my-sink', url: 'http://127.0.0.1:1' }],
  };
  assert.deepEqual(schemaErrors(withPlugins), []);
});

test('the schema still checks built-in stages and sinks, and its errors point at the option', () => {
  const cases: Array<[unknown, string[]]> = [
    [{ stages: [{ use: 'line-parser', maxLineBytes: 2048.5 }] }, ['/stages/0/maxLineBytes type', ' if']],
    [{ stages: [{ use: 'line-parser', maxLineBytes: 1e300 }] }, ['/stages/0/maxLineBytes maximum', ' if']],
    [{ stages: [{ use: 'line-parser' }, { use: 'thinking-truncator', mode: 'loud' }] }, ['/stages/1/mode enum', ' if']],
    [{ stages: [{ use: 'channel-router', colour: 1 }] }, ['/stages/0 additionalProperties', ' if']],
    [{ sinks: [{ use: 'files' }] }, ['/sinks/0 required', ' if']],
    [{ sinks: [{ use: 'files', out: '' }] }, ['/sinks/0/out minLength', ' if']],
    [{ sinks: [{ use: 'line-parser' }] }, ['/sinks/0/use not']],
    [{ stages: [{ mode: 'keep' }] }, ['/stages/0 required']],
  ];
  for (const [config, expected] of cases) {
    // ajv reports a failed `then` both at the option and as the `if` that chose it: both name the entry.
    assert.deepEqual(schemaErrors(config).map((e) => e.replace(/^(\/\w+\/\d+) if$/, ' if')).sort(), expected.sort(), JSON.stringify(config));
  }
  assert.ok(!JSON.stringify(schema).includes('"oneOf"'));
});

function configCheck(config: unknown) {
  const p = join(tmpDir(), 'c.json');
  writeFileSync(p, JSON.stringify(config));
  return spawnSync(process.execPath, [BIN, '--config', p], { input: '', encoding: 'utf8', timeout: 30_000 });
}

test('a config and the command line refuse the same values: whole numbers that are exact, a version range, a folder name', () => {
  const out = join(tmpDir(), 'o');
  const cases: Array<[Record<string, unknown>, string[], RegExp]> = [
    [{ stages: [{ use: 'line-parser', maxLineBytes: 2048.5 }] }, ['--max-line-bytes', '2048.5'], /must be a whole number/],
    [{ stages: [{ use: 'line-parser', maxLineBytes: 1e300 }] }, ['--max-line-bytes', '1' + '0'.repeat(300)], /whole number/],
    [{ stages: [{ use: 'line-parser' }, { use: 'version-guard', requireVersion: 'banana' }] }, ['--require-version', 'banana'], /must be a version range/],
    [{ stages: [{ use: 'line-parser' }, { use: 'idle-watchdog', onStall: 'panic' }] }, ['--on-stall', 'panic'], /must be one of fail, warn/],
    [{ sinks: [{ use: 'files', out: '' }] }, ['--out', ''], /must not be empty|needs a value/],
  ];
  for (const [config, flags, message] of cases) {
    const c = configCheck({ stages: [{ use: 'line-parser' }], ...config, sinks: config.sinks ?? [{ use: 'files', out }] });
    assert.equal(c.status, 2, `config ${JSON.stringify(config)}: ${c.stderr}`);
    assert.match(c.stderr, /\[ERR_CONFIG\]\n$/);
    assert.match(c.stderr, message);
    assert.throws(() => parseArgs(flags), { code: 'ERR_BAD_OPTION', message }, flags.join(' '));
  }
});

test('each flag that sets a stage option takes its type, bounds, choices, default and help from that option', () => {
  const targeted = OPTIONS.filter((o) => o.target);
  assert.ok(targeted.length >= 10);
  for (const o of targeted) {
    const spec = BUILTINS.find((d) => d.name === o.target!.use)!.options[o.target!.key];
    assert.ok(spec, o.name);
    assert.ok(o.help.startsWith(spec.description), `${o.name}: help is the option's description`);
    assert.deepEqual([o.choices, o.min], [spec.choices, spec.min], o.name);
    if (o.name !== 'out' && o.name !== 'pino') assert.equal(o.default, spec.default, `${o.name}: default`);
    assert.equal(o.type, spec.type === 'integer' ? 'number' : spec.type, o.name);
  }
  // Flags not given leave stage options to the stage's own defaults (one source for each).
  const o = parseArgs([]);
  for (const d of targeted) if (d.name !== 'out' && d.name !== 'force') assert.equal(o[d.name], undefined, d.name);
  assert.equal(o.out, 'subtee-out');
});
