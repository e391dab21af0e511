/**
 * The admin panel, offered to root and wheel (the daemon refuses everyone else anyway): users and
 * agents (create, issue or regenerate a token, optionally expiring, delete), delegation grants
 * (grant, revoke), groups and their members, workspaces and their secrets. A new token or secret is shown once, with a copy button, until "Done" hides it.
 */
import type { Api, DelegationRecord, GroupRecord, UserRecord, WorkspaceRecord, WorkspaceTokenRecord } from './api.js';
import { $, ask, button, copyText, describe, el, input, show } from './dom.js';

function fail(err: unknown): void {
  $('admin-error').textContent = describe(err);
  show('admin-error', true);
}

/** Runs a panel action; a refusal is shown in the panel as a readable message. */
function run(fn: () => Promise<void>): () => void {
  return () => {
    show('admin-error', false);
    fn().catch(fail);
  };
}

function reveal(label: string, secret: string): void {
  $('admin-secret-label').textContent = label;
  $('admin-secret-value').textContent = secret;
  show('admin-secret', true);
}

function hideSecret(): void {
  $('admin-secret-value').textContent = '';
  show('admin-secret', false);
}

function row(cells: (string | Node)[], head = false): HTMLTableRowElement {
  const tr = el('tr');
  for (const c of cells) {
    const td = el(head ? 'th' : 'td');
    td.append(c);
    tr.append(td);
  }
  return tr;
}

function actions(...buttons: HTMLButtonElement[]): HTMLTableCellElement {
  const td = el('td', 'actions');
  td.append(...buttons);
  return td;
}

function chip(text: string, remove: () => void, title: string): HTMLSpanElement {
  const c = el('span', 'chip', text);
  c.append(button('✕', remove, title));
  return c;
}

async function refresh(api: Api): Promise<void> {
  const [{ users }, { groups }, { workspaces }, { delegations }] = await Promise.all([
    api.json<{ users: UserRecord[] }>('/admin/users'),
    api.json<{ groups: GroupRecord[] }>('/admin/groups'),
    api.json<{ workspaces: WorkspaceRecord[] }>('/workspaces'),
    api.json<{ delegations: DelegationRecord[] }>('/auth/delegations'),
  ]);
  const secrets = await Promise.all(
    workspaces.map((w) =>
      api.json<{ tokens: WorkspaceTokenRecord[] }>(`/workspaces/${encodeURIComponent(w.id)}/tokens`),
    ),
  );
  const groupName = new Map(groups.map((g) => [g.gid, g.name]));

  const ut = $('admin-users');
  ut.replaceChildren(row(['Name', 'Kind', 'uid', 'Groups', 'Token', ''], true));
  for (const u of users) {
    const tr = row([
      u.name,
      `${u.is_agent ? 'agent' : 'user'}${u.is_admin ? ' (admin)' : ''}`,
      String(u.uid),
      u.groups.map((g) => groupName.get(g) ?? String(g)).join(', '),
      !u.has_token
        ? '—'
        : u.token_expires === undefined
          ? 'issued'
          : `${u.token_expires * 1000 <= Date.now() ? 'expired' : 'expires'} ${new Date(u.token_expires * 1000).toLocaleString()}`,
    ]);
    tr.dataset.name = u.name;
    tr.append(
      actions(
        button(
          u.has_token ? 'Regenerate token' : 'Issue token',
          run(async () => {
            if (
              u.has_token &&
              (await ask(`Regenerate the token of ${u.name}? The old one stops working.`, null)) === null
            )
              return;
            const secs = input('admin-token-expires').value.trim();
            const r = await api.json<{ name: string; token: string }>(
              `/admin/users/${encodeURIComponent(u.name)}/tokens`,
              { method: 'POST', body: secs === '' ? {} : { expires_in: Number(secs) } },
            );
            reveal(`The token of ${r.name}: copy it now, it is not shown again.`, r.token);
            await refresh(api);
          }),
        ),
        button(
          'Delete',
          run(async () => {
            if ((await ask(`Delete ${u.is_agent ? 'agent' : 'user'} ${u.name}?`, null)) === null) return;
            await api.json(`/admin/users/${encodeURIComponent(u.name)}`, { method: 'DELETE' });
            await refresh(api);
          }),
        ),
      ),
    );
    ut.append(tr);
  }

  const dt = $('admin-delegations');
  dt.replaceChildren(row(['User', 'Agent acting for them', 'Since', 'In their group', ''], true));
  for (const g of delegations) {
    const tr = row([
      g.user,
      g.agent,
      new Date(g.created * 1000).toLocaleString(),
      g.shares_group === true ? 'yes' : '',
    ]);
    tr.dataset.name = `${g.user}/${g.agent}`;
    tr.append(
      actions(
        button(
          'Revoke',
          run(async () => {
            if ((await ask(`Stop ${g.agent} acting on behalf of ${g.user}?`, null)) === null) return;
            await api.json(`/auth/delegations/${encodeURIComponent(g.agent)}?user=${encodeURIComponent(g.user)}`, {
              method: 'DELETE',
            });
            await refresh(api);
          }),
        ),
      ),
    );
    dt.append(tr);
  }

  const gt = $('admin-groups');
  gt.replaceChildren(row(['Name', 'gid', 'Members'], true));
  for (const g of groups) {
    const members = el('span');
    for (const m of g.members)
      members.append(
        chip(
          m,
          run(async () => {
            await api.json(`/admin/users/${encodeURIComponent(m)}/groups/${encodeURIComponent(g.name)}`, {
              method: 'DELETE',
            });
            await refresh(api);
          }),
          `Remove ${m} from ${g.name}`,
        ),
      );
    const tr = row([g.name, String(g.gid), members]);
    tr.dataset.name = g.name;
    gt.append(tr);
  }

  const wt = $('admin-workspaces');
  wt.replaceChildren(row(['Name', 'Root', 'Owner', 'Id', 'Secrets'], true));
  const sel = $('admin-wstoken-ws') as HTMLSelectElement;
  const chosen = sel.value;
  sel.replaceChildren();
  workspaces.forEach((w, i) => {
    const list = el('span');
    for (const s of secrets[i]!.tokens)
      list.append(
        chip(
          `${s.name} (${s.agent})`,
          run(async () => {
            if ((await ask(`Revoke the secret ${s.name} of workspace ${w.name}?`, null)) === null) return;
            await api.json(`/workspaces/${encodeURIComponent(w.id)}/tokens/${encodeURIComponent(s.id)}`, {
              method: 'DELETE',
            });
            await refresh(api);
          }),
          `Revoke ${s.name}`,
        ),
      );
    const tr = row([w.name, w.root_path, w.owner, el('code', undefined, w.id), list]);
    tr.dataset.name = w.name;
    wt.append(tr);
    const o = el('option', undefined, w.name);
    o.value = w.id;
    sel.append(o);
  });
  if (workspaces.some((w) => w.id === chosen)) sel.value = chosen;
}

