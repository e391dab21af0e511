/**
 * Shared by the VCS and search tests (test/vcs, test/search).
 */
import { spawnDaemon, type TestDaemon } from '../helpers/daemon.js';
import { coreFrom } from '../helpers/core.js';
import type { Caller } from '../../daemon/rpc/client.js';
import type { Creds } from '../../daemon/rpc/protocol.js';

interface Teardown {
  teardown(fn: () => void | Promise<void>): void;
}

/**
 * A daemon for tests that do not kill it: fsync only costs time here (a restart test uses the
 * default, full durability).
 */
export function quickDaemon(t: Teardown, env: NodeJS.ProcessEnv = {}): Promise<TestDaemon> {
  return spawnDaemon(t, { SERVICE_FSYNC: 'off', ...env });
}

/** A core in this process (no socket, no daemon process), shaped like a daemon's client for these tests. */
export async function quickCore(t: Teardown): Promise<{ client: { as(creds: Creds): Caller } }> {
  const c = await coreFrom(t);
  return { client: { as: c.as } };
}

export async function objects(c: Caller): Promise<number> {
  return (await c.call('sys.health', {})).objects;
}

export async function names(c: Caller, p: string): Promise<string[]> {
  return (await c.call('fs.list', { path: p })).entries.map((e) => e.name);
}

/** Settles a promise into a record instead of throwing, so a test can inspect the order of events. */
export function settle<T>(
  p: Promise<T>,
): Promise<{ ok: true; value: T } | { ok: false; error: Error & { code?: string } }> {
  return p.then(
    (value) => ({ ok: true as const, value }),
    (error: Error & { code?: string }) => ({ ok: false as const, error }),
  );
}
