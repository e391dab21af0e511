/**
 * The mdvfs web UI: sign-in (and first-run bootstrap), the file tree, a CodeMirror editor with a
 * sanitised preview, search, commit, history (history.ts), and live updates from `GET /events`.
 * Everything goes through the same REST API as any other client, with the signed-in credentials.
 */
import { EditorView, drawSelection, highlightActiveLine, keymap, lineNumbers } from '@codemirror/view';
import { defaultKeymap, history, historyKeymap } from '@codemirror/commands';
import { defaultHighlightStyle, syntaxHighlighting } from '@codemirror/language';
import { highlightSelectionMatches, searchKeymap } from '@codemirror/search';
import { markdown } from '@codemirror/lang-markdown';
import MarkdownIt from 'markdown-it';
import DOMPurify from 'dompurify';
import {
  Api,
  ApiError,
  fsUrl,
  loadSession,
  pathUrl,
  saveSession,
  type DirEntry,
  type FeedEvent,
  type GroupRecord,
  type Session,
  type Stat,
  type UserRecord,
  type WhoAmI,
} from './api.js';
import { Live } from './live.js';
import { $, ago, ask, copyText, describe, el, input, show, whoText } from './dom.js';
import { openAdmin, wireAdmin } from './admin.js';
import { closeVersion, loadHistory, setHistoryPath, wireHistory } from './history.js';

function join(dir: string, name: string): string {
  return dir === '/' ? `/${name}` : `${dir}/${name}`;
}
function dirname(p: string): string {
  const i = p.lastIndexOf('/');
  return i <= 0 ? '/' : p.slice(0, i);
}
/** "helper on behalf of alice, 2 s ago". */
function attribution(ev: FeedEvent): string {
  return `${whoText(ev.by, ev.on_behalf_of)}, ${ago(ev.time)}`;
}
/** How long a change stays marked in the tree. */
const MARK_MS = 10 * 60_000;

// ---------- state ----------

const api = new Api(loadSession());
let me: WhoAmI | null = null;
let live: Live | null = null;
/** The selected tree entry (a file or a directory). */
let selected: { path: string; dir: boolean } | null = null;
/** The file in the editor: its path, the etag it was read at, and the text saved there. */
let open: { path: string; etag: string; saved: string } | null = null;
/** Directories shown expanded in the tree. */
const expanded = new Set<string>();
/** When each directory was last collapsed by a click (a count): a listing asked for before is not shown. */
const collapsedAt = new Map<string, number>();
let collapses = 0;
/** The last change event per path, for attribution ("changed by helper on behalf of alice"). */
const lastChange = new Map<string, FeedEvent>();

/** Where the tree opens: the home directory, or `/` (the workspace root) for a workspace secret. */
function homeDir(): string {
  return me === null || me.workspace !== undefined ? '/' : me.home;
}

function message(text: string | null, kind: 'error' | 'info' = 'error'): void {
  const m = $('message');
  m.textContent = text ?? '';
  m.className = `message ${kind}`;
  m.hidden = text === null;
}
function fail(err: unknown): void {
  message(describe(err));
}
/** Runs a UI action, showing any refusal as a readable message. */
function act(fn: () => Promise<void>): () => void {
  return () => {
    message(null);
    fn().catch(fail);
  };
}

// ---------- sign-in ----------

async function start(): Promise<void> {
  const health = (await (await fetch('/health', { credentials: 'omit' })).json()) as { needs_bootstrap?: boolean };
  show('bootstrap', health.needs_bootstrap === true);
  // A hosted server does not say whether it needs bootstrap (nor to whom): offer it, with the secret.
  const hosted = health.needs_bootstrap === undefined;
  show('setup', hosted);
  show('bootstrap-local-text', !hosted);
  show('bootstrap-hosted-text', hosted);
  show('bootstrap-secret-label', hosted);
  input('bootstrap-secret').required = hosted;
  if (api.session !== null) {
    try {
      await enter();
      return;
    } catch (err) {
      fail(err);
      api.session = null;
      saveSession(null);
    }
  }
  show('signin', true);
}

async function enter(): Promise<void> {
  me = await api.json<WhoAmI>('/auth/whoami');
  const who = $('who');
  who.textContent = me.on_behalf_of === undefined ? me.user : `${me.user} → ${me.on_behalf_of}`;
  if (me.workspace !== undefined) who.textContent += ` · workspace ${me.workspace.name}`;
  if (me.is_admin) who.textContent += ' (admin)';
  show('admin-open', me.is_admin && me.workspace === undefined);
  who.title = [
    `${me.is_agent ? 'agent' : 'user'} ${me.user}`,
    me.on_behalf_of === undefined ? '' : `acting on behalf of ${me.on_behalf_of}`,
    me.workspace === undefined ? '' : `in workspace ${me.workspace.name} (${me.workspace.id}), which is / here`,
    `home ${homeDir()}`,
  ]
    .filter((x) => x !== '')
    .join('; ');
  show('signin', false);
  show('app', true);
  show('signout', true);
  show('drawer-toggle', true);
  await loadTree();
  live?.stop();
  live = new Live(api.session!, {
    onChange,
    onReset: () => void refreshAll(),
    onState: (on) => ($('live').className = on ? 'live on' : 'live'),
  });
  live.start();
}

