// <sluice-inbox>: a user's in-app inbox as a custom element, for an
// application's own pages on another origin than Sluice's (listed in the
// server's http.cors_origins). One self-contained ES module: no imports,
// no build step, its styles in its shadow root.
//
//   <script type="module" src="https://notify.example.com/ui/inbox.js"></script>
//   <sluice-inbox server="https://notify.example.com" token="ibx2...."></sluice-inbox>
//
// token is the user's inbox token (POST /v1/users/{id}/inbox-token, minted
// by the application's backend); server defaults to the origin this module
// was loaded from. The element lists the user's messages, shows the unread
// count in a badge, marks messages read, and stays live over the inbox's
// event stream, which resumes after a drop with Last-Event-ID. Requests
// carry the token as a bearer header; the stream, which EventSource cannot
// give headers, as ?token=. Neither sends cookies.
//
// Styling: CSS custom properties (--sluice-inbox-accent and the others in
// STYLE below) and ::part(): header, title, badge, mark-all, status,
// error, list, item, unread, read, subject, body, meta, mark-read, more,
// empty. Events (bubbling, composed): sluice-inbox-unread {unread},
// sluice-inbox-message {message, unread}, sluice-inbox-read {message,
// unread}, sluice-inbox-select {message}, sluice-inbox-error {status,
// title, detail}.

const STYLE = `
:host {
  display: block;
  font: var(--sluice-inbox-font, inherit);
  color: var(--sluice-inbox-fg, #1f2328);
  background: var(--sluice-inbox-bg, #fff);
  border: 1px solid var(--sluice-inbox-border, #d0d7de);
  border-radius: var(--sluice-inbox-radius, 8px);
  overflow: hidden;
}
:host([hidden]) { display: none; }
header { display: flex; align-items: center; gap: 8px; padding: 10px 12px;
  border-bottom: 1px solid var(--sluice-inbox-border, #d0d7de); }
.title { font-weight: 600; flex: 1; }
.badge { min-width: 1.4em; padding: 1px 7px; border-radius: 999px; text-align: center; font-size: 0.8em;
  font-weight: 600; background: var(--sluice-inbox-accent, #0969da); color: var(--sluice-inbox-accent-fg, #fff); }
.badge[hidden] { display: none; }
button { font: inherit; color: var(--sluice-inbox-accent, #0969da); background: none; border: 0; padding: 0;
  cursor: pointer; }
button:hover { text-decoration: underline; }
button:disabled { color: var(--sluice-inbox-muted, #656d76); cursor: default; text-decoration: none; }
.status { padding: 2px 12px; font-size: 0.8em; color: var(--sluice-inbox-muted, #656d76); }
.error { margin: 8px 12px; padding: 8px 10px; border-radius: 6px; font-size: 0.9em;
  color: var(--sluice-inbox-error, #cf222e); border: 1px solid currentColor; }
.error[hidden] { display: none; }
ul { list-style: none; margin: 0; padding: 0; max-height: var(--sluice-inbox-max-height, none); overflow-y: auto; }
li { padding: 10px 12px; border-bottom: 1px solid var(--sluice-inbox-border, #d0d7de); cursor: pointer; }
li:last-child { border-bottom: 0; }
li.unread { background: var(--sluice-inbox-unread-bg, #f0f6ff); }
li.unread .subject::before { content: "● "; color: var(--sluice-inbox-accent, #0969da); }
li.read { color: var(--sluice-inbox-muted, #656d76); }
li.empty { cursor: default; color: var(--sluice-inbox-muted, #656d76); }
.subject { font-weight: 600; }
.body { margin: 2px 0; white-space: pre-line; }
.meta { font-size: 0.8em; color: var(--sluice-inbox-muted, #656d76); }
.more { display: block; margin: 8px 12px; }
.more[hidden] { display: none; }
`;

const PAGE = 20;

// el builds an element; text goes in as text, never as markup, so what a
// message says cannot inject any.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

// userOf reads the user id from an inbox token: its second part, base64url.
function userOf(token) {
  try {
    const b64 = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    return new TextDecoder().decode(Uint8Array.from(atob(b64), c => c.charCodeAt(0)));
  } catch (e) { return ''; }
}

// InboxError is a failed call: an RFC 9457 problem, or status 0 when the
// browser got no answer it may read (the network, or CORS).
class InboxError extends Error {
  constructor(status, title, detail) {
    super(detail || title);
    Object.assign(this, {status, title, detail});
  }
}

export class SluiceInbox extends HTMLElement {
  static observedAttributes = ['server', 'token'];

