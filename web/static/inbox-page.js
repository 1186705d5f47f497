// The end user's inbox page (/ui/inbox), embeddable in an iframe. (The
// <sluice-inbox> element for an application's own pages is inbox.js.) The
// token is in the URL fragment (#t=...), which the browser never sends to
// the server in the page's URL; the page passes it as a bearer header to
// the API and as ?token= to the event stream (EventSource sets no
// headers). New messages and unread counts arrive live on the stream; a
// dropped stream reconnects by itself with Last-Event-ID, and the server
// replays what was missed.

import {h, mount, problemBox, fmtTime} from './dom.js';
import {api} from './api.js';

const main = document.getElementById('main');
const token = new URLSearchParams(location.hash.slice(1)).get('t') || '';
// The token's first part is the user id, base64url.
const user = (() => {
  try {
    const b64 = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    return new TextDecoder().decode(Uint8Array.from(atob(b64), c => c.charCodeAt(0)));
  } catch (e) { return ''; }
})();
const base = '/v1/users/' + encodeURIComponent(user) + '/inbox';
const call = (method, path) => api(method, base + path, undefined, {Authorization: 'Bearer ' + token});

const state = {items: [], unread: 0, next: '', live: false};
const list = h('ul', {class: 'inbox-list', id: 'inbox-list'});
const count = h('span', {class: 'badge', id: 'unread'});
const live = h('span', {class: 'muted', id: 'live'});
const more = h('button', {type: 'button', id: 'more', onclick: () => page(state.next)}, 'Older messages');
const status = h('div', {id: 'status', 'aria-live': 'polite'});

function item(m) {
  const act = (label, action) => h('button', {type: 'button', class: 'link', onclick: async () => {
    try {
      const r = await call('POST', '/' + encodeURIComponent(m.id) + '/' + action);
      if (action === 'archive') state.items = state.items.filter(x => x.id !== m.id);
      else Object.assign(m, r.message);
      setUnread(r.unread);
      draw();
    } catch (err) { mount(status, problemBox(err)); }
  }}, label);
  return h('li', {class: m.read ? 'read' : 'unread', 'data-seq': String(m.seq)},
    h('div', {class: 'name'}, m.subject || m.type),
    h('div', {}, m.body),
    h('div', {class: 'desc'}, fmtTime(m.created_at), ' · ',
      m.read ? act('Mark unread', 'unread') : act('Mark read', 'read'), ' · ', act('Archive', 'archive')));
}

function setUnread(n) { state.unread = n; }

function draw() {
  mount(count, state.unread + ' unread');
  mount(live, state.live ? 'live' : 'reconnecting…');
  mount(list, ...(state.items.length ? state.items.map(item) : [h('li', {class: 'muted'}, 'No messages.')]));
  more.hidden = !state.next;
}

async function page(cursor) {
  try {
    const p = await call('GET', '?limit=20' + (cursor ? '&cursor=' + encodeURIComponent(cursor) : ''));
    state.items = cursor ? state.items.concat(p.items) : p.items;
    state.next = p.next_cursor;
    setUnread(p.unread);
    draw();
  } catch (err) { mount(main, h('h1', {}, 'Inbox'), problemBox(err)); throw err; }
}

function stream() {
  // Resume after the newest message shown, so nothing between the page
  // load and the stream's start is lost.
  const newest = state.items.reduce((n, m) => Math.max(n, m.seq), 0);
  const es = new EventSource(base + '/stream?token=' + encodeURIComponent(token) + '&last_event_id=' + newest);
  es.onopen = () => { state.live = true; draw(); };
  es.onerror = () => { state.live = false; draw(); };
  es.addEventListener('message', e => {
    const d = JSON.parse(e.data);
    if (!state.items.some(m => m.id === d.message.id)) {
      state.items.unshift(d.message);
      state.items.sort((a, b) => b.seq - a.seq);
    }
    setUnread(d.unread);
    draw();
  });
  es.addEventListener('unread', e => { setUnread(JSON.parse(e.data).unread); draw(); });
}

async function start() {
  if (!token || !user) {
    mount(main, h('h1', {}, 'Inbox'), h('p', {}, 'This inbox link is incomplete. Open the link you were given again.'));
    return;
  }
  mount(main,
    h('h1', {}, 'Inbox ', count),
    h('p', {}, live, ' · ', h('button', {type: 'button', class: 'link', id: 'read-all', onclick: async () => {
      try {
        const r = await call('POST', '/read-all');
        state.items.forEach(m => { m.read = true; });
        setUnread(r.unread);
        draw();
      } catch (err) { mount(status, problemBox(err)); }
    }}, 'Mark all read')),
    status, list, more);
  await page('');
  stream();
}

start();
