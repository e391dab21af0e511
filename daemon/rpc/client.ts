/**
 * The typed daemon client used by every front end. One connection, pipelined requests.
 *
 *   const client = await connectDaemon({ dataDir });
 *   const alice = client.as({ authorization: 'User alice' });
 *   await alice.call('fs.mkdir', { path: 'notes', parents: true });
 *   const { result, data } = await alice.request('fs.read', { path: 'notes/a.md' });
 */
import net from 'node:net';
import { EventEmitter } from 'node:events';
import { VfsError, type WireError } from '../errors.js';
import { FrameDecoder, FrameError, FrameTooLarge, FrameWriter, type Frame } from './framing.js';
import {
  READ_CHUNK,
  type ChangeEvent,
  type Creds,
  type FeedHeader,
  type Method,
  type Params,
  type Result,
} from './protocol.js';

export interface CallOptions {
  data?: Buffer;
  /**
   * Where a large reply's data is read (a reused buffer: no allocation, no page faults, no garbage):
   * its `data` is then a view of it, when it fits and the reply was read straight from the socket
   * (see readBuffer); otherwise a buffer of its own, as without it. The caller must not touch it
   * until the reply came (or the request failed).
   */
  into?: Buffer;
}

export interface Reply<M extends Method> {
  result: Result<M>;
  data: Buffer;
}

/** A view of the client bound to one caller's credentials. */
export interface Caller {
  readonly creds: Creds;
  call<M extends Method>(method: M, params: Params<M>, opts?: CallOptions): Promise<Result<M>>;
  request<M extends Method>(method: M, params: Params<M>, opts?: CallOptions): Promise<Reply<M>>;
}

/** Replies without data share one empty buffer (Buffers of length 0 cannot be written to). */
const EMPTY = Buffer.alloc(0);
/**
 * Replies carrying at least this many bytes (file contents) are read from a Unix socket straight into
 * their own buffer: no chunk per socket read, no copy to join them (see `readBuffer`).
 */
const DIRECT_MIN = 64 * 1024;
/** Where a Unix socket's other reads go (then copied out): about what one read can return. */
const SCRATCH_BYTES = 256 * 1024;

interface Pending {
  resolve: (r: { result: unknown; data: Buffer }) => void;
  reject: (e: Error) => void;
  into?: Buffer | undefined;
}

export class DaemonClient extends EventEmitter implements Caller {
  readonly creds: Creds = {};
  private nextId = 1;
  private pending = new Map<number, Pending>();
  /** Requests sent and not yet answered. */
  get inFlight(): number {
    return this.pending.size;
  }
  /** Skips an oversized reply (failing only its request) instead of dropping every request in flight. */
  private decoder = new FrameDecoder({ skipOversized: true });
  private readonly out: FrameWriter;
  private closed = false;
  /** The large reply being read into its own buffer (see readBuffer). */
  private direct: { header: unknown; data: Buffer; filled: number } | null = null;
  private scratch: Buffer | undefined;
  private ended = false;
  /** When the daemon last sent anything (see watch). */
  private heard = Date.now();

  /** `direct`: the socket was made with `onread` calling readBuffer and onRead (connectSocket); else its 'data' events are read. */
  constructor(
    private readonly socket: net.Socket,
    direct = false,
  ) {
    super();
    socket.setNoDelay(true);
    this.out = new FrameWriter(socket);
    if (!direct) socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('close', () => this.onClose(new VfsError('EIO', 'rpc', undefined, 'connection to the daemon closed')));
    socket.on('error', (err) => this.emit('socket-error', err));
  }

  /** Calls a method as this client's default identity (local root unless `as` is used). */
  call<M extends Method>(method: M, params: Params<M>, opts?: CallOptions): Promise<Result<M>> {
    return this.request(method, params, opts).then(resultOf);
  }

  request<M extends Method>(method: M, params: Params<M>, opts?: CallOptions): Promise<Reply<M>> {
    return this.send(method, params, this.creds, opts);
  }

  /** A caller bound to `creds`: every request carries them and the daemon authenticates each one. */
  as(creds: Creds): Caller {
    return new BoundCaller(this, creds);
  }

  /** @internal BoundCaller's way in. */
  sendAs<M extends Method>(method: M, params: Params<M>, creds: Creds, opts?: CallOptions): Promise<Reply<M>> {
    return this.send(method, params, creds, opts);
  }

