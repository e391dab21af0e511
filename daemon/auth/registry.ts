/**
 * Users, groups, tokens and workspaces, and the authentication of every request (DESIGN.md §4).
 * Security: tokens are 256 random bits, kept only as SHA-256 hashes, shown once.
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { VfsError } from '../errors.js';
import { isWheel, ROOT_UID, WHEEL_GID, type Cred, type Principal } from '../core/perms.js';
import { credentialField, parseAuthorization } from '../rpc/credentials.js';
import type { AuthPolicy, Creds } from '../rpc/protocol.js';
import { DEFAULT_PRINCIPAL_CAPS, type PrincipalCaps, type SettingName } from '../rpc/settings.js';

export const USER_NAME = /^[a-z_][a-z0-9_.-]{0,31}$/;

export interface UserRow {
  uid: number;
  name: string;
  gid: number;
  isAgent: boolean;
  tokenHash: string | null;
  /** When the token stops working (Unix seconds); null: never. */
  tokenExpires: number | null;
  created: number;
}

/**
 * A delegation grant (DESIGN.md §3–§4): `userUid` consents to `agentUid` acting on its behalf. It
 * holds until revoked (or either user is deleted); every request checks it afresh.
 */
export interface DelegationRow {
  userUid: number;
  agentUid: number;
  created: number;
}

export interface GroupRow {
  gid: number;
  name: string;
  members: Set<number>; // supplementary members (a user's primary group is implicit)
}

export interface WorkspaceRow {
  id: string;
  name: string;
  root: string;
  ownerUid: number;
  created: number;
}

export interface WsTokenRow {
  hash: string;
  /** A public id for listing and revoking (never the secret or its hash). */
  id: string;
  workspaceId: string;
  name: string;
  agentUid: number;
  /** Hash of the agent token the secret was issued against: rotating that token revokes the secret. */
  agentTokenHash: string | null;
  created: number;
}

export type { AuthPolicy };

export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

function newSecret(prefix: string): string {
  return prefix + randomBytes(32).toString('base64url');
}

export class Registry {
  readonly users = new Map<number, UserRow>();
  readonly groups = new Map<number, GroupRow>();
  readonly workspaces = new Map<string, WorkspaceRow>();
  readonly wsTokens = new Map<string, WsTokenRow>();
  /** Delegation grants by `delegationKey(user, agent)`. */
  readonly delegations = new Map<string, DelegationRow>();
  private readonly userByName = new Map<string, UserRow>();
  private readonly groupByName = new Map<string, GroupRow>();
  private readonly userByToken = new Map<string, UserRow>();
  nextUid = 1000;
  nextGid = 1000;
  /** Set when anything changed; the store rewrites the auth tables. */
  dirty = false;
  /**
   * Security: set for good (and persisted) once any user besides root was created, so that deleting
   * every administrator never reopens `auth.bootstrap` to whoever asks first.
   */
  bootstrapped = false;
  /** What one user may create here (workspaces, workspace secrets); the daemon sets it from its settings. */
  caps: Pick<PrincipalCaps, 'workspacesPerUser' | 'workspaceSecretsPerUser'> = DEFAULT_PRINCIPAL_CAPS;

  /** A fresh registry: root (uid 0), groups root (0) and wheel (1). */
  initFresh(): void {
    this.putUser({ uid: 0, name: 'root', gid: 0, isAgent: false, tokenHash: null, tokenExpires: null, created: now() });
    this.putGroup({ gid: 0, name: 'root', members: new Set() });
    this.putGroup({ gid: WHEEL_GID, name: 'wheel', members: new Set([ROOT_UID]) });
    this.touched();
  }

  // ---------- loading ----------

  putUser(u: UserRow): void {
    this.users.set(u.uid, u);
    this.userByName.set(u.name, u);
    if (u.tokenHash !== null) this.userByToken.set(u.tokenHash, u);
    if (u.uid >= this.nextUid) this.nextUid = u.uid + 1;
  }

  putGroup(g: GroupRow): void {
    this.groups.set(g.gid, g);
    this.groupByName.set(g.name, g);
    if (g.gid >= this.nextGid) this.nextGid = g.gid + 1;
  }

