/**
 * `--url`: the CLI's commands run against a remote REST server instead of the local daemon.
 * This adapter speaks the daemon client's `Caller` interface and maps each method the CLI uses
 * onto the REST routes of the contract and DESIGN.md §5, so every command is written once.
 */
import http from 'node:http';
import https from 'node:https';
import { posix } from 'node:path';
import { VfsError, isErrorCode, type ErrorCode } from '../daemon/errors.js';
import type { Caller, CallOptions, Reply } from '../daemon/rpc/client.js';
import {
  isRestMethod,
  restBinding,
  restSource,
  type Creds,
  type Method,
  type Params,
  type RestBinding,
  type Result,
} from '../daemon/rpc/protocol.js';

type P = Record<string, unknown>;

interface HttpReply {
  status: number;
  headers: { get(name: string): string | null };
  body: Buffer;
}

/**
 * One request without keep-alive: a pooled idle socket would hold a one-shot CLI process open
 * until the server's keep-alive timeout (seconds), and node:http loads faster than fetch.
 */
function send(
  url: string,
  method: string,
  headers: Record<string, string>,
  body: Buffer | string | undefined,
): Promise<HttpReply> {
  const u = new URL(url);
  const mod = u.protocol === 'https:' ? https : http;
  const payload = body === undefined ? undefined : Buffer.isBuffer(body) ? body : Buffer.from(body, 'utf8');
  if (payload !== undefined) headers['content-length'] = String(payload.length);
  return new Promise((resolve, reject) => {
    const req = mod.request(u, { method, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const h = res.headers;
        resolve({
          status: res.statusCode ?? 0,
          headers: {
            get: (name) => {
              const v = h[name.toLowerCase()];
              return v === undefined ? null : Array.isArray(v) ? v.join(', ') : v;
            },
          },
          body: Buffer.concat(chunks),
        });
      });
    });
    req.on('error', reject);
    req.end(payload);
  });
}

const STATUS_CODES: Record<number, ErrorCode> = {
  400: 'EINVAL',
  401: 'EAUTH',
  403: 'EACCES',
  404: 'ENOENT',
  405: 'EMETHOD',
  409: 'EEXIST',
  412: 'EPRECOND',
  413: 'EFBIG',
};

function str(p: P, key: string): string {
  const v = p[key];
  return typeof v === 'string' ? v : '';
}

function opt(p: P, key: string): string | undefined {
  const v = p[key];
  return v === undefined || v === null ? undefined : String(v);
}

/**
 * A path as a URL suffix: `/fs/notes/a.md` is the relative `notes/a.md` and `/fs//srv/a.md` the
 * absolute `/srv/a.md` (DESIGN.md §5). URL parsers collapse `..` segments, so relative paths are
 * normalised here and a relative path that climbs above the home directory is refused.
 */
export function urlPath(prefix: string, path: string): string {
  let p = path;
  if (p.startsWith('/')) p = posix.normalize(p);
  else {
    const parts: string[] = [];
    for (const seg of p.split('/')) {
      if (seg === '' || seg === '.') continue;
      if (seg === '..') {
        if (parts.length === 0 || parts[parts.length - 1] === '~') {
          throw new VfsError(
            'EINVAL',
            'url',
            path,
            'a relative path above the home directory must be written as an absolute path with --url',
          );
        }
        parts.pop();
      } else parts.push(seg);
    }
    p = parts.join('/');
  }
  return `${prefix}/${p.split('/').map(encodeURIComponent).join('/')}`;
}

function query(p: Record<string, string | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(p)) if (v !== undefined) q.set(k, v);
  const s = q.toString();
  return s === '' ? '' : `?${s}`;
}

function json(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
}

function isListing(v: unknown): boolean {
  const o = v as { path?: unknown; entries?: unknown } | null;
  return typeof o === 'object' && o !== null && typeof o.path === 'string' && Array.isArray(o.entries);
}

export class RestCaller implements Caller {
  constructor(
    private readonly base: string,
    readonly creds: Creds,
  ) {}

  call<M extends Method>(method: M, params: Params<M>, opts?: CallOptions): Promise<Result<M>> {
    return this.request(method, params, opts).then((r) => r.result);
  }

  async request<M extends Method>(method: M, params: Params<M>, opts?: CallOptions): Promise<Reply<M>> {
    const r = await this.dispatch(method, params as P, opts?.data);
    return { result: r.result as Result<M>, data: r.data ?? Buffer.alloc(0) };
  }

