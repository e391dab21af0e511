/** `/search/grep`, `/search/find`, `/tree` and `/tree/<path>`. */
import { httpError } from '../errors.js';
import { boolQuery, callerOf, intQuery, query, requiredQuery, sendJson, sendText, wildcardPath, type Registrar, type RouteContext } from '../request.js';

export function registerSearch(r: Registrar, ctx: RouteContext): void {
  r.add('get', '/search/grep', async (req, res) => {
    const path = query(req, 'path');
    const max = intQuery(req, 'max_results');
    const offset = intQuery(req, 'offset', 0, 1_000_000_000);
    sendJson(res, await callerOf(ctx, req).call('search.grep', {
      pattern: requiredQuery(req, 'pattern'),
      ...(path === undefined ? {} : { path }),
      recursive: boolQuery(req, 'recursive'),
      ignore_case: boolQuery(req, 'ignore_case'),
      ...(max === undefined ? {} : { max_results: max }),
      ...(offset === undefined ? {} : { offset }),
    }));
  });
  r.add('get', '/search/find', async (req, res) => {
    const path = query(req, 'path');
    const name = query(req, 'name');
    const type = query(req, 'type');
    if (type !== undefined && type !== 'f' && type !== 'd' && type !== 'l') throw httpError('EINVAL', "query parameter 'type' must be f, d or l");
    sendJson(res, await callerOf(ctx, req).call('search.find', {
      ...(path === undefined ? {} : { path }),
      ...(name === undefined ? {} : { name }),
      ...(type === undefined ? {} : { type }),
    }));
  });
  r.add('get', '/tree{/*path}', async (req, res) => {
    const depth = intQuery(req, 'depth');
    const result = await callerOf(ctx, req).call('search.tree', { path: wildcardPath(req), ...(depth === undefined ? {} : { depth }) });
    if (query(req, 'format') === 'json') sendJson(res, result);
    else sendText(res, result.text.endsWith('\n') ? result.text : `${result.text}\n`);
  });
}
