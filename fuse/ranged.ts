/**
 * The content of a large file read through the mount, fetched from the daemon in ranged parts as the
 * kernel reads it, instead of as one whole-file transfer before the first byte (issue 18: a cold
 * 64 MiB read). The open fetched the first part (it checks access and gives the etag and size);
 * every later part names that etag (`if_match`), so the bytes served for one open are all of one
 * version: a file changed meanwhile makes the reads of parts not fetched yet fail (EPRECOND, EIO to
 * the reader) rather than return a mix of two versions.
 *
 * Parts are fetched ahead of the kernel's reads, at most AHEAD parts past the furthest part it asked
 * for and WINDOW calls in flight, and kept (read-only) for the life of the open file: a kernel read
 * of one part is answered with a view of it, with no copy in JavaScript.
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

/** Fetches `length` bytes at `offset` of the version `etag` (rejects if the file is no longer that version). */
export type FetchPart = (offset: number, length: number, etag: string) => Promise<Buffer>;

const EMPTY = Buffer.alloc(0);

export class RangedContent {
  private readonly parts: (Buffer | Promise<void> | undefined)[];
  /** Parts to prefetch: those below this index. */
  private until = 1;
  /** The lowest part index not requested yet (parts below it are requested or held). */
  private next = 1;
  private inFlight = 0;
  private received = 1;
  private failure: unknown;
  private stopped = false;
  /** Bytes of part 0; part i > 0 starts at head + (i - 1) * STEP. */
  private readonly head: number;

  /** `first`: part 0, as the open fetched it. `onDone`: called once every part is held. */
  constructor(
    readonly size: number,
    readonly etag: string,
    first: Buffer,
    private readonly fetch: FetchPart,
    private readonly onDone: (content: RangedContent) => void,
  ) {
    this.head = first.length;
    this.parts = new Array<Buffer | Promise<void> | undefined>(1 + Math.ceil((size - this.head) / STEP));
    this.parts[0] = first;
  }

  /** Bytes [pos, pos + len) (fewer at the end of the file): a view of one part, or a copy across parts. */
  async read(pos: number, len: number): Promise<Buffer> {
    const end = Math.min(this.size, pos + len);
    if (pos >= end) return EMPTY;
    const a = this.partAt(pos);
    const b = this.partAt(end - 1);
    this.ahead(this.partAt(Math.min(this.size, end + AHEAD) - 1) + 1);
    if (a === b) return (await this.part(a)).subarray(pos - this.start(a), end - this.start(a));
    const out = Buffer.allocUnsafe(end - pos);
    const got = await Promise.all(Array.from({ length: b - a + 1 }, (_, k) => this.part(a + k)));
    got.forEach((p, k) => {
      const start = this.start(a + k);
      p.copy(out, Math.max(0, start - pos), Math.max(0, pos - start), Math.min(p.length, end - start));
    });
    return out;
  }

  /** The whole content in one buffer (a writer needs it), fetching what is missing. */
  async whole(): Promise<Buffer> {
    this.ahead(this.parts.length);
    const got = await Promise.all(this.parts.map((_, i) => this.part(i)));
    return got.length === 1 ? got[0]! : Buffer.concat(got, this.size);
  }

  /** No more prefetching (the last descriptor closed). */
  stop(): void {
    this.stopped = true;
  }

  private partAt(pos: number): number {
    return pos < this.head ? 0 : 1 + Math.floor((pos - this.head) / STEP);
  }

  private start(i: number): number {
    return i === 0 ? 0 : this.head + (i - 1) * STEP;
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
    if (p instanceof Promise) await p;
    const b = this.parts[i];
    if (b instanceof Buffer) return b;
    throw this.failure;
  }

  private request(i: number): void {
    const offset = this.start(i);
    const length = Math.min(STEP, this.size - offset);
    this.inFlight++;
    this.parts[i] = this.fetch(offset, length, this.etag).then(
      (data) => {
        this.inFlight--;
        if (data.length !== length) {
          this.fail(new VfsError('EPRECOND', 'read', undefined, 'the file changed while it was being read'), i);
          return;
        }
        this.parts[i] = data;
        if (++this.received === this.parts.length) this.onDone(this);
        this.pump();
      },
      (err: unknown) => {
        this.inFlight--;
        this.fail(err, i);
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
