/**
 * Figures rolled up over a channel and every channel under it, for a subagent's outcome and
 * the run's output. A subtree whose channels have all ended is added up once and kept, so a
 * subagent that ends after those under it adds up only its own figures and its children's
 * kept sums: a chain N deep costs O(N) in all, not N²/2.
 */
import { channelTimes, type ReadonlyChannel } from '../../model/tree.js';
import { worse, type CostBasis, type ReadonlyChannelCost, type TokensBasis } from '../../model/cost.js';
import type { TreeView } from '../../model/run-model.js';
import { addUsdSum, channelUsage, channelUsdSum, type UsdSum } from '../cost.js';

/** A channel as of a moment, with its cost then and how its dollars were found. */
export interface ChannelFigures {
  channel: ReadonlyChannel;
  /** The ledger's channelCost; null: no usage of it known. */
  cost: ReadonlyChannelCost | null;
  basis: CostBasis;
}

/** Figures added up over channels. Never changed once a walk has made it. */
export interface SubtreeSum {
  /** Usage as index.json shows it (the output tokens the ledger counted). */
  usage: Record<string, number>;
  firstSeen: string | null;
  lastSeen: string | null;
  startedAt: string | null;
  endedAt: string | null;
  usd: UsdSum;
  /** The least exact basis of the channels whose usage is known; null: none is. */
  outputTokens: TokensBasis | null;
  /** Channels added up, the subtree's own channel included. */
  channels: number;
}

export function emptySum(): SubtreeSum {
  return {
    usage: {},
    firstSeen: null,
    lastSeen: null,
    startedAt: null,
    endedAt: null,
    usd: { usd: 0, lost: 0, known: 0, unknown: 0 },
    outputTokens: null,
    channels: 0,
  };
}

/** Adds one channel's own figures into `sum`. */
export function addChannel(
  sum: SubtreeSum,
  tree: Pick<TreeView, 'firstTime' | 'lastTime'>,
  figures: ChannelFigures,
): void {
  const { channel, cost: own } = figures;
  // As index.json's subtree_usd: channels with no usage known are counted apart.
  const unknown = !own || own.basis === 'unknown';
  addUsdSum(sum.usd, channelUsdSum(own));
  const basis = unknown ? null : own.basis;
  if (basis) sum.outputTokens = sum.outputTokens === null ? basis : worse(sum.outputTokens, basis);
  // As index.json shows it: the output tokens the ledger counted.
  const shown = channelUsage(channel.usage, own);
  for (const key in shown) sum.usage[key] = (sum.usage[key] ?? 0) + shown[key];
  const times = channelTimes(tree, channel);
  addSpan(sum, channel.firstSeen, channel.lastSeen, times.startedAt, times.endedAt);
  sum.channels++;
}

/** Adds the sum of a subtree (`from`, left as it is) into `into`. */
export function addSum(into: SubtreeSum, from: SubtreeSum): void {
  addUsdSum(into.usd, from.usd);
  const [was, basis] = [into.outputTokens, from.outputTokens];
  if (basis !== null) into.outputTokens = was === null ? basis : worse(was, basis);
  for (const key in from.usage) into.usage[key] = (into.usage[key] ?? 0) + from.usage[key];
  addSpan(into, from.firstSeen, from.lastSeen, from.startedAt, from.endedAt);
  into.channels += from.channels;
}

function addSpan(
  sum: SubtreeSum,
  first: string | null,
  last: string | null,
  started: string | null,
  ended: string | null,
): void {
  if (first && (!sum.firstSeen || first < sum.firstSeen)) sum.firstSeen = first;
  if (last && (!sum.lastSeen || last > sum.lastSeen)) sum.lastSeen = last;
  if (started && (!sum.startedAt || started < sum.startedAt)) sum.startedAt = started;
  if (ended && (!sum.endedAt || ended > sum.endedAt)) sum.endedAt = ended;
}

/** What the sums need of the projection: the tree, and each channel's figures as it ended. */
export interface SubtreeHost {
  readonly tree: Pick<TreeView, 'get' | 'firstTime' | 'lastTime' | 'main' | 'channels'>;
  /** A channel's figures: with `atEnd`, as it ended (one still running: now). */
  figuresOf(ch: ReadonlyChannel, atEnd: boolean): ChannelFigures;
  /** Whether a channel's figures as it ended are frozen (its first status event froze them). */
  settled(id: string): boolean;
}

/** A subtree's sum as kept: `live` when a channel in it was read as it is now (still running). */
interface Kept {
  sum: SubtreeSum;
  live: boolean;
  /** The `refresh` it was made in: a live sum holds only until the next. */
  epoch: number;
}

