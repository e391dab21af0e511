/**
 * `GET /events` read with fetch (EventSource cannot send the Authorization header, and the token
 * never goes into a URL). Reconnects with `Last-Event-ID` after a drop, so nothing still kept by
 * the daemon is missed; `onReset` says when something was (reload what is shown).
 */
import { headersFor, type FeedEvent, type Session } from './api.js';

export interface LiveHandlers {
  onChange(ev: FeedEvent): void;
  onReset(): void;
  onState(connected: boolean): void;
}

export class Live {
  private lastId: string | undefined;
  private abort: AbortController | null = null;
  private stopped = false;

  constructor(
    private readonly session: Session,
    private readonly h: LiveHandlers,
  ) {}

  start(): void {
    void this.loop();
  }

  stop(): void {
    this.stopped = true;
    this.abort?.abort();
  }

  private async loop(): Promise<void> {
    let delay = 500;
    while (!this.stopped) {
      try {
        await this.once();
        delay = 500;
      } catch {
        // dropped or refused: try again below
      }
      this.h.onState(false);
      if (this.stopped) return;
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 10_000);
    }
  }

  private async once(): Promise<void> {
    this.abort = new AbortController();
    const headers = headersFor(this.session, { Accept: 'text/event-stream' });
    if (this.lastId !== undefined) headers['Last-Event-ID'] = this.lastId;
    const res = await fetch('/events', { headers, signal: this.abort.signal, credentials: 'omit', cache: 'no-store' });
    if (!res.ok || res.body === null) throw new Error(`events: ${res.status}`);
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      let i: number;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        this.dispatch(buf.slice(0, i));
        buf = buf.slice(i + 2);
      }
    }
  }

  private dispatch(block: string): void {
    let event = 'message';
    let data = '';
    let id: string | undefined;
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) continue;
      const c = line.indexOf(':');
      const field = c < 0 ? line : line.slice(0, c);
      const value = c < 0 ? '' : line.slice(c + 1).replace(/^ /, '');
      if (field === 'event') event = value;
      else if (field === 'data') data += data === '' ? value : `\n${value}`;
      else if (field === 'id') id = value;
    }
    if (id !== undefined) this.lastId = id;
    if (event === 'ready') {
      this.h.onState(true);
      const r = JSON.parse(data) as { reset: boolean };
      if (r.reset) this.h.onReset();
    } else if (event === 'change') this.h.onChange(JSON.parse(data) as FeedEvent);
    else if (event === 'end') this.stop();
  }
}
