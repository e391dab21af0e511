/**
 * What a standby daemon answers (PostgreSQL store, docs/deploy.md): EAGAIN "not active" to every
 * request, so that front ends move on to the active daemon; `sys.ping`, `sys.status` and `sys.hold`
 * still work (the daemon is a process like any other). Once it takes the lease, the daemon swaps
 * this table for the service's.
 */
import { VfsError } from './errors.js';
import { methods, type Method, type StoreIdentity } from './rpc/protocol.js';
import { VERSION } from './rpc/version.js';
import type { DaemonProcess, Handlers } from './service/context.js';

export function standbyHandlers(
  proc: DaemonProcess,
  active: () => string,
  store: () => StoreIdentity | undefined,
): Handlers {
  const notActive = (method: Method) => (): never => {
    throw new VfsError(
      'EAGAIN',
      method,
      undefined,
      `not active: this daemon is a standby (the active daemon is ${active()}); use the active one`,
    );
  };
  const table = Object.fromEntries(Object.keys(methods).map((m) => [m, notActive(m as Method)])) as unknown as Handlers;
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
