/**
 * Which store a data dir belongs to, and which daemon a front end may trust.
 *
 * A data dir records its store in `store.json` (written by its daemon at start, and by `mdvfs migrate`
 * when the data dir's store moves to PostgreSQL). Nothing starts a daemon of another store in it: a
 * front end run with a PostgreSQL node's data dir but without SERVICE_STORE used to start a SQLite
 * daemon on the very socket other machines list in SERVICE_DAEMONS, which then acknowledged writes
 * that never reached PostgreSQL (split brain). Front ends also check the store a daemon names in its
 * handshake (`sys.ping`, `sys.health`) before they send it anything.
 */
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { VfsError } from '../errors.js';
import type { StoreIdentity } from './protocol.js';
import { storeFromEnv, storeLabel, type StoreSetting } from './settings.js';

export const STORE_RECORD = 'store.json';

/** What `store.json` holds: the store's kind, its id (PostgreSQL), and where it is, without a password. */
export interface StoreRecord {
  kind: StoreIdentity['kind'];
  /** The store's id (PostgreSQL stores only: a SQLite store lives in the data dir itself). */
  id?: string;
  database?: string;
  system_id?: string;
  /** For messages: `sqlite`, or the PostgreSQL URL without its password. */
  label: string;
}

const KINDS = { sqlite: 'SQLite', postgres: 'PostgreSQL' } as const;

/** The data dir's record, or undefined when it has none (a new data dir, or one older than records). */
export function readStoreRecord(dataDir: string): StoreRecord | undefined {
  const file = path.join(dataDir, STORE_RECORD);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  let rec: Partial<StoreRecord> | undefined;
  try {
    rec = JSON.parse(text) as Partial<StoreRecord>;
  } catch {
    rec = undefined;
  }
  if (rec === undefined || (rec.kind !== 'sqlite' && rec.kind !== 'postgres') || typeof rec.label !== 'string')
    throw new VfsError(
      'EIO',
      'store record',
      file,
      `${file} is not a store record mdvfs wrote; refusing to guess which store this data dir belongs to (move it away if the data dir is really new)`,
    );
  return rec as StoreRecord;
}