  private async http(
    method: string,
    path: string,
    init: { body?: Buffer | string; json?: unknown; headers?: Record<string, string> } = {},
    op = method,
  ): Promise<HttpReply> {
    const headers: Record<string, string> = { ...init.headers };
    if (this.creds.authorization !== undefined) headers.authorization = this.creds.authorization;
    if (this.creds.workspace !== undefined) headers['x-service-workspace'] = this.creds.workspace;
    if (this.creds.onBehalfOf !== undefined) headers['x-service-on-behalf-of'] = this.creds.onBehalfOf;
    let body: Buffer | string | undefined = init.body;
    if (init.json !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(init.json);
    }
    let res: HttpReply;
    try {
      res = await send(`${this.base}${path}`, method, headers, body);
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      throw new VfsError('EIO', op, undefined, `cannot reach ${this.base}: ${e.code ?? e.message}`);
    }
    const buf = res.body;
    if (res.status >= 400) {
      const e = json(buf) as { error?: unknown; code?: unknown } | undefined;
      const code: ErrorCode = isErrorCode(e?.code) ? e.code : (STATUS_CODES[res.status] ?? 'EIO');
      const message = typeof e?.error === 'string' ? e.error : `HTTP ${res.status}`;
      throw VfsError.fromWire({ code, message: message.startsWith(`${code}:`) ? message : `${code}: ${message}` });
    }
    return res;
  }

  private async getJson(path: string, op: string): Promise<unknown> {
    const r = await this.http('GET', path, {}, op);
    return json(r.body);
  }

  private async sendJson(method: string, path: string, body: unknown, op: string): Promise<unknown> {
    const r = await this.http(method, path, { json: body }, op);
    return json(r.body) ?? {};
  }

  private async stat(path: string, op: string): Promise<P> {
    return (await this.getJson(`${urlPath('/fs', path)}?stat=true&follow=true`, op)) as P;
  }

  /** A method with a REST binding in the operation table: the request is made from the binding. */
  private async viaBinding(method: Method, b: RestBinding, p: P): Promise<unknown> {
    let route = b.route;
    const qs: Record<string, string | undefined> = {};
    const body: P = {};
    for (const [name, v] of Object.entries(p)) {
      if (v === undefined) continue;
      const from = restSource(b, name);
      if (from === 'query') qs[name] = String(v);
      else if (from === 'body') body[name] = v;
      else if (name === 'path' && route.includes('{/*path}'))
        route = v === '' ? route.replace('{/*path}', '') : urlPath(route.replace('{/*path}', ''), String(v));
      else route = route.replace(`:${name}`, encodeURIComponent(String(v)));
    }
    route = route.replace('{/*path}', '');
    if (b.text !== undefined) qs.format = 'json';
    const verb = b.verb.toUpperCase();
    const path = `${route}${query(qs)}`;
    return verb === 'GET'
      ? this.getJson(path, method)
      : this.sendJson(verb, path, verb === 'DELETE' ? undefined : body, method);
  }

