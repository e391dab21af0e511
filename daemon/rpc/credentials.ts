/**
 * The one credential parser (DESIGN.md §4), used by every front end and by the daemon's
 * authentication: HTTP headers (REST and /mcp), the environment and flags (CLI, `mdvfs-mcp`),
 * and the `Authorization` value itself.
 *
 * Security: a credential that is given but blank is never "no credential" (which is root): it is
 * refused, wherever it comes from (fail closed).
 */
import { VfsError } from '../errors.js';
import type { AuthPolicy, Creds } from './protocol.js';

export type Authorization =
  { scheme: 'none' } | { scheme: 'user'; name: string } | { scheme: 'bearer'; secret: string };

function refuse(message: string): never {
  throw new VfsError('EAUTH', 'authenticate', undefined, message);
}

/**
 * An `Authorization` value: absent means none; `User <name>` or `Bearer <secret>` (scheme
 * case-insensitive). Throws EAUTH for a blank value, an unknown scheme or a missing name/secret.
 */
export function parseAuthorization(raw: string | undefined): Authorization {
  if (raw === undefined) return { scheme: 'none' };
  const v = raw.trim();
  if (v === '') refuse('empty Authorization header');
  const m = /^(\S+)\s+(\S(?:.*\S)?)$/.exec(v);
  const scheme = m?.[1]?.toLowerCase();
  const value = m?.[2] ?? '';
  if (scheme === 'user') return { scheme: 'user', name: value };
  if (scheme === 'bearer') return { scheme: 'bearer', secret: value };
  return refuse('unsupported authorization scheme (use "User <name>" or "Bearer <token>")');
}

/**
 * An optional credential field (workspace id, on-behalf-of user): absent stays absent, a blank
 * value is refused (EAUTH naming `what`).
 */
export function credentialField(value: string | undefined, what: string): string | undefined {
  if (value === undefined) return undefined;
  const v = value.trim();
  if (v === '') refuse(`empty ${what}`);
  return v;
}

/**
 * The raw credentials of a network request, from its headers, exactly as sent (the daemon checks
 * them, blank ones included), with the policy of the server that received it.
 */
export function credsFromHeaders(get: (name: string) => string | undefined, policy: AuthPolicy): Creds {
  const creds: Creds = { origin: 'remote', policy };
  const authorization = get('authorization');
  const workspace = get('x-service-workspace');
  const onBehalfOf = get('x-service-on-behalf-of');
  if (authorization !== undefined) creds.authorization = authorization;
  if (workspace !== undefined) creds.workspace = workspace;
  if (onBehalfOf !== undefined) creds.onBehalfOf = onBehalfOf;
  return creds;
}

/** Identity given to a local front end: flags (named as the user typed them) win over the environment. */
export interface LocalIdentity {
  user?: string;
  token?: string;
  workspace?: string;
  onBehalfOf?: string;
}

const ENV_NAMES = {
  user: 'SERVICE_AS_USER',
  token: 'SERVICE_TOKEN',
  workspace: 'SERVICE_WORKSPACE',
  onBehalfOf: 'SERVICE_ON_BEHALF_OF',
} as const;

/** Thrown for identity settings that are set but unusable; the message names the variable or flag. */
export class CredentialError extends Error {}

function nonBlank(value: string | undefined, name: string): string | undefined {
  if (value === undefined) return undefined;
  const v = value.trim();
  if (v === '') throw new CredentialError(`${name} is set but blank; give a value or unset it`);
  return v;
}

/**
 * Credentials of a local front end (CLI, `mdvfs-mcp`): `flags` (whose keys name the flag, e.g.
 * `--user`) win over SERVICE_AS_USER, SERVICE_TOKEN, SERVICE_WORKSPACE, SERVICE_ON_BEHALF_OF.
 * Nothing at all means root (the contract). Throws CredentialError for a blank flag or variable,
 * or for both a user and a token from the same source.
 */
export function localCreds(
  flags: LocalIdentity,
  flagNames: Record<keyof LocalIdentity, string>,
  env: NodeJS.ProcessEnv = process.env,
): Creds {
  const pick = (k: keyof LocalIdentity): { value?: string; from: 'flag' | 'env' } => {
    const f = nonBlank(flags[k], flagNames[k]);
    const e = nonBlank(env[ENV_NAMES[k]], ENV_NAMES[k]);
    return f !== undefined ? { value: f, from: 'flag' } : e !== undefined ? { value: e, from: 'env' } : { from: 'env' };
  };
  const user = pick('user');
  const token = pick('token');
  if (user.value !== undefined && token.value !== undefined && user.from === token.from) {
    throw new CredentialError(
      user.from === 'flag'
        ? `${flagNames.user} and ${flagNames.token} are mutually exclusive`
        : `set ${ENV_NAMES.user} or ${ENV_NAMES.token}, not both`,
    );
  }
  const creds: Creds = { origin: 'local' };
  // A flag of either kind overrides both environment variables.
  const useToken = token.value !== undefined && (token.from === 'flag' || user.from !== 'flag');
  if (useToken) creds.authorization = `Bearer ${token.value}`;
  else if (user.value !== undefined) creds.authorization = `User ${user.value}`;
  const workspace = pick('workspace').value;
  const onBehalfOf = pick('onBehalfOf').value;
  if (workspace !== undefined) creds.workspace = workspace;
  if (onBehalfOf !== undefined) creds.onBehalfOf = onBehalfOf;
  return creds;
}
