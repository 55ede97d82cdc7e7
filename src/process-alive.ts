/**
 * Whether process `pid` still runs on this machine: signal 0 reaches it, or it belongs to
 * another user (EPERM). What a run left behind (a spool, a folder's lock) is stale once not.
 */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
