/** Opens the caller a CLI invocation uses: the local daemon (started on demand) or a REST server. */
import { connectDaemon } from '../daemon/rpc/connect.js';
import { SettingsError } from '../daemon/rpc/settings.js';
import { VfsError } from '../daemon/errors.js';
import type { Caller } from '../daemon/rpc/client.js';
import type { Creds } from '../daemon/rpc/protocol.js';
import { CliError } from './errors.js';
import { RestCaller } from './rest-caller.js';

export interface Connection {
  caller: Caller;
  remote: boolean;
  close(): void;
}

export async function openConnection(creds: Creds, url?: string): Promise<Connection> {
  if (url !== undefined) return { caller: new RestCaller(url, creds), remote: true, close: () => undefined };
  let client;
  try {
    client = await connectDaemon();
  } catch (err) {
    // A bad setting (SERVICE_DAEMONS, its TLS files) is the user's to fix, not an unreachable daemon.
    if (err instanceof SettingsError) throw new CliError(err.code, err.message);
    // A daemon of another store, or a data dir that belongs to one: reachable or not, it is not to be used.
    if (err instanceof VfsError && err.code === 'ESTALE') throw new CliError(err.code, err.message);
    throw new CliError('ECONNREFUSED', `cannot reach the daemon: ${(err as Error).message}`);
  }
  return { caller: client.as(creds), remote: false, close: () => client.close() };
}
