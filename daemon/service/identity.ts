/** Identity and administration: who am I, login and bootstrap, users, groups, tokens and workspaces. */
import { VfsError } from '../errors.js';
import {
  actor,
  isAdminCred,
  requireGrantor,
  type Cred,
  requireTokenIssue,
  requireWorkspaceOwner,
} from '../core/perms.js';
import { resolveFor } from '../core/paths.js';
import { pathOf, type Node } from '../core/inode.js';
import { delegationRecord, groupRecord, userRecord, whoami, wsRecord } from './present.js';
import type { AreaOps, Kit } from './context.js';

export const identityOps = (k: Kit): AreaOps<'auth' | 'admin' | 'ws'> => ({
  'auth.whoami': (_p, { cred }) => whoami(cred),
  'auth.scope': (_p, { cred }) => ({ root_path: cred.workspace?.root ?? '/' }),
  'auth.login': (p, { ctx }) => {
    if (ctx.creds.origin === 'remote' && !k.policyFor(ctx.creds).userAuth)
      throw new VfsError('EAUTH', 'login', undefined, 'login by name is disabled on this server');
    const u = k.d.registry.user(p.username);
    if (u === undefined) throw new VfsError('EAUTH', 'login', undefined, `unknown user '${p.username.slice(0, 64)}'`);
    return { username: u.name, ...whoami({ user: k.d.registry.principal(u) }) };
  },
  'auth.bootstrap': (p, { ctx }) => {
    // Only while the store never had a user besides root; no credentials needed (that is its purpose).
    const needed = k.d.registry.needsBootstrap();
    // Security: through a hosted server, only with the one-time secret of the data dir (created now if
    // missing); every refusal there reads the same, so an anonymous caller learns nothing.
    if (k.hostedRemote(ctx.creds)) {
      k.d.bootstrap.ensure(needed);
      k.d.bootstrap.verify(p.secret, needed);
    }
    if (!needed)
      throw new VfsError(
        'EEXIST',
        'bootstrap',
        undefined,
        'already bootstrapped: this store has (or had) users besides root',
      );
    const u = k.d.registry.addUser(p.username, false);
    k.d.registry.addMember(u.name, 'wheel');
    k.d.vfs.ensureHome(k.d.registry.principal(u));
    const token = k.d.registry.issueToken(u.name);
    k.d.bootstrap.consume();
    return { username: u.name, uid: u.uid, token };
  },
  'auth.bootstrapSecret': () => {
    const r = k.d.bootstrap.ensure(k.d.registry.needsBootstrap());
    return r === undefined ? { created: false } : r;
  },

  // ---------- delegation grants ----------
  'auth.delegationAdd': (p, { cred }) => {
    const user = grantorOf(k, cred, p.user, 'delegate');
    return delegationRecord(k.d.registry, k.d.registry.grantDelegation(user, p.agent, p.share === true));
  },
  'auth.delegationList': (_p, { cred }) => ({
    delegations: k.d.registry
      .delegationsOf(isAdminCred(cred) ? undefined : actor(cred).uid)
      .map((g) => delegationRecord(k.d.registry, g)),
  }),
  'auth.delegationDel': (p, { cred }) => {
    const user = grantorOf(k, cred, p.user, 'delegate');
    return { revoked: delegationRecord(k.d.registry, k.d.registry.revokeDelegation(user, p.agent)) };
  },

  // ---------- admin ----------
  'admin.userAdd': (p) => {
    const u = k.d.registry.addUser(p.name, p.is_agent ?? false);
    k.d.vfs.ensureHome(k.d.registry.principal(u));
    // An agent is only useful with a token: its raw token is answered here, once (never stored raw).
    const token = u.isAgent ? k.d.registry.issueToken(u.name) : undefined;
    return token === undefined ? userRecord(k.d.registry, u) : { ...userRecord(k.d.registry, u), token };
  },
  'admin.userList': () => ({
    users: [...k.d.registry.users.values()].sort((a, b) => a.uid - b.uid).map((u) => userRecord(k.d.registry, u)),
  }),
  'admin.userDel': (p) => {
    k.d.registry.delUser(p.name);
    return { deleted: p.name };
  },
  'admin.token': (p, { cred }) => {
    requireTokenIssue(cred, k.d.registry.user(p.name)?.uid ?? -1, 'token');
    k.noWorkspace(cred, 'token');
    const token = k.d.registry.issueToken(p.name, p.expires_in);
    const expires = k.d.registry.user(p.name)?.tokenExpires ?? null;
    return expires === null ? { name: p.name, token } : { name: p.name, token, expires };
  },
  'admin.groupAdd': (p) => groupRecord(k.d.registry, k.d.registry.addGroup(p.name)),
  'admin.groupList': () => ({
    groups: [...k.d.registry.groups.values()].sort((a, b) => a.gid - b.gid).map((g) => groupRecord(k.d.registry, g)),
  }),
  // Security: making someone an administrator is for administrators who are root or wheel themselves (access: 'admin').
  'admin.groupMemberAdd': (p) => groupRecord(k.d.registry, k.d.registry.addMember(p.user, p.group)),
  'admin.groupMemberDel': (p) => groupRecord(k.d.registry, k.d.registry.delMember(p.user, p.group)),

  // ---------- workspaces ----------
  'ws.create': (p, { cred }) => {
    if (!p.root_path.startsWith('/'))
      throw new VfsError('EINVAL', 'workspace', p.root_path, 'root_path must be an absolute path');
    const root = resolveFor(p.root_path, '/', 'workspace');
    let node: Node;
    if (isAdminCred(cred)) node = k.d.vfs.mkdir(cred, root, { parents: true }).node;
    else {
      node = k.d.vfs.resolve(cred, root, 'workspace', true);
      requireWorkspaceOwner(cred, node.uid, 'workspace', root);
    }
    if (node.kind !== 'directory') throw new VfsError('ENOTDIR', 'workspace', root);
    const w = k.d.registry.addWorkspace(p.name, pathOf(node), actor(cred).uid);
    return wsRecord(k.d.registry, w, cred);
  },
  'ws.list': (_p, { cred }) => {
    const all = [...k.d.registry.workspaces.values()].sort(
      (a, b) => a.created - b.created || a.name.localeCompare(b.name),
    );
    const mine =
      cred.workspace !== undefined
        ? all.filter((w) => w.id === cred.workspace!.id)
        : isAdminCred(cred)
          ? all
          : all.filter((w) => w.ownerUid === actor(cred).uid);
    return { workspaces: mine.map((w) => wsRecord(k.d.registry, w, cred)) };
  },
  'ws.token': (p, { cred }) => {
    const w = k.ownedWorkspace(cred, p.id, 'workspace token');
    const { secret, row } = k.d.registry.issueWorkspaceToken(w.id, p.name, p.agent_token);
    return { workspace_id: w.id, name: p.name, secret, token_id: row.id };
  },
  'ws.tokenList': (p, { cred }) => {
    const w = k.ownedWorkspace(cred, p.id, 'workspace tokens');
    const tokens = k.d.registry.workspaceTokens(w.id).map((t) => ({
      id: t.id,
      name: t.name,
      agent: k.d.registry.users.get(t.agentUid)?.name ?? String(t.agentUid),
      created: t.created,
    }));
    return { workspace_id: w.id, tokens };
  },
  'ws.tokenRevoke': (p, { cred }) => {
    const w = k.ownedWorkspace(cred, p.id, 'revoke workspace token');
    const t = k.d.registry.revokeWorkspaceToken(w.id, p.token_id);
    return { workspace_id: w.id, revoked: t.id };
  },
});

/** The user whose grant a request manages: the caller in person, or `user` named by root/wheel. */
function grantorOf(k: Kit, cred: Cred, user: string | undefined, op: string): string {
  const name = user ?? cred.user.name;
  const u = k.d.registry.user(name);
  if (u === undefined) throw new VfsError('ENOENT', op, undefined, `no such user: ${name.slice(0, 64)}`);
  requireGrantor(cred, u.uid, op);
  return u.name;
}