  #root = this.attachShadow({mode: 'open'});
  #run = 0; // bumped by every (re)start: older work that finishes is ignored
  #es = null;
  #retry = null;
  #backoff = 1000;
  #items = [];
  #unread = 0;
  #next = '';
  #ui;

  constructor() {
    super();
    const ui = {
      badge: el('span', {class: 'badge', part: 'badge', hidden: true}),
      markAll: el('button', {type: 'button', part: 'mark-all', onclick: () => this.markAllRead()}, 'Mark all read'),
      status: el('div', {class: 'status', part: 'status', 'aria-live': 'polite'}, 'Loading…'),
      error: el('div', {class: 'error', part: 'error', role: 'alert', hidden: true}),
      list: el('ul', {part: 'list'}),
      more: el('button', {type: 'button', class: 'more', part: 'more', hidden: true, onclick: () => this.#page(this.#next, this.#run)}, 'Older messages'),
    };
    this.#ui = ui;
    this.#root.append(el('style', {}, STYLE),
      el('header', {part: 'header'}, el('span', {class: 'title', part: 'title'}, 'Inbox'), ui.badge, ui.markAll),
      ui.status, ui.error, ui.list, ui.more);
  }

  get server() {
    return (this.getAttribute('server') || new URL(import.meta.url).origin).replace(/\/+$/, '');
  }
  set server(v) { this.setAttribute('server', v); }
  get token() { return this.getAttribute('token') || ''; }
  set token(v) { this.setAttribute('token', v); }
  // unread is the user's unread count, as last heard from the server.
  get unread() { return this.#unread; }
  get messages() { return this.#items.slice(); }

  connectedCallback() { this.#schedule(); }
  disconnectedCallback() { this.#stop(); }
  attributeChangedCallback(name, before, after) { if (before !== after) this.#schedule(); }

  // #schedule restarts once after a burst of attribute changes (an
  // upgrade reports each attribute, then the connection).
  #schedule() {
    if (this.#pending) return;
    this.#pending = true;
    queueMicrotask(() => {
      this.#pending = false;
      if (this.isConnected) this.#start();
    });
  }
  #pending = false;

  #stop() {
    this.#run++;
    if (this.#es) this.#es.close();
    this.#es = null;
    clearTimeout(this.#retry);
  }

  async #start() {
    this.#stop();
    const run = this.#run;
    this.#items = [];
    this.#next = '';
    this.#setUnread(0, false);
    this.#draw();
    if (!this.token || !userOf(this.token)) {
      this.#fail(new InboxError(0, 'No inbox token', 'Set the token attribute to the user\'s inbox token.'));
      return;
    }
    this.#status('Loading…');
    if (await this.#page('', run)) this.#stream(run);
  }

  #base() { return this.server + '/v1/users/' + encodeURIComponent(userOf(this.token)) + '/inbox'; }

  async #call(method, path) {
    let res;
    try {
      res = await fetch(this.#base() + path, {method, credentials: 'omit', mode: 'cors',
        headers: {Accept: 'application/json', Authorization: 'Bearer ' + this.token}});
    } catch (e) {
      throw new InboxError(0, 'The inbox cannot be reached',
        'No answer from ' + this.server + ' that this page may read: the server is down, or it does not allow ' +
        location.origin + ' (its http.cors_origins).');
    }
    const body = await res.json().catch(() => null);
    if (!res.ok) {
      throw new InboxError(res.status, (body && body.title) || 'HTTP ' + res.status, body && body.detail);
    }
    return body;
  }

  // #page loads the newest messages (cursor empty) or older ones; it
  // reports whether it succeeded.
  async #page(cursor, run) {
    try {
      const p = await this.#call('GET', '?limit=' + PAGE + (cursor ? '&cursor=' + encodeURIComponent(cursor) : ''));
      if (run !== this.#run) return false;
      this.#items = cursor ? this.#items.concat(p.items) : p.items;
      this.#next = p.next_cursor || '';
      this.#ui.error.hidden = true;
      this.#setUnread(p.unread);
      this.#draw();
      return true;
    } catch (err) {
      if (run === this.#run) this.#fail(err);
      return false;
    }
  }

  #stream(run) {
    // Resume after the newest message shown, so nothing sent between the
    // list and the stream is lost; later reconnections send Last-Event-ID.
    const newest = this.#items.reduce((n, m) => Math.max(n, m.seq), 0);
    const es = new EventSource(this.#base() + '/stream?token=' + encodeURIComponent(this.token) + '&last_event_id=' + newest);
    this.#es = es;
    es.onopen = () => { this.#backoff = 1000; this.#status('Live'); };
    es.onerror = () => {
      if (run !== this.#run) return;
      if (es.readyState !== EventSource.CLOSED) { this.#status('Reconnecting…'); return; }
      // Refused (a revoked token, too many streams): the list says why,
      // or, if it loads, the stream is tried again later.
      this.#status('Reconnecting…');
      this.#retry = setTimeout(async () => {
        if (run === this.#run && await this.#page('', run)) this.#stream(run);
      }, this.#backoff);
      this.#backoff = Math.min(this.#backoff * 2, 60000);
    };
    es.addEventListener('message', e => {
      const d = JSON.parse(e.data);
      const fresh = !this.#items.some(m => m.id === d.message.id);
      if (fresh) {
        this.#items.unshift(d.message);
        this.#items.sort((a, b) => b.seq - a.seq);
      }
      this.#setUnread(d.unread);
      this.#draw();
      if (fresh) this.#emit('sluice-inbox-message', {message: d.message, unread: d.unread});
    });
    es.addEventListener('unread', e => { this.#setUnread(JSON.parse(e.data).unread); });
  }

  // markRead marks one message read (or unread, with read false).
  async markRead(id, read = true) {
    const run = this.#run;
    try {
      const r = await this.#call('POST', '/' + encodeURIComponent(id) + '/' + (read ? 'read' : 'unread'));
      if (run !== this.#run) return;
      const i = this.#items.findIndex(m => m.id === id);
      if (i >= 0) this.#items[i] = r.message;
      this.#setUnread(r.unread);
      this.#draw();
      this.#emit('sluice-inbox-read', {message: r.message, unread: r.unread});
    } catch (err) { if (run === this.#run) this.#fail(err); }
  }

  async markAllRead() {
    const run = this.#run;
    try {
      const r = await this.#call('POST', '/read-all');
      if (run !== this.#run) return;
      this.#items.forEach(m => { m.read = true; });
      this.#setUnread(r.unread);
      this.#draw();
    } catch (err) { if (run === this.#run) this.#fail(err); }
  }

  #setUnread(n, emit = true) {
    const changed = n !== this.#unread;
    this.#unread = n;
    this.#ui.badge.textContent = String(n);
    this.#ui.badge.hidden = n === 0;
    this.#ui.badge.setAttribute('aria-label', n + ' unread');
    this.#ui.markAll.disabled = n === 0;
    if (changed && emit) this.#emit('sluice-inbox-unread', {unread: n});
  }

  #status(text) { this.#ui.status.textContent = text; }

  #fail(err) {
    const e = err instanceof InboxError ? err : new InboxError(0, 'Error', String(err && err.message || err));
    this.#ui.error.replaceChildren(el('strong', {}, e.title), e.detail ? ' ' + e.detail : '');
    this.#ui.error.hidden = false;
    this.#status('');
    if (!this.#items.length) this.#ui.list.replaceChildren(); // not "No messages": unknown
    this.#emit('sluice-inbox-error', {status: e.status, title: e.title, detail: e.detail || ''});
  }

  #emit(type, detail) { this.dispatchEvent(new CustomEvent(type, {detail, bubbles: true, composed: true})); }

  #draw() {
    const items = this.#items.map(m => this.#item(m));
    if (!items.length) items.push(el('li', {class: 'empty', part: 'empty'}, 'No messages.'));
    this.#ui.list.replaceChildren(...items);
    this.#ui.more.hidden = !this.#next;
  }

  #item(m) {
    const state = m.read ? 'read' : 'unread';
    const mark = el('button', {type: 'button', part: 'mark-read', onclick: e => {
      e.stopPropagation();
      this.markRead(m.id, !m.read);
    }}, m.read ? 'Mark unread' : 'Mark read');
    const when = new Date(m.created_at);
    return el('li', {class: state, part: 'item ' + state, 'data-id': m.id, 'data-seq': m.seq,
      onclick: () => this.#emit('sluice-inbox-select', {message: m})},
    el('div', {class: 'subject', part: 'subject'}, m.subject || m.type),
    m.body ? el('div', {class: 'body', part: 'body'}, m.body) : null,
    el('div', {class: 'meta', part: 'meta'},
      el('time', {datetime: m.created_at}, isNaN(when) ? '' : when.toLocaleString()), ' · ', mark));
  }
}

if (!customElements.get('sluice-inbox')) customElements.define('sluice-inbox', SluiceInbox);
