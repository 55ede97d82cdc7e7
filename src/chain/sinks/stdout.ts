import type { Transform, Writable } from 'node:stream';
import { withDefaults } from '../../defaults.js';
import { writeFailed } from '../../errors.js';
import type { LineRecord, RecordBatch } from '../../model/record.js';
import { contentBlocks, lineTypeOf } from '../../model/message.js';
import { escapeLogText, escapeTextLines } from '../../views/escape.js';
import { ChannelLabels, RENDER_DEFAULTS, statusLine } from '../../views/text.js';
import { headOf } from '../../model/bounded-text.js';
import { MAX_GUIDE_LEVELS } from '../../views/walk.js';
import { passOn } from './pass-on.js';
import { viewOf } from '../../model/line-view.js';
import type { SinkRun } from '../../model/session.js';
import { BatchTransform, type BatchOutcome, type HandOn } from '../batch-transform.js';
import { BUILTIN_KIT, defineBuiltin } from '../plugin.js';

export const STDOUT_MODES = ['text', 'main', 'raw', 'none'] as const;
export type StdoutMode = (typeof STDOUT_MODES)[number];

export const STDOUT_SINK_DEFAULTS = Object.freeze({ mode: 'text' as StdoutMode, indent: '  ' });

export interface StdoutSinkOptions {
  mode?: StdoutMode;
  /** Where to write; process.stdout by default. */
  stream?: Writable;
  indent?: string;
  /** The chain's session: a record that cannot be shown is counted there (optional). */
  session?: SinkRun;
}

/** What stdout remembers between records: labels, and the last text each subagent showed. */
export interface StdoutMemory {
  labels: ChannelLabels;
  /** The head of the last text a running subagent showed (dropped when it ends). */
  lastText: Map<string, string>;
}

export function stdoutMemory(): StdoutMemory {
  return { labels: new ChannelLabels(), lastText: new Map() };
}

/**
 * A subagent's final report was already shown when it was the last text the subagent showed
 * (the summary then starts or ends with that text): its status line does not repeat it.
 */
export function summaryShown(summary: string, lastText: string | undefined): boolean {
  if (lastText === undefined || lastText === '') return false;
  const s = summary.trim();
  return s.startsWith(lastText) || (lastText.length < RENDER_DEFAULTS.resultChars && s.endsWith(lastText));
}

/** The text a record shows on stdout in `text` or `main` mode, or null for nothing. */
export function stdoutText(
  rec: LineRecord,
  mode: 'text' | 'main',
  indent: string,
  memory: StdoutMemory = stdoutMemory(),
): string | null {
  // Where the channel was as the line was routed, not as the tree has it by now.
  const ch = rec.place ?? rec.channel;
  const isMain = !ch || ch.id === null;
  const out: string[] = [];
  if (mode === 'text') {
    for (const ev of rec.events ?? []) {
      if (ev.type !== 'status') continue;
      const id = ev.channel.id ?? '';
      const shown = ev.summary !== null && summaryShown(ev.summary, memory.lastText.get(id));
      memory.lastText.delete(id);
      out.push(
        prefixed(
          ev.channel.depth,
          memory.labels.of(ev.channel),
          statusLine(ev.channel.status, shown ? null : ev.summary),
          indent,
        ),
      );
    }
  }
  const v = viewOf(rec);
  if (lineTypeOf(v) === 'assistant' && (isMain || mode === 'text')) {
    for (const b of contentBlocks(v)) {
      if (b.type !== 'text') continue;
      if (isMain) {
        out.push(escapeTextLines(b.text));
        continue;
      }
      // Every line of a subagent's text starts with its label: none can start with `::`.
      out.push(prefixed(ch!.depth, memory.labels.of(ch!), escapeLogText(b.text), indent));
      memory.lastText.set(ch!.id!, headOf(b.text.trim(), RENDER_DEFAULTS.resultChars));
    }
  }
  return out.length > 0 ? out.join('\n') + '\n' : null;
}

function prefixed(depth: number | null, label: string, text: string, indent: string): string {
  const pad = indent.repeat(Math.min(MAX_GUIDE_LEVELS, Math.max(0, (depth ?? 1) - 1)));
  return text
    .split('\n')
    .map((l) => `${pad}[${escapeLogText(label)}] ${l}`)
    .join('\n');
}

