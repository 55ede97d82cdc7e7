import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { Session } from '../src/entry/chain.js';
import {
  createChannelRouter,
  createIdleWatchdog,
  createLineParser,
  createThinkingTruncator,
  createVersionGuard,
} from '../src/entry/stages.js';
import { createFilesSink, createPinoSink } from '../src/entry/sinks.js';
import { createProjectionSink } from '../src/chain/sinks/projection.js';
import { Projection } from '../src/views/projection.js';
import { tmpDir } from './helpers/helpers.js';

test('every factory that shares run state refuses to run without a session', () => {
  const out = join(tmpDir(), 'out');
  const factories: Array<[string, () => unknown]> = [
    ['line parser', () => createLineParser({} as never)],
    ['version guard', () => createVersionGuard({} as never)],
    ['channel router', () => createChannelRouter({} as never)],
    ['thinking truncator', () => createThinkingTruncator({} as never)],
    ['idle watchdog', () => createIdleWatchdog({} as never)],
    ['files sink', () => createFilesSink({ out } as never)],
    ['pino sink', () => createPinoSink({ destination: join(out, 'p.log') } as never)],
    ['projection sink', () => createProjectionSink({ projection: new Projection(new Session()) } as never)],
  ];
  for (const [name, make] of factories) {
    assert.throws(make, { code: 'ERR_SESSION_REQUIRED' }, name);
  }
});

test('a factory called with no options at all refuses the same way, with the same code', () => {
  const factories: Array<[string, () => unknown]> = [
    ['line parser', () => (createLineParser as (o?: unknown) => unknown)()],
    ['version guard', () => (createVersionGuard as (o?: unknown) => unknown)()],
    ['channel router', () => (createChannelRouter as (o?: unknown) => unknown)()],
    ['thinking truncator', () => (createThinkingTruncator as (o?: unknown) => unknown)()],
    ['idle watchdog', () => (createIdleWatchdog as (o?: unknown) => unknown)()],
    ['projection sink', () => (createProjectionSink as (o?: unknown) => unknown)()],
  ];
  for (const [name, make] of factories) {
    assert.throws(make, { code: 'ERR_SESSION_REQUIRED' }, name);
  }
});
