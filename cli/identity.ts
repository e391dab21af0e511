/**
 * Who the CLI acts as: the global flags `--user`, `--token`, `--on-behalf-of`, `--workspace`
 * (and SERVICE_AS_USER, SERVICE_TOKEN, SERVICE_ON_BEHALF_OF, SERVICE_WORKSPACE), and where it
 * talks to: the local daemon of SERVICE_DATA_DIR, or a REST server given by `--url` / SERVICE_URL.
 */
import type { Command } from 'commander';
import { CredentialError, localCreds } from '../daemon/rpc/credentials.js';
import type { Creds } from '../daemon/rpc/protocol.js';
import { UsageError } from './errors.js';

export interface IdentityOptions {
  user?: string;
  token?: string;
  onBehalfOf?: string;
  workspace?: string;
  url?: string;
}

/** Adds the identity and `--url` options to a command (the program and every one-shot command). */
export function addIdentityOptions(cmd: Command): Command {
  return cmd
    .option('--user <name>', 'act as this user (env SERVICE_AS_USER)')
    .option('--token <token>', 'act as the holder of this API token (env SERVICE_TOKEN)')
    .option('--on-behalf-of <user>', 'delegate to this user (env SERVICE_ON_BEHALF_OF)')
    .option('--workspace <id>', 'scope a workspace token to this workspace (env SERVICE_WORKSPACE)')
    .option('--url <url>', 'talk to a remote REST server, e.g. http://127.0.0.1:3000 (env SERVICE_URL)');
}

/**
 * Flags win over environment variables; nothing at all means root, as the contract says. A blank
 * flag or variable is a usage error naming it (never root).
 */
export function resolveIdentity(opts: IdentityOptions, env: NodeJS.ProcessEnv = process.env): { creds: Creds; url?: string } {
  let creds: Creds;
  try {
    creds = localCreds(opts, FLAG_NAMES, env);
  } catch (err) {
    if (err instanceof CredentialError) throw new UsageError(err.message);
    throw err;
  }
  const url = opts.url ?? (env.SERVICE_URL || undefined);
  if (url !== undefined && !/^https?:\/\/[^/]+/.test(url)) throw new UsageError(`--url must look like http://host:port, not '${url}'`);
  return url === undefined ? { creds } : { creds, url: url.replace(/\/+$/, '') };
}

const FLAG_NAMES = { user: '--user', token: '--token', workspace: '--workspace', onBehalfOf: '--on-behalf-of' };
