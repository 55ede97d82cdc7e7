import type { ReadonlyChannel, ChannelStatus } from '../model/tree.js';

/** What the walk needs of a tree: the main channel and a lookup by id. */
export interface TreeLike {
  readonly main: ReadonlyChannel;
  get(id: string | null): ReadonlyChannel | undefined;
  channels(): ReadonlyChannel[];
}

export interface TreeRow {
  channel: ReadonlyChannel;
  /** Depth in the walk (0 for main and for channels whose parent was never seen). */
  level: number;
  /** Index in the row list of the row it was reached from; -1 for a root. */
  parentRow: number;
  /** Tree-drawing guides (`│  ` / `   ` per ancestor level, at most MAX_GUIDE_LEVELS). */
  guide: string;
  /** The last child of its parent row. */
  last: boolean;
}

/**
 * Deeper rows are not indented further: a chain thousands deep must not print megabytes of
 * guides (nor of indentation, on stdout and in the step summary).
 */
export const MAX_GUIDE_LEVELS = 32;

/**
 * Every channel once, parents before children, siblings in spawn order: main and its
 * descendants first, then channels not reachable from main (orphans, members of a spawn
 * cycle) as roots in creation order. An explicit stack, never recursion: the stream chooses
 * the depth. Summaries, the step summary and the report all read this order.
 */
export function walkTree(tree: TreeLike): TreeRow[] {
  const rows: TreeRow[] = [];
  const seen = new Set<ReadonlyChannel>();
  // Descendants of a root other than main are indented one step, under its `?` marker.
  const visitFrom = (root: ReadonlyChannel, rootGuide: string) => {
    const stack: Array<Omit<TreeRow, 'channel'> & { channel: ReadonlyChannel }> = [
      { channel: root, level: 0, parentRow: -1, guide: '', last: true },
    ];
    seen.add(root);
    while (stack.length > 0) {
      const row = stack.pop()!;
      const index = rows.push(row) - 1;
      const kids: ReadonlyChannel[] = [];
      for (const id of row.channel.children) {
        const child = tree.get(id);
        if (child && !seen.has(child)) {
          seen.add(child);
          kids.push(child);
        }
      }
      const guide =
        row.level === 0
          ? rootGuide
          : row.level > MAX_GUIDE_LEVELS
            ? row.guide
            : row.guide + (row.last ? '   ' : '│  ');
      for (let i = kids.length - 1; i >= 0; i--) {
        stack.push({
          channel: kids[i],
          level: row.level + 1,
          parentRow: index,
          guide,
          last: i === kids.length - 1,
        });
      }
    }
  };
  visitFrom(tree.main, '');
  for (const ch of tree.channels()) if (!seen.has(ch)) visitFrom(ch, '   ');
  return rows;
}

export type StatusCounts = Record<ChannelStatus, number>;

/** Subagents (main excluded) by status. */
export function statusCounts(channels: Iterable<ReadonlyChannel>): StatusCounts {
  const counts: StatusCounts = { running: 0, completed: 0, failed: 0, stopped: 0 };
  for (const ch of channels) if (ch.id !== null) counts[ch.status]++;
  return counts;
}

/**
 * Input plus output tokens of a channel: the one count every view shows (summary, index page,
 * report, live page, stats). A usage read back from index.json may hold anything: a count
 * that is not a finite number of at least 0 is taken as not stated.
 */
export function channelTokens(ch: { usage: Readonly<Record<string, unknown>> }): number {
  const input = tokenCount(ch.usage.input_tokens);
  const output = tokenCount(ch.usage.output_tokens);
  // A producer that gives only a total (GitHub Copilot CLI's subagents) is counted by it.
  if (input === undefined && output === undefined) return tokenCount(ch.usage.total_tokens) ?? 0;
  return (input ?? 0) + (output ?? 0);
}

const tokenCount = (v: unknown): number | undefined =>
  typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined;

export interface SubtreeTotals {
  /** Channels in the subtree, itself included. */
  channels: number;
  usage: Record<string, number>;
  tokens: number;
  /** Earliest first_seen and latest last_seen over the subtree (ISO strings compare in order). */
  firstSeen: string | null;
  lastSeen: string | null;
}

/** Usage, tokens and time span rolled up per subtree of the walk, children into parents. */
export function subtreeTotals(rows: readonly TreeRow[]): Map<ReadonlyChannel, SubtreeTotals> {
  const totals = rows.map((row): SubtreeTotals => ({
    channels: 1,
    usage: { ...row.channel.usage },
    tokens: channelTokens(row.channel),
    firstSeen: row.channel.firstSeen,
    lastSeen: row.channel.lastSeen,
  }));
  // Children come after their parent in the walk, so one backward pass folds every subtree.
  for (let i = rows.length - 1; i >= 0; i--) {
    const parent = rows[i].parentRow;
    if (parent < 0) continue;
    const into = totals[parent];
    const from = totals[i];
    into.channels += from.channels;
    into.tokens += from.tokens;
    for (const key in from.usage) into.usage[key] = (into.usage[key] ?? 0) + from.usage[key];
    if (from.firstSeen && (!into.firstSeen || from.firstSeen < into.firstSeen))
      into.firstSeen = from.firstSeen;
    if (from.lastSeen && (!into.lastSeen || from.lastSeen > into.lastSeen)) into.lastSeen = from.lastSeen;
  }
  return new Map(rows.map((row, i) => [row.channel, totals[i]]));
}

/**
 * Milliseconds from `first` to `last`; null when either is unknown, or when lines arrived out
 * of time order and `last` is the earlier: no time rather than a negative one.
 */
export function elapsedMs(first: number | null, last: number | null): number | null {
  return first !== null && last !== null && last >= first ? last - first : null;
}