  // ---------- lookups ----------

  user(name: string): UserRow | undefined {
    return this.userByName.get(name);
  }

  group(name: string): GroupRow | undefined {
    return this.groupByName.get(name);
  }

  /**
   * Resolves a user given by name or numeric id for chown. A name must exist (EINVAL); a numeric id
   * need not, as on a real filesystem (`tar x`, `rsync -a` as root): whether the caller may give a file
   * to it is the core's rule (requireChown: only root gives files away).
   */
  uidOf(owner: string | number): number {
    if (typeof owner === 'number' || /^\d+$/.test(owner)) return numericId(owner, 'user');
    const u = this.userByName.get(owner);
    if (u === undefined) throw new VfsError('EINVAL', 'chown', undefined, `no such user: ${owner}`);
    return u.uid;
  }

  /** A group by name (which must exist) or by any numeric id, as uidOf. */
  gidOf(group: string | number): number {
    if (typeof group === 'number' || /^\d+$/.test(group)) return numericId(group, 'group');
    const g = this.groupByName.get(group);
    if (g === undefined) throw new VfsError('EINVAL', 'chown', undefined, `no such group: ${group}`);
    return g.gid;
  }

  private principals = new Map<number, Principal>();
  private principalsAt = -1;
  private version = 0;

  /** The principal of a user: primary group first, then supplementary groups in gid order. */
  principal(u: UserRow): Principal {
    if (this.principalsAt !== this.version) {
      this.principals.clear();
      this.principalsAt = this.version;
    }
    const cached = this.principals.get(u.uid);
    if (cached !== undefined && cached.name === u.name) return cached;
    const groups = new Set<number>([u.gid]);
    for (const g of [...this.groups.values()].sort((a, b) => a.gid - b.gid))
      if (g.members.has(u.uid)) groups.add(g.gid);
    const p: Principal = {
      uid: u.uid,
      gid: u.gid,
      groups,
      name: u.name,
      home: u.uid === ROOT_UID ? '/' : `/home/${u.name}`,
      isAgent: u.isAgent,
    };
    this.principals.set(u.uid, p);
    return p;
  }

  /** Marks the registry changed: persisted in the next batch, cached principals rebuilt. */
  private touched(): void {
    this.dirty = true;
    this.version++;
  }

  rootPrincipal(): Principal {
    return this.principal(this.users.get(ROOT_UID)!);
  }

  /** Whether bootstrap is possible: no user besides root was ever created in this store. */
  needsBootstrap(): boolean {
    return !this.bootstrapped && this.users.size === 1;
  }

  // ---------- authentication ----------

