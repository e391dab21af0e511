/**
 * Crash safety (DESIGN.md §6): a writer process performs acknowledged writes over the socket (and
 * a second one every other kind of mutation) while the daemon is killed with SIGKILL at random points. After every restart each acknowledged write
 * is present byte for byte (the last acknowledged content of each path, or a later write that was
 * in flight when the daemon died), and fsck finds no problem.
 */
import t from 'tap';
import { spawnDaemon } from '../helpers/daemon.js';
import { crashRounds } from '../helpers/crash.js';

t.test('acknowledged writes survive SIGKILL of the daemon at random points', async (t) => {
  await crashRounds(t, await spawnDaemon(t), 20);
});
