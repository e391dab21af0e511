/**
 * The daemon's socket server: decodes frames, validates params against the protocol table,
 * runs handlers (pipelined: replies carry the request id and may come back in any order), and
 * answers malformed input with an error instead of dying.
 */
import net from 'node:net';
import { toWireError, VfsError, type WireError } from '../errors.js';
import { slicer } from '../core/vfs.js';
import {
  EncodedHeader,
  encodeFrame,
  encodeReplySliced,
  FrameDecoder,
  FrameError,
  FrameTooLarge,
  FrameWriter,
  MAX_DATA,
  MAX_HEADER,
} from './framing.js';
import { credsSchema, isMethod, methods, type ChangeEvent, type Method, type RequestHeader } from './protocol.js';
import type { Connection, Ctx, Handlers } from '../service/context.js';
import { requestScope } from '../events.js';
import { daemonMetrics } from '../metrics.js';

/** A connection's identity for handlers, and what ends with it (the daemon's write grants). */
class SocketConnection implements Connection {
  private readonly cleanups = new Map<string, () => void>();
  constructor(readonly id: number) {}

  onClose(key: string, fn: () => void): void {
    if (!this.cleanups.has(key)) this.cleanups.set(key, fn);
  }

  closed(): void {
    for (const fn of this.cleanups.values()) fn();
    this.cleanups.clear();
  }
}

/** What one request came to: its result (and raw bytes out), or the error to answer. */
export type Outcome =
  { ok: true; result: unknown; out: Buffer | undefined } | { ok: false; error: WireError; cause: unknown };

/**
 * Runs one request against the handler table, wherever it came from (the socket server, or a core
 * run in-process by tests and benchmarks): checks the method, its params against the protocol
 * table and the credentials object, runs the handler, and maps a failure to its wire error (with
 * workspace paths for workspace callers).
 */
export async function invoke(
  handlers: Handlers,
  req: { method: unknown; params: unknown; creds: unknown; data: Buffer | undefined },
  extras: Pick<Ctx, 'subscribe' | 'push' | 'conn'> = {},
): Promise<Outcome> {
  let ctx: Ctx | undefined;
  try {
    if (!isMethod(req.method))
      throw new VfsError('ENOSYS', String(req.method).slice(0, 64), undefined, 'no such method');
    const method: Method = req.method;
    const params = methods[method].params.safeParse(req.params ?? {});
    if (!params.success)
      throw new VfsError(
        'EINVAL',
        method,
        undefined,
        `invalid params: ${params.error.issues.map((i) => `${i.path.join('.') || 'params'}: ${i.message}`).join('; ')}`,
      );
    const creds = credsSchema.safeParse(req.creds ?? {});
    if (!creds.success) throw new VfsError('EINVAL', method, undefined, 'invalid credentials object');
    const c: Ctx = { creds: creds.data, data: req.data, ...extras };
    ctx = c;
    const handler = handlers[method] as (ctx: Ctx, p: unknown) => unknown;
    // The request's scope: who made a change, for the event feed's attribution (see events.ts).
    const result = await requestScope.run({}, () => handler(c, params.data));
    return { ok: true, result, out: ctx.out };
  } catch (err) {
    const raw = toWireError(err);
    return { ok: false, error: ctx?.mapError === undefined ? raw : ctx.mapError(raw), cause: err };
  }
}

