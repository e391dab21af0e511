/** `/fs/<path>`: read, list, stat, write, mkdir, symlink, delete, copy, move. */
import { VfsError } from '../../daemon/errors.js';
import { httpError } from '../errors.js';
import { LIST_PAGE_MAX } from '../../daemon/rpc/protocol.js';
import {
  boolQuery,
  callerOf,
  intQuery,
  parseEtags,
  query,
  quoteEtag,
  rawBody,
  requiredQuery,
  sendJson,
  wildcardPath,
  type Registrar,
  type RouteContext,
} from '../request.js';

const FS = '/fs{/*path}';

const TEXT_EXT = new Set([
  'txt',
  'text',
  'json',
  'yaml',
  'yml',
  'toml',
  'csv',
  'tsv',
  'ini',
  'cfg',
  'conf',
  'log',
  'xml',
  'ts',
  'js',
  'mjs',
  'py',
  'sh',
  'rs',
  'go',
  'c',
  'h',
  'java',
  'css',
  'sql',
  'tex',
  'rst',
  'adoc',
  'org',
]);

/**
 * Markdown is served as text/markdown; other text as text/plain (never text/html: user content
 * must not run as a page on this origin); anything else as bytes.
 */
export function contentTypeFor(path: string, data: Buffer): string {
  const ext = /\.([^./]+)$/.exec(path)?.[1]?.toLowerCase() ?? '';
  if (ext === 'md' || ext === 'markdown') return 'text/markdown; charset=utf-8';
  if (TEXT_EXT.has(ext)) return 'text/plain; charset=utf-8';
  if (data.length <= 65536 && !data.includes(0)) {
    try {
      new TextDecoder('utf-8', { fatal: true }).decode(data);
      return 'text/plain; charset=utf-8';
    } catch {
      // not UTF-8: fall through
    }
  }
  return 'application/octet-stream';
}

export function registerFs(r: Registrar, ctx: RouteContext): void {
  r.add('get', FS, async (req, res) => {
    const path = wildcardPath(req);
    const as = callerOf(ctx, req);
    if (boolQuery(req, 'stat')) {
      // lstat(2) by default: a symlink is described as itself (`kind: 'symlink'`); `follow=true` describes its target.
      const follow = boolQuery(req, 'follow');
      if (follow && boolQuery(req, 'nofollow'))
        throw httpError('EINVAL', 'give either follow=true or nofollow=true, not both', path);
      sendJson(res, await as.call('fs.stat', { path, nofollow: !follow }));
      return;
    }
    // As it was at a commit (?at=HEAD~2): the file's content, or the directory's listing, then.
    const at = query(req, 'at');
    if (at !== undefined && at !== '') {
      try {
        const { result, data } = await as.request('vcs.cat', { rev: at, path });
        res.setHeader('ETag', quoteEtag(result.etag));
        res.status(200).setHeader('Content-Type', contentTypeFor(result.path, data));
        res.send(data);
      } catch (err) {
        if (!(err instanceof VfsError) || err.code !== 'EISDIR') throw err;
        sendJson(res, await as.call('vcs.ls', { rev: at, path }));
      }
      return;
    }
    // Paging a listing (?limit=&cursor=): a cut listing carries truncated and next_cursor.
    const limit = intQuery(req, 'limit', 1, LIST_PAGE_MAX);
    const cursor = query(req, 'cursor');
    const page = { ...(limit === undefined ? {} : { limit }), ...(cursor === undefined ? {} : { cursor }) };
    if (limit !== undefined || cursor !== undefined) {
      sendJson(res, await as.call('fs.list', { path, ...page }));
      return;
    }
    const wanted = parseEtags(req.get('if-none-match'));
    try {
      const only = wanted.length === 1 && wanted[0] !== '*' ? wanted[0] : undefined;
      const { result, data } = await as.request(
        'fs.read',
        only === undefined ? { path } : { path, if_none_match: only },
      );
      res.setHeader('ETag', quoteEtag(result.etag));
      res.setHeader('Cache-Control', 'no-cache');
      if (result.not_modified === true || wanted.includes(result.etag) || wanted.includes('*')) {
        res.status(304).end();
        return;
      }
      res.status(200).setHeader('Content-Type', contentTypeFor(result.path, data));
      res.send(data);
    } catch (err) {
      // A directory: answer its listing (one read in the common case of a file).
      if (err instanceof VfsError && err.code === 'EISDIR') {
        sendJson(res, await as.call('fs.list', { path }));
        return;
      }
      throw err;
    }
  });

  r.add('put', FS, rawBody(ctx.maxFileSize), async (req, res) => {
    const path = wildcardPath(req);
    const as = callerOf(ctx, req);
    const body: Buffer = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    const mode = query(req, 'mode');
    const type = (req.get('x-service-type') ?? 'file').trim().toLowerCase();
    switch (type) {
      case 'directory': {
        const r = await as.call(
          'fs.mkdir',
          mode === undefined ? { path, parents: true } : { path, parents: true, mode },
        );
        // `If-None-Match: *` means create only, for a directory as for a file.
        if (!r.created && parseEtags(req.get('if-none-match'))[0] === '*')
          throw httpError('EPRECOND', 'the directory exists already (If-None-Match: *)', r.path);
        sendJson(res, r);
        return;
      }
      case 'symlink': {
        const target = body.toString('utf8');
        if (target === '') throw httpError('EINVAL', 'a symlink needs its target as the request body', path);
        sendJson(res, await as.call('fs.symlink', { target, path }));
        return;
      }
      case 'file': {
        const ifMatch = parseEtags(req.get('if-match'));
        const ifNoneMatch = parseEtags(req.get('if-none-match'));
        const r = await as.call(
          'fs.write',
          {
            path,
            ...(mode === undefined ? {} : { mode }),
            ...(ifMatch[0] === undefined ? {} : { if_match: ifMatch[0] }),
            ...(ifNoneMatch[0] === undefined ? {} : { if_none_match: ifNoneMatch[0] }),
          },
          { data: body },
        );
        res.setHeader('ETag', quoteEtag(r.etag));
        sendJson(res, { path: r.path, size: r.size, etag: r.etag });
        return;
      }
      default:
        throw httpError('EINVAL', `X-Service-Type must be file, directory or symlink (got '${type}')`, path);
    }
  });

  r.add('delete', FS, async (req, res) => {
    sendJson(
      res,
      await callerOf(ctx, req).call('fs.delete', { path: wildcardPath(req), recursive: boolQuery(req, 'recursive') }),
    );
  });

  r.add('post', FS, async (req, res) => {
    const src = wildcardPath(req);
    const op = requiredQuery(req, 'op');
    const as = callerOf(ctx, req);
    if (op !== 'copy' && op !== 'move') throw httpError('EINVAL', `unknown op '${op}' (expected copy or move)`, src);
    const dst = requiredQuery(req, 'dst');
    // Only an explicit ?overwrite= is passed on: the daemon's defaults are cp/rename(2) semantics.
    const ow = query(req, 'overwrite') === undefined ? {} : { overwrite: boolQuery(req, 'overwrite') };
    // Like cp/mv: an existing directory as dst receives the source as dst/<name> (into_dir=false: dst is exact).
    const into_dir = boolQuery(req, 'into_dir', true);
    if (op === 'copy')
      sendJson(
        res,
        await as.call('fs.copy', { src, dst, recursive: boolQuery(req, 'recursive', true), into_dir, ...ow }),
      );
    else sendJson(res, await as.call('fs.move', { src, dst, into_dir, ...ow }));
  });
}
