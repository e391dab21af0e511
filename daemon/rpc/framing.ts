/**
 * Length-prefixed frames: [u32 BE header length][u32 BE data length][header JSON][data bytes].
 * The header is a JSON object; `data` carries file contents without any encoding.
 */
export const MAX_HEADER = 16 * 1024 * 1024;
export const MAX_DATA = 1024 * 1024 * 1024;

/**
 * A frame that would pass the limits above. Senders never emit one (the receiver would have to drop
 * the connection): encodeFrame throws this instead, and the caller answers or fails that one request.
 */
export class FrameTooLarge extends Error {
  constructor(readonly headerBytes: number, readonly dataBytes: number) {
    super(`the message is larger than the frame limits (header ${headerBytes} of ${MAX_HEADER} bytes, data ${dataBytes} of ${MAX_DATA} bytes)`);
  }
}

export interface Frame {
  header: unknown; // parsed JSON, or a FrameError if it did not parse
  data: Buffer | undefined;
}

export class FrameError {
  /** `id`: the request id read from the start of a skipped (oversized) frame, when it had one. */
  constructor(readonly reason: string, readonly id?: number) {}
}

/** The socket side FrameWriter needs (a net.Socket). */
export interface Writable {
  readonly destroyed: boolean;
  write(b: Buffer): boolean;
  cork(): void;
  uncork(): void;
}

/**
 * A frame as buffers: prefix and header JSON in one buffer (one allocation), then the data if any.
 * Throws FrameTooLarge (and builds nothing) when the frame would pass the limits.
 */
export function encodeFrame(header: unknown, data?: Buffer): Buffer[] {
  if (data !== undefined && data.length > MAX_DATA) throw new FrameTooLarge(0, data.length);
  let json: string;
  try {
    json = JSON.stringify(header);
  } catch (err) {
    // a string past V8's maximum length: certainly over the limit
    if (err instanceof RangeError) throw new FrameTooLarge(Number.MAX_SAFE_INTEGER, data?.length ?? 0);
    throw err;
  }
  const hlen = Buffer.byteLength(json, 'utf8');
  if (hlen > MAX_HEADER) throw new FrameTooLarge(hlen, data?.length ?? 0);
  const head = Buffer.allocUnsafe(8 + hlen);
  head.writeUInt32BE(hlen, 0);
  head.writeUInt32BE(data === undefined ? 0 : data.length, 4);
  head.write(json, 8, 'utf8');
  return data === undefined || data.length === 0 ? [head] : [head, data];
}
/** `{"id":123,` at the start of a header: how a skipped frame still names its request. */
const ID_PREFIX = /^\{"id":(\d{1,15})[,}]/;

/**
 * Incremental decoder. `push` returns complete frames; a frame whose JSON does not parse comes back
 * with a FrameError header (the stream stays in sync). Lengths over the limits: by default `push`
 * throws (the peer cannot be trusted; the server closes that connection). With `skipOversized`
 * (the client side, whose peer is the daemon) the frame's bytes are discarded as they arrive, never
 * held, and it comes back as a FrameError carrying the request id its header starts with, so only
 * that request fails and the connection stays in sync.
 */
export class FrameDecoder {
  private chunks: Buffer[] = [];
  private buffered = 0;
  /** bytes of an oversized frame still to discard */
  private skipping = 0;

  constructor(private readonly opts: { skipOversized?: boolean } = {}) {}

  push(chunk: Buffer): Frame[] {
    if (this.skipping > 0) {
      const n = Math.min(this.skipping, chunk.length);
      this.skipping -= n;
      chunk = chunk.subarray(n);
      if (chunk.length === 0) return [];
    }
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    const frames: Frame[] = [];
    for (;;) {
      if (this.buffered < 8) break;
      const head = this.peek(8);
      const hlen = head.readUInt32BE(0);
      const dlen = head.readUInt32BE(4);
      if (hlen > MAX_HEADER || dlen > MAX_DATA) {
        const reason = `frame too large (header ${hlen} bytes, data ${dlen} bytes; limits ${MAX_HEADER} and ${MAX_DATA})`;
        if (!this.opts.skipOversized) throw new Error(reason);
        if (this.buffered < 8 + Math.min(hlen, 32)) break; // wait for the start of the header (its id)
        const start = this.peek(8 + Math.min(hlen, 32)).subarray(8).toString('latin1');
        const m = ID_PREFIX.exec(start);
        frames.push({ header: new FrameError(reason, m ? Number(m[1]) : undefined), data: undefined });
        const total = 8 + hlen + dlen;
        const all = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
        if (all.length > total) {
          const rest = all.subarray(total);
          this.chunks = [rest];
          this.buffered = rest.length;
        } else {
          this.chunks = [];
          this.buffered = 0;
          this.skipping = total - all.length;
        }
        continue;
      }
      if (this.buffered < 8 + hlen + dlen) break;
      const all = this.take(8 + hlen + dlen);
      const json = all.subarray(8, 8 + hlen);
      let header: unknown;
      try {
        header = JSON.parse(json.toString('utf8'));
      } catch {
        header = new FrameError('header is not valid JSON');
      }
      // No copy: the bytes are ours alone (the store copies what it keeps into shared memory).
      frames.push({ header, data: dlen > 0 ? all.subarray(8 + hlen) : undefined });
    }
    return frames;
  }

  private peek(n: number): Buffer {
    if (this.chunks[0]!.length >= n) return this.chunks[0]!.subarray(0, n);
    const merged = Buffer.concat(this.chunks);
    this.chunks = [merged];
    return merged.subarray(0, n);
  }

  private take(n: number): Buffer {
    const merged = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
    const out = merged.subarray(0, n);
    const rest = merged.subarray(n);
    this.chunks = rest.length > 0 ? [rest] : [];
    this.buffered -= n;
    return out;
  }
}

/**
 * Queues the frames of one event-loop turn and writes them to the socket together (one writev) in
 * the check phase, right after the poll phase that produced them: under load many requests (or
 * replies) arrive in one turn, and a syscall plus a wake-up of the peer per frame was the largest
 * share of the hop in profiles. Order is kept: frames leave in the order they were queued.
 */
export class FrameWriter {
  private queue: Buffer[] = [];
  private scheduled = false;
  private readonly flushNow = (): void => this.flush();

  constructor(private readonly sock: Writable) {}

  push(header: unknown, data?: Buffer): void {
    for (const b of encodeFrame(header, data)) this.queue.push(b);
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(this.flushNow);
    }
  }

  /** Writes whatever is queued now (also before closing, so queued frames are not lost). */
  flush(): void {
    this.scheduled = false;
    const q = this.queue;
    if (q.length === 0) return;
    this.queue = [];
    if (this.sock.destroyed) return;
    if (q.length === 1) {
      this.sock.write(q[0]!);
      return;
    }
    this.sock.cork();
    for (const b of q) this.sock.write(b);
    this.sock.uncork();
  }
}
