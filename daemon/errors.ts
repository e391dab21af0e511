/**
 * The one error table. Every code the daemon (or a front end) can produce lives here with its
 * HTTP status and its POSIX errno, so each transport maps errors in exactly one line.
 */
export const ERRORS = {
  ENOENT: { http: 404, errno: 2, text: 'no such file or directory' },
  EACCES: { http: 403, errno: 13, text: 'permission denied' },
  EPERM: { http: 403, errno: 1, text: 'operation not permitted' },
  EEXIST: { http: 409, errno: 17, text: 'file exists' },
  ENOTEMPTY: { http: 409, errno: 39, text: 'directory not empty' },
  ENOTDIR: { http: 400, errno: 20, text: 'not a directory' },
  EISDIR: { http: 400, errno: 21, text: 'is a directory' },
  ELOOP: { http: 400, errno: 40, text: 'too many levels of symbolic links' },
  EINVAL: { http: 400, errno: 22, text: 'invalid argument' },
  ENAMETOOLONG: { http: 400, errno: 36, text: 'file name too long' },
  EXDEV: { http: 400, errno: 18, text: 'invalid cross-device link' },
  EROFS: { http: 403, errno: 30, text: 'read-only file system' },
  EFBIG: { http: 413, errno: 27, text: 'file too large' },
  E2BIG: { http: 400, errno: 7, text: 'answer too large' },
  EBUSY: { http: 409, errno: 16, text: 'device or resource busy' },
  ETIMEDOUT: { http: 400, errno: 110, text: 'operation timed out' },
  ENOTSUP: { http: 400, errno: 95, text: 'operation not supported' },
  EAUTH: { http: 401, errno: 13, text: 'authentication required or invalid credentials' },
  EPRECOND: { http: 412, errno: 5, text: 'precondition failed' },
  EPROTO: { http: 400, errno: 71, text: 'protocol error' },
  EMETHOD: { http: 405, errno: 38, text: 'method not allowed' },
  ENOSYS: { http: 404, errno: 38, text: 'no such operation' },
  EIO: { http: 500, errno: 5, text: 'internal error' },
  /** A daemon that serves another store than the front end's (or lost its lease): never used. */
  ESTALE: { http: 503, errno: 116, text: 'the daemon serves another store' },
  /**
   * A per-principal cap (docs/security.md, "Caps"): the caller holds or created as many streams,
   * workspaces or workspace secrets as one user may; its errno is EDQUOT's, the nearest POSIX meaning.
   */
  ELIMIT: { http: 429, errno: 122, text: 'per-user limit reached' },
  /** A standby daemon (PostgreSQL store): another daemon is active; a client moves on to it. */
  EAGAIN: { http: 503, errno: 11, text: 'not active: this daemon is a standby' },
} as const satisfies Record<string, { http: number; errno: number; text: string }>;

export type ErrorCode = keyof typeof ERRORS;

export function isErrorCode(code: unknown): code is ErrorCode {
  return typeof code === 'string' && Object.prototype.hasOwnProperty.call(ERRORS, code);
}

/** The serialised form of an error as it crosses the socket and appears in REST bodies. */
export interface WireError {
  code: ErrorCode;
  message: string;
  path?: string;
}

/**
 * A typed error. The message follows Node's style: `ENOENT: no such file or directory, open '/x'`.
 * A `detail` replaces the generic text where a more useful explanation exists. Without a path the
 * message is one sentence: the detail alone (`EAUTH: invalid token`), or the operation and the
 * generic text (`EACCES: useradd: permission denied`), never a trailing operation name.
 */
export class VfsError extends Error {
  readonly code: ErrorCode;
  readonly op: string;
  readonly path: string | undefined;

  constructor(code: ErrorCode, op: string, path?: string, detail?: string) {
    super(VfsError.format(code, op, path, detail));
    this.code = code;
    this.op = op;
    this.path = path;
    this.name = 'VfsError';
  }

  static format(code: ErrorCode, op: string, path?: string, detail?: string): string {
    if (path !== undefined) return `${code}: ${detail ?? ERRORS[code].text}, ${op} '${path}'`;
    return detail !== undefined ? `${code}: ${detail}` : `${code}: ${op}: ${ERRORS[code].text}`;
  }

  toWire(): WireError {
    return this.path === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, path: this.path };
  }

  /** Rebuilds a typed error from its wire form (used by the RPC client). */
  static fromWire(w: WireError): VfsError {
    const code = isErrorCode(w.code) ? w.code : 'EIO';
    const e = new VfsError(code, 'rpc', w.path);
    e.message = w.message;
    return e;
  }
}

/** Any thrown value as a wire error; unknown errors become EIO with no internals exposed. */
export function toWireError(err: unknown): WireError {
  if (err instanceof VfsError) return err.toWire();
  return { code: 'EIO', message: 'EIO: internal error' };
}

export function httpStatus(code: ErrorCode): number {
  return ERRORS[code].http;
}

/** Negative errno for FUSE callbacks. */
export function fuseErrno(code: ErrorCode): number {
  return -ERRORS[code].errno;
}
