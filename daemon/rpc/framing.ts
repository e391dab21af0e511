/**
 * Length-prefixed frames: [u32 BE header length][u32 BE data length][header JSON][data bytes].
 * The header is a JSON object; `data` carries file contents without any encoding.
 */
export const MAX_HEADER = 16 * 1024 * 1024;
export const MAX_DATA = 1024 * 1024 * 1024;

export interface Frame {
  header: unknown; // parsed JSON, or a FrameError if it did not parse
  data: Buffer | undefined;
}

export class FrameError {
  constructor(readonly reason: string) {}
}

/** The socket side FrameWriter needs (a net.Socket). */
export interface Writable {
  readonly destroyed: boolean;
  write(b: Buffer): boolean;
  cork(): void;
  uncork(): void;
}

/** A frame as buffers: prefix and header JSON in one buffer (one allocation), then the data if any. */
export function encodeFrame(header: unknown, data?: Buffer): Buffer[] {
  const json = JSON.stringify(header);
  const hlen = Buffer.byteLength(json, 'utf8');
  const head = Buffer.allocUnsafe(8 + hlen);
  head.writeUInt32BE(hlen, 0);
  head.writeUInt32BE(data === undefined ? 0 : data.length, 4);
  head.write(json, 8, 'utf8');
  return data === undefined || data.length === 0 ? [head] : [head, data];
}
/**
 * Incremental decoder. `push` returns complete frames; a frame whose JSON does not parse comes back
 * with a FrameError header (the stream stays in sync). Lengths over the limits throw: the stream can
 * no longer be trusted and the connection should be closed.
 */
export class FrameDecoder {
  private chunks: Buffer[] = [];
  private buffered = 0;

  push(chunk: Buffer): Frame[] {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    const frames: Frame[] = [];
    for (;;) {
      if (this.buffered < 8) break;
      const head = this.peek(8);
      const hlen = head.readUInt32BE(0);
      const dlen = head.readUInt32BE(4);
      if (hlen > MAX_HEADER || dlen > MAX_DATA) throw new Error(`frame too large (header ${hlen}, data ${dlen})`);
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
