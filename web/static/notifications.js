// Notifications: search a user's notifications by delivery status, with
// each delivery's timeline and, beside them, the user's workflow runs
// (?id= opens one notification's timeline); dead letters, replayed one at
// a time or many.

import {h, mount, problemBox, fmtTime, fmtNum, badge} from './dom.js';
import {api, get, enc} from './api.js';
import {runsPanel} from './workflows.js';

const STATUSES = ['queued', 'sending', 'sent', 'delivered', 'failed', 'expired', 'dead', 'suppressed', 'canceled'];

export async function render(main, ctx) {
  const params = new URLSearchParams(location.hash.split('?')[1] || '');
  const user = h('input', {name: 'user', id: 'search-user', required: true, value: params.get('user') || '', placeholder: 'u1', size: 18});
  const status = h('select', {name: 'status', id: 'search-status'},
    h('option', {value: ''}, 'any status'), STATUSES.map(s => h('option', {value: s, selected: params.get('status') === s}, s)));
  const results = h('div', {id: 'notification-results'});
  const byID = h('input', {name: 'id', placeholder: 'notification id', size: 30, value: params.get('id') || ''});
  const open = async id => {
    try { const n = await get('/v1/notifications/' + enc(id)); mount(results, table([n])); expand(results.querySelector('tbody tr'), n); }
    catch (err) { mount(results, problemBox(err)); }
  };
  const runs = params.get('user') ? h('section', {class: 'card', id: 'user-runs', 'aria-label': 'Workflow runs'}) : null;
  mount(main, h('h1', {}, 'Notifications'),
    h('div', {class: 'card'},
      h('form', {class: 'row', id: 'search', onsubmit: e => {
        e.preventDefault();
        location.hash = `#/notifications?user=${enc(user.value.trim())}${status.value ? '&status=' + enc(status.value) : ''}`;
      }}, h('label', {}, 'user id', user), h('label', {}, 'delivery status', status), h('button', {type: 'submit'}, 'Search')),
      h('form', {class: 'row', onsubmit: e => { e.preventDefault(); open(byID.value.trim()); }},
        h('label', {}, 'or open one by id', byID), h('button', {type: 'submit', class: 'secondary'}, 'Open'))),
    h('div', {class: runs ? 'with-side' : null}, h('div', {class: 'card'}, results), runs));
  if (runs) runsPanel(runs, params.get('user'), ctx);
  if (params.get('id')) return open(params.get('id'));
  if (!params.get('user')) {
    mount(results, h('p', {class: 'muted'}, 'Search for a user\'s notifications of the last 90 days, newest first.'));
    return;
  }
  let cursor = '';
  const shown = [];
  const want = params.get('status');
  const more = async () => {
    try {
      // The API pages by time; the status filter applies to the pages read
      // so far, and "Load more" reads further back.
      const page = await get(`/v1/users/${enc(params.get('user'))}/notifications?limit=100${cursor ? '&cursor=' + enc(cursor) : ''}`);
      cursor = page.next_cursor;
      shown.push(...page.items.filter(n => !want || n.deliveries.some(d => d.status === want)));
      mount(results, shown.length ? table(shown) : h('p', {class: 'muted'}, 'No notification matches.'),
        cursor ? h('p', {}, h('button', {class: 'secondary', onclick: more}, 'Load more')) : null);
    } catch (err) { mount(results, problemBox(err)); }
  };
  await more();
}

function table(items) {
  const body = h('tbody');
  for (const n of items) {
    const row = h('tr', {},
      h('td', {}, fmtTime(n.created_at)), h('td', {}, h('code', {}, n.id)), h('td', {}, n.type), h('td', {}, n.category),
      h('td', {}, n.deliveries.map(d => [badge(`${d.channel}: ${d.status}`), ' '])),
      h('td', {}, h('button', {class: 'secondary', onclick: () => expand(row, n)}, 'Timeline')));
    body.appendChild(row);
  }
  return h('table', {id: 'notifications'}, h('thead', {}, h('tr', {}, ['created', 'id', 'type', 'category', 'deliveries', ''].map(c => h('th', {}, c)))), body);
}

