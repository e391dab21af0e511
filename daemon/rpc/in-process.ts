/**
 * A `Caller` that runs requests against a core in this process, through the same `invoke` as the
 * socket server (params, credentials and errors checked and shaped alike), without a socket. For
 * tests and benchmarks of core and VCS semantics: no daemon process per test. A read answers one
 * part (`READ_CHUNK`) as the daemon does; `DaemonClient` alone assembles larger files.
 */
import { VfsError } from '../errors.js';
import type { Handlers } from '../service/context.js';
import type { CallOptions, Caller, Reply } from './client.js';
import type { Creds, Method, Params, Result } from './protocol.js';
import { invoke } from './server.js';

const EMPTY = Buffer.alloc(0);

export class InProcessCaller implements Caller {
  constructor(
    private readonly handlers: Handlers,
    readonly creds: Creds,
  ) {}

  as(creds: Creds): InProcessCaller {
    return new InProcessCaller(this.handlers, creds);
  }

  async request<M extends Method>(method: M, params: Params<M>, opts?: CallOptions): Promise<Reply<M>> {
    // The core's grep workers and store timers do not keep a process alive (the daemon's socket
    // does): hold the event loop open while this request is in flight.
    const hold = setInterval(() => undefined, 2 ** 30);
    const o = await invoke(this.handlers, { method, params, creds: this.creds, data: opts?.data }).finally(() =>
      clearInterval(hold),
    );
    if (!o.ok) throw VfsError.fromWire(o.error);
    return { result: o.result as Result<M>, data: o.out ?? EMPTY };
  }

  async call<M extends Method>(method: M, params: Params<M>, opts?: CallOptions): Promise<Result<M>> {
    return (await this.request(method, params, opts)).result;
  }
}
