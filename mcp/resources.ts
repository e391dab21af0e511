/**
 * Files and directories as MCP resources, and resource subscriptions.
 *
 * URIs are `mdvfs://` + the absolute path as the caller sees it (workspace callers see workspace
 * paths), each segment percent-encoded: `mdvfs:///home/alice/notes/a.md`. Files read as their text
 * (or a base64 blob), directories as their JSON listing. Listing and reading go through the daemon
 * with the caller's credentials, so a caller only ever sees what it may read.
 *
 * Subscriptions: the daemon pushes change events (absolute paths) on one dedicated connection
 * (`ChangeFeed`); each subscription re-checks with its subscriber's credentials that the file may
 * still be read (`visibleChange`) before `notifications/resources/updated` is sent. Over stdio the
 * server keeps its subscriptions; over HTTP they are kept in the daemon (`SubscriptionStore`) and
 * the worker serving the session's event stream notifies (mcp/http.ts).
 */
import path from 'node:path/posix';
import { mcpMaxResourcesFromEnv } from '../daemon/rpc/settings.js';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import {
  ErrorCode,
  ListResourceTemplatesRequestSchema,
  ListResourcesRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
  type ReadResourceResult,
  type Resource,
} from '@modelcontextprotocol/sdk/types.js';
import type { Caller } from '../daemon/rpc/client.js';
import type { DaemonLink } from '../daemon/rpc/link.js';
import type { ChangeEvent, McpSubscription } from '../daemon/rpc/protocol.js';
import { affects } from '../daemon/rpc/affects.js';
import { VfsError, toWireError } from '../daemon/errors.js';
import { ANSWER_MAX } from '../daemon/rpc/protocol.js';
import { decodeContent, type CallerFor } from './tools.js';

export const URI_SCHEME = 'mdvfs:';

/** `/home/a b.md` → `mdvfs:///home/a%20b.md` */
export function uriForPath(p: string): string {
  return `mdvfs://${p.split('/').map(encodeURIComponent).join('/')}`;
}

/** The path a resource URI names; EINVAL for anything that is not an `mdvfs:///abs` URI. */
export function pathForUri(uri: string): string {
  let u: URL;
  try {
    u = new URL(uri);
  } catch {
    throw new VfsError('EINVAL', 'resource', uri, 'not a URI');
  }
  if (u.protocol !== URI_SCHEME || u.host !== '' || !u.pathname.startsWith('/') || u.search || u.hash) {
    throw new VfsError('EINVAL', 'resource', uri, 'expected a URI of the form mdvfs:///<absolute path>');
  }
  try {
    return u.pathname.split('/').map(decodeURIComponent).join('/') || '/';
  } catch {
    throw new VfsError('EINVAL', 'resource', uri, 'bad percent-encoding');
  }
}

function mimeFor(p: string): string {
  const ext = path.extname(p).toLowerCase();
  if (ext === '.md' || ext === '.markdown') return 'text/markdown';
  if (ext === '.json') return 'application/json';
  return 'text/plain';
}

function mcpError(err: unknown): McpError {
  if (err instanceof McpError) return err;
  const w = toWireError(err);
  // Not-found style failures use the spec's "resource not found" code; the daemon code rides in data.
  const code = w.code === 'ENOENT' ? -32002 : ErrorCode.InvalidParams;
  return new McpError(code, w.message, { code: w.code });
}

// ---------- change feed ----------

type Listener = (e: ChangeEvent) => void;

/**
 * Daemon change events, fanned out to subscribers. The connection is opened lazily on the first
 * listener (most MCP sessions never subscribe) and re-opened if it drops while someone listens.
 */
export class ChangeFeed {
  private readonly listeners = new Set<Listener>();
  private started: Promise<void> | null = null;

  /** `link`: a daemon link of its own (its change events are fanned out to every listener). */
  constructor(private readonly link: Pick<DaemonLink, 'onChange' | 'close'>) {}

  /** Adds a listener; resolves once events flow. Returns the function that removes it. */
  async listen(l: Listener): Promise<() => void> {
    this.listeners.add(l);
    this.started ??= this.link.onChange((e) => {
      for (const x of [...this.listeners]) x(e);
    });
    try {
      await this.started;
    } catch (err) {
      this.started = null;
      this.listeners.delete(l);
      throw err;
    }
    return () => {
      this.listeners.delete(l);
    };
  }

