/**
 * A daemon caller that survives daemon restarts, for the long-lived stdio server: an agent's MCP
 * session can outlast a `mdvfs serve` restart. A call in flight when the connection drops fails
 * (EIO, reported as a tool error); the next call reconnects, starting a daemon if none runs.
 * The daemon authenticates every request, so nothing about the identity is cached here.
 */
import type { CallOptions, Caller, DaemonClient, Reply } from '../daemon/rpc/client.js';
import { connectDaemon } from '../daemon/rpc/connect.js';
import type { Creds, Method, Params, Result } from '../daemon/rpc/protocol.js';

export class ReconnectingCaller implements Caller {
  private client: DaemonClient | null;
  private connecting: Promise<DaemonClient> | null = null;
  private closed = false;
  private boundTo: DaemonClient | null = null;
  private boundCaller: Caller | null = null;

  constructor(
    readonly creds: Creds,
    private readonly dataDir: string,
    first: DaemonClient,
  ) {
    this.client = first;
  }

  call<M extends Method>(method: M, params: Params<M>, opts?: CallOptions): Promise<Result<M>> {
    const now = this.bound();
    if (now) return now.call(method, params, opts);
    return this.live().then((c) => (this.bound() ?? c.as(this.creds)).call(method, params, opts));
  }

  request<M extends Method>(method: M, params: Params<M>, opts?: CallOptions): Promise<Reply<M>> {
    const now = this.bound();
    if (now) return now.request(method, params, opts);
    return this.live().then((c) => (this.bound() ?? c.as(this.creds)).request(method, params, opts));
  }

  /** The live connection bound to our credentials (made once per connection), or null while there is none. */
  private bound(): Caller | null {
    const c = this.client;
    if (!c || c.isClosed) return null;
    if (this.boundTo !== c) {
      this.boundTo = c;
      this.boundCaller = c.as(this.creds);
    }
    return this.boundCaller;
  }

  close(): void {
    this.closed = true;
    this.client?.close();
    this.client = null;
  }

  private live(): Promise<DaemonClient> {
    if (this.client && !this.client.isClosed) return Promise.resolve(this.client);
    if (this.closed) return Promise.reject(new Error('closed'));
    this.connecting ??= connectDaemon({ dataDir: this.dataDir })
      .then((c) => {
        this.client = c;
        process.stderr.write('mdvfs-mcp: reconnected to the daemon\n');
        return c;
      })
      .finally(() => {
        this.connecting = null;
      });
    return this.connecting;
  }
}