  /**
   * Authenticates one request's raw credentials. Throws EAUTH (401) for anything unrecognised:
   * fail closed. Delegation by name is for root, wheel members and agents only (EPERM otherwise).
   */
  authenticate(creds: Creds, policy: AuthPolicy): Cred {
    const remote = creds.origin === 'remote';
    // Security: one parser for every front end; a blank credential is refused, never "none" (root).
    const auth = parseAuthorization(creds.authorization);
    const wsId = credentialField(creds.workspace, 'X-Service-Workspace');
    let user: UserRow | undefined;
    let workspace: Cred['workspace'];
    if (auth.scheme === 'none') {
      if (remote && policy.anonymous === 'deny')
        throw new VfsError('EAUTH', 'authenticate', undefined, 'credentials required');
      if (wsId !== undefined)
        throw new VfsError('EAUTH', 'authenticate', undefined, 'a workspace needs its bearer secret');
      user = this.users.get(ROOT_UID);
    } else if (auth.scheme === 'user') {
      if (remote && !policy.userAuth)
        throw new VfsError('EAUTH', 'authenticate', undefined, 'the User scheme is disabled on this server');
      if (wsId !== undefined)
        throw new VfsError('EAUTH', 'authenticate', undefined, 'a workspace needs its bearer secret');
      user = this.userByName.get(auth.name);
      if (user === undefined)
        throw new VfsError('EAUTH', 'authenticate', undefined, `unknown user '${auth.name.slice(0, 64)}'`);
    } else {
      const h = hashSecret(auth.secret);
      if (wsId !== undefined) {
        const t = this.wsTokens.get(h);
        const ws = this.workspaces.get(wsId);
        // Security: a workspace secret only opens the workspace it was issued for.
        if (t === undefined || ws === undefined || t.workspaceId !== ws.id)
          throw new VfsError('EAUTH', 'authenticate', undefined, 'invalid workspace credentials');
        user = this.users.get(t.agentUid);
        if (user === undefined)
          throw new VfsError('EAUTH', 'authenticate', undefined, 'the workspace agent no longer exists');
        // Security: valid only while the agent token it was issued against is the agent's token.
        if (t.agentTokenHash === null || user.tokenHash !== t.agentTokenHash)
          throw new VfsError('EAUTH', 'authenticate', undefined, 'invalid workspace credentials');
        refuseExpired(user, 'the agent token this workspace secret was issued against');
        workspace = { id: ws.id, name: ws.name, root: ws.root };
      } else {
        user = this.userByToken.get(h);
        if (user === undefined) throw new VfsError('EAUTH', 'authenticate', undefined, 'invalid token');
        refuseExpired(user, 'this token');
      }
    }
    const principal = this.principal(user!);
    const obo = credentialField(creds.onBehalfOf, 'X-Service-On-Behalf-Of');
    if (obo === undefined) return workspace === undefined ? { user: principal } : { user: principal, workspace };
    const d = this.userByName.get(obo);
    if (d === undefined)
      throw new VfsError('EAUTH', 'authenticate', undefined, `unknown on-behalf-of user '${obo.slice(0, 64)}'`);
    this.requireDelegation(principal, d);
    const delegate = this.principal(d);
    return workspace === undefined ? { user: principal, delegate } : { user: principal, delegate, workspace };
  }

  /**
   * The one delegation rule (DESIGN.md §3–§4): root may act for anyone; nobody acts for root but
   * root; otherwise the caller must be an agent or a wheel member and hold the user's grant, checked
   * on every request so that a revoked grant stops the next one.
   */
  private requireDelegation(caller: Principal, d: UserRow): void {
    if (caller.uid === ROOT_UID || caller.uid === d.uid) return;
    if (d.uid === ROOT_UID)
      throw new VfsError(
        'EPERM',
        'delegate',
        undefined,
        `nobody acts on behalf of root but root (${caller.name} may not)`,
      );
    if (!isWheel(caller) && !caller.isAgent)
      throw new VfsError(
        'EPERM',
        'delegate',
        undefined,
        'only root, wheel members and agents may act on behalf of another user',
      );
    if (!this.delegations.has(delegationKey(d.uid, caller.uid)))
      throw new VfsError(
        'EPERM',
        'delegate',
        undefined,
        `no delegation grant: ${d.name} has not granted ${caller.name} the right to act on their behalf (${d.name} grants it with POST /auth/delegations {"agent":"${caller.name}"} or 'mdvfs delegate add ${caller.name}')`,
      );
  }

  // ---------- delegation grants ----------

  /** `user` consents to `agent` acting on its behalf (idempotent: an existing grant is kept). */
  grantDelegation(userName: string, agentName: string, share = false): DelegationRow {
    const u = this.userByName.get(userName);
    if (u === undefined) throw new VfsError('ENOENT', 'delegate', undefined, `no such user: ${userName.slice(0, 64)}`);
    const a = this.userByName.get(agentName);
    if (a === undefined) throw new VfsError('ENOENT', 'delegate', undefined, `no such user: ${agentName.slice(0, 64)}`);
    if (u.uid === ROOT_UID)
      throw new VfsError(
        'EPERM',
        'delegate',
        undefined,
        'nobody acts on behalf of root but root: root grants no delegation',
      );
    if (a.uid === u.uid)
      throw new VfsError('EINVAL', 'delegate', undefined, 'a user cannot grant delegation to itself');
    if (a.uid === ROOT_UID)
      throw new VfsError('EINVAL', 'delegate', undefined, 'root needs no grant to act for anyone');
    const agent = this.principal(a);
    if (!agent.isAgent && !isWheel(agent))
      throw new VfsError(
        'EINVAL',
        'delegate',
        undefined,
        `${a.name} is neither an agent nor a wheel member: only those may act on behalf of another user`,
      );
    const personal = share ? this.personalGroup(u) : undefined;
    if (share && personal === undefined)
      throw new VfsError(
        'EINVAL',
        'delegate',
        undefined,
        `${u.name}'s primary group is not a personal group named ${u.name}: an administrator shares by group instead (mdvfs usermod -aG <group> ${a.name})`,
      );
    const key = delegationKey(u.uid, a.uid);
    const row = this.delegations.get(key) ?? { userUid: u.uid, agentUid: a.uid, created: now() };
    this.delegations.set(key, row);
    personal?.members.add(a.uid);
    this.touched();
    return row;
  }