  close(): void {
    this.listeners.clear();
    this.link.close();
  }
}

// ---------- registration ----------

/**
 * Where a session's subscriptions are kept when they are not this server's own: MCP over HTTP keeps
 * them in the daemon (every worker serves every session), and the worker serving the session's
 * event stream sends the notifications (mcp/http.ts).
 */
export interface SubscriptionStore {
  add(sub: McpSubscription): Promise<void>;
  remove(uri: string): Promise<void>;
}

export interface ResourceOptions {
  /** Change events for subscriptions kept by this server (stdio). */
  feed?: ChangeFeed;
  /** Subscriptions kept elsewhere (MCP over HTTP); with neither, the server does not offer `subscribe`. */
  store?: SubscriptionStore;
  /** Most resources one resources/list page returns (default 200). */
  pageSize?: number;
  /** Most files resources/list walks in total (default SERVICE_MCP_MAX_RESOURCES or 5000). */
  maxResources?: number;
}

/**
 * Registers resources/list, resources/templates/list, resources/read and, with a feed,
 * resources/subscribe and resources/unsubscribe on `server`. Must run before `server.connect`.
 */
export function registerResources(server: McpServer, callerFor: CallerFor, opts: ResourceOptions = {}): void {
  const low = server.server;
  const pageSize = opts.pageSize ?? 200;
  const maxResources = opts.maxResources ?? mcpMaxResourcesFromEnv();
  low.registerCapabilities({
    resources: { subscribe: opts.feed !== undefined || opts.store !== undefined, listChanged: false },
  });

  low.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({
    resourceTemplates: [
      {
        uriTemplate: 'mdvfs://{+path}',
        name: 'file',
        title: 'File or directory',
        description:
          'Any file (its contents) or directory (its JSON listing) by absolute path, e.g. mdvfs:///home/alice/notes/a.md.',
      },
    ],
  }));

  // Lists the caller's home directory and every file below it that the caller may read.
  low.setRequestHandler(ListResourcesRequestSchema, async (req, extra) => {
    try {
      const caller = callerFor(extra);
      const offset = req.params?.cursor === undefined ? 0 : Number.parseInt(req.params.cursor, 10);
      if (!Number.isInteger(offset) || offset < 0) throw new McpError(ErrorCode.InvalidParams, 'invalid cursor');
      const [home, found] = await Promise.all([
        caller.call('fs.resolve', { path: '' }),
        caller.call('search.find', { path: '', type: 'f' }),
      ]);
      const files = found.results.slice(0, maxResources);
      const all: Resource[] = [
        {
          uri: uriForPath(home.path),
          name: home.path,
          title: `Directory listing of ${home.path}`,
          mimeType: 'application/json',
        },
        ...files.map((p): Resource => ({ uri: uriForPath(p), name: p, title: path.basename(p), mimeType: mimeFor(p) })),
      ];
      const page = all.slice(offset, offset + pageSize);
      const next = offset + pageSize < all.length ? String(offset + pageSize) : undefined;
      return next === undefined ? { resources: page } : { resources: page, nextCursor: next };
    } catch (err) {
      throw mcpError(err);
    }
  });

  low.setRequestHandler(ReadResourceRequestSchema, async (req, extra): Promise<ReadResourceResult> => {
    const uri = req.params.uri;
    try {
      const caller = callerFor(extra);
      const p = pathForUri(uri);
      try {
        // One byte past the bound tells a file that fits from one that does not, without reading it all.
        const { result, data } = await caller.request('fs.read', { path: p, offset: 0, length: ANSWER_MAX + 1 });
        if (result.size > ANSWER_MAX) {
          throw new VfsError(
            'EFBIG',
            'read',
            result.path,
            `the file is ${result.size} bytes, more than one MCP answer carries (${ANSWER_MAX}); read it in parts with the read_file tool (offset, length)`,
          );
        }
        const body = decodeContent(data);
        const mimeType = mimeFor(result.path);
        return {
          contents: [
            body.encoding === 'utf8'
              ? { uri, mimeType, text: body.content }
              : { uri, mimeType: 'application/octet-stream', blob: body.content },
          ],
        };
      } catch (err) {
        if (!(err instanceof VfsError && err.code === 'EISDIR')) throw err;
        const listing = await caller.call('fs.list', { path: p });
        return { contents: [{ uri, mimeType: 'application/json', text: JSON.stringify(listing, null, 2) }] };
      }
    } catch (err) {
      throw mcpError(err);
    }
  });

  const feed = opts.feed;
  const store = opts.store;
  if (feed === undefined && store === undefined) return;

  const subs = new Map<string, McpSubscription & { caller: Caller }>();
  let listening: Promise<() => void> | null = null;
  let workspaceRoot: Promise<string | null> | null = null;

  const onChange = (e: ChangeEvent): void => {
    for (const [uri, s] of subs) {
      const relevant = e.paths.filter((p) => affects(p, s.global));
      if (relevant.length === 0) continue;
      void visibleChange(s.caller, s, relevant).then((visible) => {
        if (visible) notify(uri);
      });
    }
  };
  const notify = (uri: string): void => {
    if (!subs.has(uri) || !server.isConnected()) return;
    low.sendResourceUpdated({ uri }).catch(() => undefined);
  };

  low.setRequestHandler(SubscribeRequestSchema, async (req, extra) => {
    const uri = req.params.uri;
    try {
      const caller = callerFor(extra);
      const p = pathForUri(uri);
      // Security: only what the subscriber may read now (a directory: may list).
      const st = await caller.call('fs.stat', { path: p });
      await caller.call('fs.access', { path: st.path, mode: 4 });
      // The real root, to match global change events: whoami shows a workspace caller only '/'.
      workspaceRoot ??= caller.call('auth.scope', {}).then((s) => (s.root_path === '/' ? null : s.root_path));
      const root = await workspaceRoot;
      const global = root === null ? st.path : path.join(root, st.path);
      if (store !== undefined) {
        await store.add({ uri, path: st.path, global });
        return {};
      }
      if (feed === undefined) return {};
      listening ??= feed.listen(onChange).catch((err: unknown) => {
        listening = null;
        throw err;
      });
      await listening;
      subs.set(uri, { uri, caller, path: st.path, global });
      return {};
    } catch (err) {
      throw mcpError(err);
    }
  });

  low.setRequestHandler(UnsubscribeRequestSchema, async (req) => {
    if (store !== undefined) {
      try {
        await store.remove(req.params.uri);
      } catch (err) {
        throw mcpError(err);
      }
      return {};
    }
    subs.delete(req.params.uri);
    if (subs.size === 0 && listening) {
      void listening.then(
        (stop) => stop(),
        () => undefined,
      );
      listening = null;
    }
    return {};
  });

  const prevClose = low.onclose;
  low.onclose = () => {
    prevClose?.();
    subs.clear();
    if (listening)
      void listening.then(
        (stop) => stop(),
        () => undefined,
      );
    listening = null;
  };
}

