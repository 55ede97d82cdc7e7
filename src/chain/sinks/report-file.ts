import { join } from 'node:path';
import { writeFailed } from '../../errors.js';
import { replaceFile, replaceFileWith } from '../../safe-open.js';
import { pagePieces } from '../../views/report/page.js';
import { writePiecesSync } from './write-pieces.js';
import {
  fitReportPage,
  subteeVersion,
  type ReportBuildOptions,
  type ReportResult,
} from '../../views/report/build.js';
import { indexPageHtml, sortRows, type IndexPageRow } from '../../views/report/index-page.js';

/**
 * Writes OUT/report.html, the page the view renders from the output folder, and says what it
 * holds. Atomically: a fresh temporary file (never written through a link planted at its
 * name), then one rename. The report sink writes it at the end of a run, `subtee report` later.
 */
export function writeReport(out: string, options: ReportBuildOptions = {}): ReportResult {
  const data = fitReportPage(out, options);
  const path = join(out, 'report.html');
  try {
    replaceFileWith(path, (fd) => writePiecesSync(fd, pagePieces(data, data.page.bytes)));
  } catch (err) {
    throw writeFailed(path, err);
  }
  return {
    path,
    bytes: data.page.bytes,
    limitBytes: data.page.limitBytes,
    channels: data.channels.length,
    cutChannels: data.page.cutChannels,
    leftOutChannels: data.page.leftOutChannels ?? 0,
  };
}

/** Writes ROOT/index.html, the page over many runs (atomically, as above); returns its path. */
export function writeIndexPage(root: string, rows: IndexPageRow[], version = subteeVersion()): string {
  const path = join(root, 'index.html');
  try {
    replaceFile(path, indexPageHtml(sortRows(rows), version));
  } catch (err) {
    throw writeFailed(path, err);
  }
  return path;
}
