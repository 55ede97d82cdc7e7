/**
 * Just enough semver for version ranges: `>=2.1.219`, `<3`, `^0.1.0`, `2.1.x`, joined by
 * spaces (AND) or `||`.
 */
export type Version = [number, number, number];

/**
 * The whole string as a version (`2.1.328`, `v1.2`, `0.3.0-nightly.1+build`), or null: a
 * version the stream states is only trusted whole (`99abc` is not version 99).
 */
export function parseVersion(s: string): Version | null {
  const m = /^\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?\s*$/.exec(s);
  if (!m) return null;
  return [Number(m[1]), Number(m[2] ?? 0), Number(m[3] ?? 0)];
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

export function compareVersions(a: Version, b: Version): number {
  for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i] < b[i] ? -1 : 1;
  return 0;
}

const COMPARATOR = /^(>=|<=|>|<|=|\^|~)?\s*v?(\d+)(?:\.(\d+|x|\*))?(?:\.(\d+|x|\*))?$/;

/** True when the range is well-formed; used to reject bad `--require-version` values early. */
export function isValidRange(range: string): boolean {
  return range.split('||').every((alt) => {
    const parts = alt.trim().split(/\s+/).filter(Boolean);
    return parts.length > 0 && parts.every((p) => COMPARATOR.test(p));
  });
}

export function satisfies(version: string, range: string): boolean {
  const v = parseVersion(version);
  if (!v || !isValidRange(range)) return false;
  return range.split('||').some((alt) =>
    alt
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .every((p) => test(v, p)),
  );
}

function test(v: Version, comparator: string): boolean {
  const m = COMPARATOR.exec(comparator)!;
  const op = m[1] ?? '=';
  const wild = (x: string | undefined) => x === undefined || x === 'x' || x === '*';
  const base: Version = [Number(m[2]), wild(m[3]) ? 0 : Number(m[3]), wild(m[4]) ? 0 : Number(m[4])];
  const c = compareVersions(v, base);
  switch (op) {
    case '>=':
      return c >= 0;
    case '<=':
      return c <= 0;
    case '>':
      return c > 0;
    case '<':
      return c < 0;
    case '^': {
      // The first non-zero part is pinned; a part left out counts as any (`^0` is <1.0.0, `^0.0` is <0.1.0).
      const upper: Version =
        base[0] > 0 || wild(m[3])
          ? [base[0] + 1, 0, 0]
          : base[1] > 0 || wild(m[4])
            ? [0, base[1] + 1, 0]
            : [0, 0, base[2] + 1];
      return c >= 0 && compareVersions(v, upper) < 0;
    }
    case '~':
      return c >= 0 && compareVersions(v, wild(m[3]) ? [base[0] + 1, 0, 0] : [base[0], base[1] + 1, 0]) < 0;
    default:
      if (wild(m[3])) return v[0] === base[0];
      if (wild(m[4])) return v[0] === base[0] && v[1] === base[1];
      return c === 0;
  }
}
