/**
 * The HTTP sidecar's daemon connection, kept across daemon restarts and failovers: the sidecar keeps
 * its listener, and this client brings the link back (the data dir's socket, or the active daemon of
 * SERVICE_DAEMONS through `connectDaemon`, with its store identity checks on every reconnect).
 *
 * - A request made while the link is up goes straight to it, as on a plain `DaemonClient`.
 * - A request made while it is down waits up to `waitMs` for the next link, then fails with
 *   `EAGAIN` (HTTP 503 + `Retry-After`): the daemon is restarting or a failover is under way.
 * - A request in flight when the link drops fails with `EAGAIN` saying its outcome is unknown (the
 *   daemon may or may not have applied it before it went away).
 * - `lost` is emitted when a link drops: per-connection state in the daemon (event subscriptions,
 *   open MCP streams) went with it, so whoever relies on it ends its streams (clients reconnect and
 *   resume with Last-Event-ID). `feed` events of the current link are re-emitted.
 *
 * Reconnects are tried at once, then with a capped backoff, forever (until `close`).
 */
import { EventEmitter } from 'node:events';
import { VfsError } from '../errors.js';
import type { CallOptions, Caller, DaemonClient, Reply } from './client.js';
import type { Creds, FeedHeader, Method, Params, Result } from './protocol.js';

export interface ReconnectOptions {
  /** Opens a new link. `demand`: a request is waiting for it (a standalone sidecar may then start a daemon). */
  connect: (demand: boolean) => Promise<DaemonClient>;
  /** How long a request waits for a link before EAGAIN (ms, default 2000). */
  waitMs?: number;
  /** An error no retry can mend (a refused socket, a bad setting): the loop stops and `fatal` is emitted. */
  isFatal?: (err: unknown) => boolean;
  /** One structured line (lost, back, still down once a minute). */
  log: (fields: Record<string, unknown>) => void;
}

const BACKOFF_MIN_MS = 50;
const BACKOFF_MAX_MS = 500;
const DOWN_LOG_EVERY_MS = 60_000;

interface Waiter {
  resolve: (link: DaemonClient) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

/**
 * What the HTTP app (REST, /events, /mcp) needs of its daemon connection: a plain `DaemonClient`, or
 * a `ReconnectingClient`, which also emits `lost` when a link drops.
 */
export interface AppClient {
  as(creds: Creds): Caller;
  /** Requests sent to the daemon and not yet answered (the metrics' daemon queue of this front end). */
  readonly inFlight: number;
  on(event: 'feed', listener: (d: FeedHeader['data']) => void): unknown;
  on(event: 'lost', listener: () => void): unknown;
}

/** A daemon connection that outlives its links; see the module comment. */
export class ReconnectingClient extends EventEmitter implements Caller {
  readonly creds: Creds = {};
  private link: DaemonClient | null = null;
  private readonly waiters = new Set<Waiter>();
  private reconnecting = false;
  private closed = false;
  /** Why the last attempt failed, for the EAGAIN message and the log. */
  private lastError = '';
  private wake: (() => void) | null = null;

  get inFlight(): number {
    return this.link?.inFlight ?? 0;
  }

  /** `first`: the link made at start, or null to start reconnecting at once. */
  constructor(
    first: DaemonClient | null,
    private readonly opts: ReconnectOptions,
  ) {
    super();
    if (first !== null) this.adopt(first);
    else void this.reconnect(Date.now());
  }

  call<M extends Method>(method: M, params: Params<M>, opts?: CallOptions): Promise<Result<M>> {
    return this.send(method, params, this.creds, opts).then((r) => r.result);
  }

  request<M extends Method>(method: M, params: Params<M>, opts?: CallOptions): Promise<Reply<M>> {
    return this.send(method, params, this.creds, opts);
  }

  /** A caller bound to `creds` whose requests use whichever link is current when each is made. */
  as(creds: Creds): Caller {
    return new LinkedCaller(this, creds);
  }

  /** Whether a link is up now. */
  get connected(): boolean {
    return this.link !== null && !this.link.isClosed;
  }

  close(): void {
    this.closed = true;
    this.wake?.();
    for (const w of this.waiters) {
      clearTimeout(w.timer);
      w.reject(new VfsError('EAGAIN', 'rpc', undefined, 'the HTTP server is stopping'));
    }
    this.waiters.clear();
    this.link?.close();
    this.link = null;
  }

