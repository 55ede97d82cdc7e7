import { describeCli } from './e2e/cli-suite.js';
import { startFakeGemini } from './e2e/fake-gemini.js';
import { GEMINI, geminiAvailable, geminiCommand } from './e2e/gemini.js';
import { readGemini } from './e2e/other-reader.js';
import { GEMINI_SCENARIOS } from './e2e/other-scenarios.js';

describeCli({
  format: 'gemini',
  title: 'Gemini CLI',
  skip: !geminiAvailable() && 'the Gemini CLI is not installed (`npm test` installs it)',
  executable: GEMINI,
  versionOf: (printed) => (/^\d+\.\d+\.\d+$/.test(printed) ? printed : null),
  startApi: startFakeGemini,
  command: geminiCommand,
  read: readGemini,
  scenarios: GEMINI_SCENARIOS,
  wrappedScenario: 'unknown-subagent',
  wrappedTitle: 'subtee run -- gemini -p',
});
