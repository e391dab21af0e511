/**
 * Whole listings for front ends that must show every entry (the CLI's `ls`, FUSE readdir, export,
 * the MCP resource view): follows `next_cursor` page after page. Each page is one bounded request,
 * so the daemon serves other callers between pages.
 */
import type { Listing } from './protocol.js';

/** What `listAll` needs of a caller (the daemon client, or the CLI's REST caller). */
export interface ListCaller {
  call(method: 'fs.list', params: { path?: string; limit?: number; cursor?: string }): Promise<Listing>;
}

export async function listAll(caller: ListCaller, path: string): Promise<Listing> {
  let page = await caller.call('fs.list', { path });
  if (page.truncated !== true) return page;
  const entries = [...page.entries];
  const shown = page.path;
  while (page.truncated === true && page.next_cursor !== undefined) {
    page = await caller.call('fs.list', { path, cursor: page.next_cursor });
    for (const e of page.entries) entries.push(e);
  }
  return { path: shown, entries };
}
