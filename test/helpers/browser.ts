/**
 * Real headless Chromium for the report's tests (Debian's `chromium`, driven by
 * playwright-core over the DevTools protocol; `.ci/run` installs it when missing).
 *
 *   node dist/test/helpers/browser.js screenshot OUT FILE.png   # a screenshot of OUT/report.html
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import { BIN, ROOT } from './helpers.js';

export const CHROMIUM = process.env.SUBTEE_CHROMIUM ?? '/usr/bin/chromium';

/** Screenshots land here (dist/ is not committed); CI can keep the folder as an artifact. */
export const ARTIFACTS = process.env.SUBTEE_ARTIFACTS ?? join(ROOT, 'dist', 'test-artifacts', 'report');

export function chromiumAvailable(): boolean {
  return existsSync(CHROMIUM);
}

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
}

export interface OpenedPage {
  page: Page;
  /** Every console message and page error, in order (`type: text`). */
  console: string[];
}

/** A new page that records its console (CSP violations show up there) and uncaught errors. */
export async function newPage(
  browser: Browser,
  viewport = { width: 1400, height: 900 },
): Promise<OpenedPage> {
  const page = await browser.newPage({ viewport });
  const console: string[] = [];
  page.on('console', (m) => console.push(`${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => console.push(`pageerror: ${e.message}`));
  return { page, console };
}

/** Opens OUT/report.html from disk and waits until the page says it has rendered. */
export async function openReport(
  browser: Browser,
  out: string,
  hash = '',
  viewport?: { width: number; height: number },
): Promise<OpenedPage> {
  const opened = await newPage(browser, viewport);
  await opened.page.goto(pathToFileURL(join(out, 'report.html')).href + hash);
  await opened.page.waitForSelector('#app[data-state="ready"]');
  return opened;
}

export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(ARTIFACTS, { recursive: true });
  const path = join(ARTIFACTS, `${name}.png`);
  await page.screenshot({ path, fullPage: false });
  return path;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href && process.argv[2] === 'screenshot') {
  const [out, file] = process.argv.slice(3);
  const browser = await launchBrowser();
  try {
    const { page } = await newPage(browser, { width: 1280, height: 760 });
    await page.goto(pathToFileURL(join(out, 'report.html')).href + (process.argv[5] ?? ''));
    await page.waitForSelector('#app[data-state="ready"]');
    await page.screenshot({ path: file });
  } finally {
    await browser.close();
  }
}

export interface Started {
  child: ChildProcess;
  stderr: () => string;
  closed: Promise<number | null>;
  /** The live page's address, from the readiness line (`--serve`). */
  url: () => Promise<string>;
}

const children = new Set<ChildProcess>();
// A test that fails half-way leaves its subtee waiting on stdin; end it with the file.
after(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

/** Starts the CLI with stdin on a pipe the test writes to. */
export function startSubtee(args: string[]): Started {
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['pipe', 'ignore', 'pipe'] });
  children.add(child);
  let err = '';
  const waiters: Array<() => void> = [];
  child.stderr!.on('data', (d) => {
    err += d;
    for (const w of waiters.splice(0)) w();
  });
  const closed = new Promise<number | null>((r) => child.on('close', (code) => r(code)));
  const url = () =>
    new Promise<string>((resolve, reject) => {
      const check = () => {
        const m = /live report at (http:\/\/\S+)/.exec(err);
        if (m) return resolve(m[1]);
        if (child.exitCode !== null) return reject(new Error(`subtee exited: ${err}`));
        waiters.push(check);
      };
      child.once('close', () => check());
      check();
    });
  return { child, stderr: () => err, closed, url };
}
