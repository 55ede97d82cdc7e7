import { CODEX, codexAvailable, codexCommand } from './e2e/codex.js';
import { describeCli } from './e2e/cli-suite.js';
import { startFakeResponses } from './e2e/fake-responses.js';
import { readCodex } from './e2e/other-reader.js';
import { CODEX_SCENARIOS } from './e2e/other-scenarios.js';

describeCli({
  format: 'codex',
  title: 'Codex CLI',
  skip:
    !codexAvailable() && 'the Codex CLI and its platform binary are not installed (.ci/run installs them)',
  executable: CODEX,
  versionOf: (printed) => /^codex-cli (\d+\.\d+\.\d+)$/.exec(printed)?.[1] ?? null,
  startApi: startFakeResponses,
  command: codexCommand,
  read: readCodex,
  scenarios: CODEX_SCENARIOS,
  wrappedScenario: 'failing-subagent',
  wrappedTitle: 'subtee run -- codex exec --json',
});
