// Issue 31 (operations): the default number of HTTP workers. On a 2-core machine one worker is
// enough (a second gives no gain), but with SERVICE_DAEMONS a worker that loses its daemon restarts,
// and a lone worker's restart would close the port: there the default is at least 2.
import t from 'tap';
import os from 'node:os';
import { httpWorkersFromEnv } from '../../daemon/rpc/settings.js';

t.test('default: one per core but one, at least 1', async (t) => {
  t.equal(httpWorkersFromEnv({}), Math.max(1, os.availableParallelism() - 1));
});

t.test('with SERVICE_DAEMONS: at least 2, so the port stays open while one restarts', async (t) => {
  t.equal(httpWorkersFromEnv({ SERVICE_DAEMONS: 'tls://10.0.0.5:7070' }), Math.max(2, os.availableParallelism() - 1));
  t.equal(
    httpWorkersFromEnv({ SERVICE_DAEMONS: 'tls://10.0.0.5:7070', SERVICE_HTTP_WORKERS: '1' }),
    1,
    'a set value wins',
  );
});
