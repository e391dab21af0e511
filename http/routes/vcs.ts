/** `/vcs/*`: commit, log, revert, status, diff (scoped to the caller's workspace, if any). */
import { httpError } from '../errors.js';
import { bodyString, callerOf, intQuery, jsonBody, query, sendJson, sendText, type Registrar, type RouteContext } from '../request.js';

function format(req: Parameters<typeof query>[0]): 'json' | 'text' {
  const f = query(req, 'format');
  if (f === undefined || f === 'text') return 'text';
  if (f === 'json') return 'json';
  throw httpError('EINVAL', "query parameter 'format' must be text or json");
}

export function registerVcs(r: Registrar, ctx: RouteContext): void {
  r.add('post', '/vcs/commit', ...jsonBody(), async (req, res) => {
    sendJson(res, await callerOf(ctx, req).call('vcs.commit', { message: bodyString(req, 'message') }));
  });
  r.add('get', '/vcs/log', async (req, res) => {
    const path = query(req, 'path');
    const limit = intQuery(req, 'limit');
    sendJson(res, await callerOf(ctx, req).call('vcs.log', { ...(path === undefined ? {} : { path }), ...(limit === undefined ? {} : { limit }) }));
  });
  r.add('post', '/vcs/revert', ...jsonBody(), async (req, res) => {
    sendJson(res, await callerOf(ctx, req).call('vcs.revert', { hash: bodyString(req, 'hash') }));
  });
  r.add('get', '/vcs/status', async (req, res) => {
    const fmt = format(req);
    const st = await callerOf(ctx, req).call('vcs.status', {});
    if (fmt === 'json') sendJson(res, st);
    else sendText(res, st.text === '' || st.text.endsWith('\n') ? st.text : `${st.text}\n`);
  });
  r.add('get', '/vcs/diff', async (req, res) => {
    const fmt = format(req);
    const from = query(req, 'from');
    const to = query(req, 'to');
    const path = query(req, 'path');
    const { diff, truncated } = await callerOf(ctx, req).call('vcs.diff', {
      ...(from === undefined || from === '' ? {} : { from }),
      ...(to === undefined || to === '' ? {} : { to }),
      ...(path === undefined ? {} : { path }),
    });
    if (fmt === 'json') sendJson(res, truncated === true ? { diff, truncated } : { diff });
    else sendText(res, diff, 'text/x-diff; charset=utf-8');
  });
}