  close(): void {
    this.closed = true;
    this.out.flush();
    this.socket.end();
    this.socket.destroy();
  }

  get isClosed(): boolean {
    return this.closed;
  }

  private send<M extends Method>(method: M, params: Params<M>, creds: Creds, opts?: CallOptions): Promise<Reply<M>> {
    if (method === 'fs.read') {
      const p = params as Params<'fs.read'>;
      if (p.offset === undefined && p.length === undefined) return this.readWhole(p, creds) as Promise<Reply<M>>;
    }
    return this.sendOne(method, params, creds, opts);
  }

  /**
   * A whole file, in parts of at most READ_CHUNK bytes (one frame each). Every later part names the
   * first part's etag, so the parts are of one version; if the file changes meanwhile, start again.
   */
  private async readWhole(params: Params<'fs.read'>, creds: Creds): Promise<Reply<'fs.read'>> {
    for (let attempt = 1; ; attempt++) {
      const first = await this.sendOne('fs.read', params, creds);
      const { size, etag } = first.result;
      if (first.result.not_modified === true || first.data.length >= size) return first;
      const whole = Buffer.allocUnsafe(size);
      first.data.copy(whole, 0);
      let off = first.data.length;
      try {
        while (off < size) {
          const part = await this.sendOne(
            'fs.read',
            { path: params.path, if_match: etag, offset: off, length: READ_CHUNK },
            creds,
          );
          if (part.data.length === 0)
            throw new VfsError('EPRECOND', 'read', params.path, 'the file changed while it was being read in parts');
          part.data.copy(whole, off);
          off += part.data.length;
        }
        return { result: first.result, data: whole };
      } catch (err) {
        if (!(err instanceof VfsError) || err.code !== 'EPRECOND' || attempt >= 5) throw err;
      }
    }
  }

