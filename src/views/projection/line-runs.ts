/** Which of a channel's lines its `.jsonl` holds as they were routed, and which only memory does. */

/**
 * A channel's lines as runs: those its file holds as routed (the files sink wrote the line's
 * own bytes, and they are what was routed), and between them runs of lines it does not, which
 * a replay takes from memory: a line mapped from another producer's event (its file holds the
 * event's bytes, `ownLines`) or derived from another line's (its file holds nothing). A run
 * whose producer never changed has one run; `auto` changes producer a few times at most, so a
 * channel has a few. Without files every line is memory's: one run.
 */
export class LineRuns {
  /** Per memory run: its first line, its lines, and how many of them have a line in the file. */
  private readonly firsts: number[] = [];
  private readonly lengths: number[] = [];
  private readonly ownLines: number[] = [];
  private count = 0;
  /** The lines the channel's file holds: every line but a derived one. */
  fileLines = 0;

  /** Adds the channel's next line: `inFile`, its file holds it as routed; `own`, it has a file line. */
  add(inFile: boolean, own: boolean): void {
    const at = this.count++;
    if (own) this.fileLines++;
    if (inFile) return;
    const last = this.firsts.length - 1;
    if (last >= 0 && this.firsts[last] + this.lengths[last] === at) {
      this.lengths[last]++;
      this.ownLines[last] += own ? 1 : 0;
    } else {
      this.firsts.push(at);
      this.lengths.push(1);
      this.ownLines.push(own ? 1 : 0);
    }
  }

  /** True when one of the first `count` lines is memory's. */
  needsMemory(count: number): boolean {
    return this.firsts.length > 0 && this.firsts[0] < count;
  }

  /**
   * The first `count` lines, as spans to replay in order: `file` lines `from` to `to` of the
   * channel's file, or `memory` lines `from` to `to` of those memory holds.
   */
  *spans(count: number): Generator<{ source: 'file' | 'memory'; from: number; to: number }> {
    let line = 0;
    let file = 0;
    let memory = 0;
    for (let run = 0; run < this.firsts.length && line < count; run++) {
      const first = Math.min(this.firsts[run], count);
      if (first > line) {
        yield { source: 'file', from: file, to: file + first - line };
        file += first - line;
        line = first;
      }
      const lines = Math.min(this.lengths[run], count - line);
      if (lines === 0) break;
      yield { source: 'memory', from: memory, to: memory + lines };
      memory += lines;
      line += lines;
      file += this.ownLines[run];
    }
    if (count > line) yield { source: 'file', from: file, to: file + count - line };
  }

  /** A walk over the lines in order, for a replay that takes them one at a time. */
  walk(): LineWalk {
    return new LineWalk(this.firsts, this.lengths, this.ownLines);
  }
}

/** The lines of a channel in order: `next()` says where each one's file line is, or null for memory's. */
export class LineWalk {
  private line = 0;
  private file = 0;
  private run = 0;

  constructor(
    private readonly firsts: readonly number[],
    private readonly lengths: readonly number[],
    private readonly ownLines: readonly number[],
  ) {}

  /** The next line's place in the channel's file, when the file holds it as routed; null: memory's. */
  next(): number | null {
    const at = this.line++;
    const run = this.run;
    if (run < this.firsts.length && at >= this.firsts[run]) {
      // Past the run's last line, its lines' file lines are behind.
      if (at === this.firsts[run] + this.lengths[run] - 1) {
        this.file += this.ownLines[run];
        this.run++;
      }
      return null;
    }
    return this.file++;
  }
}