/** Records that `dataDir` belongs to the store `identity` (atomically, 0600). */
export function writeStoreRecord(dataDir: string, identity: StoreIdentity, label: string): void {
  const rec: StoreRecord = {
    kind: identity.kind,
    ...(identity.kind === 'postgres' ? { id: identity.id } : {}),
    ...(identity.database === undefined ? {} : { database: identity.database }),
    ...(identity.system_id === undefined ? {} : { system_id: identity.system_id }),
    label,
  };
  const file = path.join(dataDir, STORE_RECORD);
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(rec, null, 2)}\n`, { mode: 0o600 });
  renameSync(tmp, file);
}

const owned = (rec: StoreRecord): string =>
  rec.kind === 'sqlite' ? 'the SQLite store in it (store.db)' : `the PostgreSQL store ${rec.label}`;

/**
 * The daemon's check before it opens a store: the data dir's record must name the kind SERVICE_STORE
 * names. (That the PostgreSQL store is the very one recorded is checked once it is connected.)
 */
export function refuseOtherKind(dataDir: string, setting: StoreSetting): StoreRecord | undefined {
  const rec = readStoreRecord(dataDir);
  if (rec === undefined || rec.kind === setting.kind) return rec;
  throw new VfsError(
    'EINVAL',
    'start',
    dataDir,
    rec.kind === 'postgres'
      ? `the data dir ${dataDir} belongs to the PostgreSQL store ${rec.label}: a ${KINDS[setting.kind]} daemon will not start in it, so that no write lands outside that store. Set SERVICE_STORE to that store (or SERVICE_DAEMONS to its daemons), or use another SERVICE_DATA_DIR`
      : `the data dir ${dataDir} belongs to ${owned(rec)}: a PostgreSQL daemon will not start in it. Copy the store with 'mdvfs migrate --from ${dataDir} --to postgres://…' (which moves the data dir to the new store), or use another SERVICE_DATA_DIR`,
  );
}

/** The daemon's check once its store is open: a PostgreSQL data dir serves only the store it recorded. */
export function refuseOtherStore(dataDir: string, rec: StoreRecord | undefined, identity: StoreIdentity): void {
  if (rec === undefined || rec.kind !== 'postgres' || rec.id === identity.id) return;
  throw new VfsError(
    'EINVAL',
    'start',
    dataDir,
    `the data dir ${dataDir} belongs to the PostgreSQL store ${rec.label} (id ${rec.id}), and SERVICE_STORE names another store (id ${identity.id}${identity.database === undefined ? '' : `, database ${identity.database}`}); use another SERVICE_DATA_DIR for it`,
  );
}

/** What a front end expects of the daemon of a data dir, and whether it may start one there. */
export interface Expected {
  kind: StoreIdentity['kind'];
  /** The store's id, when the data dir recorded one. */
  id?: string;
  label: string;
  /** Whether starting a background daemon there is allowed (never for a PostgreSQL data dir without SERVICE_STORE). */
  mayStart: boolean;
  /** Why not, when it is not. */
  why?: string;
}

/**
 * A front end's expectation of a data dir: the store its record names (an explicit SERVICE_STORE of
 * another kind is a mistake, refused), else SERVICE_STORE (SQLite when unset).
 */
export function expectedStore(dataDir: string, env: NodeJS.ProcessEnv = process.env): Expected {
  const explicit = (env.SERVICE_STORE ?? '').trim() !== '';
  const setting = storeFromEnv(env);
  const rec = readStoreRecord(dataDir);
  if (rec === undefined) return { kind: setting.kind, label: storeLabel(setting), mayStart: true };
  if (explicit && rec.kind !== setting.kind) refuseOtherKind(dataDir, setting);
  const mayStart = rec.kind === 'sqlite' || explicit;
  return {
    kind: rec.kind,
    ...(rec.id === undefined ? {} : { id: rec.id }),
    label: rec.label,
    mayStart,
    ...(mayStart
      ? {}
      : {
          why: `no daemon runs for the data dir ${dataDir}, which belongs to the PostgreSQL store ${rec.label}; a front end without SERVICE_STORE will not start one there (a daemon of another store would split the data). Start it with SERVICE_STORE set to that store ('mdvfs serve' or 'mdvfs daemon'), or set SERVICE_DAEMONS to the running daemons`,
        }),
  };
}

/**
 * Refuses a daemon that serves another store than the one expected, or an active daemon whose lease
 * epoch is older than one already seen (a paused daemon that has not yet noticed it lost the lease).
 * `got` undefined: a daemon older than store identities, trusted only where a SQLite store (or
 * nothing in particular) is expected. `expected.kind` undefined: any kind.
 */
export function checkIdentity(
  where: string,
  expected: { kind?: StoreIdentity['kind'] | undefined; id?: string | undefined; label?: string | undefined },
  got: StoreIdentity | undefined,
  minEpoch = 0,
): void {
  const refuse = (why: string): never => {
    throw new VfsError('ESTALE', 'connect', where, `refusing the daemon on ${where}: ${why}`);
  };
  const kind = expected.kind === undefined ? 'the' : `the ${KINDS[expected.kind]}`;
  const want = expected.label ?? (expected.id === undefined ? `${kind} store` : `${kind} store ${expected.id}`);
  if (got === undefined) {
    if (expected.kind !== 'postgres' && expected.id === undefined) return;
    refuse(`it does not say which store it serves (an older mdvfs), and ${want} is expected`);
    return;
  }
  if (expected.kind !== undefined && got.kind !== expected.kind)
    refuse(`it serves a ${KINDS[got.kind]} store, where ${want} is expected`);
  if (expected.id !== undefined && got.id !== expected.id)
    refuse(
      `it serves the store ${got.id}${got.database === undefined ? '' : ` (database ${got.database})`}, not ${want} (id ${expected.id})`,
    );
  if (got.epoch !== undefined && got.epoch < minEpoch)
    refuse(`its lease epoch ${got.epoch} is older than epoch ${minEpoch}, already seen active: it lost the lease`);
}
