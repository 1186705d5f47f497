// The dashboard's shell: the session, sign-in and sign-out, and a hash
// router that mounts one page at a time (each page may register cleanups,
// such as stopping its poller, with ctx.onStop).

import {h, mount, problemBox} from './dom.js';
import {api, setCSRF} from './api.js';
import * as overview from './overview.js';
import * as notifications from './notifications.js';
import * as ratelimit from './ratelimit.js';
import * as links from './links.js';
import * as providers from './providers.js';
import * as eventsubs from './events.js';
import * as templates from './templates.js';
import * as workflows from './workflows.js';

const pages = {
  'overview': overview.render,
  'notifications': notifications.render,
  'dead-letters': notifications.renderDeadLetters,
  'workflows': workflows.render,
  'templates': templates.render,
  'policies': ratelimit.renderPolicies,
  'blocks': ratelimit.renderBlocks,
  'links': links.render,
  'providers': providers.render,
  'event-subscriptions': eventsubs.render,
};

const main = document.getElementById('main');
let session = null;
let stops = [];

// stopPage runs the open page's cleanups (its pollers, its event streams).
function stopPage() {
  stops.forEach(f => f());
  stops = [];
}

function route() {
  stopPage();
  if (!session) return;
  const name = location.hash.replace(/^#\/?/, '').split('?')[0] || 'overview';
  for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', a.getAttribute('href') === '#/' + name);
  const page = pages[name];
  if (!page) {
    mount(main, h('h1', {}, 'Not found'), h('p', {}, 'No page ', h('code', {}, name), '.'));
    return;
  }
  const ctx = {session, onStop: f => stops.push(f)};
  Promise.resolve(page(main, ctx)).catch(err => mount(main, problemBox(err)));
}

function signInForm(message) {
  const input = h('input', {type: 'password', id: 'api-key', name: 'key', autocomplete: 'off', placeholder: 'sk_…', required: true});
  const out = h('div');
  const form = h('form', {id: 'signin', onsubmit: async e => {
    e.preventDefault();
    try {
      await api('POST', '/v1/session', {key: input.value});
      input.value = '';
      await start();
    } catch (err) {
      mount(out, problemBox(err));
    }
  }},
  h('label', {}, 'API key', input),
  h('p', {}, h('button', {type: 'submit'}, 'Sign in')),
  out);
  mount(main, h('div', {class: 'card signin'},
    h('h1', {}, 'Sign in'),
    h('p', {class: 'muted'}, message || 'Paste an API key. The dashboard keeps a session cookie, not the key, and can do what the key\'s scopes allow.'),
    h('p', {class: 'muted', id: 'key-hint'}, 'No key yet? On the node, run ', h('code', {}, 'sluice keys create --scope admin'),
      ' (with the node\'s --data-dir or --database-url); it prints the key once.'),
    form));
  input.focus();
}

async function start() {
  const s = await api('GET', '/v1/session');
  document.getElementById('nav').hidden = !s.signed_in;
  document.getElementById('signout').hidden = !s.signed_in || s.keyless;
  if (!s.signed_in) {
    session = null;
    document.getElementById('who').textContent = '';
    signInForm(s.closed
      ? 'Every API key has been revoked, so the API is closed to every caller (keyless access ended with the first key). Create an admin key on the node with `sluice keys create --scope admin`, then paste it here.'
      : undefined);
    return;
  }
  session = s;
  setCSRF(s.csrf_token);
  document.getElementById('who').textContent = s.keyless
    ? 'keyless loopback access (no API key has been created yet)'
    : `${s.name || s.key_id} · ${s.scopes.join(', ')}`;
  route();
}

document.getElementById('signout').addEventListener('click', async () => {
  stopPage();
  await api('DELETE', '/v1/session');
  setCSRF('');
  await start();
});
window.addEventListener('hashchange', route);
start().catch(err => mount(main, problemBox(err)));