function signIn(s: Session): void {
  api.session = s;
  saveSession(s);
  act(async () => {
    try {
      await enter();
    } catch (err) {
      api.session = null;
      saveSession(null);
      throw err;
    }
  })();
}

// ---------- tree ----------

async function loadTree(): Promise<void> {
  const tree = $('tree');
  tree.replaceChildren();
  const root = '/';
  tree.append(dirItem(root, root));
  expanded.add(root);
  // Open the way down to the home directory.
  const parts = homeDir()
    .split('/')
    .filter((x) => x !== '');
  let p = '';
  for (const part of parts) {
    p += `/${part}`;
    expanded.add(p);
  }
  await renderDir(root);
  selectPath(homeDir(), true);
}

function dirItem(path: string, label: string): HTMLLIElement {
  const li = el('li', 'dir');
  li.dataset.path = path;
  li.setAttribute('role', 'treeitem');
  const name = el('span', 'name', label);
  name.oncontextmenu = (e) => entryMenu(e, path, true);
  name.onclick = act(async () => {
    selectPath(path, true);
    if (expanded.has(path)) {
      expanded.delete(path);
      collapsedAt.set(path, ++collapses);
      li.querySelector(':scope > ul')?.remove();
      li.classList.remove('open');
    } else {
      expanded.add(path);
      await renderDir(path);
    }
  });
  li.append(name);
  markChanged(li);
  return li;
}

function fileItem(path: string, label: string): HTMLLIElement {
  const li = el('li', 'file');
  li.dataset.path = path;
  li.setAttribute('role', 'treeitem');
  const name = el('span', 'name', label);
  name.oncontextmenu = (e) => entryMenu(e, path, false);
  name.onclick = act(async () => {
    selectPath(path, false);
    await openFile(path);
    drawer(false);
  });
  li.append(name);
  markChanged(li);
  return li;
}

/**
 * Marks a tree entry changed recently by someone else (an agent, another user) with who and when,
 * kept current by a timer.
 */
function markChanged(li: HTMLLIElement): void {
  const ev = lastChange.get(li.dataset.path ?? '');
  const name = li.querySelector(':scope > .name');
  let mark = name?.querySelector<HTMLElement>('.changed') ?? null;
  if (ev === undefined || mine(ev) || Date.now() - ev.time > MARK_MS) {
    mark?.remove();
    return;
  }
  if (mark === null) {
    mark = el('span', 'changed');
    name?.append(mark);
  }
  mark.textContent = attribution(ev);
  mark.title = `changed by ${mark.textContent}`;
}

function itemFor(path: string): HTMLLIElement | null {
  for (const li of $('tree').querySelectorAll<HTMLLIElement>('li')) if (li.dataset.path === path) return li;
  return null;
}

/** (Re)loads a directory's listing into the tree, keeping expanded subdirectories expanded. */
async function renderDir(path: string): Promise<void> {
  const li = itemFor(path);
  // A folder collapsed since a redraw of it was asked for (a live event's, 50 ms later) stays collapsed.
  if (li === null || !expanded.has(path)) return;
  const asked = collapses;
  let entries: DirEntry[];
  let truncated = false;
  try {
    const r = await api.json<{ entries: DirEntry[]; truncated?: boolean }>(`${fsUrl(path)}?limit=1000`);
    entries = r.entries;
    truncated = r.truncated === true;
  } catch (err) {
    if (err instanceof ApiError && (err.code === 'ENOENT' || err.code === 'EACCES' || err.code === 'ENOTDIR')) {
      expanded.delete(path);
      li.querySelector(':scope > ul')?.remove();
      li.classList.remove('open');
      li.classList.toggle('denied', err.code === 'EACCES');
      if (err.code === 'EACCES') li.title = err.message;
      return;
    }
    throw err;
  }
  // Collapsed while its listing was on the way (a live event redraws it as the user clicks): it stays so.
  if ((collapsedAt.get(path) ?? 0) > asked) return;
  const ul = el('ul');
  ul.setAttribute('role', 'group');
  const subdirs: string[] = [];
  for (const e of entries) {
    const p = join(path, e.name);
    if (e.is_dir) {
      ul.append(dirItem(p, e.name));
      if (expanded.has(p)) subdirs.push(p);
    } else ul.append(fileItem(p, e.name));
  }
  if (truncated) ul.append(el('li', 'more', '… more entries not shown'));
  li.querySelector(':scope > ul')?.remove();
  li.append(ul);
  li.classList.add('open');
  if (selected !== null) markSelected();
  await Promise.all(subdirs.map((d) => renderDir(d)));
}