/**
 * Stdout sink. In `text`/`main` mode a pass-through object stage; in `raw` mode a byte
 * stage that the chain puts before the parser, so the input is copied unchanged (like tee).
 * Waits for 'drain' when the reader is slow. A reader that goes away (EPIPE, `| head -1`)
 * ends this sink only: records keep flowing to the other sinks.
 */
export function createStdoutSink(options: StdoutSinkOptions = {}): Transform {
  return new StdoutSink(options);
}

class StdoutSink extends BatchTransform {
  readonly #mode: StdoutMode;
  readonly #indent: string;
  readonly #stream: Writable;
  readonly #session: SinkRun | undefined;
  readonly #memory = stdoutMemory();
  #readerGone: boolean;
  /** A write that failed for another reason than a reader gone (a full disk): the run fails. */
  #failed: Error | null = null;
  readonly #onReaderGone = (err?: unknown) => {
    this.#readerGone = true;
    if (err !== undefined && (err as NodeJS.ErrnoException)?.code !== 'EPIPE')
      this.#failed ??= writeFailed('stdout', err);
  };

  constructor(options: StdoutSinkOptions) {
    const opts = withDefaults(STDOUT_SINK_DEFAULTS, options);
    super({ objectMode: opts.mode !== 'raw', highWaterMark: undefined });
    this.#mode = opts.mode;
    this.#indent = opts.indent;
    this.#stream = options.stream ?? process.stdout;
    this.#session = options.session;
    this.#readerGone = opts.mode === 'none';
    this.#stream.on('error', this.#onReaderGone);
    this.#stream.once('close', this.#onReaderGone);
    this.once('finish', () => this.#letGo());
  }

  /** Ended or destroyed: the stream's listeners go, or it would hold this run (its session) for ever. */
  protected override teardown(): void {
    this.#letGo();
  }

  #letGo(): void {
    this.#stream.off('error', this.#onReaderGone);
    this.#stream.off('close', this.#onReaderGone);
  }

  /** A batch of records, or a chunk of input bytes in `raw` mode. */
  protected override transformBatch(chunk: RecordBatch | Buffer): BatchOutcome {
    if (this.#failed) throw this.#failed;
    const pass = passOn(this, chunk) as HandOn;
    if (this.#mode === 'raw') return this.#write(chunk as Buffer, pass);
    if (this.#readerGone) return pass;
    const text = this.#textOf(chunk as RecordBatch);
    return text === '' ? pass : this.#write(text, pass);
  }

  /** The last write's failure is reported a turn later: it fails the run too. */
  protected override flushAtEnd(): BatchOutcome {
    if (this.#mode === 'none') return undefined;
    return new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
      if (this.#failed) throw this.#failed;
    });
  }

  #textOf(batch: RecordBatch): string {
    let text = '';
    for (const rec of batch) {
      if (rec.kind !== 'line') continue;
      try {
        text += stdoutText(rec, this.#mode as 'text' | 'main', this.#indent, this.#memory) ?? '';
      } catch (err) {
        // Not shown on stdout; the files still get the line.
        this.#session?.recordFailed('stdout', rec.lineNo, err);
      }
    }
    return text;
  }

  /** Hands `pass` on once `data` is written, or at once when the reader is gone. */
  #write(data: string | Buffer, pass: HandOn): BatchOutcome {
    const stream = this.#stream;
    if (this.#readerGone || stream.destroyed || stream.writableEnded) {
      this.#readerGone = true;
      return pass;
    }
    return stream.write(data) ? pass : this.#drained().then(() => pass);
  }

  #drained(): Promise<void> {
    const stream = this.#stream;
    return new Promise((resolve) => {
      const done = () => {
        stream.off('drain', done);
        stream.off('close', done);
        resolve();
      };
      stream.on('drain', done);
      stream.on('close', done);
    });
  }
}

export const stdoutSinkPlugin = defineBuiltin<Omit<StdoutSinkOptions, 'session' | 'stream' | 'indent'>>({
  name: 'stdout',
  kind: 'sink',
  kit: BUILTIN_KIT,
  // Its end warns nothing, and a reader that stopped reading would hold index.json back.
  indexRole: () => 'unwaited',
  options: {
    mode: {
      type: 'string',
      choices: STDOUT_MODES,
      default: STDOUT_SINK_DEFAULTS.mode,
      description:
        'text: main text + labelled subagent text; main: main text only; raw: input unchanged (tee); none',
    },
  },
  input: (o) => (o.mode === 'raw' ? 'bytes' : 'records'),
  create: (o, ctx) => createStdoutSink({ ...o, session: ctx.session }),
});
