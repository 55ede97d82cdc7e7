/** Writes schema/subtee-config.schema.json from the registry: `npm run schema`. */
import { writeFileSync } from 'node:fs';
import { configSchema } from '../../src/chain/schema.js';
import { builtinRegistry } from '../../src/chain/builtins.js';
import { registerPlugins } from '../../src/chain/config.js';

const registry = builtinRegistry();
await registerPlugins(registry, ['redact-secrets', 'github-step-summary'], process.cwd());
writeFileSync(
  new URL('../../../schema/subtee-config.schema.json', import.meta.url),
  JSON.stringify(configSchema(registry), null, 2) + '\n',
);