// expand shows, under row, each delivery's timeline: accepted, the attempts
// the outbox recorded, the latest outcome, the next attempt if one is due.
async function expand(row, n) {
  if (row.nextSibling && row.nextSibling.classList && row.nextSibling.classList.contains('expand')) {
    row.nextSibling.remove();
    return;
  }
  const cell = h('td', {colspan: 6}, h('p', {class: 'muted'}, 'Loading…'));
  row.after(h('tr', {class: 'expand'}, cell));
  let outbox = [];
  try { outbox = (await get('/v1/outbox?notification_id=' + enc(n.id) + '&limit=200')).items; } catch { /* no outbox, or no scope */ }
  // Digests are on the notification itself, not on history pages.
  // So are an email's first click and open (clicked_at, opened_at).
  let digests = n.digests || [];
  let full = {};
  try {
    const rec = await get('/v1/notifications/' + enc(n.id));
    digests = rec.digests || [];
    for (const d of rec.deliveries || []) full[d.channel] = d;
  } catch { /* shown without them */ }
  mount(cell, digests.map(g => digestBox(n, g)), h('div', {class: 'grid'}, n.deliveries.map(d => {
    const events = [{at: n.created_at, text: 'accepted', cls: ''}];
    // The outbox numbers attempts from 1 (the provider's Message.Attempt).
    for (const o of outbox.filter(o => o.channel === d.channel).sort((a, b) => a.attempt - b.attempt)) {
      events.push({at: o.created_at, text: `attempt ${o.attempt}: handed to the outbox for ${o.to || 'the user'}`, cls: 'ok'});
    }
    const final = ['failed', 'dead', 'expired'].includes(d.status) ? 'bad' : ['sent', 'delivered'].includes(d.status) ? 'ok' : '';
    // A suppressed delivery was never attempted; its error is the reason.
    // A canceled one was stopped by a DELETE before any worker took it.
    const after = d.attempts ? ` after ${d.attempts} attempt${d.attempts === 1 ? '' : 's'}` : '';
    events.push({at: d.updated_at, text: `${d.status}${after}${d.error ? ': ' + d.error : ''}`, cls: final});
    const f = full[d.channel] || {};
    if (f.opened_at) events.push({at: f.opened_at, text: 'opened by the reader (bot hits left out)', cls: 'ok'});
    if (f.clicked_at) events.push({at: f.clicked_at, text: 'a tracked link clicked by the reader (bot hits left out)', cls: 'ok'});
    if (d.next_attempt_at) events.push({at: d.next_attempt_at, text: (d.error || '').startsWith('escalation:') ? 'escalation due unless the user engages' : 'next attempt due', cls: ''});
    return h('div', {},
      h('strong', {}, d.channel), ' via ', h('code', {}, d.provider || '–'), ' ', badge(d.status),
      h('ul', {class: 'timeline'}, events.map(e => h('li', {class: e.cls}, h('span', {class: 'muted'}, fmtTime(e.at)), ' ', e.text))));
  })), cancelRow(row, n));
}

// cancelRow offers to cancel n while some delivery is still queued: the
// answer shows per delivery whether it was canceled or already on its way.
function cancelRow(row, n) {
  if (!n.deliveries.some(d => d.status === 'queued')) return null;
  const out = h('span', {class: 'muted'});
  const btn = h('button', {class: 'secondary cancel', onclick: async () => {
    btn.disabled = true;
    try {
      const r = await api('DELETE', '/v1/notifications/' + enc(n.id));
      n.deliveries = r.deliveries;
      mount(row.children[4], n.deliveries.map(d => [badge(`${d.channel}: ${d.status}`), ' ']));
      row.nextSibling.remove();
      await expand(row, n);
      row.nextSibling.querySelector('td').prepend(h('p', {class: 'cancel-outcome'}, r.outcome.replace('_', ' ') + ': ' +
        r.deliveries.map(d => `${d.channel} ${d.status}`).join(', ')));
    } catch (err) { btn.disabled = false; mount(out, problemBox(err)); }
  }}, 'Cancel unsent deliveries');
  return h('p', {class: 'row'}, btn, ' ', out);
}