function selectPath(path: string, dir: boolean): void {
  selected = { path, dir };
  markSelected();
}
function markSelected(): void {
  for (const li of $('tree').querySelectorAll<HTMLLIElement>('li.selected')) li.classList.remove('selected');
  if (selected !== null) itemFor(selected.path)?.classList.add('selected');
}
function targetDir(): string {
  if (selected === null) return homeDir();
  return selected.dir ? selected.path : dirname(selected.path);
}

// ---------- editor ----------

let view: EditorView;
const md = new MarkdownIt({ html: false, linkify: true });

function text(): string {
  return view.state.doc.toString();
}
function dirty(): boolean {
  return open !== null && text() !== open.saved;
}
function updateState(): void {
  $('file-path').textContent = open?.path ?? '';
  $('file-state').textContent = open === null ? '' : dirty() ? 'modified' : 'saved';
  ($('save') as HTMLButtonElement).disabled = open === null;
  ($('file-history') as HTMLButtonElement).disabled = open === null;
  if (!$('preview').hidden) renderPreview();
}
function renderPreview(): void {
  $('preview').innerHTML = DOMPurify.sanitize(md.render(text()));
}
function setText(t: string): void {
  view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: t } });
}

async function openFile(path: string, line?: number): Promise<void> {
  const res = await api.raw(fsUrl(path));
  const t = await res.text();
  open = { path, etag: (res.headers.get('ETag') ?? '').replace(/"/g, ''), saved: t };
  setText(t);
  closeVersion();
  show('conflict', false);
  // Who changed it last, if that was someone else while this page watched.
  const ev = lastChange.get(path);
  fileNote(ev !== undefined && !mine(ev) && Date.now() - ev.time < MARK_MS ? { kind: 'last', ev } : null);
  updateState();
  if (line !== undefined) {
    const l = view.state.doc.line(Math.min(Math.max(1, line), view.state.doc.lines));
    view.dispatch({
      selection: { anchor: l.from, head: l.to },
      effects: EditorView.scrollIntoView(l.from, { y: 'center' }),
    });
    view.focus();
  }
}

/** The save in flight: a change event for the open file waits for it (it may be our own write). */
let saving: Promise<void> | null = null;

function save(): Promise<void> {
  saving ??= saveNow().finally(() => {
    saving = null;
  });
  return saving;
}

async function saveNow(): Promise<void> {
  if (open === null) return;
  const body = text();
  try {
    const res = await api.raw(fsUrl(open.path), {
      method: 'PUT',
      body,
      headers: { 'If-Match': `"${open.etag}"`, 'Content-Type': 'text/markdown; charset=utf-8' },
    });
    open.etag = (res.headers.get('ETag') ?? '').replace(/"/g, '');
    open.saved = body;
    show('conflict', false);
    message(`Saved ${open.path}`, 'info');
    updateState();
  } catch (err) {
    if (err instanceof ApiError && err.status === 412) {
      const ev = lastChange.get(open.path);
      $('conflict-text').textContent =
        `Not saved: ${open.path} was changed by ${ev === undefined ? 'someone else' : `${whoText(ev.by, ev.on_behalf_of)} ${ago(ev.time)}`} since you opened it. Your text is still here; copy what you need, then load their version.`;
      show('conflict', true);
      return;
    }
    throw err;
  }
}

// ---------- file operations ----------

async function newEntry(kind: 'file' | 'folder'): Promise<void> {
  const dir = targetDir();
  const name = await ask(`New ${kind} in ${dir}:`, '');
  if (!name) return;
  const p = name.startsWith('/') ? name : join(dir, name);
  if (kind === 'file') await api.raw(fsUrl(p), { method: 'PUT', body: '', headers: { 'If-None-Match': '*' } });
  else await api.raw(fsUrl(p), { method: 'PUT', headers: { 'X-Service-Type': 'directory', 'If-None-Match': '*' } });
  expanded.add(dirname(p));
  await renderDir(dirname(p));
  if (kind === 'file') {
    selectPath(p, false);
    await openFile(p);
  } else selectPath(p, true);
}

async function rename(): Promise<void> {
  if (selected === null) return;
  const src = selected.path;
  const dst = await ask(`Rename or move ${src} to:`, src);
  if (!dst || dst === src) return;
  const abs = dst.startsWith('/') ? dst : join(dirname(src), dst);
  await api.raw(`${fsUrl(src)}?op=move&into_dir=false&dst=${encodeURIComponent(abs)}`, { method: 'POST' });
  // The open file moves with it, also when a folder it is in moves.
  if (open !== null && (open.path === src || open.path.startsWith(`${src}/`)))
    open.path = abs + open.path.slice(src.length);
  updateState();
  selectPath(abs, selected.dir);
  await renderDir(dirname(src));
  if (dirname(abs) !== dirname(src)) await renderDir(dirname(abs));
}

async function remove(): Promise<void> {
  if (selected === null) return;
  const p = selected.path;
  if ((await ask(`Delete ${p}${selected.dir ? ' and everything in it' : ''}?`, null)) === null) return;
  await api.raw(`${fsUrl(p)}${selected.dir ? '?recursive=true' : ''}`, { method: 'DELETE' });
  if (open !== null && (open.path === p || open.path.startsWith(`${p}/`))) {
    open = null;
    setText('');
    updateState();
  }
  selectPath(dirname(p), true);
  await renderDir(dirname(p));
}

// ---------- properties: chmod, chown ----------

/** uid → user name and gid → group name, as far as this session may know them (admins see all). */
const userNames = new Map<number, string>();
const groupNames = new Map<number, string>();

async function loadNames(): Promise<void> {
  if (me === null) return;
  userNames.set(me.uid, me.user);
  if (!me.is_admin) return;
  const [{ users }, { groups }] = await Promise.all([
    api.json<{ users: UserRecord[] }>('/admin/users'),
    api.json<{ groups: GroupRecord[] }>('/admin/groups'),
  ]);
  for (const u of users) userNames.set(u.uid, u.name);
  for (const g of groups) groupNames.set(g.gid, g.name);
}

async function properties(): Promise<void> {
  if (selected === null) return;
  const path = selected.path;
  const st = await api.json<Stat>(`${fsUrl(path)}?stat=true`);
  await loadNames();
  const owner = userNames.get(st.uid) ?? String(st.uid);
  const group = groupNames.get(st.gid) ?? String(st.gid);
  $('props-path').textContent = path;
  $('props-info').textContent =
    `${st.kind}${st.kind === 'file' ? `, ${st.size} bytes` : ''}, modified ${new Date(st.modified * 1000).toLocaleString()}. The owner, wheel or root may change the mode; only root gives a file to another user; an owner may change its group to one of their own groups.`;
  input('props-mode').value = st.mode;
  input('props-owner').value = owner;
  input('props-group').value = group;
  show('props-error', false);
  const dlg = $('props') as HTMLDialogElement;
  dlg.showModal();
  const close = (): void => {
    $('props-form').onsubmit = null;
    dlg.close();
  };
  $('props-cancel').onclick = close;
  $('props-form').onsubmit = (e) => {
    e.preventDefault();
    void (async () => {
      try {
        const mode = input('props-mode').value.trim();
        const newOwner = input('props-owner').value.trim();
        const newGroup = input('props-group').value.trim();
        if (!/^[0-7]{3,4}$/.test(mode))
          throw new Error(`The mode must be 3 or 4 octal digits, such as 0644 (not '${mode}')`);
        if (mode.padStart(4, '0') !== st.mode)
          await api.json(pathUrl('/admin/chmod', path), { method: 'POST', body: { mode } });
        const change: { owner?: string; group?: string } = {};
        if (newOwner !== owner) change.owner = newOwner;
        if (newGroup !== group) change.group = newGroup;
        if (change.owner !== undefined || change.group !== undefined)
          await api.json(pathUrl('/admin/chown', path), { method: 'POST', body: change });
        close();
        message(`Properties of ${path} saved`, 'info');
        await renderDir(dirname(path));
      } catch (err) {
        $('props-error').textContent = describe(err);
        show('props-error', true);
      }
    })();
  };
}

// ---------- search, commit, history ----------

async function search(): Promise<void> {
  const pattern = input('search-input').value;
  const list = $('search-results');
  list.replaceChildren();
  if (pattern === '') return;
  const r = await api.json<{ results: { file: string; line_num: number; line: string }[]; truncated: boolean }>(
    `/search/grep?recursive=true&path=%2F&max_results=200&pattern=${encodeURIComponent(pattern)}`,
  );
  if (r.results.length === 0) list.append(el('li', 'empty', 'No matches'));
  for (const hit of r.results) {
    const li = el('li', 'hit');
    li.append(el('span', 'loc', `${hit.file}:${hit.line_num}`), el('span', 'line', hit.line));
    li.onclick = act(() => openFile(hit.file, hit.line_num));
    list.append(li);
  }
  if (r.truncated) list.append(el('li', 'more', 'More matches not shown; narrow the pattern'));
}

/** Opens the tree down to `path` and selects it (a directory is expanded too). */
async function reveal(path: string, dir: boolean): Promise<void> {
  let p = '';
  for (const part of dirname(path)
    .split('/')
    .filter((x) => x !== '')) {
    p += `/${part}`;
    if (!expanded.has(p)) {
      expanded.add(p);
      await renderDir(p);
    }
  }
  if (dir && !expanded.has(path)) {
    expanded.add(path);
    await renderDir(path);
  }
  selectPath(path, dir);
  itemFor(path)?.scrollIntoView({ block: 'nearest' });
}

async function findByName(): Promise<void> {
  const name = input('find-input').value.trim();
  const list = $('find-results');
  list.replaceChildren();
  if (name === '') return;
  type Found = { results: string[]; truncated?: boolean };
  const q = (type: 'f' | 'd'): Promise<Found> =>
    api.json<Found>(`/search/find?path=%2F&type=${type}&name=${encodeURIComponent(name)}`);
  const [files, dirs] = await Promise.all([q('f'), q('d')]);
  const all = [...files.results.map((p) => ({ p, dir: false })), ...dirs.results.map((p) => ({ p, dir: true }))].sort(
    (a, b) => (a.p < b.p ? -1 : a.p > b.p ? 1 : 0),
  );
  if (all.length === 0) list.append(el('li', 'empty', 'Nothing by that name'));
  for (const { p, dir } of all) {
    const li = el('li', 'hit');
    li.dataset.path = p;
    li.append(el('span', 'loc', dir ? `${p}/` : p));
    li.onclick = act(async () => {
      await reveal(p, dir);
      if (!dir) await openFile(p);
    });
    list.append(li);
  }
  if (files.truncated === true || dirs.truncated === true)
    list.append(el('li', 'more', 'More names not shown; narrow the pattern'));
}

async function loadStatus(): Promise<void> {
  const st = await api.json<{ text: string; clean?: boolean }>('/vcs/status?format=json');
  $('status').textContent = st.text.trim() === '' ? 'Nothing to commit' : st.text;
}

async function commit(): Promise<void> {
  const msg = input('commit-message').value.trim();
  if (msg === '') {
    message('Write a commit message first');
    return;
  }
  const r = await api.json<{ hash: string }>('/vcs/commit', { method: 'POST', body: { message: msg } });
  input('commit-message').value = '';
  message(`Committed ${r.hash.slice(0, 10)}`, 'info');
  await loadStatus();
}

// ---------- history: entry points (the panel itself is history.ts) ----------

/** Opens the History panel on one file's (or folder's) history. */
function historyOf(path: string, dir: boolean): void {
  setHistoryPath(path, dir);
  tab('log');
}

/**
 * After a restore of `path` (null: everything): the tree as it is now, the open file reloaded if the
 * restore touched it (its unsaved edits were saved first), and a restored file opened unless the
 * editor holds unsaved edits of another.
 */
async function restored(path: string | null, dir: boolean): Promise<void> {
  await refreshAll();
  const touched = open !== null && (path === null || open.path === path || (dir && open.path.startsWith(`${path}/`)));
  let target: string | null = null;
  if (touched) target = open!.path;
  else if (path !== null && !dir && !dirty()) target = path;
  if (target === null) return;
  try {
    if (target === path) await reveal(path, false);
    await openFile(target);
  } catch (err) {
    // Restored to a commit without it: the file is gone now.
    if (!(err instanceof ApiError && err.code === 'ENOENT')) throw err;
    if (open?.path === target) {
      open = null;
      setText('');
      updateState();
    }
  }
}

/** The tree's context menu: what can be done with an entry, its history included. */
function entryMenu(e: MouseEvent, path: string, dir: boolean): void {
  e.preventDefault();
  selectPath(path, dir);
  const menu = $('entry-menu');
  const items: [string, string, () => Promise<void> | void][] = [
    ['history', 'History', () => historyOf(path, dir)],
    ['rename', 'Rename or move…', rename],
    ['delete', 'Delete…', remove],
    ['properties', 'Properties…', properties],
  ];
  if (!dir) items.unshift(['open', 'Open', () => openFile(path)]);
  menu.replaceChildren(
    ...items.map(([id, label, run]) => {
      const b = el('button', undefined, label);
      b.type = 'button';
      b.dataset.act = id;
      b.setAttribute('role', 'menuitem');
      b.onclick = act(async () => {
        closeMenu();
        await run();
      });
      return b;
    }),
  );
  menu.hidden = false;
  // CSSOM (not a style attribute), which the Content-Security-Policy allows.
  const { innerWidth: w, innerHeight: h } = window;
  const r = menu.getBoundingClientRect();
  menu.style.left = `${Math.max(0, Math.min(e.clientX, w - r.width - 4))}px`;
  menu.style.top = `${Math.max(0, Math.min(e.clientY, h - r.height - 4))}px`;
  menu.querySelector('button')?.focus();
}
function closeMenu(): void {
  $('entry-menu').hidden = true;
}

// ---------- live ----------

const pendingDirs = new Set<string>();
let flushTimer: number | undefined;

function onChange(ev: FeedEvent): void {
  const act = el('li', 'event');
  act.dataset.time = String(ev.time);
  const who = whoText(ev.by, ev.on_behalf_of);
  act.append(
    el('span', 'by', who),
    el('span', 'paths', ev.paths.length === 0 ? '(access changed)' : ev.paths.join(', ')),
    el('span', 'when', ago(ev.time)),
  );
  const list = $('activity');
  list.prepend(act);
  while (list.children.length > 200) list.lastElementChild?.remove();
  if (ev.paths.length === 0) {
    void refreshAll();
    return;
  }
  for (const p of ev.paths) {
    lastChange.set(p, ev);
    const li = itemFor(p);
    if (li !== null) markChanged(li);
    if (expanded.has(dirname(p))) pendingDirs.add(dirname(p));
    if (expanded.has(p)) pendingDirs.add(p);
    if (open !== null && (open.path === p || open.path.startsWith(`${p}/`))) void openChanged(ev);
  }
  flushTimer ??= window.setTimeout(() => {
    flushTimer = undefined;
    const dirs = [...pendingDirs];
    pendingDirs.clear();
    for (const d of dirs) renderDir(d).catch(fail);
  }, 50);
}

/** What the note above the editor says about the open file, kept current by a timer. */
type FileNote = { kind: 'editing' | 'updated' | 'deleted' | 'last'; ev: FeedEvent };
let note: FileNote | null = null;

function fileNote(n: FileNote | null): void {
  note = n;
  const box = $('file-note');
  box.hidden = n === null;
  if (n === null) {
    box.textContent = '';
    return;
  }
  const a = attribution(n.ev);
  box.textContent =
    n.kind === 'editing'
      ? `Changed by ${a}, while you were editing; saving will report a conflict.`
      : n.kind === 'updated'
        ? `Updated by ${a}`
        : n.kind === 'deleted'
          ? `Deleted or moved by ${a}; your text is kept until you close it.`
          : `Last changed by ${a}`;
}

/** Whether a change was made with the identity this page signed in with. */
function mine(ev: FeedEvent): boolean {
  return me !== null && ev.by === me.user && ev.on_behalf_of === me.on_behalf_of;
}

/** The open file changed elsewhere: reload it if there are no unsaved edits, else say so. */
async function openChanged(ev: FeedEvent): Promise<void> {
  if (saving !== null) await saving.catch(() => undefined);
  if (open === null) return;
  // Our own save (or a change already loaded) leaves the etag we hold: nothing to report.
  try {
    const st = await api.json<{ etag?: string }>(`${fsUrl(open.path)}?stat=true`);
    if (st.etag === open.etag) return;
  } catch {
    // gone or unreadable: reported below
  }
  if (open === null) return;
  if (dirty()) {
    fileNote({ kind: 'editing', ev });
    return;
  }
  const path = open.path;
  try {
    const res = await api.raw(fsUrl(path));
    const t = await res.text();
    if (open?.path !== path || dirty()) return;
    open.etag = (res.headers.get('ETag') ?? '').replace(/"/g, '');
    open.saved = t;
    if (t !== text()) setText(t);
    fileNote({ kind: 'updated', ev });
    updateState();
  } catch (err) {
    if (err instanceof ApiError && err.code === 'ENOENT') {
      fileNote({ kind: 'deleted', ev });
      return;
    }
    throw err;
  }
}

async function refreshAll(): Promise<void> {
  for (const d of [...expanded].sort((a, b) => a.length - b.length)) if (itemFor(d) !== null) await renderDir(d);
}

// ---------- keyboard, help, narrow screens ----------

/**
 * The page's shortcuts, one declaration for the editor's keymap, the page's key handler and the
 * help overlay. `key` is in CodeMirror's notation (`Mod` is Ctrl, or Cmd on a Mac); `plain` is a
 * key that also works while no text field has the focus.
 */
interface Shortcut {
  key: string;
  plain?: string;
  what: string;
  run(): void;
}
const SHORTCUTS: Shortcut[] = [
  { key: 'Mod-s', what: 'Save the open file', run: () => act(save)() },
  {
    key: 'Mod-k',
    what: 'Search file contents',
    run: () => {
      tab('search');
      input('search-input').focus();
    },
  },
  {
    key: 'Mod-Shift-f',
    what: 'Find files and folders by name',
    run: () => {
      tab('find');
      input('find-input').focus();
    },
  },
  {
    key: 'Mod-Enter',
    what: 'Commit: shows the pending changes; with a message written, commits',
    run: () => {
      const written = input('commit-message').value.trim() !== '';
      tab('commit');
      if (written) act(commit)();
      else input('commit-message').focus();
    },
  },
  {
    key: 'Mod-Shift-h',
    what: 'History of the open file (or of the selected entry)',
    run: () => {
      if (open !== null) historyOf(open.path, false);
      else if (selected !== null) historyOf(selected.path, selected.dir);
    },
  },
  { key: 'Mod-/', plain: '?', what: 'Show these shortcuts', run: () => openHelp() },
];
/** The editor's own keys, listed in the help. */
const EDITOR_KEYS: [string, string][] = [
  ['Mod-f', 'Find and replace in the open file'],
  ['Mod-z', 'Undo'],
  ['Mod-Shift-z', 'Redo'],
  ['Escape', 'Close a dialog or the file drawer'],
];
const MAC = /Mac|iPhone|iPad/.test(navigator.platform);

/** Whether a key event is a shortcut in CodeMirror's notation (`Mod-Shift-f`). */
function matches(key: string, e: KeyboardEvent): boolean {
  const parts = key.split('-');
  const name = parts.pop()!;
  const mod = parts.includes('Mod');
  return (
    (e.ctrlKey || e.metaKey) === mod &&
    e.shiftKey === parts.includes('Shift') &&
    !e.altKey &&
    e.key.toLowerCase() === name.toLowerCase()
  );
}

function keyLabel(key: string): string {
  return key
    .split('-')
    .map((p) => (p === 'Mod' ? (MAC ? '⌘' : 'Ctrl') : p.length === 1 ? p.toUpperCase() : p))
    .join('+');
}

function openHelp(): void {
  const table = $('help-keys');
  table.replaceChildren();
  const row = (keys: string[], what: string): void => {
    const tr = el('tr');
    const k = el('td');
    keys.forEach((x, i) => {
      if (i > 0) k.append(' or ');
      k.append(el('kbd', undefined, x));
    });
    tr.append(k, el('td', undefined, what));
    table.append(tr);
  };
  for (const s of SHORTCUTS) row(s.plain === undefined ? [keyLabel(s.key)] : [keyLabel(s.key), s.plain], s.what);
  for (const [k, what] of EDITOR_KEYS) row([keyLabel(k)], what);
  const dlg = $('help') as HTMLDialogElement;
  if (!dlg.open) dlg.showModal();
}

/** On a narrow screen the tree is a drawer over the editor. */
function drawer(open: boolean): void {
  $('app').classList.toggle('drawer-open', open);
  $('drawer-toggle').setAttribute('aria-expanded', String(open));
}

// ---------- wiring ----------

function tab(name: string): void {
  for (const b of document.querySelectorAll<HTMLButtonElement>('.tab'))
    b.classList.toggle('active', b.dataset.tab === name);
  for (const t of ['search', 'find', 'commit', 'log', 'activity']) show(`tab-${t}`, t === name);
  // Diffs need room: the history panel takes half the width.
  $('app').classList.toggle('wide-right', name === 'log');
  if (name === 'commit') act(loadStatus)();
  if (name === 'log') act(loadHistory)();
}

function wire(): void {
  // In a shadow root, CodeMirror's styles go in constructable style sheets; in the document they
  // would be a <style> element, which the page's Content-Security-Policy (style-src 'self') refuses.
  const shadow = $('editor').attachShadow({ mode: 'open' });
  const sheet = new CSSStyleSheet();
  sheet.replaceSync(':host { display: block; } .cm-editor { height: 100%; } .cm-editor.cm-focused { outline: none; }');
  shadow.adoptedStyleSheets = [sheet];
  view = new EditorView({
    parent: shadow,
    root: shadow,
    extensions: [
      keymap.of([
        ...SHORTCUTS.map((k) => ({ key: k.key, preventDefault: true, run: () => (k.run(), true) })),
        ...defaultKeymap,
        ...historyKeymap,
        ...searchKeymap,
      ]),
      lineNumbers(),
      history(),
      drawSelection(),
      highlightActiveLine(),
      highlightSelectionMatches(),
      syntaxHighlighting(defaultHighlightStyle, { fallback: true }),
      markdown(),
      EditorView.lineWrapping,
      EditorView.updateListener.of((u) => {
        if (u.docChanged) updateState();
      }),
    ],
  });
  $('bootstrap-form').onsubmit = (e) => {
    e.preventDefault();
    act(async () => {
      const r = await new Api(null).json<{ username: string; token: string }>('/auth/bootstrap', {
        method: 'POST',
        body: {
          username: input('bootstrap-name').value.trim(),
          ...(input('bootstrap-secret').required ? { secret: input('bootstrap-secret').value.trim() } : {}),
        },
      });
      input('bootstrap-secret').value = '';
      $('bootstrap-user').textContent = r.username;
      $('bootstrap-token').textContent = r.token;
      show('bootstrap-form', false);
      show('bootstrap-result', true);
    })();
  };
  $('setup-open').onclick = () => {
    show('setup', false);
    show('bootstrap', true);
    input('bootstrap-name').focus();
  };
  $('bootstrap-copy').onclick = act(async () => message(await copyText($('bootstrap-token')), 'info'));
  $('bootstrap-continue').onclick = () => {
    const token = $('bootstrap-token').textContent ?? '';
    $('bootstrap-token').textContent = '';
    show('bootstrap', false);
    signIn({ authorization: `Bearer ${token}` });
  };
  $('signin-form').onsubmit = (e) => {
    e.preventDefault();
    const token = input('signin-token').value.trim();
    const user = input('signin-user').value.trim();
    const obo = input('signin-obo').value.trim();
    const workspace = input('signin-workspace').value.trim();
    if (token === '' && user === '') {
      message('Give a token or a user name');
      return;
    }
    if (workspace !== '' && token === '') {
      message('A workspace needs its secret as the token');
      return;
    }
    input('signin-token').value = '';
    signIn({
      authorization: token !== '' ? `Bearer ${token}` : `User ${user}`,
      ...(obo === '' ? {} : { onBehalfOf: obo }),
      ...(workspace === '' ? {} : { workspace }),
    });
  };
  $('signout').onclick = () => {
    live?.stop();
    saveSession(null);
    location.reload();
  };
  $('new-file').onclick = act(() => newEntry('file'));
  $('new-folder').onclick = act(() => newEntry('folder'));
  $('rename').onclick = act(rename);
  $('delete').onclick = act(remove);
  $('properties').onclick = act(properties);
  $('admin-open').onclick = act(() => openAdmin(api));
  wireAdmin(api);
  $('save').onclick = act(save);
  $('file-history').onclick = () => {
    if (open !== null) historyOf(open.path, false);
  };
  wireHistory({
    api,
    md,
    message,
    act,
    editing: () => (open === null ? null : { path: open.path, unsaved: dirty() }),
    save: async () => {
      await save();
      return !dirty();
    },
    restored,
  });
  document.addEventListener('click', (e) => {
    if (!$('entry-menu').contains(e.target as Node)) closeMenu();
  });
  window.addEventListener('blur', closeMenu);
  $('toggle-preview').onclick = () => {
    const p = $('preview');
    p.hidden = !p.hidden;
    $('panes').classList.toggle('split', !p.hidden);
    if (!p.hidden) renderPreview();
  };
  $('conflict-reload').onclick = act(async () => {
    if (open !== null) await openFile(open.path);
  });
  $('search-form').onsubmit = (e) => {
    e.preventDefault();
    act(search)();
  };
  $('find-form').onsubmit = (e) => {
    e.preventDefault();
    act(findByName)();
  };
  $('commit-form').onsubmit = (e) => {
    e.preventDefault();
    act(commit)();
  };
  for (const b of document.querySelectorAll<HTMLButtonElement>('.tab'))
    b.onclick = () => tab(b.dataset.tab ?? 'search');
  $('message').onclick = () => message(null);
  document.addEventListener('keydown', (e) => {
    // The editor's keymap has handled it already (and prevented the default).
    if (e.defaultPrevented || $('app').hidden) return;
    const typing =
      e.target instanceof HTMLInputElement ||
      e.target instanceof HTMLTextAreaElement ||
      e.target instanceof HTMLSelectElement ||
      (e.target instanceof HTMLElement && e.target.id === 'editor');
    const s = SHORTCUTS.find((k) => matches(k.key, e) || (!typing && k.plain !== undefined && e.key === k.plain));
    if (s !== undefined) {
      e.preventDefault();
      s.run();
    } else if (e.key === 'Escape') {
      closeMenu();
      drawer(false);
    }
  });
  $('help-open').onclick = openHelp;
  $('help-close').onclick = () => ($('help') as HTMLDialogElement).close();
  $('drawer-toggle').onclick = () => drawer(!$('app').classList.contains('drawer-open'));
  window.setInterval(() => {
    for (const li of document.querySelectorAll<HTMLElement>('#activity li')) {
      const w = li.querySelector('.when');
      if (w !== null) w.textContent = ago(Number(li.dataset.time));
    }
    for (const li of document.querySelectorAll<HTMLLIElement>('#tree li'))
      if (li.querySelector(':scope > .name > .changed') !== null) markChanged(li);
    if (note !== null) fileNote(note);
  }, 5000);
  tab('search');
}

wire();
start().catch(fail);
