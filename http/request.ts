/**
 * Helpers shared by the route modules: the route registrar (which also feeds the 405 handling and
 * the OpenAPI check), credentials from headers, query parsing, body parsing, response helpers.
 */
import express, { type Request, type RequestHandler, type Response, type Router } from 'express';
import type { Caller } from '../daemon/rpc/client.js';
import type { AppClient } from '../daemon/rpc/reconnecting.js';
import { credsFromHeaders } from '../daemon/rpc/credentials.js';
import type { AuthPolicy, Creds } from '../daemon/rpc/protocol.js';
import { httpError, methodNotAllowed } from './errors.js';

export type Verb = 'get' | 'post' | 'put' | 'delete';

export interface RouteContext {
  client: AppClient;
  /** SERVICE_MAX_FILE_SIZE: the PUT body limit. */
  maxFileSize: number;
  /** SERVICE_ANONYMOUS/SERVICE_USER_AUTH of this server, declared to the daemon with every request. */
  policy: AuthPolicy;
}

export type Handler = (req: Request, res: Response) => Promise<void>;

/** Registers routes on a router and remembers them, so wrong methods get 405 and tests can list them. */
export class Registrar {
  readonly routes: { method: Verb; path: string }[] = [];

  constructor(private readonly router: Router) {}

  /** Express 5 forwards a rejected handler promise to the error handler. */
  add(method: Verb, path: string, ...handlers: [...RequestHandler[], Handler]): void {
    this.routes.push({ method, path });
    this.router[method](path, ...(handlers as RequestHandler[]));
  }

  /** After every route: the same paths with any other method answer 405 (OPTIONS is CORS's). */
  addMethodNotAllowed(): void {
    const byPath = new Map<string, string[]>();
    for (const r of this.routes) byPath.set(r.path, [...(byPath.get(r.path) ?? []), r.method.toUpperCase()]);
    for (const [path, methods] of byPath) this.router.all(path, methodNotAllowed(methods));
  }
}

/** The caller's raw credentials, exactly as sent (the daemon authenticates them), with this server's policy. */
export function credsOf(ctx: RouteContext, req: Request): Creds {
  return credsFromHeaders((name) => req.get(name), ctx.policy);
}

export function callerOf(ctx: RouteContext, req: Request): Caller {
  return ctx.client.as(credsOf(ctx, req));
}

/**
 * The path inside a wildcard route: `/fs/notes/a.md` → `notes/a.md` (relative, so the caller's home);
 * `/fs//srv/a.md` and `/fs/%2Fsrv/a.md` → `/srv/a.md`; `/fs/` → `` (home). Passed on unchanged:
 * the daemon resolves `..` lexically and confines workspaces.
 */
export function wildcardPath(req: Request): string {
  const segs = (req.params as Record<string, unknown>).path;
  if (segs === undefined) return '';
  if (Array.isArray(segs)) return segs.join('/');
  return String(segs);
}

/** One query parameter as a string; repeated parameters are a client error. */
export function query(req: Request, name: string): string | undefined {
  const v = (req.query as Record<string, unknown>)[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw httpError('EINVAL', `query parameter '${name}' must be given once, as a string`);
  return v;
}

export function requiredQuery(req: Request, name: string): string {
  const v = query(req, name);
  if (v === undefined || v === '') throw httpError('EINVAL', `missing query parameter '${name}'`);
  return v;
}

export function boolQuery(req: Request, name: string, dflt = false): boolean {
  const v = query(req, name);
  if (v === undefined) return dflt;
  if (v === '' || v === 'true' || v === '1' || v === 'yes') return true;
  if (v === 'false' || v === '0' || v === 'no') return false;
  throw httpError('EINVAL', `query parameter '${name}' must be true or false`);
}

export function intQuery(req: Request, name: string, min = 1, max = 1_000_000): number | undefined {
  const v = query(req, name);
  if (v === undefined || v === '') return undefined;
  if (!/^\d{1,9}$/.test(v) || Number(v) < min || Number(v) > max)
    throw httpError('EINVAL', `query parameter '${name}' must be an integer from ${min} to ${max}`);
  return Number(v);
}

/** Raw body of any content type, up to `limit` bytes (413 EFBIG beyond). */
export function rawBody(limit: number): RequestHandler {
  return express.raw({ type: () => true, limit });
}

const JSON_LIMIT = 1024 * 1024;

/**
 * JSON bodies: an empty body is `{}`; otherwise the Content-Type must be JSON and the body a JSON
 * object (400 EINVAL otherwise).
 */
export function jsonBody(): RequestHandler[] {
  return [
    express.raw({ type: () => true, limit: JSON_LIMIT }),
    (req, _res, next) => {
      const buf: unknown = req.body;
      if (!Buffer.isBuffer(buf) || buf.length === 0) {
        req.body = {};
        next();
        return;
      }
      const type = (req.get('content-type') ?? '').toLowerCase();
      if (!/^application\/([\w.-]+\+)?json\s*(;|$)/.test(type)) {
        next(httpError('EINVAL', `Content-Type must be application/json (got '${type || 'none'}')`));
        return;
      }
      let parsed: unknown;
      try {
        parsed = JSON.parse(buf.toString('utf8'));
      } catch {
        next(httpError('EINVAL', 'malformed JSON body'));
        return;
      }
      if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
        next(httpError('EINVAL', 'the JSON body must be an object'));
        return;
      }
      req.body = parsed;
      next();
    },
  ];
}

const JSON_TYPE = 'application/json; charset=utf-8';

/** 200 with a JSON body (the header express would derive from `type('json')`, set once here). */
export function sendJson(res: Response, body: unknown): void {
  res.status(200).setHeader('Content-Type', JSON_TYPE);
  res.send(Buffer.from(JSON.stringify(body), 'utf8'));
}

export function sendText(res: Response, text: string, type = 'text/plain; charset=utf-8'): void {
  res.status(200).setHeader('Content-Type', type);
  res.send(text);
}

/** `"abc"`, `W/"abc"`, `abc` → `abc`; a list gives several. */
export function parseEtags(header: string | undefined): string[] {
  if (header === undefined) return [];
  return header
    .split(',')
    .map((s) =>
      s
        .trim()
        .replace(/^W\//, '')
        .replace(/^"(.*)"$/, '$1'),
    )
    .filter((s) => s !== '');
}

export function quoteEtag(etag: string): string {
  return `"${etag}"`;
}