// digestBox shows a digest on a notification's timeline: the events a
// digest message gathered, or the digest an event went into.
function digestBox(n, g) {
  const message = g.notification_id === n.id;
  const state = g.notification_id ? (message ? 'sent as this message' : ['sent as ', h('code', {}, g.notification_id)])
    : g.closed ? 'closed, sending' : `open until ${fmtTime(g.window_end)}`;
  return h('div', {class: 'digest'},
    h('p', {}, h('strong', {}, message ? `Digest of ${fmtNum(g.count)} event${g.count === 1 ? '' : 's'}` : 'Gathered into a digest'),
      ' on ', g.channel, ' (', h('code', {}, g.id), '): ', state),
    message ? h('ul', {class: 'timeline'}, g.items.map(it => h('li', {}, h('span', {class: 'muted'}, fmtTime(it.at)), ' ', h('code', {}, it.notification_id)))) : null);
}

export async function renderDeadLetters(main) {
  const list = h('div');
  const out = h('div', {id: 'replay-result'});
  mount(main, h('h1', {}, 'Dead letters'),
    h('p', {class: 'muted'}, 'Critical and orders deliveries that failed for good or ran out of attempts. Replaying sends the delivery again.'),
    out, h('div', {class: 'card'}, list));
  let cursor = '';
  const items = [];
  const selected = new Set();
  const replay = async (ids) => {
    const done = [], failed = [];
    for (const id of ids) {
      try { await api('POST', `/v1/dead-letters/${enc(id)}/replay`); done.push(id); selected.delete(id); }
      catch (err) { failed.push([id, err]); }
    }
    for (const id of done) {
      const item = items.find(i => i.id === id);
      if (item) item.replayed_at = new Date().toISOString();
    }
    mount(out,
      done.length ? h('div', {class: 'success'}, `Replayed ${done.length} dead letter${done.length === 1 ? '' : 's'}.`) : null,
      failed.map(([id, err]) => [h('p', {}, 'Replay of ', h('code', {}, id), ' failed:'), problemBox(err)]));
    draw();
  };
  const draw = () => {
    if (!items.length) { mount(list, h('p', {class: 'muted'}, 'No dead letters.')); return; }
    const all = h('input', {type: 'checkbox', title: 'select all', onchange: e => {
      items.filter(i => !i.replayed_at).forEach(i => e.target.checked ? selected.add(i.id) : selected.delete(i.id));
      draw();
    }});
    mount(list,
      h('div', {class: 'row'}, h('button', {id: 'replay-selected', disabled: !selected.size, onclick: () => replay([...selected])},
        `Replay selected (${selected.size})`)),
      h('table', {id: 'dead-letters'},
        h('thead', {}, h('tr', {}, h('th', {}, all), ['created', 'notification', 'user', 'channel', 'attempts', 'error', ''].map(c => h('th', {}, c)))),
        h('tbody', {}, items.map(d => h('tr', {'data-id': d.id},
          h('td', {}, h('input', {type: 'checkbox', checked: selected.has(d.id), disabled: !!d.replayed_at,
            onchange: e => { e.target.checked ? selected.add(d.id) : selected.delete(d.id); draw(); }})),
          h('td', {}, fmtTime(d.created_at)),
          h('td', {}, h('a', {href: `#/notifications?user=${enc(d.user_id || '')}`}, h('code', {}, d.notification_id))),
          h('td', {}, d.user_id || ''), h('td', {}, d.channel), h('td', {class: 'num'}, fmtNum(d.attempts)),
          h('td', {class: 'error'}, d.error),
          h('td', {}, d.replayed_at ? h('span', {class: 'badge ok'}, 'replayed ' + fmtTime(d.replayed_at))
            : h('button', {class: 'secondary replay', onclick: () => replay([d.id])}, 'Replay')))))),
      cursor ? h('p', {}, h('button', {class: 'secondary', onclick: more}, 'Load more')) : null);
  };
  const more = async () => {
    try {
      const page = await get('/v1/dead-letters?limit=100' + (cursor ? '&cursor=' + enc(cursor) : ''));
      cursor = page.next_cursor;
      items.push(...page.items);
      draw();
    } catch (err) { mount(list, problemBox(err)); }
  };
  await more();
}
