/**
 * The mount's connection to its daemon, bound to the mount's principal. If the daemon goes away (it
 * was restarted, or crashed), the next operation reconnects, starting a daemon for the data dir if
 * needed, instead of leaving a mount that only answers EIO.
 */
import { connectDaemon } from '../daemon/rpc/connect.js';
import type { CallOptions, Caller, DaemonClient, Reply } from '../daemon/rpc/client.js';
import type { ChangeEvent, Creds, Method, Params, Result } from '../daemon/rpc/protocol.js';

export class DaemonLink implements Caller {
  private client: DaemonClient | null;
  private caller: Caller;
  private connecting: Promise<Caller> | null = null;
  private changeHandler: ((ev: ChangeEvent) => void) | null = null;

  private constructor(
    private readonly dataDir: string,
    readonly creds: Creds,
    client: DaemonClient,
  ) {
    this.client = client;
    this.caller = this.bind(client);
  }

  static async open(dataDir: string, creds: Creds): Promise<DaemonLink> {
    return new DaemonLink(dataDir, creds, await connectDaemon({ dataDir }));
  }

  call<M extends Method>(method: M, params: Params<M>, opts?: CallOptions): Promise<Result<M>> {
    return this.request(method, params, opts).then((r) => r.result);
  }

  request<M extends Method>(method: M, params: Params<M>, opts?: CallOptions): Promise<Reply<M>> {
    if (this.client && !this.client.isClosed) return this.caller.request(method, params, opts);
    return this.reconnect().then((c) => c.request(method, params, opts));
  }

  /**
   * Calls `handler` with every change the daemon reports (on this connection and after reconnects).
   * Also called with `{paths: []}` when the connection drops and after a reconnect: anything cached
   * may be stale then.
   */
  async onChange(handler: (ev: ChangeEvent) => void): Promise<void> {
    this.changeHandler = handler;
    if (this.client) await this.subscribe(this.client);
  }

  close(): void {
    this.client?.close();
    this.client = null;
  }

  private bind(client: DaemonClient): Caller {
    client.on('socket-error', (err: Error) => process.stderr.write(`mdvfs mount: daemon connection: ${err.message}\n`));
    client.on('event', (ev: ChangeEvent) => this.changeHandler?.(ev));
    // No events arrive while disconnected: nothing cached can be trusted from now on.
    client.on('close', () => this.changeHandler?.({ kind: 'change', paths: [] }));
    return client.as(this.creds);
  }

  private async subscribe(client: DaemonClient): Promise<void> {
    // The connection's own identity (local root) subscribes: the events only serve cache invalidation.
    await client.call('sys.subscribe', {});
  }

  private reconnect(): Promise<Caller> {
    this.connecting ??= connectDaemon({ dataDir: this.dataDir })
      .then((client) => {
        process.stderr.write('mdvfs mount: reconnected to the daemon\n');
        this.client = client;
        this.caller = this.bind(client);
        if (this.changeHandler) {
          this.changeHandler({ kind: 'change', paths: [] });
          // Answers cached between the reconnect and the subscription are not trusted either.
          void this.subscribe(client)
            .then(() => this.changeHandler?.({ kind: 'change', paths: [] }))
            .catch((err: Error) => process.stderr.write(`mdvfs mount: cannot subscribe to changes: ${err.message}\n`));
        }
        return this.caller;
      })
      .finally(() => {
        this.connecting = null;
      });
    return this.connecting;
  }
}
