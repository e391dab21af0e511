/** `/admin/*`: users, tokens, groups, chmod, chown. The daemon checks that the caller may. */
import { httpError } from '../errors.js';
import { bodyField, bodyScalar, bodyString, callerOf, jsonBody, sendJson, wildcardPath, type Registrar, type RouteContext } from '../request.js';

function param(p: Record<string, unknown>, name: string): string {
  const v = p[name];
  if (typeof v !== 'string' || v === '') throw httpError('EINVAL', `missing path parameter '${name}'`);
  return v;
}

export function registerAdmin(r: Registrar, ctx: RouteContext): void {
  r.add('get', '/admin/users', async (req, res) => {
    sendJson(res, await callerOf(ctx, req).call('admin.userList', {}));
  });
  r.add('post', '/admin/users', ...jsonBody(), async (req, res) => {
    const isAgent = bodyField(req, 'is_agent', 'boolean');
    sendJson(res, await callerOf(ctx, req).call('admin.userAdd', { name: bodyString(req, 'name'), is_agent: isAgent ?? false }));
  });
  r.add('delete', '/admin/users/:name', async (req, res) => {
    sendJson(res, await callerOf(ctx, req).call('admin.userDel', { name: param(req.params, 'name') }));
  });
  r.add('post', '/admin/users/:name/tokens', async (req, res) => {
    sendJson(res, await callerOf(ctx, req).call('admin.token', { name: param(req.params, 'name') }));
  });
  r.add('get', '/admin/groups', async (req, res) => {
    sendJson(res, await callerOf(ctx, req).call('admin.groupList', {}));
  });
  r.add('post', '/admin/groups', ...jsonBody(), async (req, res) => {
    sendJson(res, await callerOf(ctx, req).call('admin.groupAdd', { name: bodyString(req, 'name') }));
  });
  r.add('post', '/admin/users/:name/groups/:group', async (req, res) => {
    sendJson(res, await callerOf(ctx, req).call('admin.groupMemberAdd', { user: param(req.params, 'name'), group: param(req.params, 'group') }));
  });
  r.add('delete', '/admin/users/:name/groups/:group', async (req, res) => {
    sendJson(res, await callerOf(ctx, req).call('admin.groupMemberDel', { user: param(req.params, 'name'), group: param(req.params, 'group') }));
  });
  r.add('post', '/admin/chmod{/*path}', ...jsonBody(), async (req, res) => {
    const mode = bodyScalar(req, 'mode');
    if (mode === undefined) throw httpError('EINVAL', "missing field 'mode' (octal string such as \"0644\")");
    sendJson(res, await callerOf(ctx, req).call('fs.chmod', { path: wildcardPath(req), mode }));
  });
  r.add('post', '/admin/chown{/*path}', ...jsonBody(), async (req, res) => {
    const owner = bodyScalar(req, 'owner');
    const group = bodyScalar(req, 'group');
    if (owner === undefined && group === undefined) throw httpError('EINVAL', "missing field 'owner' (and optional 'group')");
    sendJson(res, await callerOf(ctx, req).call('fs.chown', { path: wildcardPath(req), ...(owner === undefined ? {} : { owner }), ...(group === undefined ? {} : { group }) }));
  });
}