/**
 * Subtree sums as each subagent ends. The sum of a subtree whose channels are all settled
 * (ended, figures frozen) is kept; `changed` forgets it, and its ancestors', when a line or a
 * tree change touches a channel in it (a line after a subagent's end, a spawn under it). A
 * channel still running is read as it is now; a sum over one holds until `refresh` (the run
 * model moves on between the projection's batches, not during one), so subagents ending in one
 * batch above the same running ones read those once.
 */
export class SubtreeSums {
  /** Kept sums by channel: a channel has a good one only if every channel under it has. */
  private readonly kept = new Map<string, Kept>();
  private epoch = 0;
  /** Channels whose figures the walks read, and kept sums they took, for the bounded-work check. */
  visits = 0;

  constructor(private readonly host: SubtreeHost) {}

  /**
   * A channel's figures changed, or its children did: its kept sum and those above it go.
   * Kept sums above a channel without one are none (see `kept`): the walk up stops there.
   */
  changed(id: string | null): void {
    const tree = this.host.tree;
    for (let at = id; at !== null;) {
      const kept = this.kept.get(at);
      if (!kept) break;
      this.kept.delete(at);
      if (!this.holds(kept)) break;
      const ch = tree.get(at);
      if (!ch || ch.orphan) break;
      at = ch.parent;
    }
  }

  /** Channels still running may have moved on: sums over them are made again. */
  refresh(): void {
    this.epoch++;
  }

  private holds(kept: Kept): boolean {
    return !kept.live || kept.epoch === this.epoch;
  }

  /** A child's kept sum if it still holds. */
  private keptSum(id: string): SubtreeSum | null {
    const kept = this.kept.get(id);
    return kept && this.holds(kept) ? kept.sum : null;
  }

  /**
   * `root` and every channel under it, each as it ended (one still running: as it is now). A
   * loop over explicit lists, no recursion: the stream chooses how deep the tree is.
   */
  atEnd(root: ReadonlyChannel): SubtreeSum {
    const { tree } = this.host;
    // The channels to read, parents before children: those under a kept sum are not.
    const order: ReadonlyChannel[] = [];
    const seen = new Set<ReadonlyChannel>();
    const stack = [root];
    while (stack.length > 0) {
      const at = stack.pop()!;
      if (seen.has(at)) continue;
      seen.add(at);
      order.push(at);
      for (const childId of at.children) {
        if (this.keptSum(childId)) continue;
        const child = tree.get(childId);
        if (child) stack.push(child);
      }
    }
    // Children before parents; each adds its own figures, then its children's sums, the last
    // child first (the order a walk from `root` met them in).
    const made = new Map<ReadonlyChannel, { sum: SubtreeSum; live: boolean }>();
    for (let i = order.length - 1; i >= 0; i--) {
      const at = order[i];
      const sum = emptySum();
      this.visits++;
      addChannel(sum, tree, this.host.figuresOf(at, true));
      let live = at.id === null || !this.host.settled(at.id);
      for (let c = at.children.length - 1; c >= 0; c--) {
        const childId = at.children[c];
        const kept = this.kept.get(childId);
        if (kept && this.holds(kept)) {
          this.visits++;
          addSum(sum, kept.sum);
          live ||= kept.live;
          continue;
        }
        const child = tree.get(childId);
        const sub = child && made.get(child);
        if (!sub) continue;
        made.delete(child);
        addSum(sum, sub.sum);
        live ||= sub.live;
      }
      made.set(at, { sum, live });
      if (at.id !== null) this.kept.set(at.id, { sum, live, epoch: this.epoch });
    }
    return made.get(root)!.sum;
  }

  /**
   * Every channel of the run as it is now: main's tree, then each orphan's (a subagent seen
   * before its spawn, or never spawned) and what it spawned; each channel once.
   */
  everyChannel(): SubtreeSum {
    const { tree } = this.host;
    const sum = emptySum();
    const seen = new Set<ReadonlyChannel>();
    const add = (root: ReadonlyChannel) => {
      const stack = [root];
      while (stack.length > 0) {
        const at = stack.pop()!;
        if (seen.has(at)) continue;
        seen.add(at);
        addChannel(sum, tree, this.host.figuresOf(at, false));
        for (const childId of at.children) {
          const child = tree.get(childId);
          if (child) stack.push(child);
        }
      }
    };
    add(tree.main);
    const channels = tree.channels();
    for (const ch of channels) if (ch.orphan) add(ch);
    // Every channel hangs below main or an orphan; any the walks missed is added all the same.
    for (const ch of channels) if (!seen.has(ch)) add(ch);
    return sum;
  }
}