  private sendOne<M extends Method>(method: M, params: Params<M>, creds: Creds, opts?: CallOptions): Promise<Reply<M>> {
    if (this.closed) return Promise.reject(new VfsError('EIO', method, undefined, 'connection to the daemon closed'));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      // Queued: the requests of one event-loop turn leave in one write.
      try {
        this.out.push({ id, method, params, creds }, opts?.data);
      } catch (err) {
        if (!(err instanceof FrameTooLarge)) throw err;
        reject(
          new VfsError(
            err.dataBytes > 0 ? 'EFBIG' : 'E2BIG',
            method,
            undefined,
            `the request is larger than one message may be (${err.message})`,
          ),
        );
        return;
      }
      this.pending.set(id, {
        resolve: resolve as (r: { result: unknown; data: Buffer }) => void,
        reject,
        into: opts?.into,
      });
    });
  }

  /**
   * Where the socket's next read goes (net's `onread`): the rest of a large reply's data, so that the
   * kernel copies it into place (issue 18: a 64 MiB read through the mount spent more time in joining
   * 64 KiB chunks and collecting them than in anything else), or a scratch buffer, copied out.
   */
  readBuffer(): Buffer {
    if (this.direct) return this.direct.data.subarray(this.direct.filled);
    return (this.scratch ??= Buffer.allocUnsafe(SCRATCH_BYTES));
  }

  /** `n` bytes were read into readBuffer(). */
  onRead(n: number): void {
    this.heard = Date.now();
    const d = this.direct;
    if (d) {
      d.filled += n;
      if (d.filled < d.data.length) return;
      this.direct = null;
      this.dispatch([{ header: d.header, data: d.data }]);
      return;
    }
    this.onData(Buffer.from(this.scratch!.subarray(0, n)));
    if (!this.closed) this.direct = this.decoder.takeLarge(DIRECT_MIN, this.target);
  }

  /** The buffer a large reply's data is read into: the one its request brought (`into`), if it fits. */
  private readonly target = (header: unknown, length: number): Buffer => {
    const id = header instanceof FrameError ? undefined : (header as { id?: unknown } | null)?.id;
    const into = typeof id === 'number' ? this.pending.get(id)?.into : undefined;
    return into !== undefined && into.length >= length ? into.subarray(0, length) : Buffer.allocUnsafe(length);
  };

  /**
   * Heartbeat, for front ends given several daemons (SERVICE_DAEMONS): a daemon that owes an answer
   * (a request, or the ping sent when the line was quiet) and stays silent for `silentMs` is taken for
   * paused, hung or cut off. The connection is dropped, its requests fail with EIO, and the front end
   * reconnects to the daemon active then, instead of waiting for the daemon to wake (or for TCP to
   * give up, ~15 minutes on a partition). A healthy daemon answers within ~50 ms, whatever it is doing.
   */
  watch(silentMs: number): void {
    const every = Math.max(50, Math.floor(silentMs / 4));
    let pinging = false;
    const timer = setInterval(() => {
      if (this.closed) {
        clearInterval(timer);
        return;
      }
      const quiet = Date.now() - this.heard;
      if (quiet >= silentMs && this.pending.size > 0) {
        clearInterval(timer);
        this.onClose(
          new VfsError(
            'EIO',
            'rpc',
            undefined,
            `the daemon did not answer for ${quiet} ms: taken for paused or cut off`,
          ),
        );
        this.socket.destroy();
        return;
      }
      if (quiet >= every && !pinging) {
        pinging = true;
        this.sendOne('sys.ping', {}, {})
          .catch(() => undefined)
          .finally(() => (pinging = false));
      }
    }, every);
    timer.unref();
  }

  private onData(chunk: Buffer): void {
    this.heard = Date.now();
    let frames;
    try {
      frames = this.decoder.push(chunk);
    } catch (err) {
      this.onClose(new VfsError('EPROTO', 'rpc', undefined, (err as Error).message));
      this.socket.destroy();
      return;
    }
    this.dispatch(frames);
  }

  private dispatch(frames: Frame[]): void {
    for (const { header, data } of frames) {
      if (header instanceof FrameError) {
        const err = new VfsError(
          'E2BIG',
          'rpc',
          undefined,
          `the daemon's answer was refused: ${header.reason}; narrow the request`,
        );
        const p = header.id === undefined ? undefined : this.pending.get(header.id);
        if (p) {
          this.pending.delete(header.id!);
          p.reject(err);
        } else this.emit('protocol-error', err);
        continue;
      }
      const h = header as { id?: number | null; result?: unknown; error?: WireError; event?: string; data?: unknown };
      if (h.event === 'feed') {
        this.emit('feed', h.data as FeedHeader['data']);
        continue;
      }
      if (h.event !== undefined) {
        this.emit('event', h.data as ChangeEvent);
        continue;
      }
      if (typeof h.id !== 'number') {
        if (h.error) this.emit('protocol-error', VfsError.fromWire(h.error));
        continue;
      }
      const p = this.pending.get(h.id);
      if (!p) continue;
      this.pending.delete(h.id);
      if (h.error) p.reject(VfsError.fromWire(h.error));
      else p.resolve({ result: h.result, data: data ?? EMPTY });
    }
  }

  private onClose(err: Error): void {
    if (this.ended) return; // the heartbeat ended it first; then the socket's own 'close' came
    this.ended = true;
    this.closed = true;
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
    this.emit('close');
  }
}

/** One object per caller (front ends make one per HTTP request): methods live on the prototype. */
class BoundCaller implements Caller {
  constructor(
    private readonly client: DaemonClient,
    readonly creds: Creds,
  ) {}

  call<M extends Method>(method: M, params: Params<M>, opts?: CallOptions): Promise<Result<M>> {
    return this.client.sendAs(method, params, this.creds, opts).then(resultOf);
  }

  request<M extends Method>(method: M, params: Params<M>, opts?: CallOptions): Promise<Reply<M>> {
    return this.client.sendAs(method, params, this.creds, opts);
  }
}

function resultOf<M extends Method>(r: Reply<M>): Result<M> {
  return r.result;
}

export function connectSocket(socketPath: string): Promise<DaemonClient> {
  return new Promise((resolve, reject) => {
    // Replies are read into the client's buffers (net's onread): it must exist before the connection,
    // whose first read buffer net asks for as it connects.
    const opts: net.SocketConstructorOpts & Pick<net.ConnectOpts, 'onread'> = {
      onread: {
        buffer: () => client.readBuffer(),
        callback: (n) => {
          client.onRead(n);
          return true;
        },
      },
    };
    const sock = new net.Socket(opts);
    const client = new DaemonClient(sock, true);
    const onError = (err: Error) => reject(err);
    sock.once('error', onError);
    sock.once('connect', () => {
      sock.off('error', onError);
      resolve(client);
    });
    sock.connect(socketPath);
  });
}
