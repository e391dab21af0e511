/**
 * The stdio transport of `mdvfs-mcp`: newline-delimited JSON-RPC on stdin/stdout, as the SDK's
 * StdioServerTransport (same framing, same limits, same error reporting), with less work per message:
 *
 * - Incoming lines are split without re-concatenating the whole input buffer for every chunk.
 * - A plain request or notification (the shape every client sends for tools/call) is checked by
 *   hand instead of by the SDK's zod union; anything else (responses, `_meta`, odd shapes) still
 *   goes through `JSONRPCMessageSchema.parse`, so malformed input fails exactly as before.
 * - The answers of one event-loop turn leave in one write to stdout instead of one write each (a
 *   client with several calls in flight gets them together; one call alone waits for nothing).
 */
import type { Readable, Writable } from 'node:stream';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { JSONRPCMessageSchema, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/** As the SDK's ReadBuffer: a line that grows past this without a newline is an error. */
export const MAX_LINE_BYTES = 10 * 1024 * 1024;

const REQUEST_KEYS = new Set(['jsonrpc', 'id', 'method', 'params']);

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * A parsed line as a JSON-RPC message. The hand check accepts exactly what the SDK's schema accepts
 * for requests and notifications without `_meta` (it would return them unchanged); everything else
 * is left to the schema.
 */
export function toMessage(value: unknown): JSONRPCMessage {
  if (isPlainObject(value) && value.jsonrpc === '2.0' && typeof value.method === 'string') {
    const id = value.id;
    const params = value.params;
    let simple = id === undefined || typeof id === 'string' || (typeof id === 'number' && Number.isSafeInteger(id));
    if (simple && params !== undefined) simple = isPlainObject(params) && params._meta === undefined;
    if (simple) for (const k in value) if (!REQUEST_KEYS.has(k)) simple = false;
    if (simple) return value as JSONRPCMessage;
  }
  return JSONRPCMessageSchema.parse(value);
}

export class LeanStdioServerTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  private started = false;
  private pending: Buffer[] = []; // the start of a line not yet complete
  private pendingBytes = 0;
  private outQueue: string[] = [];
  private outWaiters: (() => void)[] = [];
  private flushScheduled = false;

  constructor(
    private readonly stdin: Readable = process.stdin,
    private readonly stdout: Writable = process.stdout,
  ) {}

  private readonly onData = (chunk: Buffer): void => {
    try {
      this.take(chunk);
    } catch (error) {
      this.onerror?.(error as Error);
      void this.close();
    }
  };

  private readonly onStdinError = (error: Error): void => {
    this.onerror?.(error);
  };

  private readonly flushNow = (): void => this.flush();

  start(): Promise<void> {
    if (this.started) throw new Error('LeanStdioServerTransport already started');
    this.started = true;
    this.stdin.on('data', this.onData);
    this.stdin.on('error', this.onStdinError);
    return Promise.resolve();
  }

  private take(chunk: Buffer): void {
    let from = 0;
    let nl = chunk.indexOf(10);
    if (nl < 0) {
      if (this.pendingBytes + chunk.length > MAX_LINE_BYTES) {
        this.pending = [];
        this.pendingBytes = 0;
        throw new Error(`ReadBuffer exceeded maximum size of ${MAX_LINE_BYTES} bytes`);
      }
      this.pending.push(chunk);
      this.pendingBytes += chunk.length;
      return;
    }
    while (nl >= 0) {
      if (this.pendingBytes + nl - from > MAX_LINE_BYTES) {
        this.pending = [];
        this.pendingBytes = 0;
        throw new Error(`ReadBuffer exceeded maximum size of ${MAX_LINE_BYTES} bytes`);
      }
      let line: string;
      if (this.pending.length > 0) {
        this.pending.push(chunk.subarray(from, nl));
        line = Buffer.concat(this.pending).toString('utf8');
        this.pending = [];
        this.pendingBytes = 0;
      } else {
        line = chunk.toString('utf8', from, nl);
      }
      from = nl + 1;
      this.deliver(line);
      nl = chunk.indexOf(10, from);
    }
    if (from < chunk.length) {
      const rest = chunk.subarray(from);
      if (rest.length > MAX_LINE_BYTES) throw new Error(`ReadBuffer exceeded maximum size of ${MAX_LINE_BYTES} bytes`);
      this.pending.push(rest);
      this.pendingBytes = rest.length;
    }
  }

  private deliver(line: string): void {
    let message: JSONRPCMessage;
    try {
      message = toMessage(JSON.parse(line.endsWith('\r') ? line.slice(0, -1) : line));
    } catch (error) {
      this.onerror?.(error as Error);
      return;
    }
    this.onmessage?.(message);
  }

  send(message: JSONRPCMessage): Promise<void> {
    this.outQueue.push(`${JSON.stringify(message)}\n`);
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(this.flushNow);
    }
    return new Promise((resolve) => this.outWaiters.push(resolve));
  }

  /** Writes every queued message in one write; the senders' promises settle as the SDK's do (written, or drained). */
  private flush(): void {
    this.flushScheduled = false;
    if (this.outQueue.length === 0) return;
    const text = this.outQueue.length === 1 ? this.outQueue[0]! : this.outQueue.join('');
    const waiters = this.outWaiters;
    this.outQueue = [];
    this.outWaiters = [];
    const done = (): void => {
      for (const w of waiters) w();
    };
    if (this.stdout.write(text)) done();
    else this.stdout.once('drain', done);
  }

  close(): Promise<void> {
    this.flush(); // answers already produced still go out
    this.stdin.off('data', this.onData);
    this.stdin.off('error', this.onStdinError);
    if (this.stdin.listenerCount('data') === 0) this.stdin.pause();
    this.pending = [];
    this.pendingBytes = 0;
    this.onclose?.();
    return Promise.resolve();
  }
}
