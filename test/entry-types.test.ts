import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  createClickHouseSink,
  createOtlpSink,
  createReportSink,
  Session,
  type ChannelRouterOptions,
  type ClickHouseSinkOptions,
  type FilesSinkOptions,
  type IdleWatchdogOptions,
  type InputFormatOptions,
  type LineParserOptions,
  type ObjectSourceOptions,
  type OtlpSinkOptions,
  type PinoSinkOptions,
  type ProjectionSinkOptions,
  type ReportSinkOptions,
  type StdoutSinkOptions,
  type ThinkingTruncatorOptions,
  type VersionGuardOptions,
} from '../src/index.js';
import { tmpDir } from './helpers.js';

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
