/**
 * The content of a large file read through the mount, fetched from the daemon in ranged parts as the
 * kernel reads it, instead of as one whole-file transfer before the first byte (issue 18: a cold
 * 64 MiB read). The open fetched the first part (it checks access and gives the etag and size);
 * every later part names that etag (`if_match`), so the bytes served for one open are all of one
 * version: a file changed meanwhile makes the reads of parts not fetched yet fail (EPRECOND, EIO to
 * the reader) rather than return a mix of two versions.
 *
 * Parts are fetched ahead of the kernel's reads, at most AHEAD bytes past the furthest byte it asked
 * for and WINDOW calls in flight: a kernel read of one part is answered with a view of it, with no
 * copy in JavaScript. A file the cache will keep whole (PartPool absent) keeps every part for the life
 * of the open file. A larger one keeps only the parts from one behind the kernel's last read onwards
 * (a part behind that is fetched again, of the same version, if it is read again): the others' buffers
 * go back to a PartPool, and the socket reads the next parts straight into them (the RPC client's
 * `into`): a cold read of a large file allocates nothing per part, so brings neither page faults on
 * new memory nor garbage collections (issue 18: together the largest share of the mount's time).
 *
 * Recycling is safe because a part's buffer is never reused while a view of it may still be served:
 * a part is pinned while a read or `whole` waits for it or copies from it, and a buffer given back
 * joins the pool only in a later turn of the event loop (a view returned by `read` is copied into the
 * kernel in the turn it is returned: see LowLevelMount's read reply). Until then nothing can be read
 * into it: the socket writes into a buffer only after it was taken from the pool.
 */
import { VfsError } from '../daemon/errors.js';

/**
 * The first part, fetched by the open: the kernel's largest read request (1 MiB, max_pages 256).
 * Smaller files come whole in that one call.
 */
export const PART = 1024 * 1024;
/**
 * The other parts. Each call costs the daemon and the mount a fixed share (measured: 64 MiB took
 * ~140 ms in 1 MiB calls against ~80 ms in 4 MiB calls, four in flight); part boundaries stay on
 * 1 MiB multiples, so an aligned kernel read lies within one part.
 */
const STEP = 4 * PART;
/** Bytes fetched ahead of the furthest byte the kernel asked for. */
const AHEAD = 16 * PART;
/** Ranged reads in flight at once. */
const WINDOW = 2;
/**
 * Free part buffers kept at most: what one sequential reader gives back before it takes them again
 * (the parts it holds are AHEAD / STEP ahead, one behind, WINDOW in flight).
 */
const POOL_MAX = AHEAD / STEP + WINDOW + 1;
/** Free part buffers are dropped after this long without use (idle memory goes back). */
const POOL_IDLE_MS = 30_000;

/**
 * Fetches `length` bytes at `offset` of the version `etag` (rejects if the file is no longer that
 * version); `into`, when given, is a free buffer of STEP bytes the bytes may be read into.
 */
export type FetchPart = (offset: number, length: number, etag: string, into?: Buffer) => Promise<Buffer>;

const EMPTY = Buffer.alloc(0);

/** Buffers of one part (STEP bytes), reused from one part (and one large file) to the next. */
export class PartPool {
  private free: Buffer[] = [];
  private used = false;
  private timer: NodeJS.Timeout | undefined;

  /** A buffer of STEP bytes, no longer used by anyone. */
  take(): Buffer {
    this.used = true;
    return this.free.pop() ?? Buffer.allocUnsafeSlow(STEP);
  }

  /** Gives back a buffer taken here; it can be taken again from the next turn of the event loop on. */
  give(b: Buffer): void {
    setImmediate(() => {
      if (this.free.length < POOL_MAX) this.free.push(b);
      this.timer ??= setInterval(() => this.sweep(), POOL_IDLE_MS).unref();
    });
  }

  private sweep(): void {
    if (this.used) {
      this.used = false;
      return;
    }
    this.free = [];
    clearInterval(this.timer);
    this.timer = undefined;
  }
}

export class RangedContent {
  private readonly parts: (Buffer | Promise<Buffer | undefined> | undefined)[];
  /** Reads and `whole` calls waiting for or copying from each part: a pinned part is not given back. */
  private readonly pins: Uint32Array;
  /** The pool's buffer (whole) each part was read into: it goes back to the pool with the part. */
  private readonly pooled: (Buffer | undefined)[];
  /** Parts received at least once (all of them: onDone). */
  private readonly seen: Uint8Array;
  /** Parts to prefetch: those below this index. */
  private until = 1;
  /** The lowest part index not requested yet (parts below it are requested or held). */
  private next = 1;
  private inFlight = 0;
  private received = 1;
  private failure: unknown;
  private stopped = false;
  /** The last descriptor closed: parts go back to the pool as soon as no read uses them. */
  private closed = false;
  /** Bytes of part 0; part i > 0 starts at head + (i - 1) * STEP. */
  private readonly head: number;

