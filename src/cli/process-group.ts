import { readdirSync, readFileSync } from 'node:fs';

/** How often a group that was signalled is looked at until it is empty. */
const GROUP_CHECK_MS = 50;
/**
 * How long processes sent SIGKILL are given to be gone (the kernel ends them; one in an
 * uninterruptible wait is not waited for beyond this).
 */
export const AFTER_KILL_MS = 2000;

/**
 * Sends a signal to every process of a group. False when the group is empty; a process that
 * may not be signalled (EPERM) counts as one still there.
 */
export function signalGroup(pgid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

/**
 * The state letter and process group of a line of `/proc/PID/stat`: the fields after the
 * command name, which is in parentheses and may itself hold spaces and parentheses.
 */
export function procStat(stat: string): { state: string; pgrp: number } | null {
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const pgrp = Number(fields[2]);
  return fields[0] && Number.isInteger(pgrp) ? { state: fields[0], pgrp } : null;
}

/**
 * Whether a process of the group still runs. A process that has ended but was not yet reaped
 * by its parent (a zombie: a grandchild whose parent is an init process that does not reap)
 * still answers a signal; where `/proc` says so, it does not count.
 */
export function groupRunning(pgid: number): boolean {
  if (!signalGroup(pgid, 0)) return false;
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((name) => /^\d+$/.test(name));
  } catch {
    return true;
  }
  for (const pid of pids) {
    let stat;
    try {
      stat = procStat(readFileSync(`/proc/${pid}/stat`, 'utf8'));
    } catch {
      continue;
    }
    if (stat && stat.pgrp === pgid && stat.state !== 'Z' && stat.state !== 'X') return true;
  }
  return false;
}

/** Resolves once no process of the group runs, or after `ms` with false. */
export function groupGone(pgid: number, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    if (!groupRunning(pgid)) return resolve(true);
    const t0 = performance.now();
    const timer = setInterval(() => {
      const gone = !groupRunning(pgid);
      if (gone || performance.now() - t0 >= ms) {
        clearInterval(timer);
        resolve(gone);
      }
    }, GROUP_CHECK_MS);
  });
}

/**
 * Ends every process of a group: `first` (SIGTERM unless told), then SIGKILL to whatever still
 * runs `graceMs` later. Resolves once the group is empty (or SIGKILL was sent and given its
 * moment); a group already empty costs nothing.
 */
export async function endGroup(
  pgid: number,
  graceMs: number,
  first: NodeJS.Signals = 'SIGTERM',
): Promise<void> {
  if (!groupRunning(pgid)) return;
  if (graceMs > 0 && signalGroup(pgid, first) && (await groupGone(pgid, graceMs))) return;
  if (signalGroup(pgid, 'SIGKILL')) await groupGone(pgid, AFTER_KILL_MS);
}
