import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { ROOT } from './helpers/helpers.js';

const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
const EXAMPLES = ['examples/claude-agent-sdk.mjs', 'examples/deep-agents.mjs'];

/**
 * Files on the command line, so tsconfig.json (and its `paths` to src/) is not read: `subtee`
 * resolves as a user's import does, through package.json `exports` to the built declarations.
 */
function typeCheck(files: string[], extra: string[] = []): string[] {
  const flags = ['--strict', '--noEmit', '--allowJs', '--checkJs', '--skipLibCheck', '--pretty', 'false'];
  const node = [
    '--module',
    'nodenext',
    '--moduleResolution',
    'nodenext',
    '--target',
    'es2022',
    '--types',
    'node',
  ];
  const args = [TSC, ...flags, ...extra, ...node, ...files];
  const r = spawnSync(process.execPath, args, { cwd: ROOT, encoding: 'utf8' });
  assert.equal(r.error, undefined);
  return r.stdout.split('\n').filter((l) => /^\S.*error TS\d+/.test(l));
}

test('the .mjs examples type-check as TypeScript under --strict against the built package types', () => {
  assert.ok(existsSync(join(ROOT, 'dist', 'src', 'index.d.ts')), 'the package is built');
  assert.deepEqual(typeCheck(EXAMPLES), []);
});

test('the projection example (the README and library page snippet) type-checks under the ' +
  'strictest flags a program may turn on: open() takes an option given as undefined', () => {
  const strictest = ['--exactOptionalPropertyTypes', '--noUncheckedIndexedAccess'];
  assert.deepEqual(typeCheck(['examples/projection.ts'], strictest), []);
});

test('the type-check reports what it should: an example that misuses the API fails it', () => {
  // A guard against a harness that checks nothing (a file never read, a wrong flag).
  const errors = typeCheck(['test/fixtures/typecheck/misuse.mjs']);
  assert.equal(errors.length, 2, errors.join('\n'));
  assert.match(errors[0], /TS18047: 'sub\.depth' is possibly 'null'/);
  assert.match(errors[1], /TS7006: Parameter 'line' implicitly has an 'any' type/);
});

test("a sink's run (SinkRun) reads every figure and warns; counting, routing, stalls, " +
  "the chain facts, writing the tree's channels and the cost report do not type-check", () => {
  const errors = typeCheck(['test/fixtures/typecheck/sink-run.mjs']);
  const said = errors.map((e) => e.replace(/^.*error (TS\d+): /, '$1 '));
  assert.deepEqual(said, [
    "TS2339 Property 'countLines' does not exist on type 'SinkRun'.",
    "TS2339 Property 'take' does not exist on type 'SinkRun'.",
    "TS2339 Property 'recordStall' does not exist on type 'SinkRun'.",
    "TS2339 Property 'stateProducer' does not exist on type 'SinkRun'.",
    "TS2540 Cannot assign to 'interrupted' because it is a read-only property.",
    "TS2540 Cannot assign to 'lines' because it is a read-only property.",
    "TS2540 Cannot assign to 'status' because it is a read-only property.",
    "TS2339 Property 'push' does not exist on type 'readonly string[]'.",
    "TS2540 Cannot assign to 'usd' because it is a read-only property.",
    "TS2339 Property 'delete' does not exist on type 'ReadonlyMap<string | null, ReadonlyChannelCost>'.",
    "TS2339 Property 'push' does not exist on type 'readonly string[]'.",
    "TS2540 Cannot assign to 'output_tokens' because it is a read-only property.",
  ]);
});

test("the Session's chain facts (producer, its version and transcripts, the checked version, " +
  'the interrupt, the command\'s end, the display policy) are set only through its state methods', () => {
  // The fixture marks each assignment with @ts-expect-error: a fact left writable fails the check.
  assert.deepEqual(typeCheck(['test/fixtures/typecheck/session-facts.ts']), []);
});

test("a plugin's option specs type-check as the Plugins page writes them: check reads the " +
  "option's own type, description may be left out, and a misuse is refused", () => {
  // The fixture marks each misuse with @ts-expect-error: a type that lets one through fails
  // the check as much as one that refuses what the page shows.
  assert.deepEqual(typeCheck(['test/fixtures/typecheck/plugin-options.ts']), []);
});
