// Mutation testing with StrykerJS over `node --test`, one module at a time:
//   npm run mutate -- src/views/projection/projection.ts
// The TypeScript is built once; Stryker mutates the module's built JavaScript in dist/ (in
// place, restored afterwards) and runs, through its TAP runner, the built tests that cover it.
// Not part of CI: a run over one module takes minutes.

/** The tests that exercise each module; a module not listed runs the tests named in SUBTEE_MUTATE_TESTS. */
export const MODULE_TESTS = {
  'src/views/projection/projection.ts': [
    'projection',
    'open-options',
    'deep-agents-parity',
    'projection-replay',
    'projection-ends',
  ],
  'src/adapters/langgraph.ts': ['langgraph', 'langgraph-depth', 'hardening-inputs'],
  'src/chain/sinks/clickhouse.ts': ['clickhouse', 'clickhouse-spool'],
  'src/chain/sinks/clickhouse-spool.ts': ['clickhouse-spool-units', 'clickhouse-rows', 'clickhouse-spool'],
  'src/chain/sinks/otlp.ts': ['otlp-delivery', 'otlp'],
  'src/model/tree.ts': ['tree', 'session'],
  'src/model/message.ts': ['line-kinds', 'message'],
  'src/model/session.ts': ['session'],
  'src/model/run-model.ts': ['run-model', 'session', 'stages'],
  'src/model/display.ts': ['text-cut', 'stages'],
  'src/model/cost.ts': ['cost-ledger'],
  'src/adapters/gemini.ts': ['gemini'],
  'src/adapters/copilot.ts': ['copilot'],
  'src/adapters/codex.ts': ['codex'],
  'src/adapters/opencode.ts': ['opencode'],
  'src/adapters/stream-lines.ts': ['stream-lines'],
  'src/adapters/claude-sdk.ts': ['adapters'],
  'src/chain/sinks/report-server.ts': ['report-server'],
  'src/model/bounded-text.ts': ['text-cut'],
  'src/model/lines.ts': ['line-parser'],
  'src/model/content.ts': ['content', 'stages'],
  'src/model/in-flight.ts': ['in-flight', 'idle-watchdog'],
};

const module = process.env.SUBTEE_MUTATE ?? 'src/views/projection/projection.ts';
/** Lines of the built file to mutate (`120-260`), to keep a run within minutes. */
const lines = process.env.SUBTEE_MUTATE_LINES ? `:${process.env.SUBTEE_MUTATE_LINES}` : '';
const named = process.env.SUBTEE_MUTATE_TESTS?.split(',').filter(Boolean);
const tests = named ?? MODULE_TESTS[module];
if (!tests) throw new Error(`no tests listed for ${module}: set SUBTEE_MUTATE_TESTS=name,name`);

export default {
  testRunner: 'tap',
  tap: { testFiles: tests.map((name) => `dist/test/${name}.test.js`), forceBail: true },
  mutate: [module.replace(/^src\//, 'dist/src/').replace(/\.ts$/, '.js') + lines],
  // The build is in dist/ already; mutating it in place spares a copy of the repository.
  inPlace: true,
  // Nothing but the mutated file is rewritten (no @ts-nocheck added across the tree).
  disableTypeChecks: false,
  coverageAnalysis: 'perTest',
  concurrency: Number(process.env.SUBTEE_MUTATE_CONCURRENCY ?? 1),
  timeoutFactor: 3,
  timeoutMS: 20_000,
  reporters: ['clear-text', 'json'],
  jsonReporter: { fileName: `reports/mutation/${module.replace(/[/.]/g, '_')}.json` },
  clearTextReporter: { allowColor: false, logTests: false },
  tempDirName: '.stryker-tmp',
};