/**
 * Security: whether the subscriber may see any of these changes now, checked with its own
 * credentials (delegation and workspace included; permissions may have changed since it
 * subscribed). A change to the watched path or one of its ancestors counts if the watched path
 * may still be read, or is gone (the subscriber can observe the deletion itself). A change below
 * it counts only if the changed path may be read, or if it is gone or unreadable but its parent
 * directory may be read (the entry's appearance, removal or size shows in that listing anyway):
 * changes inside a private directory below a readable folder are never reported.
 */
export async function visibleChange(caller: Caller, s: McpSubscription, changed: string[]): Promise<boolean> {
  const may = async (p: string, gone: boolean): Promise<boolean> => {
    try {
      await caller.call('fs.access', { path: p, mode: 4 });
      return true;
    } catch (err) {
      return gone && err instanceof VfsError && err.code === 'ENOENT';
    }
  };
  const prefix = s.global === '/' ? '/' : `${s.global}/`;
  const below = (p: string): boolean => p !== s.global && p.startsWith(prefix);
  if (changed.some((p) => !below(p)) && (await may(s.path, true))) return true;
  // Bounded: a huge batch is judged by its first paths.
  for (const p of changed.filter(below).slice(0, 64)) {
    const mine = path.join(s.path, p.slice(prefix.length));
    if ((await may(mine, false)) || (await may(path.dirname(mine), false))) return true;
  }
  return false;
}