export interface Logger {
  info(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export class RpcServer {
  readonly server: net.Server;
  private readonly subscribers = new Set<net.Socket>();
  private readonly sockets = new Set<net.Socket>();
  /** Per connection: replies and events of one event-loop turn leave in one write, in order. */
  private readonly writers = new WeakMap<net.Socket, FrameWriter>();
  private readonly conns = new WeakMap<net.Socket, SocketConnection>();
  private nextConn = 1;

  /** Called whenever a connection opens or closes (the daemon's idle exit counts them). */
  onClientsChange: ((clients: number) => void) | undefined;

  /** Open connections. */
  get clients(): number {
    return this.sockets.size;
  }

  /** The handler table; a standby daemon swaps in the service's when it takes the lease. */
  constructor(
    public handlers: Handlers,
    private readonly log: Logger,
  ) {
    this.server = net.createServer((sock) => this.accept(sock));
  }

  /** Pushes a change event to every subscribed connection. */
  broadcast(ev: ChangeEvent): void {
    if (this.subscribers.size === 0) return;
    let frame: Buffer[];
    try {
      frame = encodeFrame({ event: 'change', data: ev });
    } catch (err) {
      if (!(err instanceof FrameTooLarge)) throw err;
      this.log.error({ paths: ev.paths.length }, 'change event too large to send; dropped');
      return;
    }
    for (const s of this.subscribers) this.writers.get(s)?.pushEncoded(frame);
  }

  /** One event frame on one connection; a frame too large is dropped with a log line. */
  private pushEvent(sock: net.Socket, header: object): void {
    if (sock.destroyed) return;
    try {
      this.writers.get(sock)?.push(header);
    } catch (err) {
      if (!(err instanceof FrameTooLarge)) throw err;
      this.log.error({}, 'event too large to send; dropped');
    }
  }

  closeAll(): void {
    for (const s of this.sockets) s.destroy();
  }

  /** Serves a connection: the Unix socket's, or a TLS one that proved the shared secret (tcp.ts). */
  accept(sock: net.Socket): void {
    this.sockets.add(sock);
    this.onClientsChange?.(this.sockets.size);
    sock.setNoDelay(true);
    this.writers.set(sock, new FrameWriter(sock));
    const conn = new SocketConnection(this.nextConn++);
    this.conns.set(sock, conn);
    const decoder = new FrameDecoder();
    let broken = false;
    sock.on('data', (chunk: Buffer) => {
      if (broken) return;
      let frames;
      try {
        frames = decoder.push(chunk);
      } catch (err) {
        // Lengths we cannot trust: say why and drop this connection only (whatever it sends next is ignored).
        broken = true;
        this.reply(sock, null, { code: 'EPROTO', message: `EPROTO: ${(err as Error).message}` });
        this.writers.get(sock)?.flush();
        sock.end(() => sock.destroy());
        return;
      }
      for (const f of frames) void this.dispatch(sock, f.header, f.data);
    });
    sock.on('error', () => sock.destroy());
    sock.on('close', () => {
      this.sockets.delete(sock);
      this.subscribers.delete(sock);
      conn.closed();
      this.onClientsChange?.(this.sockets.size);
    });
  }

  private reply(
    sock: net.Socket,
    id: number | null,
    error: WireError | undefined,
    result?: unknown,
    data?: Buffer,
  ): void {
    if (sock.destroyed) return;
    const header = error !== undefined ? { id, error } : result instanceof EncodedHeader ? result : { id, result };
    const out = this.writers.get(sock);
    try {
      out?.push(header, error === undefined ? data : undefined);
    } catch (err) {
      // Never send a frame the peer would have to refuse: this request gets a clear error instead.
      if (!(err instanceof FrameTooLarge)) throw err;
      const message = `E2BIG: the answer is larger than the ${err.dataBytes > 0 ? `${MAX_DATA}-byte data` : `${MAX_HEADER}-byte header`} limit of one message; narrow the request`;
      out?.push({ id, error: { code: 'E2BIG', message } });
    }
  }

  private async dispatch(sock: net.Socket, header: unknown, data: Buffer | undefined): Promise<void> {
    if (header instanceof FrameError || typeof header !== 'object' || header === null) {
      this.reply(sock, null, {
        code: 'EPROTO',
        message: `EPROTO: malformed request: ${header instanceof FrameError ? header.reason : 'not an object'}`,
      });
      return;
    }
    const h = header as Partial<RequestHeader>;
    const id = typeof h.id === 'number' && Number.isSafeInteger(h.id) ? h.id : null;
    if (id === null) {
      this.reply(sock, null, { code: 'EPROTO', message: 'EPROTO: a request needs a numeric id' });
      return;
    }
    const started = process.hrtime.bigint();
    daemonMetrics.rpcInFlight++;
    try {
      const conn = this.conns.get(sock);
      const outcome = await invoke(
        this.handlers,
        { method: h.method, params: h.params, creds: h.creds, data },
        {
          subscribe: () => this.subscribers.add(sock),
          push: (header) => this.pushEvent(sock, header),
          ...(conn === undefined ? {} : { conn }),
        },
      );
      if (outcome.ok) {
        try {
          // a big result (a listing page, grep hits, a diff) is encoded in slices, not in one turn
          this.reply(
            sock,
            id,
            undefined,
            (await encodeReplySliced(id, outcome.result, slicer)) ?? outcome.result,
            outcome.out,
          );
        } catch (err) {
          this.reply(sock, id, toWireError(err));
        }
        return;
      }
      const err = outcome.cause;
      if (outcome.error.code === 'EIO')
        this.log.error(
          { err: err instanceof Error ? { message: err.message, stack: err.stack } : String(err), method: h.method },
          'internal error',
        );
      this.reply(sock, id, outcome.error);
    } finally {
      daemonMetrics.rpcInFlight--;
      daemonMetrics.rpcRequests++;
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      if (ms > 1000) this.log.info({ method: h.method, ms }, 'slow request');
    }
  }
}
