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
  constructor(
    readonly headerBytes: number,
    readonly dataBytes: number,
  ) {
    super(
      `the message is larger than the frame limits (header ${headerBytes} of ${MAX_HEADER} bytes, data ${dataBytes} of ${MAX_DATA} bytes)`,
    );
  }
}

export interface Frame {
  header: unknown; // parsed JSON, or a FrameError if it did not parse
  data: Buffer | undefined;
}

export class FrameError {
  /** `id`: the request id read from the start of a skipped (oversized) frame, when it had one. */
  constructor(
    readonly reason: string,
    readonly id?: number,
  ) {}
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
  if (header instanceof EncodedHeader) return frameOf(header.parts, data);
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

function frameOf(parts: Buffer[], data: Buffer | undefined): Buffer[] {
  let hlen = 0;
  for (const p of parts) hlen += p.length;
  if (hlen > MAX_HEADER) throw new FrameTooLarge(hlen, data?.length ?? 0);
  const prefix = Buffer.allocUnsafe(8);
  prefix.writeUInt32BE(hlen, 0);
  prefix.writeUInt32BE(data === undefined ? 0 : data.length, 4);
  return data === undefined || data.length === 0 ? [prefix, ...parts] : [prefix, ...parts, data];
}

/** A header already encoded as UTF-8 JSON, in parts (by `encodeReplySliced`). */
export class EncodedHeader {
  constructor(readonly parts: Buffer[]) {}
}

/** Arrays in a reply's result longer than this are encoded in slices of this many items. */
export const ENCODE_SLICE_ITEMS = 500;
/** Strings in a reply's result longer than this (a diff of up to 4 MiB) are encoded in slices of this many UTF-16 units. */
export const ENCODE_SLICE_CHARS = 65536;

const isLong = (v: unknown): v is unknown[] | string =>
  (Array.isArray(v) && v.length > ENCODE_SLICE_ITEMS) || (typeof v === 'string' && v.length > ENCODE_SLICE_CHARS);

/**
 * The header `{"id":…,"result":…}` of a reply whose result (a plain object) holds an array longer
 * than ENCODE_SLICE_ITEMS or a string longer than ENCODE_SLICE_CHARS, encoded in turns of the event
 * loop of their own: a slice of items (or of the string) at a time, calling `pause` (a fresh
 * `pauser()`; the daemon passes `slicer`) between slices, which yields when it returns a promise.
 * One JSON.stringify of a 10,000-entry listing page (2.2 MB), and the UTF-8 length and copy of that
 * string, held the daemon's event loop 100-1,000 ms on a loaded machine. The bytes are those
 * JSON.stringify would give (a string is never cut inside a surrogate pair). Any other result:
 * undefined (encoded in one go, as usual).
 */
export async function encodeReplySliced(
  id: number,
  result: unknown,
  pauser: () => () => Promise<void> | undefined,
): Promise<EncodedHeader | undefined> {
  if (typeof result !== 'object' || result === null || Object.getPrototypeOf(result) !== Object.prototype)
    return undefined;
  // Most replies are small: look for a long field before building anything.
  let long = false;
  for (const key in result) if (isLong((result as Record<string, unknown>)[key])) long = true;
  if (!long) return undefined;
  const fields = Object.entries(result as Record<string, unknown>);
  await new Promise<void>((resolve) => setImmediate(resolve)); // the handler may have used this turn already
  const pause = pauser();
  const parts: Buffer[] = [];
  let text = `{"id":${id},"result":{`;
  const flush = async (slice: string): Promise<void> => {
    parts.push(Buffer.from(text + slice, 'utf8'));
    text = '';
    const w = pause();
    if (w !== undefined) await w;
  };
  let first = true;
  for (const [key, value] of fields) {
    const json = isLong(value) ? undefined : (JSON.stringify(value) as string | undefined);
    if (json === undefined && !isLong(value)) continue; // undefined, a function: left out, as JSON.stringify does
    text += `${first ? '' : ','}${JSON.stringify(key)}:`;
    first = false;
    if (json !== undefined) text += json;
    else if (typeof value === 'string') {
      text += '"';
      for (let i = 0; i < value.length;) {
        let end = Math.min(value.length, i + ENCODE_SLICE_CHARS);
        const last = value.charCodeAt(end - 1);
        if (end < value.length && last >= 0xd800 && last <= 0xdbff) end--; // keep a surrogate pair together
        await flush(JSON.stringify(value.slice(i, end)).slice(1, -1));
        i = end;
      }
      text += '"';
    } else {
      const items = value as unknown[];
      text += '[';
      for (let i = 0; i < items.length; i += ENCODE_SLICE_ITEMS)
        await flush((i === 0 ? '' : ',') + JSON.stringify(items.slice(i, i + ENCODE_SLICE_ITEMS)).slice(1, -1));
      text += ']';
    }
  }
  parts.push(Buffer.from(`${text}}}`, 'utf8'));
  return new EncodedHeader(parts);
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
        const start = this.peek(8 + Math.min(hlen, 32))
          .subarray(8)
          .toString('latin1');
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

  /**
   * The frame being received, when its header is in and its data (at least `min` bytes) is not all:
   * its data buffer, with the bytes held so far copied in, for the rest to be read from the socket
   * straight into it (DaemonClient). The decoder then holds nothing. `alloc` gives that buffer (the
   * caller's own for that reply, or a new one) from the frame's header and data length.
   */
  takeLarge(
    min: number,
    alloc: (header: unknown, length: number) => Buffer = (_, n) => Buffer.allocUnsafe(n),
  ): { header: unknown; data: Buffer; filled: number } | null {
    if (this.skipping > 0 || this.buffered < 8) return null;
    const head = this.peek(8);
    const hlen = head.readUInt32BE(0);
    const dlen = head.readUInt32BE(4);
    if (dlen < min || hlen > MAX_HEADER || dlen > MAX_DATA) return null;
    if (this.buffered < 8 + hlen || this.buffered >= 8 + hlen + dlen) return null;
    const all = this.take(this.buffered);
    let header: unknown;
    try {
      header = JSON.parse(all.subarray(8, 8 + hlen).toString('utf8'));
    } catch {
      header = new FrameError('header is not valid JSON');
    }
    const data = alloc(header, dlen);
    return { header, data, filled: all.copy(data, 0, 8 + hlen) };
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
    this.pushEncoded(encodeFrame(header, data));
  }

  /** Queues a frame already encoded (`encodeFrame`): one event sent to many connections is encoded once. */
  pushEncoded(frame: readonly Buffer[]): void {
    for (const b of frame) this.queue.push(b);
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
