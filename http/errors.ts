/**
 * The one place where errors become HTTP responses. Every failure, whether from the daemon
 * (a VfsError), from body parsing, or from a bad route, is answered as `{error, code}` with the
 * status of `ERRORS[code].http`. Stack traces never reach the client.
 */
import type { ErrorRequestHandler, NextFunction, Request, RequestHandler, Response } from 'express';
import { ERRORS, VfsError, isErrorCode, type ErrorCode } from '../daemon/errors.js';

/** What a 503 answer asks the client to wait: about the time a daemon takes to reconnect to PostgreSQL. */
const RETRY_AFTER_SECS = 2;

/** A front-end error with a code from the one table (bad query parameter, wrong method, ...). */
export function httpError(code: ErrorCode, detail: string, path?: string): VfsError {
  const e = new VfsError(code, 'http', path, detail);
  // One sentence naming the path, without the internal operation name ('http').
  if (path !== undefined) e.message = `${code}: ${detail} (path '${path}')`;
  return e;
}

/** Maps body-parser and router errors (which carry `type`/`status`) onto our codes. */
function classify(err: unknown): { code: ErrorCode; message: string; internal: boolean } {
  if (err instanceof VfsError) return { code: err.code, message: err.message, internal: err.code === 'EIO' };
  const e = err as { type?: unknown; status?: unknown; statusCode?: unknown; code?: unknown; message?: unknown } | null;
  if (e && typeof e === 'object') {
    if (isErrorCode(e.code) && typeof e.message === 'string')
      return { code: e.code, message: e.message, internal: e.code === 'EIO' };
    if (e.type === 'entity.too.large')
      return { code: 'EFBIG', message: 'EFBIG: request body too large', internal: false };
    if (e.type === 'entity.parse.failed')
      return { code: 'EINVAL', message: 'EINVAL: malformed JSON body', internal: false };
    if (e.type === 'encoding.unsupported' || e.type === 'charset.unsupported')
      return { code: 'EINVAL', message: 'EINVAL: unsupported content encoding or charset', internal: false };
    if (e.type === 'request.aborted') return { code: 'EINVAL', message: 'EINVAL: request aborted', internal: false };
    const status = typeof e.status === 'number' ? e.status : typeof e.statusCode === 'number' ? e.statusCode : 0;
    // e.g. a URIError from the router when a path parameter has a broken %-escape
    if (status >= 400 && status < 500)
      return {
        code: 'EINVAL',
        message: `EINVAL: ${err instanceof URIError ? 'malformed percent-encoding in the URL' : 'bad request'}`,
        internal: false,
      };
  }
  return { code: 'EIO', message: 'EIO: internal error', internal: true };
}

export function sendError(res: Response, code: ErrorCode, message: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  // 503 (EAGAIN): a standby, or a daemon waiting for PostgreSQL; both are expected to answer again soon.
  if (ERRORS[code].http === 503) res.setHeader('Retry-After', String(RETRY_AFTER_SECS));
  res
    .status(ERRORS[code].http)
    .type('application/json')
    .send(JSON.stringify({ error: message, code }));
}

/** The final error handler: one JSON shape for everything; internals are logged, never sent. */
export function errorHandler(log: (fields: Record<string, unknown>) => void): ErrorRequestHandler {
  return (err: unknown, req: Request, res: Response, _next: NextFunction) => {
    const { code, message, internal } = classify(err);
    if (internal) {
      res.locals.internalError = true;
      log({
        level: 'error',
        req_id: res.locals.reqId,
        msg: 'internal error',
        err: err instanceof Error ? (err.stack ?? err.message) : String(err),
      });
    }
    res.locals.errorCode = code;
    sendError(res, code, internal ? 'EIO: internal error' : message);
  };
}

/** Unknown routes: 404 ENOSYS as JSON. */
export const notFound: RequestHandler = (req, res) => {
  res.locals.errorCode = 'ENOSYS';
  sendError(res, 'ENOSYS', `ENOSYS: no route for ${req.method} ${req.path}`);
};

/** Known path, wrong method: 405 EMETHOD with an Allow header. */
export function methodNotAllowed(allowed: string[]): RequestHandler {
  const allow = [...new Set([...allowed, ...(allowed.includes('GET') ? ['HEAD'] : []), 'OPTIONS'])].join(', ');
  return (req, res) => {
    res.setHeader('Allow', allow);
    res.locals.errorCode = 'EMETHOD';
    sendError(res, 'EMETHOD', `EMETHOD: ${req.method} is not allowed on ${req.path} (allowed: ${allow})`);
  };
}

/**
 * Requests node:http rejects before express sees them (header block over 16 KiB, a malformed
 * request line): answered with the same JSON shape instead of Node's empty 400/431, then closed.
 */
export function clientErrorResponse(err: NodeJS.ErrnoException): Buffer {
  const detail = err.code === 'HPE_HEADER_OVERFLOW' ? 'request line or headers too large' : 'malformed HTTP request';
  const code: ErrorCode = 'EINVAL';
  const body = JSON.stringify({ error: `${code}: ${detail}`, code });
  const status = ERRORS[code].http;
  return Buffer.from(
    `HTTP/1.1 ${status} Bad Request\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nAccess-Control-Allow-Origin: *\r\nConnection: close\r\n\r\n${body}`,
  );
}