export async function openAdmin(api: Api): Promise<void> {
  hideSecret();
  show('admin-error', false);
  await refresh(api);
  const dlg = $('admin') as HTMLDialogElement;
  if (!dlg.open) dlg.showModal();
}

/** Wires the panel's forms and buttons once. */
export function wireAdmin(api: Api): void {
  const dlg = $('admin') as HTMLDialogElement;
  const close = (): void => {
    hideSecret();
    dlg.close();
  };
  $('admin-close').onclick = close;
  dlg.oncancel = (e) => {
    e.preventDefault();
    close();
  };
  $('admin-secret-copy').onclick = () =>
    void copyText($('admin-secret-value')).then((m) => ($('admin-secret-copy').title = m));
  $('admin-secret-done').onclick = hideSecret;
  const form = (id: string, fn: () => Promise<void>): void => {
    $(id).onsubmit = (e) => {
      e.preventDefault();
      run(fn)();
    };
  };
  form('admin-user-form', async () => {
    const name = input('admin-user-name').value.trim();
    const r = await api.json<UserRecord & { token?: string }>('/admin/users', {
      method: 'POST',
      body: { name, is_agent: input('admin-user-agent').checked },
    });
    input('admin-user-name').value = '';
    input('admin-user-agent').checked = false;
    if (r.token !== undefined) reveal(`The token of agent ${r.name}: copy it now, it is not shown again.`, r.token);
    await refresh(api);
  });
  form('admin-deleg-form', async () => {
    await api.json('/auth/delegations', {
      method: 'POST',
      body: {
        user: input('admin-deleg-user').value.trim(),
        agent: input('admin-deleg-agent').value.trim(),
        share: input('admin-deleg-share').checked,
      },
    });
    input('admin-deleg-user').value = '';
    input('admin-deleg-agent').value = '';
    input('admin-deleg-share').checked = false;
    await refresh(api);
  });
  form('admin-group-form', async () => {
    await api.json('/admin/groups', { method: 'POST', body: { name: input('admin-group-name').value.trim() } });
    input('admin-group-name').value = '';
    await refresh(api);
  });
  form('admin-member-form', async () => {
    await api.json(
      `/admin/users/${encodeURIComponent(input('admin-member-user').value.trim())}/groups/${encodeURIComponent(input('admin-member-group').value.trim())}`,
      { method: 'POST' },
    );
    input('admin-member-user').value = '';
    await refresh(api);
  });
  form('admin-ws-form', async () => {
    await api.json('/workspaces', {
      method: 'POST',
      body: { name: input('admin-ws-name').value.trim(), root_path: input('admin-ws-root').value.trim() },
    });
    input('admin-ws-name').value = '';
    input('admin-ws-root').value = '';
    await refresh(api);
  });
  form('admin-wstoken-form', async () => {
    const id = ($('admin-wstoken-ws') as HTMLSelectElement).value;
    if (id === '') throw new Error('Create a workspace first');
    const agentToken = input('admin-wstoken-agent');
    const r = await api.json<{ workspace_id: string; name: string; secret: string }>(
      `/workspaces/${encodeURIComponent(id)}/tokens`,
      {
        method: 'POST',
        body: { name: input('admin-wstoken-name').value.trim(), agent_token: agentToken.value.trim() },
      },
    );
    agentToken.value = '';
    input('admin-wstoken-name').value = '';
    reveal(
      `The secret ${r.name} for workspace ${r.workspace_id}: sign in with it and that workspace id. Copy it now, it is not shown again.`,
      r.secret,
    );
    await refresh(api);
  });
}
