import { createRequire } from 'node:module';

/**
 * Versions and version ranges as npm reads them, through npm's own `semver` package: every range
 * form it knows (`>=2.1.219 <3`, `^0.1.0`, `~1.2`, `1.x`, `1.2.3 - 1.4`, `a || b`).
 *
 * A prerelease counts by its place in semver's order: `2.1.300-nightly` is newer than
 * `2.1.219`, so it meets `>=2.1.219`, and `2.1.219-beta.1` comes before `2.1.219`, so it does
 * not. What is checked is a program that is already installed (the agent, subtee itself for a
 * plugin), as npm checks `engines` (`includePrerelease`): semver's default of leaving
 * prereleases out of a range is for choosing a version to install, and would refuse a newer
 * nightly that no range short of naming it could admit.
 */
const OPTIONS = Object.freeze({ includePrerelease: true });

/** The functions of the `semver` package used here (it ships no types of its own). */
interface SemverFunctions {
  satisfies(version: string, range: string, options: typeof OPTIONS): boolean;
  validRange(range: string, options: typeof OPTIONS): string | null;
  valid(version: string): string | null;
  compare(a: string, b: string): -1 | 0 | 1;
}

const requireHere = createRequire(import.meta.url);
/** Each function's own module. */
const MODULES: Readonly<Record<keyof SemverFunctions, string>> = {
  satisfies: 'semver/functions/satisfies',
  validRange: 'semver/ranges/valid',
  valid: 'semver/functions/valid',
  compare: 'semver/functions/compare',
};
const loaded: Partial<SemverFunctions> = {};

/**
 * One of `semver`'s functions, loaded on its first use from its own module, as semver documents
 * it: the version timeline compares versions (9 of the package's 47 modules), and only a range
 * to check (`--require-version`, a plugin's `kit`) loads semver's range reader (13 more).
 */
function semver<K extends keyof SemverFunctions>(name: K): SemverFunctions[K] {
  return (loaded[name] ??= requireHere(MODULES[name]) as SemverFunctions[K]);
}

/**
 * The whole string as a version, in its plain form (`v2.1.328 ` → `2.1.328`), or null: a
 * version the stream states is only trusted whole (`99abc` is not version 99, `2.1` is not a
 * version).
 */
export function parseVersion(s: string): string | null {
  return semver('valid')(s);
}

/**
 * The first version-shaped word in a text (`x.y.z`, an optional `v` and pre-release part), as
 * a command's `--version` prints it: `2.1.328 (Claude Code)`, `codex-cli 0.171.0`,
 * `GitHub Copilot CLI 1.0.102.`; null when there is none.
 */
export function findVersion(text: string): string | null {
  const found = /(?:^|\s)v?(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]*[0-9A-Za-z])?)/.exec(text);
  return found ? found[1] : null;
}

/** Semver order of two versions (a prerelease before its release): -1, 0 or 1. */
export function compareVersions(a: string, b: string): number {
  return semver('compare')(a, b);
}

/**
 * True when the range is one semver reads. A blank range, or a blank side of `||`, is refused
 * although semver reads it as `*`: a stray `||` would otherwise let every version through.
 */
export function isValidRange(range: string): boolean {
  if (range.split('||').some((alt) => alt.trim() === '')) return false;
  return semver('validRange')(range, OPTIONS) !== null;
}

/** Whether the version is in the range; false for a version or a range that cannot be read. */
export function satisfies(version: string, range: string): boolean {
  return isValidRange(range) && semver('satisfies')(version, range, OPTIONS);
}
