/** MCP over HTTP sessions, kept in the daemon so that every HTTP worker can serve every session. */
import { VfsError } from '../errors.js';
import type { McpSessions } from '../mcp-sessions.js';
import type { AreaOps } from './context.js';

export const mcpOps = (sessions: McpSessions): AreaOps<'mcp'> => ({
  'mcp.session.open': (p, { ctx, cred }) => ({
    id: sessions.open(ctx.creds, cred, p.address, p.limits),
  }),
  'mcp.session.get': (p, { ctx }) => {
    const s = sessions.get(ctx.creds, p.id);
    return { id: s.id, subscriptions: sessions.subscriptions(s) };
  },
  'mcp.session.stream': (p, { ctx }) => {
    const s = sessions.get(ctx.creds, p.id);
    const conn = ctx.conn;
    if (conn === undefined)
      throw new VfsError('ENOTSUP', 'mcp session', undefined, 'event streams need a socket connection');
    conn.onClose('mcp-streams', () => sessions.dropConnection(conn.id));
    return { streams: sessions.stream(s, conn.id, p.open ? 1 : -1) };
  },
  'mcp.session.subscribe': (p, { ctx }) => ({
    subscriptions: sessions.subscribe(sessions.get(ctx.creds, p.id), p.subscription),
  }),
  'mcp.session.unsubscribe': (p, { ctx }) => ({
    subscriptions: sessions.unsubscribe(sessions.get(ctx.creds, p.id), p.uri),
  }),
  'mcp.session.close': (p, { ctx }) => {
    sessions.get(ctx.creds, p.id);
    return { closed: sessions.close(p.id) };
  },
  'mcp.session.match': (p) => sessions.match(p.ids, p.paths),
  'mcp.session.events': async (p, { ctx }) => {
    const s = sessions.get(ctx.creds, p.id);
    await sessions.recorded(); // every change so far is in the buffer
    return sessions.events(s, p.after);
  },
});