  /** The user's personal group: her primary group when it bears her name (as useradd makes it). */
  private personalGroup(u: UserRow): GroupRow | undefined {
    const g = this.groups.get(u.gid);
    return g?.name === u.name ? g : undefined;
  }

  /** Whether the grant's agent is in the granting user's personal group (granted with `share`). */
  sharesGroup(g: DelegationRow): boolean {
    const u = this.users.get(g.userUid);
    return u !== undefined && this.personalGroup(u)?.members.has(g.agentUid) === true;
  }

  /** Revokes `user`'s grant to `agent`; the agent's next request on the user's behalf is refused. */
  revokeDelegation(userName: string, agentName: string): DelegationRow {
    const u = this.userByName.get(userName);
    const a = this.userByName.get(agentName);
    const key = u === undefined || a === undefined ? '' : delegationKey(u.uid, a.uid);
    const row = this.delegations.get(key);
    if (row === undefined)
      throw new VfsError(
        'ENOENT',
        'delegate',
        undefined,
        `no delegation grant from ${userName.slice(0, 64)} to ${agentName.slice(0, 64)}`,
      );
    this.delegations.delete(key);
    // Consent ends, and so does the sharing that came with it: the agent leaves her personal group.
    this.personalGroup(u!)?.members.delete(a!.uid);
    this.touched();
    return row;
  }

  /** The grants given by or to `uid` (every grant when undefined), oldest first. */
  delegationsOf(uid: number | undefined): DelegationRow[] {
    return [...this.delegations.values()]
      .filter((g) => uid === undefined || g.userUid === uid || g.agentUid === uid)
      .sort((a, b) => a.created - b.created || a.userUid - b.userUid || a.agentUid - b.agentUid);
  }

  // ---------- administration ----------

  private checkNewName(name: string, op: string): void {
    if (!USER_NAME.test(name))
      throw new VfsError(
        'EINVAL',
        op,
        undefined,
        `invalid name '${name.slice(0, 64)}' (lowercase letters, digits, _ . -, at most 32, starting with a letter or _)`,
      );
    if (this.userByName.has(name) || this.groupByName.has(name))
      throw new VfsError('EEXIST', op, undefined, `'${name}' already exists`);
  }

  /** A new user with the next uid and a personal group with the next gid. */
  addUser(name: string, isAgent: boolean): UserRow {
    this.checkNewName(name, 'useradd');
    const gid = this.nextGid++;
    this.putGroup({ gid, name, members: new Set() });
    const u: UserRow = { uid: this.nextUid++, name, gid, isAgent, tokenHash: null, tokenExpires: null, created: now() };
    this.putUser(u);
    this.bootstrapped = true;
    this.touched();
    return u;
  }

  delUser(name: string): UserRow {
    const u = this.userByName.get(name);
    if (u === undefined) throw new VfsError('ENOENT', 'userdel', undefined, `no such user: ${name}`);
    if (u.uid === ROOT_UID) throw new VfsError('EPERM', 'userdel', undefined, 'root cannot be deleted');
    this.users.delete(u.uid);
    this.userByName.delete(name);
    if (u.tokenHash !== null) this.userByToken.delete(u.tokenHash);
    for (const g of this.groups.values()) g.members.delete(u.uid);
    const personal = this.groups.get(u.gid);
    if (personal !== undefined && personal.name === name && personal.members.size === 0) {
      this.groups.delete(personal.gid);
      this.groupByName.delete(personal.name);
    }
    for (const [h, t] of this.wsTokens) if (t.agentUid === u.uid) this.wsTokens.delete(h);
    for (const [k, g] of this.delegations) if (g.userUid === u.uid || g.agentUid === u.uid) this.delegations.delete(k);
    this.touched();
    return u;
  }