  /** @internal LinkedCaller's way in. */
  send<M extends Method>(method: M, params: Params<M>, creds: Creds, opts?: CallOptions): Promise<Reply<M>> {
    const link = this.link;
    if (link !== null && !link.isClosed) return this.sendOn(link, method, params, creds, opts);
    return this.nextLink(method).then((l) => this.sendOn(l, method, params, creds, opts));
  }

  private sendOn<M extends Method>(
    link: DaemonClient,
    method: M,
    params: Params<M>,
    creds: Creds,
    opts?: CallOptions,
  ): Promise<Reply<M>> {
    return link.sendAs(method, params, creds, opts).catch((err: unknown) => {
      // The link dropped under the request: the daemon may have applied it or not.
      if (link.isClosed && err instanceof VfsError && err.code === 'EIO')
        throw new VfsError(
          'EAGAIN',
          method,
          undefined,
          'the connection to the daemon was lost while this request was in flight, so its outcome is unknown (check before repeating a change); reconnecting, retry shortly',
        );
      throw err;
    });
  }

  /** The next link, or EAGAIN after waitMs. */
  private nextLink(method: string): Promise<DaemonClient> {
    if (this.closed) return Promise.reject(new VfsError('EAGAIN', method, undefined, 'the HTTP server is stopping'));
    return new Promise((resolve, reject) => {
      const w: Waiter = {
        resolve,
        reject,
        timer: setTimeout(() => {
          this.waiters.delete(w);
          reject(
            new VfsError(
              'EAGAIN',
              method,
              undefined,
              `no connection to the daemon for now (restarting, or a failover is under way${this.lastError ? `: ${this.lastError}` : ''}); retry shortly`,
            ),
          );
        }, this.opts.waitMs ?? 2000),
      };
      this.waiters.add(w);
      // A waiting request ends the backoff's sleep: try now (and say that someone is waiting).
      this.wake?.();
    });
  }

  private adopt(link: DaemonClient): void {
    this.link = link;
    link.on('feed', (d: FeedHeader['data']) => this.emit('feed', d));
    link.once('close', () => {
      if (this.link !== link) return;
      this.link = null;
      if (this.closed) return;
      this.opts.log({ level: 'warn', msg: 'connection to the daemon lost; reconnecting' });
      this.emit('lost');
      void this.reconnect(Date.now());
    });
    for (const w of this.waiters) {
      clearTimeout(w.timer);
      w.resolve(link);
    }
    this.waiters.clear();
    this.emit('connected');
  }

  private async reconnect(since: number): Promise<void> {
    if (this.reconnecting) return;
    this.reconnecting = true;
    let backoff = BACKOFF_MIN_MS;
    let logged = since;
    try {
      while (!this.closed) {
        try {
          const link = await this.opts.connect(this.waiters.size > 0);
          if (this.closed) {
            link.close();
            return;
          }
          this.opts.log({ level: 'info', msg: 'reconnected to the daemon', down_ms: Date.now() - since });
          this.lastError = '';
          this.adopt(link);
          return;
        } catch (err) {
          this.lastError = err instanceof Error ? err.message : String(err);
          if (this.opts.isFatal?.(err) === true) {
            this.opts.log({ level: 'error', msg: 'cannot reconnect to the daemon', err: this.lastError });
            this.emit('fatal', err);
            return;
          }
          if (Date.now() - logged >= DOWN_LOG_EVERY_MS) {
            logged = Date.now();
            this.opts.log({
              level: 'warn',
              msg: 'still no connection to the daemon',
              down_ms: logged - since,
              err: this.lastError,
            });
          }
        }
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, backoff);
          this.wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        this.wake = null;
        backoff = Math.min(backoff * 2, BACKOFF_MAX_MS);
      }
    } finally {
      this.reconnecting = false;
    }
  }
}

/** One object per caller (one per HTTP request): methods live on the prototype. */
class LinkedCaller implements Caller {
  constructor(
    private readonly client: ReconnectingClient,
    readonly creds: Creds,
  ) {}

  call<M extends Method>(method: M, params: Params<M>, opts?: CallOptions): Promise<Result<M>> {
    return this.client.send(method, params, this.creds, opts).then((r) => r.result);
  }

  request<M extends Method>(method: M, params: Params<M>, opts?: CallOptions): Promise<Reply<M>> {
    return this.client.send(method, params, this.creds, opts);
  }
}