  /**
   * `first`: part 0, as the open fetched it. `onDone`: called once every part was received.
   * `pool`: where the buffers of parts behind the reader go (and the next parts' come from); without
   * it every part is kept.
   */
  constructor(
    readonly size: number,
    readonly etag: string,
    first: Buffer,
    private readonly fetch: FetchPart,
    private readonly onDone: (content: RangedContent) => void,
    private readonly pool?: PartPool,
  ) {
    this.head = first.length;
    const n = 1 + Math.ceil((size - this.head) / STEP);
    this.parts = new Array<Buffer | Promise<Buffer | undefined> | undefined>(n);
    this.parts[0] = first;
    this.pins = new Uint32Array(n);
    this.pooled = new Array<Buffer | undefined>(n);
    this.seen = new Uint8Array(n);
    this.seen[0] = 1;
  }

  /**
   * Bytes [pos, pos + len) (fewer at the end of the file): a view of one part, or a copy across parts.
   * A view is valid until the end of this turn of the event loop: serve it (copy it out) at once.
   */
  async read(pos: number, len: number): Promise<Buffer> {
    const end = Math.min(this.size, pos + len);
    if (pos >= end) return EMPTY;
    const a = this.partAt(pos);
    const b = this.partAt(end - 1);
    this.pin(a, b + 1, 1);
    try {
      this.behind(a - 1);
      this.ahead(this.partAt(Math.min(this.size, end + AHEAD) - 1) + 1);
      if (a === b) return (await this.part(a)).subarray(pos - this.start(a), end - this.start(a));
      const out = Buffer.allocUnsafe(end - pos);
      const got = await Promise.all(Array.from({ length: b - a + 1 }, (_, k) => this.part(a + k)));
      got.forEach((p, k) => {
        const start = this.start(a + k);
        p.copy(out, Math.max(0, start - pos), Math.max(0, pos - start), Math.min(p.length, end - start));
      });
      return out;
    } finally {
      this.pin(a, b + 1, -1);
    }
  }

  /** The whole content in one buffer (a writer needs it), fetching what is missing. */
  async whole(): Promise<Buffer> {
    const n = this.parts.length;
    this.pin(0, n, 1);
    try {
      this.ahead(n);
      // Every index: parts never requested are holes in `parts`, which map() would skip.
      const got = await Promise.all(Array.from({ length: n }, (_, i) => this.part(i)));
      return got.length === 1 ? got[0]! : Buffer.concat(got, this.size);
    } finally {
      this.pin(0, n, -1);
    }
  }

  /** No more prefetching (the last descriptor closed); the parts' buffers go back once no read uses them. */
  stop(): void {
    this.stopped = true;
    this.closed = true;
    this.behind(this.parts.length);
  }

  private partAt(pos: number): number {
    return pos < this.head ? 0 : 1 + Math.floor((pos - this.head) / STEP);
  }

  private start(i: number): number {
    return i === 0 ? 0 : this.head + (i - 1) * STEP;
  }

  private pin(from: number, to: number, by: 1 | -1): void {
    for (let i = from; i < to; i++) this.pins[i]! += by;
    if (by < 0 && this.closed) this.behind(this.parts.length);
  }

  /** With a pool: the buffers of the held parts 1..below-1 no read uses go back to it. */
  private behind(below: number): void {
    if (!this.pool) return;
    for (let i = 1; i < below; i++) {
      const p = this.parts[i];
      if (!(p instanceof Buffer) || this.pins[i] !== 0) continue;
      this.parts[i] = undefined;
      const own = this.pooled[i];
      if (own) this.pool.give(own);
      this.pooled[i] = undefined;
    }
  }

  private ahead(until: number): void {
    this.until = Math.max(this.until, Math.min(until, this.parts.length));
    this.pump();
  }

  private pump(): void {
    while (!this.stopped && this.failure === undefined && this.inFlight < WINDOW && this.next < this.until) {
      const i = this.next++;
      if (this.parts[i] === undefined) this.request(i);
    }
  }

  private async part(i: number): Promise<Buffer> {
    if (this.parts[i] === undefined) {
      if (this.failure !== undefined) throw this.failure;
      this.request(i);
    }
    const p = this.parts[i];
    const b = p instanceof Promise ? await p : p;
    if (b instanceof Buffer) return b;
    throw this.failure;
  }

  private request(i: number): void {
    const offset = this.start(i);
    const length = Math.min(STEP, this.size - offset);
    const into = this.pool?.take();
    this.inFlight++;
    this.parts[i] = this.fetch(offset, length, this.etag, into).then(
      (data) => {
        this.inFlight--;
        if (data.length !== length) {
          this.fail(new VfsError('EPRECOND', 'read', undefined, 'the file changed while it was being read'), i);
          return undefined;
        }
        this.parts[i] = data;
        // A view of the pool's buffer unless the reply came in a buffer of its own.
        this.pooled[i] = into && data.buffer === into.buffer && data.byteOffset === into.byteOffset ? into : undefined;
        if (!this.seen[i]) {
          this.seen[i] = 1;
          if (++this.received === this.parts.length) this.onDone(this);
        }
        // Stopped meanwhile (the last descriptor closed): nobody will read it.
        if (this.closed) this.behind(this.parts.length);
        this.pump();
        return data;
      },
      (err: unknown) => {
        this.inFlight--;
        this.fail(err, i);
        return undefined;
      },
    );
  }

  /** A part could not be had as this version: no part is fetched again, and reads of missing parts fail. */
  private fail(err: unknown, i: number): void {
    this.failure ??= err;
    this.parts[i] = undefined;
    this.stopped = true;
  }
}
