/**
 * The one long-lived daemon connection of a front end (the mount, the stdio MCP server, the MCP
 * change feed of the HTTP sidecar), bound to one identity. If the daemon goes away (restarted, or
 * crashed), the next call reconnects (starting a daemon for the data dir unless `spawn: false`)
 * instead of leaving a front end that only answers EIO; a call in flight when the connection drops
 * fails (EIO). The daemon authenticates every request, so nothing about the identity is cached here.
 *
 * Change events (`onChange`): the subscription is renewed on every new connection, and while there
 * is none, a reconnect to a running daemon is tried every second (never starting one: after
 * `mdvfs stop`, only a call brings a daemon back). The handler is also called with `{paths: []}` when the
 * connection drops and once the subscription is back: anything cached may be stale then.
 */
import type { CallOptions, Caller, DaemonClient, Reply } from './client.js';
import { connectDaemon } from './connect.js';
import type { ChangeEvent, Creds, Method, Params, Result } from './protocol.js';

export interface LinkOptions {
  /** Who speaks in log lines on stderr, e.g. `mdvfs mount`. */
  name: string;
  /** Start a daemon when none runs (default true); the HTTP sidecar's feed leaves that to `serve`. */
  spawn?: boolean;
}

const RETRY_MS = 1000;

export class DaemonLink implements Caller {
  private client: DaemonClient | null;
  private caller: Caller | null = null;
  private connecting: Promise<Caller> | null = null;
  private changeHandler: ((ev: ChangeEvent) => void) | null = null;
  private retry: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(
    private readonly dataDir: string,
    readonly creds: Creds,
    private readonly opts: LinkOptions,
    first: DaemonClient | null = null,
  ) {
    this.client = first;
    if (first !== null) this.caller = this.bind(first);
  }

  /** Connects now (the first failure is the caller's to report). */
  static async open(dataDir: string, creds: Creds, opts: LinkOptions): Promise<DaemonLink> {
    return new DaemonLink(dataDir, creds, opts, await connectDaemon({ dataDir, spawn: opts.spawn !== false }));
  }

  call<M extends Method>(method: M, params: Params<M>, opts?: CallOptions): Promise<Result<M>> {
    return this.request(method, params, opts).then((r) => r.result);
  }

  request<M extends Method>(method: M, params: Params<M>, opts?: CallOptions): Promise<Reply<M>> {
    if (this.client && !this.client.isClosed && this.caller) return this.caller.request(method, params, opts);
    return this.reconnect(this.opts.spawn !== false).then((c) => c.request(method, params, opts));
  }

  /**
   * The same connection acting with other credentials (`mdvfs mount --shared`: one per local user):
   * its replies keep their order with this link's change events, as this link's own do.
   */
  as(creds: Creds): Caller {
    const request = <M extends Method>(method: M, params: Params<M>, opts?: CallOptions): Promise<Reply<M>> => {
      if (this.client && !this.client.isClosed) return this.client.as(creds).request(method, params, opts);
      return this.reconnect(this.opts.spawn !== false).then(() => this.client!.as(creds).request(method, params, opts));
    };
    return { creds, request, call: (method, params, opts) => request(method, params, opts).then((r) => r.result) };
  }

  /** Calls `handler` with every change the daemon reports, on this connection and after reconnects. */
  async onChange(handler: (ev: ChangeEvent) => void): Promise<void> {
    this.changeHandler = handler;
    if (!this.client || this.client.isClosed) await this.reconnect(this.opts.spawn !== false);
    await this.subscribe(this.client!);
  }

  close(): void {
    this.closed = true;
    if (this.retry) clearTimeout(this.retry);
    this.retry = null;
    this.client?.close();
    this.client = null;
  }

  private bind(client: DaemonClient): Caller {
    client.on('socket-error', (err: Error) =>
      process.stderr.write(`${this.opts.name}: daemon connection: ${err.message}\n`),
    );
    client.on('event', (ev: ChangeEvent) => this.changeHandler?.(ev));
    client.on('close', () => {
      if (this.closed) return;
      // No events arrive while disconnected: nothing cached can be trusted from now on.
      this.changeHandler?.({ kind: 'change', paths: [] });
      this.scheduleRetry();
    });
    return client.as(this.creds);
  }

  private subscribe(client: DaemonClient): Promise<unknown> {
    // The connection's own identity (local root) subscribes: the events only serve cache invalidation.
    return client.call('sys.subscribe', {});
  }

  /** With a change handler, a lost connection is brought back without waiting for the next call. */
  private scheduleRetry(): void {
    if (this.closed || this.changeHandler === null || this.retry) return;
    this.retry = setTimeout(() => {
      this.retry = null;
      this.reconnect(false).catch(() => this.scheduleRetry());
    }, RETRY_MS);
    this.retry.unref();
  }

  private reconnect(spawn: boolean): Promise<Caller> {
    if (this.closed) return Promise.reject(new Error('closed'));
    this.connecting ??= connectDaemon({ dataDir: this.dataDir, spawn })
      .then((client) => {
        if (this.client !== null) process.stderr.write(`${this.opts.name}: reconnected to the daemon\n`);
        this.client = client;
        const caller = this.bind(client);
        this.caller = caller;
        if (this.changeHandler) {
          this.changeHandler({ kind: 'change', paths: [] });
          // Answers cached between the reconnect and the subscription are not trusted either.
          void this.subscribe(client)
            .then(() => this.changeHandler?.({ kind: 'change', paths: [] }))
            .catch((err: Error) =>
              process.stderr.write(`${this.opts.name}: cannot subscribe to changes: ${err.message}\n`),
            );
        }
        return caller;
      })
      .finally(() => {
        this.connecting = null;
      });
    return this.connecting;
  }
}
