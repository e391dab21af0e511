/**
 * The REST API as the page uses it: same origin, the signed-in credentials on every request
 * (kept in sessionStorage, never in a URL), errors as readable ApiError messages.
 */

export interface Session {
  /** `Bearer <token>` or `User <name>`. */
  authorization: string;
  onBehalfOf?: string;
  workspace?: string;
}

const KEY = 'mdvfs.session';

export function loadSession(): Session | null {
  const raw = sessionStorage.getItem(KEY);
  if (raw === null) return null;
  try {
    const s = JSON.parse(raw) as Session;
    return typeof s.authorization === 'string' ? s : null;
  } catch {
    return null;
  }
}

export function saveSession(s: Session | null): void {
  if (s === null) sessionStorage.removeItem(KEY);
  else sessionStorage.setItem(KEY, JSON.stringify(s));
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export function headersFor(s: Session | null, extra: Record<string, string> = {}): Record<string, string> {
  const h: Record<string, string> = { ...extra };
  if (s !== null) {
    h.Authorization = s.authorization;
    if (s.onBehalfOf) h['X-Service-On-Behalf-Of'] = s.onBehalfOf;
    if (s.workspace) h['X-Service-Workspace'] = s.workspace;
  }
  return h;
}

/**
 * A route that takes a path in the URL + an absolute path, each segment encoded:
 * `/home/a b.md` → `/fs//home/a%20b.md` (also `/admin/chmod`, `/admin/chown`).
 */
export function pathUrl(route: '/fs' | '/admin/chmod' | '/admin/chown', abs: string): string {
  return `${route}/${abs.split('/').map(encodeURIComponent).join('/')}`;
}
export function fsUrl(abs: string): string {
  return pathUrl('/fs', abs);
}

export interface Call {
  method?: string;
  body?: string | object;
  headers?: Record<string, string>;
}

export class Api {
  constructor(public session: Session | null) {}

  async raw(url: string, c: Call = {}): Promise<Response> {
    const extra: Record<string, string> = { ...(c.headers ?? {}) };
    let body: string | undefined;
    if (typeof c.body === 'string') body = c.body;
    else if (c.body !== undefined) {
      body = JSON.stringify(c.body);
      extra['Content-Type'] = 'application/json';
    }
    const res = await fetch(url, {
      method: c.method ?? 'GET',
      headers: headersFor(this.session, extra),
      body: body ?? null,
      credentials: 'omit',
      cache: 'no-store',
    });
    if (!res.ok && res.status !== 304) {
      let code = `HTTP${res.status}`;
      let message = `${res.status} ${res.statusText}`;
      try {
        const e = (await res.json()) as { error?: string; code?: string };
        if (typeof e.code === 'string') code = e.code;
        if (typeof e.error === 'string') message = e.error;
      } catch {
        // not JSON: keep the status line
      }
      throw new ApiError(res.status, code, message);
    }
    return res;
  }

  async json<T>(url: string, c: Call = {}): Promise<T> {
    return (await (await this.raw(url, c)).json()) as T;
  }
}

// The records as the daemon declares them (type-only: nothing of the daemon is bundled).
export type {
  ChangeRecord as Change,
  CommitRecord as Commit,
  DelegationRecord,
  DirEntry,
  FeedEvent,
  GroupRecord,
  Stat,
  UserRecord,
  WhoAmI,
  WorkspaceRecord,
  WorkspaceTokenRecord,
} from '../daemon/rpc/protocol.js';
