/**
 * A raw `GET /events` reader for black-box tests: parses the server-sent events as they arrive.
 *
 *   const s = await openEvents(svc, { auth: 'User alice' });
 *   const ev = await s.until((e) => e.paths.includes('/home/alice/a.md'));
 */
import http from 'node:http';

export interface SseEvent {
  id?: string;
  event: string;
  data: string;
}

export interface FeedEventJson {
  id: string;
  time: number;
  paths: string[];
  by?: string;
  on_behalf_of?: string;
}

export interface EventStream {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** The body of a refused request (not a stream). */
  body: string;
  /** Every frame so far, in order. */
  frames: SseEvent[];
  /** The `ready` frame's data. */
  ready: { last_id: string; reset: boolean } | undefined;
  /** The `change` events so far. */
  changes(): FeedEventJson[];
  /** Resolves with the first change event (already received or not) that matches. */
  until(pred: (e: FeedEventJson) => boolean): Promise<FeedEventJson>;
  close(): void;
}

export function openEvents(
  svc: { port: number },
  opts: { auth?: string; headers?: Record<string, string>; path?: string } = {},
): Promise<EventStream> {
  const headers: Record<string, string> = { accept: 'text/event-stream', ...opts.headers };
  if (opts.auth !== undefined) headers.authorization = opts.auth;
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port: svc.port, method: 'GET', path: opts.path ?? '/events', headers, agent: false },
      (res) => {
        const frames: SseEvent[] = [];
        const waiters: { pred: (e: FeedEventJson) => boolean; resolve: (e: FeedEventJson) => void }[] = [];
        const s: EventStream = {
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: '',
          frames,
          ready: undefined,
          changes: () => frames.filter((f) => f.event === 'change').map((f) => JSON.parse(f.data) as FeedEventJson),
          until: (pred) => {
            const hit = s.changes().find(pred);
            if (hit !== undefined) return Promise.resolve(hit);
            return new Promise((r) => waiters.push({ pred, resolve: r }));
          },
          close: () => {
            req.destroy();
          },
        };
        res.setEncoding('utf8');
        if (s.status !== 200) {
          res.on('data', (c: string) => (s.body += c));
          res.on('end', () => resolve(s));
          return;
        }
        let buf = '';
        let resolved = false;
        res.on('data', (chunk: string) => {
          buf += chunk;
          let i: number;
          while ((i = buf.indexOf('\n\n')) >= 0) {
            const block = buf.slice(0, i);
            buf = buf.slice(i + 2);
            const f: SseEvent = { event: 'message', data: '' };
            let any = false;
            for (const line of block.split('\n')) {
              if (line === '' || line.startsWith(':')) continue;
              const c = line.indexOf(':');
              const k = c < 0 ? line : line.slice(0, c);
              const v = c < 0 ? '' : line.slice(c + 1).replace(/^ /, '');
              if (k === 'event') f.event = v;
              else if (k === 'data') f.data += f.data === '' ? v : `\n${v}`;
              else if (k === 'id') f.id = v;
              else continue;
              any = true;
            }
            if (!any) continue;
            frames.push(f);
            if (f.event === 'ready') {
              s.ready = JSON.parse(f.data) as { last_id: string; reset: boolean };
              if (!resolved) {
                resolved = true;
                resolve(s);
              }
            }
            if (f.event === 'change') {
              const e = JSON.parse(f.data) as FeedEventJson;
              for (const w of [...waiters]) {
                if (w.pred(e)) {
                  waiters.splice(waiters.indexOf(w), 1);
                  w.resolve(e);
                }
              }
            }
          }
        });
        res.on('error', () => undefined);
      },
    );
    req.on('error', reject);
    req.end();
  });
}
