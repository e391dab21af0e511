/**
 * Security: the data dir, everything in it and the socket's directory belong to one local user
 * (DESIGN.md §4). Like ssh with ~/.ssh: what is ours but open to others is fixed, what belongs to
 * another user is refused, because another account could read the store or listen for our tokens.
 */
import { chmodSync, lstatSync, mkdirSync, readdirSync, statSync, type Stats } from 'node:fs';
import path from 'node:path';
import { VfsError } from '../errors.js';

/** The umask of every process that writes into a data dir: files 0600, directories 0700. */
export const PRIVATE_UMASK = 0o077;

const me = (): number => process.getuid?.() ?? 0;
const octal = (mode: number): string => (mode & 0o7777).toString(8).padStart(4, '0');

function warn(line: string): void {
  process.stderr.write(`mdvfs: ${line}\n`);
}

function foreign(what: string, p: string, st: Stats, advice: string): VfsError {
  return new VfsError(
    'EACCES',
    'open',
    p,
    `refusing to use ${what} ${p}: it is owned by uid ${st.uid}, not by you (uid ${me()}), so that user could read or replace it; ${advice}`,
  );
}

/** Makes `dir` (created 0700 when missing) ours and private: fixed if ours and open, refused if another user's. */
function ensureOwnDir(dir: string, what: string, advice: string, opts: { followLinks: boolean }): void {
  mkdirSync(path.dirname(dir), { recursive: true });
  try {
    mkdirSync(dir, { mode: 0o700 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  const st = opts.followLinks ? statSync(dir) : lstatSync(dir);
  if (st.isSymbolicLink())
    throw new VfsError('EACCES', 'open', dir, `refusing to use ${what} ${dir}: it is a symbolic link; ${advice}`);
  if (!st.isDirectory()) throw new VfsError('ENOTDIR', 'open', dir, `${what} ${dir} is not a directory`);
  if (st.uid !== me()) throw foreign(what, dir, st, advice);
  if ((st.mode & 0o077) !== 0) {
    chmodSync(dir, st.mode & 0o700);
    warn(`${what} ${dir} was open to other users (mode ${octal(st.mode)}); made it ${octal(st.mode & 0o700)}`);
  }
}

/**
 * Creates the data dir 0700 if needed and makes it and every entry in it private to us. Throws
 * EACCES naming the path when the dir or an entry belongs to another user.
 */
export function securePrivateDataDir(dataDir: string): void {
  const advice = 'set SERVICE_DATA_DIR to a directory of your own';
  ensureOwnDir(dataDir, 'the data dir', advice, { followLinks: true });
  for (const name of readdirSync(dataDir)) {
    const p = path.join(dataDir, name);
    let st: Stats;
    try {
      st = lstatSync(p);
    } catch {
      continue; // gone meanwhile
    }
    if (st.isSymbolicLink()) continue; // chmod would change the target, which is not ours to judge here
    if (st.uid !== me()) throw foreign('the data dir entry', p, st, `move it away or ${advice}`);
    if ((st.mode & 0o077) !== 0) {
      chmodSync(p, st.mode & 0o700);
      warn(`${p} was open to other users (mode ${octal(st.mode)}); made it ${octal(st.mode & 0o700)}`);
    }
  }
}

const SOCKET_ADVICE = 'set XDG_RUNTIME_DIR to a private directory of yours or use a shorter SERVICE_DATA_DIR';

/** The daemon, before binding: the socket's directory exists, is ours and is private. */
export function prepareSocketDir(socketPath: string): void {
  ensureOwnDir(path.dirname(socketPath), "the daemon socket's directory", SOCKET_ADVICE, { followLinks: false });
}

/**
 * A client, before connecting (and so before sending any credential): the socket and its
 * directory must be ours and the directory closed to others, or another local user could be the
 * one listening. Nothing is fixed here: a directory that was open may hold someone else's socket.
 * Throws EACCES with the reason; a missing socket is left to the connection attempt to report.
 */
export function verifySocket(socketPath: string): void {
  const dir = path.dirname(socketPath);
  let st: Stats;
  try {
    st = lstatSync(dir);
  } catch {
    return; // nothing there: the connection fails on its own
  }
  const refuse = (why: string): VfsError =>
    new VfsError(
      'EACCES',
      'connect',
      socketPath,
      `refusing to connect to the daemon socket ${socketPath}: ${why}, so another local user could be listening there; ${SOCKET_ADVICE}`,
    );
  if (st.isSymbolicLink()) {
    // The data dir itself may be a link the user made; the fallback directory never is.
    st = statSync(dir);
  }
  if (!st.isDirectory()) throw refuse(`${dir} is not a directory`);
  if (st.uid !== me()) throw refuse(`its directory ${dir} is owned by uid ${st.uid}, not by you (uid ${me()})`);
  if ((st.mode & 0o077) !== 0) throw refuse(`its directory ${dir} is open to other users (mode ${octal(st.mode)})`);
  let sock: Stats;
  try {
    sock = lstatSync(socketPath);
  } catch {
    return;
  }
  if (sock.uid !== me()) throw refuse(`it is owned by uid ${sock.uid}, not by you (uid ${me()})`);
}
