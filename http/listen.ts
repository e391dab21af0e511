/** SERVICE_LISTEN parsing and the other sidecar settings. */

export interface ListenAddress {
  host: string;
  port: number;
}

const DEFAULT_HOST = '127.0.0.1';
const DEFAULT_PORT = 3000;

/** `host:port`, `[v6]:port`, `:port` or `port` (host defaults to 127.0.0.1). */
export function parseListen(value: string | undefined): ListenAddress {
  const v = (value ?? '').trim();
  if (v === '') return { host: DEFAULT_HOST, port: DEFAULT_PORT };
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(v) ?? /^()()(\d{1,5})$/.exec(v);
  const port = Number(m?.[3]);
  if (!m || !Number.isInteger(port) || port > 65535) throw new Error(`SERVICE_LISTEN must be host:port (got '${v}')`);
  return { host: m[1] || m[2] || DEFAULT_HOST, port };
}

export function formatListen(a: ListenAddress): string {
  return a.host.includes(':') ? `[${a.host}]:${a.port}` : `${a.host}:${a.port}`;
}

/** SERVICE_MAX_FILE_SIZE in bytes (default 10 MiB). */
export function maxFileSizeFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const v = env.SERVICE_MAX_FILE_SIZE;
  if (v === undefined || v === '') return 10 * 1024 * 1024;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new Error(`SERVICE_MAX_FILE_SIZE must be a number of bytes (got '${v}')`);
  return n;
}

/** Messages from the sidecar to `mdvfs serve` over the IPC channel. */
export interface ListeningMessage {
  type: 'listening';
  host: string;
  port: number;
}