  /**
   * Issues (or regenerates, invalidating the old one) a user's token; returns the raw token once.
   * With `expiresIn` (seconds) the token stops working that long from now.
   */
  issueToken(name: string, expiresIn?: number): string {
    const u = this.userByName.get(name);
    if (u === undefined) throw new VfsError('ENOENT', 'token', undefined, `no such user: ${name}`);
    if (u.tokenHash !== null) this.userByToken.delete(u.tokenHash);
    // Security: workspace secrets issued against the replaced token go with it.
    for (const [h, t] of this.wsTokens) if (t.agentUid === u.uid) this.wsTokens.delete(h);
    const token = newSecret('mdvfs_');
    u.tokenHash = hashSecret(token);
    u.tokenExpires = expiresIn === undefined ? null : now() + expiresIn;
    this.userByToken.set(u.tokenHash, u);
    this.touched();
    return token;
  }

  addGroup(name: string): GroupRow {
    this.checkNewName(name, 'groupadd');
    const g: GroupRow = { gid: this.nextGid++, name, members: new Set() };
    this.putGroup(g);
    this.touched();
    return g;
  }

  addMember(userName: string, groupName: string): GroupRow {
    const u = this.userByName.get(userName);
    if (u === undefined) throw new VfsError('ENOENT', 'usermod', undefined, `no such user: ${userName}`);
    const g = this.groupByName.get(groupName);
    if (g === undefined) throw new VfsError('ENOENT', 'usermod', undefined, `no such group: ${groupName}`);
    g.members.add(u.uid);
    this.touched();
    return g;
  }

  delMember(userName: string, groupName: string): GroupRow {
    const u = this.userByName.get(userName);
    if (u === undefined) throw new VfsError('ENOENT', 'usermod', undefined, `no such user: ${userName}`);
    const g = this.groupByName.get(groupName);
    if (g === undefined) throw new VfsError('ENOENT', 'usermod', undefined, `no such group: ${groupName}`);
    if (u.gid === g.gid) throw new VfsError('EINVAL', 'usermod', undefined, 'a user cannot leave their primary group');
    if (u.uid === ROOT_UID && g.gid === WHEEL_GID)
      throw new VfsError('EPERM', 'usermod', undefined, 'root stays in wheel');
    g.members.delete(u.uid);
    this.touched();
    return g;
  }

  groupMembers(g: GroupRow): string[] {
    const names = new Set<string>();
    for (const u of this.users.values()) if (u.gid === g.gid || g.members.has(u.uid)) names.add(u.name);
    return [...names].sort();
  }

  addWorkspace(name: string, root: string, ownerUid: number): WorkspaceRow {
    if (name.trim() === '' || name.length > 200)
      throw new VfsError('EINVAL', 'workspace', undefined, 'a workspace needs a name of 1 to 200 characters');
    const owned = [...this.workspaces.values()].filter((w) => w.ownerUid === ownerUid).length;
    this.requireBelowCap(
      ownerUid,
      owned,
      this.caps.workspacesPerUser,
      'workspace',
      'workspaces',
      'SERVICE_MAX_WORKSPACES_PER_USER',
      'reuse one (workspaces cannot be deleted yet), or ask the administrator to raise the bound',
    );
    const w: WorkspaceRow = { id: randomUUID(), name, root, ownerUid, created: now() };
    this.workspaces.set(w.id, w);
    this.touched();
    return w;
  }

