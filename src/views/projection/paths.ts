/**
 * Where each channel sits: ids from the main conversation down to it, kept as one shared link
 * per channel (its id under its parent's link), so a path costs O(1) to hand out however deep
 * the tree is, and the ids are laid out only when read.
 */
import type { TreeView } from '../../model/run-model.js';

/** Paths at most this deep keep their ids once laid out; deeper ones are laid out per read. */
const PATH_IDS_KEPT_DEPTH = 64;

/** The path of main: empty. */
export const MAIN_PATH: readonly string[] = Object.freeze([]);

/** One channel's path: its id under its parent's path. Immutable once made. */
export class ChannelPath {
  /** How many ids the path has (the channel's own included). */
  readonly length: number;
  private kept: readonly string[] | null = null;

  constructor(
    readonly id: string,
    readonly up: ChannelPath | null,
    /** The channel the path starts from: a subagent of main, or an orphan. */
    readonly top: string,
    /** Whether `top` was an orphan: the path holds while it stays one (a spawn adopts it). */
    readonly topOrphan: boolean,
  ) {
    this.length = (up?.length ?? 0) + 1;
  }

  /** The ids, ancestors first, frozen; a loop, not recursion, however deep. */
  ids(): readonly string[] {
    if (this.kept) return this.kept;
    const ids = new Array<string>(this.length);
    let at: ChannelPath | null = this;
    for (let i = this.length - 1; at !== null; i--, at = at.up) ids[i] = at.id;
    const frozen = Object.freeze(ids);
    if (this.length <= PATH_IDS_KEPT_DEPTH) this.kept = frozen;
    return frozen;
  }
}

/**
 * Every channel's path, made once per channel and shared by its events and handle. A path
 * runs up parent links to a subagent of main (fixed for good: a spawned channel never moves)
 * or to an orphan; when a spawn adopts that orphan, the paths through it are made again, each
 * walking up only to the nearest path still good.
 */
export class ChannelPaths {
  private readonly paths = new Map<string, ChannelPath>();
  /** Channels walked to make paths, for the check that each is made in bounded work. */
  walked = 0;

  constructor(private readonly tree: Pick<TreeView, 'get' | 'size'>) {}

  /** A channel's path; null for main. */
  of(id: string | null): ChannelPath | null {
    if (id === null) return null;
    const known = this.paths.get(id);
    if (known && this.holds(known)) return known;
    const ids: string[] = [];
    let base: ChannelPath | null = null;
    let topOrphan = false;
    for (let at: string | null = id; at !== null;) {
      if (ids.length > 0) {
        const above = this.paths.get(at);
        if (above && this.holds(above)) {
          base = above;
          break;
        }
      }
      ids.push(at);
      this.walked++;
      const ch = this.tree.get(at);
      // An orphan heads its path while it stays one. A channel the tree does not know (none
      // such is routed), and a walk longer than the tree (it has no cycle: spawns that would
      // close one are ignored), head a path made anew each time: `holds` never passes it.
      if (!ch || ch.orphan || ids.length > this.tree.size) {
        topOrphan = true;
        break;
      }
      at = ch.parent;
    }
    const top = base ? base.top : ids[ids.length - 1];
    if (base) topOrphan = base.topOrphan;
    let path = base;
    for (let i = ids.length - 1; i >= 0; i--) {
      path = new ChannelPath(ids[i], path, top, topOrphan);
      this.paths.set(ids[i], path);
    }
    return path;
  }

  /** A channel's path as ids, frozen: empty for main. */
  ids(id: string | null): readonly string[] {
    return this.of(id)?.ids() ?? MAIN_PATH;
  }

  /** Whether a path made earlier still holds: it starts at a subagent of main, or at one still an orphan. */
  private holds(path: ChannelPath): boolean {
    return !path.topOrphan || this.tree.get(path.top)?.orphan === true;
  }
}
