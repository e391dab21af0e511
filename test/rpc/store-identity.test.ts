/**
 * The rule front ends apply to a daemon's handshake (daemon/rpc/store-record.ts): the store it names
 * must be the one expected, and an active daemon's lease epoch may never go back (a daemon paused
 * past its lease answers as active with the old epoch until it notices; it is passed over).
 */
import t from 'tap';
import { checkIdentity } from '../../daemon/rpc/store-record.js';

const pg = { kind: 'postgres', id: 'store-1', database: 'notes' } as const;

t.test('the expected store is accepted; another kind or id is refused with ESTALE', async (t) => {
  t.doesNotThrow(() => checkIdentity('sock', { kind: 'postgres', id: 'store-1' }, { ...pg, epoch: 3 }, 3));
  t.doesNotThrow(() => checkIdentity('sock', { kind: 'postgres' }, pg), 'no id pinned yet: any PostgreSQL store');
  t.throws(() => checkIdentity('sock', { kind: 'postgres' }, { kind: 'sqlite', id: 'x' }), {
    code: 'ESTALE',
    message: /serves a SQLite store/,
  });
  t.throws(() => checkIdentity('sock', { kind: 'postgres', id: 'store-1' }, { ...pg, id: 'store-2' }), {
    code: 'ESTALE',
    message: /serves the store store-2 \(database notes\)/,
  });
  t.throws(() => checkIdentity('sock', { kind: 'sqlite' }, pg), { code: 'ESTALE' });
});

t.test('an active daemon of an older epoch than one already seen is refused', async (t) => {
  t.throws(() => checkIdentity('sock', { kind: 'postgres', id: 'store-1' }, { ...pg, epoch: 2 }, 3), {
    code: 'ESTALE',
    message: /epoch 2 is older than epoch 3/,
  });
  t.doesNotThrow(() => checkIdentity('sock', { kind: 'postgres', id: 'store-1' }, { ...pg, epoch: 4 }, 3));
});

t.test('a daemon that names no store is trusted only where a SQLite store is expected', async (t) => {
  t.doesNotThrow(() => checkIdentity('sock', { kind: 'sqlite' }, undefined));
  t.doesNotThrow(() => checkIdentity('sock', {}, undefined), 'nor anything in particular');
  t.doesNotThrow(() => checkIdentity('sock', {}, pg), 'any kind, when none is expected');
  t.throws(() => checkIdentity('sock', { id: 'store-1' }, undefined), { code: 'ESTALE' });
  t.throws(() => checkIdentity('sock', { kind: 'postgres' }, undefined), { code: 'ESTALE' });
});