  /**
   * Issues a workspace secret against an agent's token (proof of possession). Only the agent's
   * uid is stored, never its token.
   */
  issueWorkspaceToken(workspaceId: string, name: string, agentToken: string): { secret: string; row: WsTokenRow } {
    const w = this.workspaces.get(workspaceId);
    if (w === undefined)
      throw new VfsError('ENOENT', 'workspace token', undefined, `no such workspace: ${workspaceId.slice(0, 64)}`);
    if (name.trim() === '' || name.length > 200)
      throw new VfsError('EINVAL', 'workspace token', undefined, 'a token needs a name of 1 to 200 characters');
    const agent = this.userByToken.get(hashSecret(agentToken));
    if (agent === undefined)
      throw new VfsError('EAUTH', 'workspace token', undefined, 'agent_token is not a valid token');
    if (!agent.isAgent)
      throw new VfsError('EINVAL', 'workspace token', undefined, 'agent_token must belong to an agent user');
    // Counted against the workspace's owner, whose workspaces the secrets open.
    let secrets = 0;
    for (const t of this.wsTokens.values()) if (this.workspaces.get(t.workspaceId)?.ownerUid === w.ownerUid) secrets++;
    this.requireBelowCap(
      w.ownerUid,
      secrets,
      this.caps.workspaceSecretsPerUser,
      'workspace token',
      'workspace secrets',
      'SERVICE_MAX_WORKSPACE_SECRETS_PER_USER',
      'revoke unused ones first (DELETE /workspaces/<id>/tokens/<token_id>)',
    );
    const secret = newSecret('mdvfsws_');
    const row: WsTokenRow = {
      hash: hashSecret(secret),
      id: randomBytes(8).toString('hex'),
      workspaceId: w.id,
      name,
      agentUid: agent.uid,
      agentTokenHash: agent.tokenHash,
      created: now(),
    };
    this.wsTokens.set(row.hash, row);
    this.touched();
    return { secret, row };
  }

  /**
   * Security: what one user may create is bounded (docs/security.md, "Caps"), so that no user can
   * grow the registry without end; root is not bounded. ELIMIT names the bound and its setting.
   */
  private requireBelowCap(
    uid: number,
    held: number,
    cap: number,
    op: string,
    what: string,
    setting: SettingName,
    hint: string,
  ): void {
    if (uid === ROOT_UID || held < cap) return;
    const who = this.users.get(uid)?.name ?? `uid ${uid}`;
    throw new VfsError(
      'ELIMIT',
      op,
      undefined,
      `${who} already has ${held} ${what}, as many as one user may (${setting}=${cap}); ${hint}`,
    );
  }

  /** The secrets of a workspace, oldest first (rows carry hashes: callers show only id, name, agent, created). */
  workspaceTokens(workspaceId: string): WsTokenRow[] {
    return [...this.wsTokens.values()]
      .filter((t) => t.workspaceId === workspaceId)
      .sort((a, b) => a.created - b.created || a.id.localeCompare(b.id));
  }

  /** Revokes one secret of a workspace by its public id. Throws ENOENT if there is none. */
  revokeWorkspaceToken(workspaceId: string, tokenId: string): WsTokenRow {
    for (const [h, t] of this.wsTokens) {
      if (t.workspaceId === workspaceId && t.id === tokenId) {
        this.wsTokens.delete(h);
        this.touched();
        return t;
      }
    }
    throw new VfsError(
      'ENOENT',
      'workspace token',
      undefined,
      `no token '${tokenId.slice(0, 64)}' in workspace ${workspaceId.slice(0, 64)}`,
    );
  }
}

export function delegationKey(userUid: number, agentUid: number): string {
  return `${userUid}/${agentUid}`;
}

/** Security: an expired token is refused (401) with a message that says so, never as "invalid". */
function refuseExpired(u: UserRow, what: string): void {
  if (u.tokenExpires !== null && now() >= u.tokenExpires)
    throw new VfsError(
      'EAUTH',
      'authenticate',
      undefined,
      `${what} expired at ${new Date(u.tokenExpires * 1000).toISOString()}; ask for a new one`,
    );
}

function now(): number {
  return Math.floor(Date.now() / 1000);
}

/** A numeric uid or gid: 0 up to 2^32 - 2 (2^32 - 1 is chown's "unchanged"). */
function numericId(v: string | number, what: string): number {
  const id = Number(v);
  if (!Number.isSafeInteger(id) || id < 0 || id >= 0xffffffff)
    throw new VfsError('EINVAL', 'chown', undefined, `invalid ${what} id: ${String(v).slice(0, 32)}`);
  return id;
}