  private async dispatch(method: Method, p: P, data: Buffer | undefined): Promise<{ result: unknown; data?: Buffer }> {
    if (isRestMethod(method)) return { result: await this.viaBinding(method, restBinding(method)!, p) };
    const fs = (key = 'path') => urlPath('/fs', str(p, key));
    switch (method) {
      case 'sys.health':
        return { result: await this.getJson('/health', method) };
      case 'fs.stat':
        return {
          result: await this.getJson(
            `${fs()}${query({ stat: 'true', follow: p.nofollow === true ? undefined : 'true' })}`,
            method,
          ),
        };
      case 'fs.readlink': {
        const st = await this.getJson(`${fs()}${query({ stat: 'true' })}`, method);
        const target = (st as { target?: unknown } | undefined)?.target;
        if (typeof target !== 'string') throw new VfsError('EINVAL', 'readlink', str(p, 'path'));
        return { result: { path: str(p, 'path'), target } };
      }
      case 'fs.list': {
        const r = await this.http(
          'GET',
          `${fs()}${query({ limit: p.limit === undefined ? undefined : String(p.limit), cursor: opt(p, 'cursor') })}`,
          {},
          method,
        );
        const v = (r.headers.get('content-type') ?? '').includes('json') ? json(r.body) : undefined;
        if (!isListing(v)) throw new VfsError('ENOTDIR', 'scandir', str(p, 'path'));
        return { result: v };
      }
      case 'vcs.cat': {
        const r = await this.http('GET', `${fs()}${query({ at: str(p, 'rev') })}`, {}, method);
        if ((r.headers.get('content-type') ?? '').includes('json') && isListing(json(r.body)))
          throw new VfsError('EISDIR', 'history', str(p, 'path'));
        return {
          result: { path: str(p, 'path'), etag: r.headers.get('etag') ?? '', size: r.body.length },
          data: r.body,
        };
      }
      case 'fs.read': {
        const r = await this.http('GET', fs(), {}, method);
        // A directory answers with its JSON listing; a file named *.json answers with JSON too, so look closer.
        if ((r.headers.get('content-type') ?? '').includes('json') && isListing(json(r.body))) {
          const st = await this.stat(str(p, 'path'), method);
          if (st.kind === 'directory') throw new VfsError('EISDIR', 'read', str(p, 'path'));
        }
        return {
          result: { path: str(p, 'path'), etag: r.headers.get('etag') ?? '', size: r.body.length },
          data: r.body,
        };
      }
      case 'fs.write': {
        if (p.append === true)
          throw new VfsError('ENOTSUP', 'write', str(p, 'path'), 'appending is not available over --url');
        const headers: Record<string, string> = { 'content-type': 'application/octet-stream' };
        const ifMatch = opt(p, 'if_match');
        const ifNone = opt(p, 'if_none_match') ?? (p.exclusive === true ? '*' : undefined);
        if (ifMatch !== undefined) headers['if-match'] = ifMatch;
        if (ifNone !== undefined) headers['if-none-match'] = ifNone;
        const r = await this.http(
          'PUT',
          `${fs()}${query({ mode: opt(p, 'mode') })}`,
          { body: data ?? Buffer.alloc(0), headers },
          method,
        );
        return {
          result: {
            created: false,
            ...((json(r.body) as P | undefined) ?? { path: str(p, 'path'), size: data?.length ?? 0, etag: '' }),
          },
        };
      }
      case 'fs.mkdir': {
        const path = str(p, 'path');
        if (p.parents !== true) {
          // REST creates directories like mkdir -p; check first so plain mkdir keeps its errors.
          const exists = await this.stat(path, method).then(
            () => true,
            (e: unknown) => {
              if (e instanceof VfsError && e.code === 'ENOENT') return false;
              throw e;
            },
          );
          if (exists) throw new VfsError('EEXIST', 'mkdir', path);
          // The parent must exist already ('.' is the home directory, which the server resolves).
          const parent = posix.dirname(path.replace(/\/+$/, ''));
          if (parent !== '.') {
            const st = await this.stat(parent, method);
            if (st.kind !== 'directory') throw new VfsError('ENOTDIR', 'mkdir', path);
          }
        }
        await this.http(
          'PUT',
          `${fs()}${query({ mode: opt(p, 'mode') })}`,
          { headers: { 'x-service-type': 'directory' } },
          method,
        );
        return { result: { path, created: true } };
      }
      case 'fs.symlink':
        await this.http('PUT', fs(), { body: str(p, 'target'), headers: { 'x-service-type': 'symlink' } }, method);
        return { result: { path: str(p, 'path'), target: str(p, 'target') } };
      case 'fs.unlink': {
        const st = await this.getJson(`${fs()}${query({ stat: 'true' })}`, method);
        if ((st as P | undefined)?.kind === 'directory') throw new VfsError('EISDIR', 'unlink', str(p, 'path'));
        await this.http('DELETE', fs(), {}, method);
        return { result: { path: str(p, 'path') } };
      }
      case 'fs.rmdir':
      case 'fs.delete': {
        const r = await this.http(
          'DELETE',
          `${fs()}${query({ recursive: p.recursive === true ? 'true' : undefined })}`,
          {},
          method,
        );
        return { result: { path: str(p, 'path'), deleted: 0, ...((json(r.body) as P | undefined) ?? {}) } };
      }
      case 'fs.copy':
      case 'fs.move': {
        const op = method === 'fs.copy' ? 'copy' : 'move';
        const q = query({
          op,
          dst: str(p, 'dst'),
          recursive: p.recursive === true ? 'true' : undefined,
          overwrite: p.overwrite === true ? 'true' : undefined,
          into_dir: p.into_dir === true ? undefined : 'false',
        });
        const r = await this.http('POST', `${fs('src')}${q}`, {}, method);
        return {
          result: { src: str(p, 'src'), dst: str(p, 'dst'), copied: 0, ...((json(r.body) as P | undefined) ?? {}) },
        };
      }
      case 'sys.gc':
      case 'sys.fsck':
      case 'sys.metrics':
      case 'auth.scope':
      case 'sys.ping':
      case 'sys.status':
      case 'sys.hold':
      case 'auth.bootstrapSecret':
      case 'sys.subscribe':
      case 'events.subscribe':
      case 'events.unsubscribe':
      case 'mcp.session.open':
      case 'mcp.session.get':
      case 'mcp.session.stream':
      case 'mcp.session.subscribe':
      case 'mcp.session.unsubscribe':
      case 'mcp.session.close':
      case 'mcp.session.match':
      case 'mcp.session.events':
      case 'fs.resolve':
      case 'fs.truncate':
      case 'fs.grantWrite':
      case 'fs.releaseGrant':
      case 'fs.utimens':
      case 'fs.access':
      case 'fs.statfs':
      case 'vcs.ls':
      case 'vcs.stat':
        throw new VfsError('ENOTSUP', method, undefined, `${method} is not available over --url; use the local daemon`);
    }
  }
}
