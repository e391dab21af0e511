/**
 * What a daemon that is not active answers (PostgreSQL store, docs/deploy.md). A standby: EAGAIN
 * "not active" to every request, so that front ends move on to the active daemon. A daemon waiting
 * for an unreachable PostgreSQL: EAGAIN naming the outage (HTTP 503 + Retry-After). `sys.ping`,
 * `sys.status` and `sys.hold` still work (the daemon is a process like any other). Once it takes
 * the lease, the daemon swaps this table for the service's.
 */
import { VfsError } from './errors.js';
import { methods, type Method, type OpTraits, type StoreIdentity } from './rpc/protocol.js';
import { VERSION } from './rpc/version.js';
import type { DaemonProcess, Handlers } from './service/context.js';

/** Which store the daemon serves, for the handshake (`sys.ping`): front ends check it (store-record.ts). */
type Identity = () => StoreIdentity | undefined;

export function standbyHandlers(proc: DaemonProcess, active: () => string, store: Identity): Handlers {
  return refusing(
    proc,
    () => `not active: this daemon is a standby (the active daemon is ${active()}); use the active one`,
    store,
  );
}

/** A daemon with no core yet (PostgreSQL unreachable since it started): `why` says so to every request. */
export function waitingHandlers(proc: DaemonProcess, why: () => string, store: Identity): Handlers {
  return refusing(proc, why, store);
}

/**
 * A daemon that lost PostgreSQL while active: reads are served from memory by `serving`, every
 * mutation is refused with `why` before it touches memory (it could not be made durable).
 */
export function degradedHandlers(serving: Handlers, why: () => string): Handlers {
  const table = { ...serving } as Record<Method, unknown>;
  for (const m of Object.keys(methods) as Method[]) {
    if ((methods[m] as OpTraits).mutates === undefined) continue;
    table[m] = (): never => {
      throw new VfsError('EAGAIN', m, undefined, why());
    };
  }
  return table as unknown as Handlers;
}

function refusing(proc: DaemonProcess, why: () => string, store: Identity): Handlers {
  const refuse = (method: Method) => (): never => {
    throw new VfsError('EAGAIN', method, undefined, why());
  };
  const table = Object.fromEntries(Object.keys(methods).map((m) => [m, refuse(m as Method)])) as unknown as Handlers;
  const local = (origin: string | undefined, op: string): void => {
    if (origin === 'remote') throw new VfsError('EACCES', op, undefined, 'not available over the network');
  };
  table['sys.ping'] = () => {
    const identity = store();
    return identity === undefined
      ? { pong: true, pid: process.pid }
      : { pong: true, pid: process.pid, store: identity };
  };
  table['sys.status'] = (ctx) => {
    local(ctx.creds.origin, 'status');
    return { ...proc.status(), version: VERSION, users: 0, files: 0, commits: 0 };
  };
  table['sys.hold'] = (ctx, p) => {
    local(ctx.creds.origin, 'hold');
    return { held_by: proc.hold(p.pid) };
  };
  return table;
}
