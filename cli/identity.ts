/**
 * Who the CLI acts as: the global flags `--user`, `--token-file`, `--on-behalf-of`, `--workspace`
 * (and SERVICE_AS_USER, SERVICE_TOKEN, SERVICE_ON_BEHALF_OF, SERVICE_WORKSPACE), and where it
 * talks to: the local daemon of SERVICE_DATA_DIR, or a REST server given by `--url` / SERVICE_URL.
 */
import { readFileSync, statSync } from 'node:fs';
import { Option, type Command } from 'commander';
import { CredentialError, localCreds } from '../daemon/rpc/credentials.js';
import type { Creds } from '../daemon/rpc/protocol.js';
import { UsageError } from './errors.js';

export interface IdentityOptions {
  user?: string;
  token?: string;
  tokenFile?: string;
  onBehalfOf?: string;
  workspace?: string;
  url?: string;
}

/** Adds the identity and `--url` options to a command (the program and every one-shot command). */
export function addIdentityOptions(cmd: Command): Command {
  return cmd
    .option('--user <name>', 'act as this user (env SERVICE_AS_USER)')
    .addOption(new Option('--token <token>', 'removed: see --token-file').hideHelp())
    .option('--token-file <path>', 'act as the holder of the API token in this file (env SERVICE_TOKEN)')
    .option('--on-behalf-of <user>', 'delegate to this user (env SERVICE_ON_BEHALF_OF)')
    .option('--workspace <id>', 'scope a workspace token to this workspace (env SERVICE_WORKSPACE)')
    .option('--url <url>', 'talk to a remote REST server, e.g. http://127.0.0.1:3000 (env SERVICE_URL)');
}

const warnLine = (line: string): void => {
  process.stderr.write(`mdvfs: warning: ${line}\n`);
};

/**
 * Security: a token given as a command-line argument is readable by every local user (ps,
 * /proc/<pid>/cmdline), so `--token` is refused (a usage error that names the alternatives and does
 * not repeat the secret). Used by every command that takes an identity (the CLI, `mdvfs mount`).
 */
export function refuseTokenFlag(given: string | undefined): void {
  if (given !== undefined)
    throw new UsageError(
      '--token is no longer accepted: a token on the command line is visible to every local user (ps); set SERVICE_TOKEN or use --token-file <file>',
    );
}

/**
 * Security: a secret given as a command-line argument is readable by every local user (ps,
 * /proc/<pid>/cmdline). It still works; this says so, in one line that does not repeat it.
 */
export function warnSecretFlag(flag: string, instead: string, warn: (line: string) => void = warnLine): void {
  warn(`${flag} shows the secret to every local user (ps); use ${instead} instead`);
}

/**
 * Reads a token from a file (one token, surrounding whitespace ignored). Like ssh with a private
 * key, a file that other users may read gets a warning. Throws UsageError when unreadable or empty.
 */
export function readTokenFile(file: string, flag = '--token-file', warn: (line: string) => void = warnLine): string {
  let text: string;
  try {
    const st = statSync(file);
    if (st.isFile() && (st.mode & 0o077) !== 0)
      warn(
        `${file} is accessible by other users (mode ${(st.mode & 0o777).toString(8).padStart(4, '0')}); run chmod 600 ${file}`,
      );
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new UsageError(
      `${flag}: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
    );
  }
  const token = text.trim();
  if (token === '') throw new UsageError(`${flag}: ${file} is empty`);
  if (/\s/.test(token)) throw new UsageError(`${flag}: ${file} must hold one token on one line`);
  return token;
}

/**
 * Flags win over environment variables; nothing at all means root, as the contract says. A blank
 * flag or variable is a usage error naming it (never root). `--token-file` counts as the token flag.
 */
export function resolveIdentity(
  opts: IdentityOptions,
  env: NodeJS.ProcessEnv = process.env,
): { creds: Creds; url?: string } {
  refuseTokenFlag(opts.token);
  const flags = opts.tokenFile !== undefined ? { ...opts, token: readTokenFile(opts.tokenFile) } : opts;
  let creds: Creds;
  try {
    creds = localCreds(flags, FLAG_NAMES, env);
  } catch (err) {
    if (err instanceof CredentialError) throw new UsageError(err.message);
    throw err;
  }
  const url = opts.url ?? (env.SERVICE_URL || undefined);
  if (url !== undefined && !/^https?:\/\/[^/]+/.test(url))
    throw new UsageError(`--url must look like http://host:port, not '${url}'`);
  return url === undefined ? { creds } : { creds, url: url.replace(/\/+$/, '') };
}

const FLAG_NAMES = { user: '--user', token: '--token-file', workspace: '--workspace', onBehalfOf: '--on-behalf-of' };
