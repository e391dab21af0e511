/**
 * `GET /events`: the daemon's change feed as server-sent events, for the web UI and any client.
 *
 * Each stream is one `events.subscribe` subscription on the sidecar's daemon connection, made with
 * the caller's own credentials: the daemon filters every event by what the caller may read (see
 * daemon/events.ts) — nothing is filtered here. `Last-Event-ID` (or `?last_event_id=`, for clients
 * that cannot set headers) replays what was missed; the first frame, `event: ready`, says whether
 * it could (`reset: true`: reload what you show). A stream whose reader falls behind by more than
 * STREAM_BACKLOG bytes is closed; the client reconnects with its last id and loses nothing that is
 * still in the daemon's ring. When the sidecar's daemon connection drops (the daemon restarted, a
 * failover), the subscriptions went with it: every stream is closed without an `end` frame, and the
 * client reconnects with its last id, as after a network error.
 */
import type { Response } from 'express';
import type { FeedEvent, FeedHeader } from '../daemon/rpc/protocol.js';
import { httpError } from './errors.js';
import { callerOf, query, type Registrar, type RouteContext } from './request.js';

/** Bytes a slow reader may have pending before its stream is closed. */
export const STREAM_BACKLOG = 1024 * 1024;
/** A comment line this often keeps proxies and idle timeouts from closing a quiet stream. */
const HEARTBEAT_MS = 20_000;

interface Stream {
  res: Response;
  /** Events that arrived before the subscription answered (the replay), sent after `ready`. */
  early: FeedEvent[] | null;
  /** The daemon connection it was subscribed on dropped: nothing to unsubscribe. */
  lost: boolean;
}

function frame(res: Response, event: string, data: unknown, id?: string): void {
  if (res.writableEnded || res.destroyed) return;
  res.write(`${id === undefined ? '' : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  if (res.writableLength > STREAM_BACKLOG) res.end();
}

export function registerEvents(r: Registrar, ctx: RouteContext): void {
  const streams = new Map<string, Stream>();
  let next = 0;
  ctx.client.on('feed', (d: FeedHeader['data']) => {
    const s = streams.get(d.sub);
    if (s === undefined) return;
    if (d.end !== undefined) {
      frame(s.res, 'end', { reason: d.end });
      s.res.end();
      return;
    }
    if (d.event === undefined) return;
    if (s.early !== null) s.early.push(d.event);
    else frame(s.res, 'change', d.event, d.event.id);
  });
  ctx.client.on('lost', () => {
    for (const s of streams.values()) {
      s.lost = true;
      // A stream still being opened gets its answer from the route below (503).
      if (s.res.headersSent) s.res.end();
    }
    streams.clear();
  });

  r.add('get', '/events', async (req, res) => {
    const since = req.get('last-event-id') ?? query(req, 'last_event_id');
    const sub = (++next).toString(36);
    const as = callerOf(ctx, req);
    const s: Stream = { res, early: [], lost: false };
    streams.set(sub, s);
    let ready: { last_id: string; reset: boolean };
    try {
      ready = await as.call('events.subscribe', since === undefined ? { sub } : { sub, since });
    } catch (err) {
      streams.delete(sub);
      throw err;
    }
    if (s.lost) {
      // The link dropped while this stream was being opened: its subscription may be on the next one.
      as.call('events.unsubscribe', { sub }).catch(() => undefined);
      throw httpError('EAGAIN', 'the connection to the daemon dropped while the stream was being opened; retry');
    }
    const heartbeat = setInterval(() => {
      if (!res.writableEnded) res.write(': ping\n\n');
    }, HEARTBEAT_MS);
    heartbeat.unref();
    res.once('close', () => {
      clearInterval(heartbeat);
      streams.delete(sub);
      if (!s.lost) as.call('events.unsubscribe', { sub }).catch(() => undefined);
    });
    res.status(200);
    res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
    res.setHeader('Cache-Control', 'no-cache, no-transform');
    res.setHeader('X-Accel-Buffering', 'no');
    res.flushHeaders();
    res.write('retry: 2000\n\n');
    const early = s.early ?? [];
    s.early = null;
    // Without replayed events, `ready` carries the newest id, so a reconnect resumes from here.
    frame(res, 'ready', ready, early.length === 0 ? ready.last_id : undefined);
    for (const ev of early) frame(res, 'change', ev, ev.id);
  });
}
