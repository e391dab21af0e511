/**
 * The crash rounds of crash.test.ts with SERVICE_STORE on a private PostgreSQL cluster: after every
 * kill -9 of the daemon, each acknowledged write is in PostgreSQL byte for byte and fsck is clean.
 */
import t from 'tap';
import { spawnDaemon } from '../helpers/daemon.js';
import { crashRounds } from '../helpers/crash.js';
import { startPostgres } from '../helpers/postgres.js';

t.test('acknowledged writes survive SIGKILL of a daemon on PostgreSQL at random points', async (t) => {
  const pg = await startPostgres(t);
  await crashRounds(t, await spawnDaemon(t, { SERVICE_STORE: await pg.createDb() }), 10);
});
