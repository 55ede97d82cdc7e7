#!/usr/bin/env node
// Installs the agent CLIs the end-to-end tests run headless (Claude Code, GitHub Copilot CLI,
// opencode, Codex, Gemini CLI) into test/e2e/node_modules, exactly as test/e2e/package-lock.json
// pins them, when they are missing or were installed from another lockfile. `npm test` runs it
// first, so a fresh clone's `npm ci` stays small and the whole suite still runs them.
//
// Optional dependencies are left out, then exactly this machine's native package of each CLI
// is added back at the version the lockfile pins, in one command (a later `npm install
// --no-save` would remove what an earlier one added): the CLIs ship their binaries as optional
// dependencies, one per platform, and only this machine's is wanted.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));
const MODULES = join(HERE, 'node_modules');
const BIN = join(MODULES, '.bin');
const STAMP = join(MODULES, '.installed-lock-sha256');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const CLIS = ['claude', 'copilot', 'opencode', 'codex', 'gemini'];

const lockText = readFileSync(join(HERE, 'package-lock.json'));
const lockHash = createHash('sha256').update(lockText).digest('hex');

/** Whether a CLI answers `--version` (its native binary is in place). */
function answers(cli) {
  const r = spawnSync(join(BIN, cli), ['--version'], { encoding: 'utf8', timeout: 60_000 });
  return r.status === 0;
}

function run(args, cwd = HERE) {
  const r = spawnSync(npm, args, { cwd, stdio: ['ignore', 'inherit', 'inherit'] });
  if (r.status !== 0) {
    console.error(`test/e2e/install.mjs: npm ${args.join(' ')} failed (exit ${r.status})`);
    process.exit(1);
  }
}

/** This machine's native package of each CLI, as `name@version` at the version the lockfile pins. */
function nativePackages() {
  const lock = JSON.parse(lockText.toString('utf8'));
  const { platform, arch } = process;
  const glibc = platform !== 'linux' || Boolean(process.report.getReport().header.glibcVersionRuntime);
  // opencode has a build for x64 CPUs without AVX2 ("baseline"); its installer picks by the CPU.
  const avx2 =
    arch !== 'x64' || platform !== 'linux' || /(^|\s)avx2(\s|$)/.test(readFileSync('/proc/cpuinfo', 'utf8'));
  const opencodeOs = platform === 'win32' ? 'windows' : platform;
  const names = [
    `@anthropic-ai/claude-code-${platform}-${arch}${glibc ? '' : '-musl'}`,
    `@github/copilot-${platform === 'linux' && !glibc ? 'linuxmusl' : platform}-${arch}`,
    `opencode-${opencodeOs}-${arch}${avx2 ? '' : '-baseline'}${glibc ? '' : '-musl'}`,
    // Codex publishes its binaries as versions of itself under a platform alias
    // (`@openai/codex-linux-x64` is `@openai/codex@VERSION-linux-x64`).
    `@openai/codex-${platform}-${arch}`,
  ];
  return names.map((name) => {
    const entry = lock.packages[`node_modules/${name}`];
    if (!entry) throw new Error(`test/e2e/package-lock.json has no ${name}`);
    if (name.startsWith('@openai/codex-')) return `${name}@npm:@openai/codex@${entry.version}`;
    return `${name}@${entry.version}`;
  });
}

// Installed from this lockfile, every CLI answered then, and each is still in place.
const installed = existsSync(STAMP) && readFileSync(STAMP, 'utf8') === lockHash;
if (!installed || !CLIS.every((cli) => existsSync(join(BIN, cli)))) {
  console.error('test/e2e: installing the agent CLIs the end-to-end tests run (test/e2e/package-lock.json)');
  run(['ci', '--no-audit', '--no-fund', '--omit=optional']);
  run(['install', '--no-save', '--no-audit', '--no-fund', '--omit=optional', ...nativePackages()]);
  // Claude Code and opencode put their native binary in place from an install script; npm may
  // skip install scripts by policy, so run each when its binary is not usable yet.
  if (!answers('claude')) {
    spawnSync(process.execPath, [join(MODULES, '@anthropic-ai', 'claude-code', 'install.cjs')], { stdio: 'inherit' });
  }
  if (!answers('opencode')) {
    spawnSync(process.execPath, ['postinstall.mjs'], { cwd: join(MODULES, 'opencode-ai'), stdio: 'inherit' });
  }
  const broken = CLIS.filter((cli) => !answers(cli));
  if (broken.length > 0) {
    console.error(`test/e2e/install.mjs: ${broken.join(', ')} installed but not runnable`);
    process.exit(1);
  }
  writeFileSync(STAMP, lockHash);
}
