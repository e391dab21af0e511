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

export function encodeFrame(header: unknown, data?: Buffer): Buffer[] {
  const json = Buffer.from(JSON.stringify(header), 'utf8');
  const prefix = Buffer.allocUnsafe(8);
  prefix.writeUInt32BE(json.length, 0);
  prefix.writeUInt32BE(data === undefined ? 0 : data.length, 4);
  return data === undefined || data.length === 0 ? [prefix, json] : [prefix, json, data];
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
