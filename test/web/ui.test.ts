/// <reference lib="dom" />
/**
 * The web UI in a real headless Chromium (Debian's `chromium`, driven by puppeteer-core; no browser
 * is downloaded): first-run bootstrap, sign-in, create/edit/save/preview, a conflicting save,
 * search, commit and a commit's diff, an agent's REST write appearing live and attributed, a file's
 * history (attributed commits, diffs, a version read and restored, revert to a commit), bob not
 * seeing alice's private files, a cross-origin page unable to drive the API, and no CSP violation.
 *
 * CHROMIUM_PATH names the browser (default /usr/bin/chromium). MDVFS_SCREENSHOTS=1 also writes the
 * screenshots in docs/screenshots/. (The DOM library above types the functions that run in the page.)
 */
import { existsSync, mkdirSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import t from 'tap';
import puppeteer, { type Browser, type KeyInput, type Page } from 'puppeteer-core';
import { client, startService, ROOT } from '../helpers/http.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
if (!existsSync(CHROMIUM))
  throw new Error(`no Chromium at ${CHROMIUM}: install Debian's chromium package (.ci/run does) or set CHROMIUM_PATH`);
const SHOTS = process.env.MDVFS_SCREENSHOTS === '1' ? path.join(ROOT, 'docs', 'screenshots') : undefined;
if (SHOTS !== undefined) mkdirSync(SHOTS, { recursive: true });

const svc = await startService(t);
const root = client(svc);
const browser: Browser = await puppeteer.launch({
  executablePath: CHROMIUM,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
});
t.teardown(() => browser.close());

/** Console errors and CSP violations of every page of ours; none may happen. */
const problems: string[] = [];
async function newPage(width = 1400, height = 860): Promise<Page> {
  const ctx = await browser.createBrowserContext();
  const page = await ctx.newPage();
  await page.setViewport({ width, height });
  page.on('console', (m) => {
    // Refusals the UI shows (403, 404, 412) also log "Failed to load resource": expected, not problems.
    if (m.type() === 'error' && page.url().startsWith(svc.base) && !m.text().startsWith('Failed to load resource'))
      problems.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`pageerror: ${String(e)}`));
  return page;
}
async function shot(page: Page, name: string): Promise<void> {
  if (SHOTS !== undefined) await page.screenshot({ path: path.join(SHOTS, `${name}.png`) });
}
async function textOf(page: Page, sel: string): Promise<string> {
  return page.$eval(sel, (e) => e.textContent ?? '');
}
async function waitText(page: Page, sel: string, re: RegExp): Promise<string> {
  await page.waitForFunction(
    (s, src) => new RegExp(src).test(document.querySelector(s)?.textContent ?? ''),
    {},
    sel,
    re.source,
  );
  return textOf(page, sel);
}
/** Answers the page's small dialog. */
async function answer(page: Page, value?: string): Promise<void> {
  await page.waitForSelector('#ask[open]');
  if (value !== undefined) {
    await page.$eval('#ask-input', (e) => ((e as HTMLInputElement).value = ''));
    await page.type('#ask-input', value);
  }
  await page.click('#ask-ok');
  await page.waitForSelector('#ask:not([open])');
}
/** Clicks a tree entry inside the page in one step (live updates may redraw the tree at any time). */
async function clickTree(page: Page, path: string): Promise<void> {
  const sel = `#tree li[data-path="${path}"] > .name`;
  // Found and clicked in one turn of the page: a redraw between the two cannot detach it.
  await page.waitForFunction(
    (s) => {
      const e = document.querySelector<HTMLElement>(s);
      e?.click();
      return e !== null;
    },
    {},
    sel,
  );
}
async function editorText(page: Page): Promise<string> {
  return page.$eval('#editor >>> .cm-content', (e) =>
    [...e.querySelectorAll('.cm-line')].map((l) => l.textContent ?? '').join('\n'),
  );
}
async function signIn(page: Page, user: string): Promise<void> {
  await page.goto(svc.base);
  await page.waitForSelector('#signin-form', { visible: true });
  await page.type('#signin-user', user);
  await page.click('#signin-form button[type=submit]');
  await waitText(page, '#who', new RegExp(`^${user}`));
  await page.waitForSelector(`#tree li[data-path="/home/${user}"].selected`);
}

let adminToken = '';

t.test('the page is served with a strict Content-Security-Policy', async (t) => {
  const r = await root.get('/');
  t.equal(r.status, 200);
  t.match(String(r.headers['content-type']), /^text\/html/);
  const csp = String(r.headers['content-security-policy']);
  t.match(csp, /default-src 'none'/);
  t.match(csp, /script-src 'self'(;|$)/, 'no inline script, no eval');
  t.match(csp, /frame-ancestors 'none'/);
  t.notMatch(r.text, /<script(?![^>]*\bsrc=)/, 'no inline script in the page');
  t.equal((await root.get('/assets/app.js')).status, 200);
  t.equal((await root.get('/assets/nope.js')).status, 404);
});

t.test('first run: bootstrap shows the token once, with a copy button, and signs in with it', async (t) => {
  const page = await newPage();
  await page.goto(svc.base);
  await page.waitForSelector('#bootstrap:not([hidden])');
  await shot(page, 'bootstrap');
  await page.type('#bootstrap-name', 'admin');
  await page.click('#bootstrap-form button[type=submit]');
  await page.waitForSelector('#bootstrap-result:not([hidden])');
  adminToken = await textOf(page, '#bootstrap-token');
  t.match(adminToken, /\S{20,}/, 'the token is shown');
  t.ok(await page.$('#bootstrap-copy'), 'copy button');
  t.equal(
    (await client(svc, { auth: `Bearer ${adminToken}` }).get('/auth/whoami')).json.user,
    'admin',
    'the shown token works',
  );
  t.notMatch(page.url(), /token|mdvfs_/, 'never in the URL');
  await page.click('#bootstrap-continue');
  t.equal(await waitText(page, '#who', /admin/), 'admin (admin)');
  t.equal(await textOf(page, '#bootstrap-token'), '', 'not shown again');
  const stored = await page.evaluate(() => sessionStorage.getItem('mdvfs.session'));
  t.match(stored, /Bearer /, 'kept in sessionStorage');
  await page.browserContext().close();
  // The cast for the rest of the file.
  for (const [name, is_agent] of [
    ['alice', false],
    ['bob', false],
    ['helper', true],
  ] as const)
    t.equal((await root.post('/admin/users', { name, is_agent })).status, 200);
});

const alice = client(svc, { auth: 'User alice' });
let page: Page;

t.test('alice signs in, creates, edits, saves and previews a note', async (t) => {
  page = await newPage();
  await signIn(page, 'alice');
  await page.click('#new-file');
  await answer(page, 'note.md');
  await waitText(page, '#file-path', /\/home\/alice\/note\.md/);
  await page.waitForSelector('#tree li[data-path="/home/alice/note.md"]');
  await page.click('#editor >>> .cm-content');
  await page.keyboard.type(
    '# Hello\n\nSome *text* and <img src=x onerror="document.title=\'xss\'"> [link](javascript:alert(1))\n',
  );
  t.equal(await textOf(page, '#file-state'), 'modified');
  await page.keyboard.down('Control');
  await page.keyboard.press('s');
  await page.keyboard.up('Control');
  await waitText(page, '#file-state', /^saved$/);
  await waitText(page, '#message', /Saved/);
  // One save per key press, and our own write's event is not reported as someone else's change.
  t.equal(await page.$eval('#conflict', (e) => e.hasAttribute('hidden')), true, 'no conflict with itself');
  t.equal(
    await page.$eval('#file-note', (e) => e.hasAttribute('hidden')),
    true,
    'no "changed by" note for our own save',
  );
  const r = await alice.get('/fs/note.md');
  t.match(r.text, /^# Hello\n\nSome \*text\*/, 'saved through the API');
  await page.click('#toggle-preview');
  await page.waitForSelector('#preview h1');
  t.equal(await textOf(page, '#preview h1'), 'Hello');
  t.equal(await textOf(page, '#preview em'), 'text');
  t.equal(await page.$('#preview img'), null, 'raw HTML is not rendered');
  t.equal(
    await page.$$eval(
      '#preview a',
      (as) => as.filter((a) => /^javascript:/i.test(a.getAttribute('href') ?? '')).length,
    ),
    0,
    'no javascript: links',
  );
  t.not(await page.title(), 'xss');
});

t.test('a conflicting save is shown and overwrites nothing', async (t) => {
  await page.click('#editor >>> .cm-content');
  await page.keyboard.press('End');
  await page.keyboard.type('my edit');
  const other = await alice.get('/fs/note.md');
  const w = await alice.put('/fs/note.md', `${other.text}their edit\n`);
  t.equal(w.status, 200);
  await waitText(page, '#file-note', /while you were editing/);
  await page.click('#save');
  const msg = await waitText(page, '#conflict-text', /Not saved/);
  t.match(msg, /changed by alice/);
  t.match((await alice.get('/fs/note.md')).text, /their edit\n$/, 'their version stands');
  t.match(await editorText(page), /my edit/, 'my text is kept');
  await shot(page, 'conflict');
  await page.click('#conflict-reload');
  await page.waitForSelector('#conflict', { hidden: true });
  t.match(await editorText(page), /their edit/);
});

t.test('search opens a hit at its line', async (t) => {
  await alice.put(
    '/fs/docs/long.md',
    `${Array.from({ length: 80 }, (_, i) => `line ${i + 1}`).join('\n')}\nthe needle is here\n`,
  );
  await page.click('.tab[data-tab=search]');
  await page.type('#search-input', 'needle');
  await page.click('#search-form button');
  await waitText(page, '#search-results', /\/home\/alice\/docs\/long\.md:81/);
  await page.click('#search-results li.hit');
  await waitText(page, '#file-path', /long\.md/);
  await page.waitForFunction(
    "document.querySelector('#editor')?.shadowRoot?.querySelector('.cm-activeLine')?.textContent === 'the needle is here'",
  );
  t.pass('the editor is at the matching line');
});

t.test('find by name: a click opens the file, or shows the folder in the tree', async (t) => {
  await page.click('.tab[data-tab=find]');
  await page.type('#find-input', 'lon*');
  await page.click('#find-form button');
  await waitText(page, '#find-results', /\/home\/alice\/docs\/long\.md/);
  await page.click('#find-results li.hit[data-path="/home/alice/docs/long.md"]');
  await waitText(page, '#file-path', /^\/home\/alice\/docs\/long\.md$/);
  await page.waitForSelector('#tree li[data-path="/home/alice/docs/long.md"].selected');
  await page.$eval('#find-input', (e) => ((e as HTMLInputElement).value = ''));
  await page.type('#find-input', 'doc?');
  await page.click('#find-form button');
  await waitText(page, '#find-results', /\/home\/alice\/docs\//);
  await page.click('#find-results li.hit[data-path="/home/alice/docs"]');
  await page.waitForSelector('#tree li[data-path="/home/alice/docs"].selected.open');
  await page.$eval('#find-input', (e) => ((e as HTMLInputElement).value = ''));
  await page.type('#find-input', 'no-such-name-*');
  await page.click('#find-form button');
  await waitText(page, '#find-results', /Nothing by that name/);
  t.pass('found and opened');
});

t.test('commit shows the status first, then the log and a diff', async (t) => {
  await page.click('.tab[data-tab=commit]');
  const status = await waitText(page, '#status', /note\.md/);
  t.match(status, /long\.md/);
  await page.type('#commit-message', 'first notes');
  await page.click('#commit-form button');
  await waitText(page, '#message', /Committed/);
  await alice.put('/fs/note.md', '# Hello\n\nchanged for the diff\n');
  await page.type('#commit-message', 'second version');
  await page.click('#commit-form button');
  await waitText(page, '#status', /nothing to commit/);
  await page.click('.tab[data-tab=log]');
  await waitText(page, '#log', /second version/);
  await page.click('#log li.commit');
  await page.waitForSelector('#diff .d2h-file-wrapper');
  t.match(await textOf(page, '#diff'), /changed for the diff/);
});

t.test('properties: chmod and chgrp where permitted, a refused chown shown as a readable message', async (t) => {
  t.equal((await root.post('/admin/groups', { name: 'team' })).status, 200);
  t.equal((await root.post('/admin/users/alice/groups/team')).status, 200);
  const team = ((await root.get('/admin/groups')).json.groups as { name: string; gid: number }[]).find(
    (g) => g.name === 'team',
  )!.gid;
  await clickTree(page, '/home/alice/note.md');
  await page.click('#properties');
  await page.waitForSelector('#props[open]');
  t.equal(await textOf(page, '#props-path'), '/home/alice/note.md');
  t.equal(await page.$eval('#props-owner', (e) => (e as HTMLInputElement).value), 'alice', 'the owner by name');
  await page.$eval('#props-mode', (e) => ((e as HTMLInputElement).value = ''));
  await page.type('#props-mode', '0640');
  await page.$eval('#props-group', (e) => ((e as HTMLInputElement).value = ''));
  await page.type('#props-group', 'team');
  await page.click('#props-ok');
  await page.waitForSelector('#props:not([open])');
  await waitText(page, '#message', /Properties of \/home\/alice\/note\.md saved/);
  let st = (await alice.get('/fs/note.md?stat=true')).json as { mode: string; gid: number; uid: number };
  t.equal(st.mode, '0640', 'chmod done');
  t.equal(st.gid, team, 'chgrp to her own group done');
  await page.click('#properties');
  await page.waitForSelector('#props[open]');
  await page.$eval('#props-owner', (e) => ((e as HTMLInputElement).value = ''));
  await page.type('#props-owner', 'bob');
  await page.click('#props-ok');
  const err = await waitText(page, '#props-error', /\S/);
  t.match(err, /^EPERM: /, 'the refusal, readable');
  t.ok(await page.$('#props[open]'), 'the dialog stays open');
  st = (await alice.get('/fs/note.md?stat=true')).json as { mode: string; gid: number; uid: number };
  t.equal(st.uid, (await alice.get('/auth/whoami')).json.uid, 'still hers');
  await shot(page, 'properties');
  await page.click('#props-cancel');
  await page.waitForSelector('#props:not([open])');
});

t.test("an agent's REST write appears live in the tree and the editor, attributed", async (t) => {
  // Delegated writes pass the checks of both, so the agent works in /tmp, which alice opens.
  await clickTree(page, '/tmp');
  await page.waitForSelector('#tree li[data-path="/tmp"].open');
  const tok = (await client(svc, { auth: `Bearer ${adminToken}` }).post('/admin/users/helper/tokens')).json
    .token as string;
  t.equal((await client(svc, { auth: 'User alice' }).post('/auth/delegations', { agent: 'helper' })).status, 200);
  const helper = client(svc, { auth: `Bearer ${tok}`, onBehalfOf: 'alice' });
  // 0666: the agent rewrites it below, and a delegated write needs write access for the agent too.
  t.equal((await helper.put('/fs//tmp/agent.md?mode=0666', 'first draft\n')).status, 200);
  await page.waitForSelector('#tree li[data-path="/tmp/agent.md"]');
  await clickTree(page, '/tmp/agent.md');
  await waitText(page, '#file-path', /agent\.md/);
  t.equal((await helper.put('/fs//tmp/agent.md', 'second draft by the agent\n')).status, 200);
  await page.waitForFunction(
    "document.querySelector('#editor')?.shadowRoot?.querySelector('.cm-content')?.textContent?.includes('second draft by the agent')",
  );
  t.match(
    await waitText(page, '#file-note', /Updated by/),
    /^Updated by helper on behalf of alice, \d+ s ago$/,
    'the open file says who and when',
  );
  t.match(
    await waitText(page, '#tree li[data-path="/tmp/agent.md"] .changed', /ago/),
    /^helper on behalf of alice, \d+ s ago$/,
    'so does the tree',
  );
  await page.click('.tab[data-tab=activity]');
  t.match(await waitText(page, '#activity', /agent\.md/), /helper on behalf of alice/);
  await shot(page, 'live');
  // The agent's own view: the header says whom it acts for.
  const hp = await newPage();
  await signInToken(hp, tok, { obo: 'alice' });
  t.equal(await waitText(hp, '#who', /helper/), 'helper → alice', 'agent → user when delegating');
  await hp.waitForSelector('#tree li[data-path="/home/alice"].selected');
  await hp.browserContext().close();
});

t.test('a note opened from a folder the tree loads lazily (the main screen)', async (t) => {
  const note =
    '# Planning meeting\n\n*Tuesday*, with the **research agent**.\n\n## Decisions\n\n- Notes stay in markdown, versioned\n- Agents draft in `/tmp`; people review and commit\n\n## Next\n\n1. Draft the summary\n2. Commit it\n\n> Nothing is lost: every commit can be diffed.\n';
  t.equal((await alice.put('/fs/notes/meeting.md', note)).status, 200);
  await clickTree(page, '/home/alice/notes');
  await clickTree(page, '/home/alice/notes/meeting.md');
  await waitText(page, '#file-path', /meeting\.md/);
  await page.waitForSelector('#preview h2');
  t.equal(await textOf(page, '#preview h1'), 'Planning meeting');
  t.equal(await page.$$eval('#preview li', (l) => l.length), 4);
  await page.click('.tab[data-tab=activity]');
  await shot(page, 'editor');
});

t.test('a folder collapsed while a live event reloads it stays collapsed', async (t) => {
  await page.waitForSelector('#tree li[data-path="/home/alice/notes"].open');
  // The listing a live event asks for is held until the folder was collapsed.
  const listing = '/fs//home/alice/notes?limit=1000';
  let held: (() => void) | undefined;
  const seen = new Promise<void>((resolve) => {
    page.on('request', (req) => {
      if (held === undefined && req.method() === 'GET' && req.url().endsWith(listing)) {
        held = () => void req.continue();
        resolve();
      } else void req.continue();
    });
  });
  await page.setRequestInterception(true);
  try {
    t.equal((await alice.put('/fs/notes/late.md', 'late\n')).status, 200);
    await seen;
    await clickTree(page, '/home/alice/notes');
    await page.waitForSelector('#tree li[data-path="/home/alice/notes"].selected:not(.open)');
    const answered = page.waitForResponse((r) => r.url().endsWith(listing));
    held!();
    await answered;
    await page.evaluate(() => new Promise((r) => setTimeout(r, 200)));
    t.equal(await page.$('#tree li[data-path="/home/alice/notes"].open'), null, 'the late listing did not open it');
  } finally {
    await page.setRequestInterception(false);
    page.removeAllListeners('request');
  }
});

t.test(
  'new folder, a file in it, rename, move the folder with the open file, delete; a refusal is readable',
  async (t) => {
    await clickTree(page, '/home/alice'); // collapse
    await clickTree(page, '/home/alice'); // open again, selected
    await page.waitForSelector('#tree li[data-path="/home/alice"].selected.open');
    await page.click('#new-folder');
    await answer(page, 'drafts');
    await page.waitForSelector('#tree li[data-path="/home/alice/drafts"].selected');
    await page.click('#new-file');
    await answer(page, 'idea.md');
    await waitText(page, '#file-path', /^\/home\/alice\/drafts\/idea\.md$/);
    await page.click('#editor >>> .cm-content');
    await page.keyboard.type('an idea\n');
    await page.click('#save');
    await waitText(page, '#file-state', /^saved$/);
    await page.click('#rename');
    await answer(page, 'plan.md');
    await page.waitForSelector('#tree li[data-path="/home/alice/drafts/plan.md"].selected');
    // (The tree may show it first, from the live event of the move.)
    t.equal(
      await waitText(page, '#file-path', /plan\.md$/),
      '/home/alice/drafts/plan.md',
      'the open file follows its new name',
    );
    t.equal((await alice.get('/fs/drafts/plan.md')).text, 'an idea\n');
    t.equal((await alice.get('/fs/drafts/idea.md')).status, 404);
    await clickTree(page, '/home/alice/drafts'); // collapse, selected
    await page.waitForSelector('#tree li[data-path="/home/alice/drafts"].selected:not(.open)');
    await page.click('#rename');
    await answer(page, '/home/alice/archive');
    await page.waitForSelector('#tree li[data-path="/home/alice/archive"]');
    t.equal(
      await waitText(page, '#file-path', /archive/),
      '/home/alice/archive/plan.md',
      'moving the folder moves the open file',
    );
    await page.click('#editor >>> .cm-content');
    await page.keyboard.type('more ');
    await page.click('#save');
    await waitText(page, '#file-state', /^saved$/);
    t.match(
      (await alice.get('/fs/archive/plan.md')).text,
      /^(more an idea\n|an idea\nmore )$/,
      'saved at its new place',
    );
    t.equal((await alice.get('/fs/drafts')).status, 404);
    await page.click('#delete');
    await answer(page);
    await page.waitForSelector('#tree li[data-path="/home/alice/archive"]', { hidden: true });
    t.equal((await alice.get('/fs/archive')).status, 404, 'deleted with what is in it');
    t.equal(await textOf(page, '#file-path'), '', 'the open file is closed');
    // root's file in the sticky /tmp: alice may not delete it
    t.equal((await root.put('/fs//tmp/roots.md', 'root')).status, 200);
    await clickTree(page, '/tmp/roots.md');
    await waitText(page, '#file-path', /roots\.md/);
    await page.click('#delete');
    await answer(page);
    t.match(
      await waitText(page, '#message', /^E/),
      /^(EACCES|EPERM): .*\/tmp\/roots\.md/,
      'the refusal, readable, naming the file',
    );
    t.equal((await root.get('/fs//tmp/roots.md')).status, 200, 'still there');
  },
);

/** The History panel's rows, newest first: the message, who committed, who changed the path. */
async function historyRows(p: Page, n: number): Promise<{ msg: string; by: string; attr: string }[]> {
  await p.waitForFunction((k) => document.querySelectorAll('#log li.commit').length === k, {}, n);
  return p.$$eval('#log li.commit', (ls) =>
    ls.map((l) => ({
      msg: l.querySelector('.msg')?.textContent ?? '',
      by: l.querySelector('.by')?.textContent ?? '',
      attr: l.querySelector('.attr')?.textContent ?? '',
    })),
  );
}
/** Clicks a button of the History panel's row whose message is `msg`. */
async function rowButton(p: Page, msg: string, cls: string): Promise<void> {
  await p.waitForFunction(
    (m, c) => {
      const li = [...document.querySelectorAll('#log li.commit')].find(
        (l) => l.querySelector('.msg')?.textContent === m,
      );
      const b = li?.querySelector<HTMLElement>(`button.${c}, input.${c}`);
      b?.click();
      return b !== undefined && b !== null;
    },
    {},
    msg,
    cls,
  );
}
/** Opens the tree's context menu on an entry and picks an item. */
async function treeMenu(p: Page, path: string, item: string): Promise<void> {
  await p.waitForFunction(
    (s) => {
      const e = document.querySelector<HTMLElement>(s);
      if (e === null) return false;
      const r = e.getBoundingClientRect();
      e.dispatchEvent(new MouseEvent('contextmenu', { bubbles: true, cancelable: true, clientX: r.x, clientY: r.y }));
      return true;
    },
    {},
    `#tree li[data-path="${path}"] > .name`,
  );
  await p.waitForSelector('#entry-menu:not([hidden])');
  await p.click(`#entry-menu button[data-act=${item}]`);
  await p.waitForSelector('#entry-menu', { hidden: true });
}

t.test('per-file history: both commits attributed, diffs, a version read and restored in the editor', async (t) => {
  const v1 = '# Plan\n\nfirst draft\n';
  t.equal((await alice.put('/fs/hist.md', v1)).status, 200);
  t.equal((await alice.post('/vcs/commit', { message: 'hist v1', paths: ['hist.md'] })).status, 200);
  t.equal((await alice.put('/fs/hist.md', '# Plan\n\nsecond draft, much better\n')).status, 200);
  t.equal((await alice.post('/vcs/commit', { message: 'hist v2', paths: ['hist.md'] })).status, 200);
  // and a third edit, not committed: the working copy
  t.equal((await alice.put('/fs/hist.md', '# Plan\n\nthird, not committed\n')).status, 200);
  await clickTree(page, '/home/alice/hist.md');
  await waitText(page, '#file-path', /^\/home\/alice\/hist\.md$/);
  await page.waitForFunction(
    "document.querySelector('#editor')?.shadowRoot?.querySelector('.cm-content')?.textContent?.includes('third, not committed')",
  );
  await page.click('#file-history');
  t.equal(await waitText(page, '#log-title', /History of/), 'History of /home/alice/hist.md');
  let rows = await historyRows(page, 2);
  t.same(
    rows.map((r) => r.msg),
    ['hist v2', 'hist v1'],
    'the commits of this file only, newest first',
  );
  t.match(rows[0]!.by, /^committed by alice · \d+ s ago$/);
  t.equal(rows[0]!.attr, 'modified by alice', 'who changed the file in that commit');
  t.equal(rows[1]!.attr, 'added by alice');
  // what a commit changed, side by side, then unified
  await rowButton(page, 'hist v2', 'changes');
  await page.waitForSelector('#diff .d2h-file-side-diff');
  t.match(await textOf(page, '#diff .diff-title'), /changes in \w+ \(hist v2\)/);
  t.match(
    await textOf(page, '#diff'),
    /first draft[\s\S]*second draft, much better|second draft, much better[\s\S]*first draft/,
  );
  await page.click('#diff-format');
  await page.waitForSelector('#diff .d2h-file-diff');
  t.equal(await page.$('#diff .d2h-file-side-diff'), null, 'unified: one column');
  t.match(await textOf(page, '#diff'), /second draft, much better/);
  await page.click('#diff-format');
  await page.waitForSelector('#diff .d2h-file-side-diff');
  // a version against the working copy
  await rowButton(page, 'hist v1', 'diff-now');
  t.match(await waitText(page, '#diff .diff-title', /working copy/), /version \w+ → the working copy/);
  t.match(await textOf(page, '#diff'), /third, not committed/);
  // two versions
  await rowButton(page, 'hist v1', 'tick');
  t.equal(await page.$eval('#compare', (e) => (e as HTMLButtonElement).disabled), true, 'one ticked: no compare yet');
  await rowButton(page, 'hist v2', 'tick');
  await page.click('#compare');
  await waitText(page, '#diff .diff-title', /version \w+ → version \w+$/);
  const two = await textOf(page, '#diff');
  t.match(two, /second draft, much better/);
  t.notMatch(two, /third, not committed/, 'between the two versions, not the working copy');
  // read the old version, with its preview
  await rowButton(page, 'hist v1', 'view');
  await page.waitForSelector('#version:not([hidden])');
  t.ok(await page.$('#panes[hidden]'), 'in place of the editor');
  t.match(await textOf(page, '#version-title'), /^\/home\/alice\/hist\.md at \w+ \(hist v1, .*\), read-only$/);
  t.equal(await textOf(page, '#version-text'), v1, 'the text as it was');
  t.equal(await textOf(page, '#version-preview h1'), 'Plan', 'and rendered');
  await shot(page, 'version');
  // restore it: a confirmation, then the editor shows the old text; nothing is lost
  await page.click('#version-restore');
  await page.waitForSelector('#ask[open]');
  t.match(await textOf(page, '#ask-label'), /^Restore \/home\/alice\/hist\.md to its version of \w+ \(hist v1\)\?/);
  await answer(page);
  t.match(
    await waitText(page, '#message', /Restored/),
    /^Restored \/home\/alice\/hist\.md to \w+ \(commit \w+\); the changes before it are in \w+$/,
  );
  await page.waitForSelector('#panes:not([hidden])');
  t.equal(await editorText(page), v1, 'the editor shows the old text');
  t.equal(await textOf(page, '#file-state'), 'saved');
  t.equal((await alice.get('/fs/hist.md')).text, v1, 'restored in the store');
  rows = await historyRows(page, 4);
  t.match(rows[0]!.msg, /^revert to \w+/, 'recorded as a commit');
  t.match(rows[1]!.msg, /^save uncommitted changes before revert/, 'the uncommitted edit kept first');
  // From the tree's context menu, and by keyboard
  await clickTree(page, '/home/alice/note.md');
  await waitText(page, '#file-path', /note\.md$/);
  await page.click('.tab[data-tab=search]');
  await treeMenu(page, '/home/alice/hist.md', 'history');
  await waitText(page, '#log-title', /History of \/home\/alice\/hist\.md$/);
  await historyRows(page, 4);
  // restoring a file that is not open opens it, as restored
  await rowButton(page, 'hist v2', 'restore');
  await answer(page);
  t.match(await waitText(page, '#message', /Restored/), /^Restored \/home\/alice\/hist\.md to \w+ \(commit \w+\)$/);
  await waitText(page, '#file-path', /hist\.md$/);
  t.equal(await editorText(page), '# Plan\n\nsecond draft, much better\n', 'the restored file is opened');
  await historyRows(page, 5);
  await clickTree(page, '/home/alice/note.md');
  await waitText(page, '#file-path', /note\.md$/);
  await page.keyboard.down('Control');
  await page.keyboard.down('Shift');
  await page.keyboard.press('H');
  await page.keyboard.up('Shift');
  await page.keyboard.up('Control');
  await waitText(page, '#log-title', /History of \/home\/alice\/note\.md$/);
  t.pass('Ctrl+Shift+H: the history of the open file');
});

t.test("an agent's work in the history: its own commit, and alice's commit of its change", async (t) => {
  const helper = client(svc, { auth: 'User helper', onBehalfOf: 'alice' });
  t.equal((await helper.put('/fs//tmp/agent-notes.md?mode=0666', 'by the agent\n')).status, 200);
  t.equal((await helper.post('/vcs/commit', { message: 'agent notes', paths: ['/tmp/agent-notes.md'] })).status, 200);
  t.equal((await helper.put('/fs//tmp/agent-notes.md', 'revised by the agent\n')).status, 200);
  t.equal((await alice.post('/vcs/commit', { message: 'alice reviews', paths: ['/tmp/agent-notes.md'] })).status, 200);
  await page.waitForSelector('#tree li[data-path="/tmp/agent-notes.md"]');
  await treeMenu(page, '/tmp/agent-notes.md', 'history');
  await waitText(page, '#log-title', /agent-notes\.md$/);
  const rows = await historyRows(page, 2);
  t.match(rows[1]!.by, /^committed by helper on behalf of alice · /, "the agent's own commit");
  t.equal(rows[1]!.attr, 'added by helper on behalf of alice');
  t.match(rows[0]!.by, /^committed by alice · /, 'alice commits what the agent changed');
  t.equal(rows[0]!.attr, 'modified by helper on behalf of alice', 'and the agent stays visible');
  await rowButton(page, 'alice reviews', 'changes');
  await page.waitForSelector('#diff .d2h-file-side-diff');
  t.match(await textOf(page, '#diff'), /revised by the agent/);
  await shot(page, 'history');
  // the whole log: a commit's changes, each attributed
  await page.click('#log-all');
  await waitText(page, '#log-title', /All commits/);
  await page.waitForSelector('#log li.commit');
  await page.$$eval('#log li.commit', (ls) =>
    (ls.find((l) => l.querySelector('.msg')?.textContent === 'alice reviews') as HTMLElement).click(),
  );
  const detail = await waitText(page, '#commit-detail', /agent-notes/);
  t.match(detail, /modified\/tmp\/agent-notes\.mdby helper on behalf of alice/);
  await page.waitForSelector('#diff .d2h-file-wrapper');
  t.match(await textOf(page, '#diff'), /revised by the agent/);
});

t.test('a refused restore is a readable message and changes nothing', async (t) => {
  t.equal((await root.put('/fs//tmp/roots-notes.md', 'root one\n')).status, 200);
  t.equal((await root.post('/vcs/commit', { message: 'roots one', paths: ['/tmp/roots-notes.md'] })).status, 200);
  t.equal((await root.put('/fs//tmp/roots-notes.md', 'root two\n')).status, 200);
  t.equal((await root.post('/vcs/commit', { message: 'roots two', paths: ['/tmp/roots-notes.md'] })).status, 200);
  await page.waitForSelector('#tree li[data-path="/tmp/roots-notes.md"]');
  await treeMenu(page, '/tmp/roots-notes.md', 'history');
  await historyRows(page, 2);
  await rowButton(page, 'roots one', 'restore');
  await answer(page);
  t.match(await waitText(page, '#message', /^E/), /^EACCES: .*roots-notes\.md/, 'the refusal, readable');
  t.equal((await root.get('/fs//tmp/roots-notes.md')).text, 'root two\n', 'unchanged');
  await historyRows(page, 2);
});

t.test("the file history is paged with the log's cursor", async (t) => {
  for (let i = 1; i <= 27; i++) {
    t.equal((await alice.put('/fs/paged.md', `version ${i}\n`)).status, 200);
    t.equal((await alice.post('/vcs/commit', { message: `paged ${i}`, paths: ['paged.md'] })).status, 200);
  }
  await page.waitForSelector('#tree li[data-path="/home/alice/paged.md"]');
  await treeMenu(page, '/home/alice/paged.md', 'history');
  const first = await historyRows(page, 25);
  t.equal(first[0]!.msg, 'paged 27');
  await page.click('#log-more');
  const all = await historyRows(page, 27);
  t.equal(all[26]!.msg, 'paged 1', 'down to the first');
  await page.waitForSelector('#log-more', { hidden: true });
});

t.test("bob sees none of alice's private files: tree, search, history, events", async (t) => {
  const bobPage = await newPage();
  await signIn(bobPage, 'bob');
  await clickTree(bobPage, '/home'); // collapse
  await clickTree(bobPage, '/home'); // and open again
  await bobPage.waitForSelector('#tree li[data-path="/home/alice"]');
  await clickTree(bobPage, '/home/alice');
  await bobPage.waitForSelector('#tree li[data-path="/home/alice"].denied');
  t.equal(await bobPage.$('#tree li[data-path="/home/alice/note.md"]'), null, 'not in the tree');
  await bobPage.type('#search-input', 'Hello');
  await bobPage.click('#search-form button');
  await waitText(bobPage, '#search-results', /No matches|\//);
  t.notMatch(await textOf(bobPage, '#search-results'), /alice/, 'not in search');
  await bobPage.click('.tab[data-tab=log]');
  await bobPage.waitForSelector('#log li');
  // (Her first commit also made /home/alice itself, a name bob may read in /home; the second only changed her note.)
  t.notMatch(await textOf(bobPage, '#log'), /second version/, 'not in history');
  t.notMatch(await textOf(bobPage, '#log'), /hist v|revert to|paged/, "none of her note's commits");
  t.match(await textOf(bobPage, '#log'), /agent notes/, 'a commit of a file he may read is listed');
  await bobPage.click('.tab[data-tab=activity]');
  await alice.put('/fs/private-plan.md', 'secret');
  await root.put('/fs//tmp/public-after.md', 'x');
  await waitText(bobPage, '#activity', /public-after\.md/);
  t.notMatch(await textOf(bobPage, '#activity'), /private-plan|\/home\/alice/, 'not in the events');
  await bobPage.browserContext().close();
});

/** The bot agent's token and a workspace secret for it, made in the admin panel (used below). */
let botToken = '';
let wsSecret = '';
let wsId = '';

async function signInToken(p: Page, token: string, extra: { obo?: string; workspace?: string } = {}): Promise<void> {
  await p.goto(svc.base);
  await p.waitForSelector('#signin-form', { visible: true });
  await p.type('#signin-token', token);
  if (extra.obo !== undefined) await p.type('#signin-obo', extra.obo);
  if (extra.workspace !== undefined) await p.type('#signin-workspace', extra.workspace);
  await p.click('#signin-form button[type=submit]');
  await p.waitForSelector('#app:not([hidden])');
}
async function secretShown(p: Page): Promise<string> {
  await p.waitForFunction(
    () =>
      /\S{20,}/.test(document.querySelector('#admin-secret-value')?.textContent ?? '') &&
      !document.querySelector('#admin-secret')?.hasAttribute('hidden'),
  );
  return textOf(p, '#admin-secret-value');
}
async function userRow(p: Page, name: string, button: number): Promise<void> {
  await p.waitForSelector(`#admin-users tr[data-name="${name}"]`);
  await p.$eval(`#admin-users tr[data-name="${name}"] td.actions button:nth-child(${button})`, (e) =>
    (e as HTMLElement).click(),
  );
}

t.test('the admin panel: users and agents, tokens shown once, groups, workspaces and their secrets', async (t) => {
  t.equal(
    await page.$eval('#admin-open', (e) => e.hasAttribute('hidden')),
    true,
    'alice (not root/wheel) has no admin panel',
  );
  const p = await newPage();
  await signInToken(p, adminToken);
  await p.click('#admin-open');
  await p.waitForSelector('#admin[open]');
  await waitText(p, '#admin-users', /alice/);
  // a user: created without a token, then issued one, then regenerated
  await p.type('#admin-user-name', 'carol');
  await p.click('#admin-user-form button[type=submit]');
  await p.waitForSelector('#admin-users tr[data-name="carol"]');
  t.equal(await p.$eval('#admin-secret', (e) => e.hasAttribute('hidden')), true, 'a user gets no token on creation');
  await userRow(p, 'carol', 1);
  const tok1 = await secretShown(p);
  t.ok(await p.$('#admin-secret-copy'), 'with a copy button');
  t.equal(
    (await client(svc, { auth: `Bearer ${tok1}` }).get('/auth/whoami')).json.user,
    'carol',
    'the shown token works',
  );
  await userRow(p, 'carol', 1);
  await answer(p);
  await p.waitForFunction((old) => document.querySelector('#admin-secret-value')?.textContent !== old, {}, tok1);
  const tok2 = await secretShown(p);
  t.not(tok2, tok1, 'regenerated');
  t.equal(
    (await client(svc, { auth: `Bearer ${tok1}` }).get('/auth/whoami')).status,
    401,
    'the old token no longer works',
  );
  t.equal((await client(svc, { auth: `Bearer ${tok2}` }).get('/auth/whoami')).json.user, 'carol');
  await p.click('#admin-secret-done');
  t.equal(await textOf(p, '#admin-secret-value'), '', 'not shown again');
  // an agent: its token comes with its creation
  await p.type('#admin-user-name', 'bot');
  await p.click('#admin-user-agent');
  await p.click('#admin-user-form button[type=submit]');
  botToken = await secretShown(p);
  t.equal(
    (await client(svc, { auth: `Bearer ${botToken}` }).get('/auth/whoami')).json.is_agent,
    true,
    'an agent token',
  );
  await waitText(p, '#admin-users tr[data-name="bot"]', /agent/);
  await p.click('#admin-secret-done');
  // delegation grants: alice lets bot act for her, then the grant is revoked in the panel
  await p.type('#admin-deleg-user', 'alice');
  await p.type('#admin-deleg-agent', 'bot');
  await p.click('#admin-deleg-share');
  await p.click('#admin-deleg-form button[type=submit]');
  await p.waitForSelector('#admin-delegations tr[data-name="alice/bot"]');
  await waitText(p, '#admin-delegations tr[data-name="alice/bot"]', /yes/);
  const botForAlice = client(svc, { auth: `Bearer ${botToken}`, onBehalfOf: 'alice' });
  t.equal((await botForAlice.get('/auth/whoami')).json.on_behalf_of, 'alice', 'the grant made in the panel holds');
  await p.$eval('#admin-delegations tr[data-name="alice/bot"] td.actions button', (e) => (e as HTMLElement).click());
  await answer(p);
  await p.waitForSelector('#admin-delegations tr[data-name="alice/bot"]', { hidden: true });
  t.equal((await botForAlice.get('/auth/whoami')).status, 403, 'revoked in the panel: refused');
  // a token that expires: the listing says when
  await p.type('#admin-token-expires', '3600');
  await userRow(p, 'bob', 1);
  const bobTok = await secretShown(p);
  t.equal((await client(svc, { auth: `Bearer ${bobTok}` }).get('/auth/whoami')).json.user, 'bob');
  await waitText(p, '#admin-users tr[data-name="bob"]', /expires/);
  await p.click('#admin-secret-done');
  await p.$eval('#admin-token-expires', (e) => ((e as HTMLInputElement).value = ''));
  // groups and membership
  await p.type('#admin-group-name', 'writers');
  await p.click('#admin-group-form button[type=submit]');
  await p.waitForSelector('#admin-groups tr[data-name="writers"]');
  await p.type('#admin-member-user', 'carol');
  await p.type('#admin-member-group', 'writers');
  await p.click('#admin-member-form button[type=submit]');
  await waitText(p, '#admin-groups tr[data-name="writers"]', /carol/);
  t.match(await textOf(p, '#admin-users tr[data-name="carol"]'), /writers/, 'the user row lists the group');
  await p.$eval('#admin-groups tr[data-name="writers"] .chip button', (e) => (e as HTMLElement).click());
  await p.waitForFunction(
    () => !/carol/.test(document.querySelector('#admin-groups tr[data-name="writers"]')?.textContent ?? 'carol'),
  );
  t.pass('member removed');
  // a refusal is a readable message in the panel
  await p.type('#admin-user-name', 'alice');
  await p.click('#admin-user-form button[type=submit]');
  t.match(await waitText(p, '#admin-error', /\S/), /^EEXIST: /, 'a refusal, readable');
  await p.$eval('#admin-user-name', (e) => ((e as HTMLInputElement).value = ''));
  // delete a user
  await userRow(p, 'carol', 2);
  await answer(p);
  await p.waitForSelector('#admin-users tr[data-name="carol"]', { hidden: true });
  t.equal((await client(svc, { auth: `Bearer ${tok2}` }).get('/auth/whoami')).status, 401, 'deleted');
  // workspaces and their secrets
  await p.type('#admin-ws-name', 'proj');
  await p.type('#admin-ws-root', '/tmp/proj');
  await p.click('#admin-ws-form button[type=submit]');
  await waitText(p, '#admin-workspaces tr[data-name="proj"]', /\/tmp\/proj/);
  wsId = ((await root.get('/workspaces')).json.workspaces as { id: string; name: string }[]).find(
    (w) => w.name === 'proj',
  )!.id;
  for (const name of ['ci', 'temp']) {
    await p.type('#admin-wstoken-name', name);
    await p.type('#admin-wstoken-agent', botToken);
    await p.click('#admin-wstoken-form button[type=submit]');
    await waitText(p, '#admin-secret-label', new RegExp(`secret ${name} `));
    const secret = await secretShown(p);
    if (name === 'ci') wsSecret = secret;
    await waitText(p, '#admin-workspaces tr[data-name="proj"]', new RegExp(`${name} \\(bot\\)`));
    await p.click('#admin-secret-done');
  }
  const ws = await client(svc, { auth: `Bearer ${wsSecret}`, workspace: wsId }).get('/auth/whoami');
  t.equal(ws.json.workspace?.name, 'proj', 'the secret works in its workspace');
  await p.$$eval('#admin-workspaces tr[data-name="proj"] .chip', (cs) =>
    (cs.find((c) => c.textContent?.startsWith('temp'))?.querySelector('button') as HTMLElement).click(),
  );
  await answer(p);
  await p.waitForFunction(
    () =>
      !/temp \(bot\)/.test(
        document.querySelector('#admin-workspaces tr[data-name="proj"]')?.textContent ?? 'temp (bot)',
      ),
  );
  t.equal(((await root.get(`/workspaces/${wsId}/tokens`)).json.tokens as unknown[]).length, 1, 'revoked');
  await shot(p, 'admin');
  await p.click('#admin-close');
  await p.waitForSelector('#admin:not([open])');
  await p.browserContext().close();
});

t.test('a workspace secret signs in to its workspace, and the header says so', async (t) => {
  t.equal((await root.put('/fs//tmp/proj/readme.md', '# Project\n')).status, 200);
  const p = await newPage();
  await signInToken(p, wsSecret, { workspace: wsId });
  t.equal(await waitText(p, '#who', /workspace/), 'bot · workspace proj');
  await p.waitForSelector('#tree li[data-path="/"].selected');
  await clickTree(p, '/readme.md');
  await waitText(p, '#file-path', /^\/readme\.md$/);
  t.match(await editorText(p), /# Project/, 'the workspace root is / here');
  t.match(await p.$eval('#who', (e) => (e as HTMLElement).title), /agent bot; in workspace proj/);
  await p.browserContext().close();
});

t.test('a cross-origin page cannot drive the API', async (t) => {
  const evil = http.createServer((_req, res) => {
    res.setHeader('Content-Type', 'text/html');
    res.end('<!doctype html><title>evil</title><p>hello</p>');
  });
  await new Promise<void>((r) => evil.listen(0, '127.0.0.1', r));
  t.teardown(() => evil.close());
  const port = (evil.address() as { port: number }).port;
  const p = await newPage();
  // localhost vs 127.0.0.1: another origin, as any web page the user visits.
  await p.goto(`http://localhost:${port}/`);
  const before = (await alice.get('/fs/note.md')).text;
  const result = await p.evaluate(async (base) => {
    const out: string[] = [];
    try {
      const r = await fetch(`${base}/fs//home/alice/note.md`, { headers: { Authorization: 'User alice' } });
      out.push(`read:${r.status}`);
    } catch {
      out.push('read:blocked');
    }
    try {
      const r = await fetch(`${base}/fs//home/alice/note.md`);
      out.push(`simple:${r.status}`);
    } catch {
      out.push('simple:blocked');
    }
    // A "simple" cross-site write needs no preflight: the server must refuse it itself.
    await fetch(`${base}/fs//home/alice/note.md`, {
      method: 'POST',
      mode: 'no-cors',
      body: 'x',
      headers: { 'Content-Type': 'text/plain' },
    }).catch(() => undefined);
    await fetch(`${base}/vcs/commit`, {
      method: 'POST',
      mode: 'no-cors',
      body: '{"message":"pwned"}',
      headers: { 'Content-Type': 'text/plain' },
    }).catch(() => undefined);
    return out;
  }, svc.base);
  t.same(result, ['read:blocked', 'simple:blocked'], 'reads fail');
  t.equal((await alice.get('/fs/note.md')).text, before, 'nothing changed');
  t.notMatch((await alice.get('/vcs/log')).text, /pwned/, 'no commit made');
  await p.browserContext().close();
});

t.test('keyboard shortcuts, listed in a help overlay', async (t) => {
  const p = await newPage();
  await signIn(p, 'alice');
  await p.keyboard.press('?');
  await p.waitForSelector('#help[open]');
  const help = await textOf(p, '#help-keys');
  for (const re of [/Ctrl\+S\s*Save/, /Ctrl\+K\s*Search/, /Ctrl\+Shift\+F\s*Find/, /Ctrl\+Enter\s*Commit/])
    t.match(help, re);
  await shot(p, 'help');
  await p.keyboard.press('Escape');
  await p.waitForSelector('#help:not([open])');
  const combo = async (...keys: KeyInput[]): Promise<void> => {
    for (const k of keys) await p.keyboard.down(k);
    for (const k of keys.reverse()) await p.keyboard.up(k);
  };
  await combo('Control', 'Shift', 'F');
  await p.waitForFunction(() => document.activeElement?.id === 'find-input');
  t.pass('Ctrl+Shift+F: find');
  await combo('Control', 'k');
  await p.waitForFunction(() => document.activeElement?.id === 'search-input');
  t.pass('Ctrl+K: search');
  // in the editor too
  await clickTree(p, '/home/alice/note.md');
  await waitText(p, '#file-path', /note\.md/);
  await p.click('#editor >>> .cm-content');
  await combo('Control', 'Enter');
  await p.waitForFunction(() => document.activeElement?.id === 'commit-message');
  await waitText(p, '#status', /\S/);
  t.pass('Ctrl+Enter: the commit panel with the pending changes');
  await p.type('#commit-message', 'by keyboard');
  await combo('Control', 'Enter');
  await waitText(p, '#message', /Committed/);
  t.match((await alice.get('/vcs/log?limit=1')).text, /by keyboard/, 'committed');
  await p.click('#editor >>> .cm-content');
  await combo('Control', '/');
  await p.waitForSelector('#help[open]');
  t.pass('Ctrl+/ in the editor: help');
  await p.browserContext().close();
});

t.test('a 390 px wide screen: the tree is a drawer, the editor takes the width', async (t) => {
  const p = await newPage(390, 844);
  await signIn(p, 'alice');
  const side = async (): Promise<{ x: number; width: number }> =>
    p.$eval('#side', (e) => e.getBoundingClientRect().toJSON() as { x: number; width: number });
  t.ok((await side()).x + (await side()).width <= 0, 'the tree starts closed, off the screen');
  const center = await p.$eval('#center', (e) => e.getBoundingClientRect().toJSON() as { x: number; width: number });
  t.ok(center.x === 0 && center.width >= 389, 'the editor takes the whole width');
  t.ok(await p.$eval('#right', (e) => e.getBoundingClientRect().width >= 389), 'the panels below it too');
  await p.click('#drawer-toggle');
  await p.waitForFunction(() => document.querySelector('#side')!.getBoundingClientRect().x === 0);
  t.ok((await side()).width >= 300, 'open: the tree is wide enough to use');
  await shot(p, 'narrow-tree');
  await clickTree(p, '/home/alice/note.md');
  await waitText(p, '#file-path', /note\.md/);
  await p.waitForFunction(() => document.querySelector('#side')!.getBoundingClientRect().right <= 0);
  t.pass('opening a file closes the drawer');
  const header = await p.$eval('#top', (e) => ({ h: e.getBoundingClientRect().height, w: e.scrollWidth }));
  t.ok(header.w <= 390, 'the header fits');
  await shot(p, 'narrow');
  await p.browserContext().close();
});

t.test('revert to a commit from the commit log, after a confirmation; the open file follows', async (t) => {
  t.equal((await root.post('/admin/users', { name: 'dave', is_agent: false })).status, 200);
  const dave = client(svc, { auth: 'User dave' });
  t.equal((await dave.put('/fs/log.md', 'dave one\n')).status, 200);
  t.equal((await dave.post('/vcs/commit', { message: 'dave one' })).status, 200);
  t.equal((await dave.put('/fs/log.md', 'dave two\n')).status, 200);
  t.equal((await dave.post('/vcs/commit', { message: 'dave two' })).status, 200);
  const p = await newPage();
  await signIn(p, 'dave');
  await clickTree(p, '/home/dave/log.md');
  await waitText(p, '#file-path', /log\.md$/);
  t.equal(await editorText(p), 'dave two\n');
  await p.click('.tab[data-tab=log]');
  await waitText(p, '#log-title', /All commits/);
  await p.waitForSelector('#log li.commit');
  await p.$$eval('#log li.commit', (ls) =>
    (ls.find((l) => l.querySelector('.msg')?.textContent === 'dave one') as HTMLElement).click(),
  );
  await waitText(p, '#commit-detail', /dave one/);
  t.match(await textOf(p, '#commit-detail'), /\/home\/dave\/log\.mdby dave/, 'its changes, attributed');
  await p.click('#commit-detail button.revert');
  await p.waitForSelector('#ask[open]');
  t.match(await textOf(p, '#ask-label'), /^Revert to \w+ \(dave one\)\?/);
  await answer(p);
  t.match(await waitText(p, '#message', /Reverted/), /^Reverted to \w+ \(commit \w+\)$/);
  t.equal((await dave.get('/fs/log.md')).text, 'dave one\n', 'reverted');
  await p.waitForFunction(
    "document.querySelector('#editor')?.shadowRoot?.querySelector('.cm-content')?.textContent === 'dave one'",
  );
  t.pass('the open file shows it');
  t.match(await waitText(p, '#log li.commit .msg', /^revert/), /^revert to \w+$/, 'recorded as a new commit');
  await p.browserContext().close();
});

t.test('no console error and no CSP violation on any page of ours', async (t) => {
  t.same(problems, []);
});
