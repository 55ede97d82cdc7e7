import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Session } from '../src/entry/chain.js';
import {
  type ChannelRouterOptions,
  type IdleWatchdogOptions,
  type InputFormatOptions,
  type LineParserOptions,
  type ObjectSourceOptions,
  type ThinkingTruncatorOptions,
  type VersionGuardOptions,
} from '../src/entry/stages.js';
import {
  createClickHouseSink,
  createOtlpSink,
  createReportSink,
  type ClickHouseSinkOptions,
  type FilesSinkOptions,
  type OtlpSinkOptions,
  type PinoSinkOptions,
  type ProjectionSinkOptions,
  type ReportSinkOptions,
  type StdoutSinkOptions,
} from '../src/entry/sinks.js';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, tmpDir } from './helpers/helpers.js';

// Compiling this file is most of the test: a program types its options from the package entry.
test("every factory's options type and every built-in sink's factory come from the package entry", () => {
  const session = new Session();
  const stages: [
    LineParserOptions,
    ObjectSourceOptions,
    InputFormatOptions,
    VersionGuardOptions,
    ChannelRouterOptions,
    ThinkingTruncatorOptions,
    IdleWatchdogOptions,
  ] = [
    { session, maxLineBytes: 4096 },
    { session, maxBatch: 8 },
    { session, format: 'claude' },
    { session, requireVersion: '>=2.1.0' },
    { session },
    { session, mode: 'drop' },
    { session, idleTimeoutMs: 1000, onStall: 'warn' },
  ];
  const sinks: [FilesSinkOptions, StdoutSinkOptions, PinoSinkOptions, ProjectionSinkOptions | null] = [
    { session, out: 'out' },
    { mode: 'none' },
    { session, destination: '-' },
    null,
  ];
  assert.equal(stages.length + sinks.length, 11);
  const report: ReportSinkOptions = { session, quiet: true };
  const otlp: OtlpSinkOptions = { session, url: 'http://127.0.0.1:1', flushTimeoutMs: 0 };
  const clickhouse: ClickHouseSinkOptions = {
    session,
    url: 'http://127.0.0.1:1',
    flushTimeoutMs: 0,
    spoolDir: tmpDir(),
  };
  const factories = [
    () => createReportSink(report),
    () => createOtlpSink(otlp),
    () => createClickHouseSink(clickhouse),
  ];
  for (const make of factories) {
    const sink = make();
    assert.equal(typeof sink.write, 'function');
    sink.destroy();
  }
});

test('the package entry is small: open(), the errors, ' +
  'the plugin contract; the rest in typed subpaths', async () => {
  const text = readFileSync(join(ROOT, 'src', 'index.ts'), 'utf8');
  assert.doesNotMatch(text, /export \*/, 'no export *');
  const declared = [...text.matchAll(/export (?:type )?\{([^}]*)\}/g)].flatMap((m) =>
    m[1]
      .split(',')
      .map((name) => name.replace(/^\s*type\s+/, '').trim())
      .filter(Boolean),
  );
  assert.ok(declared.length <= 60, `${declared.length} names declared`);
  const entry: Record<string, unknown> = await import('../src/index.js');
  const runtime = Object.keys(entry);
  assert.ok(runtime.length <= 30, `${runtime.length} runtime exports: ${runtime.join(', ')}`);
  for (const name of ['open', 'definePlugin', 'SubteeError', 'UsageError', 'EXIT', 'rewriteText'])
    assert.ok(runtime.includes(name), name);
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  for (const sub of ['chain', 'stages', 'sinks', 'adapters', 'model', 'views']) {
    const target = pkg.exports[`./${sub}`];
    assert.ok(target, `subtee/${sub} is exported`);
    assert.ok(existsSync(join(ROOT, target.types)) && existsSync(join(ROOT, target.default)), `subtee/${sub}`);
  }
  const chain: Record<string, unknown> = await import('../src/entry/chain.js');
  assert.equal(typeof chain.runChain, 'function');
});
