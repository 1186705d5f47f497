// The end-user preference page. The signed token is in the URL fragment
// (#t=...), which the browser never sends to the server; the page passes
// it in X-Preference-Token. Critical notifications are shown locked on.

import {h, mount, problemBox, fmtTime} from './dom.js';
import {api} from './api.js';

const CATEGORIES = [
  ['critical', 'Security and account', 'One-time codes, password resets, sign-in alerts, failed payments. Always on.'],
  ['orders', 'Orders', 'Confirmations, shipping and delivery updates, refunds.'],
  ['marketing', 'Offers', 'Sales, price drops, items back in stock, reminders about your cart.'],
];
const CHANNELS = [
  ['email', 'Email'], ['sms', 'Text messages (SMS)'], ['push', 'Push notifications'], ['webhook', 'Webhook'], ['inapp', 'In-app inbox'],
];

const main = document.getElementById('main');
const token = new URLSearchParams(location.hash.slice(1)).get('t') || '';
const call = (method, body) => api(method, '/v1/preferences', body, {'X-Preference-Token': token});

function row(name, desc, input, locked) {
  return h('div', {class: 'switch'},
    h('div', {}, h('div', {class: 'name'}, name), h('div', {class: 'desc'}, desc),
      // A text badge, not an emoji: machines without an emoji font drew
      // the padlock as an empty box.
      locked ? h('div', {class: 'lock'}, h('span', {class: 'badge'}, 'Locked on'), ' These keep your account safe.') : null),
    input);
}

function render(p, message) {
  const inputs = {channels: {}, categories: {}};
  const status = h('div', {id: 'status', 'aria-live': 'polite'}, message || null);
  const cats = CATEGORIES.map(([key, name, desc]) => {
    const locked = (p.locked || []).includes('categories.' + key);
    const box = h('input', {type: 'checkbox', id: 'cat-' + key, checked: p.categories[key] !== false, disabled: locked, 'aria-label': name});
    inputs.categories[key] = box;
    return row(name, desc, box, locked);
  });
  const chans = CHANNELS.map(([key, name]) => {
    const box = h('input', {type: 'checkbox', id: 'ch-' + key, checked: !!p.channels[key], 'aria-label': name});
    inputs.channels[key] = box;
    return row(name, '', box, false);
  });
  mount(main,
    h('h1', {}, 'Notification preferences'),
    h('p', {class: 'muted'}, 'Choose what we send you and how. This link works until ', fmtTime(p.expires_at), '.'),
    h('form', {id: 'prefs', onsubmit: async e => {
      e.preventDefault();
      const body = {channels: {}, categories: {}};
      for (const kind of ['channels', 'categories']) {
        for (const [k, box] of Object.entries(inputs[kind])) if (!box.disabled) body[kind][k] = box.checked;
      }
      const btn = e.target.querySelector('button');
      btn.disabled = true;
      try {
        const saved = await call('PUT', body);
        render(saved, h('div', {class: 'success', role: 'status'}, 'Saved. Your choices apply to the next message.'));
      } catch (err) {
        mount(status, explain(err));
        btn.disabled = false;
      }
    }},
    h('div', {class: 'card'}, h('h2', {}, 'What we send'), cats),
    h('div', {class: 'card'}, h('h2', {}, 'How we reach you'), chans),
    status,
    h('p', {}, h('button', {type: 'submit'}, 'Save preferences'))));
}

// explain turns the API's refusal into a sentence for people.
function explain(err) {
  const fields = (err.problem && err.problem.errors) || [];
  const words = {
    'categories.critical': 'Security and account messages cannot be turned off.',
    'channels': 'Keep at least one way to reach you turned on, so we can send security messages.',
  };
  const lines = fields.map(f => words[f.field] || `${f.field}: ${f.detail}`);
  if (!lines.length) return problemBox(err);
  return h('div', {class: 'problem', role: 'alert'}, h('strong', {}, 'Not saved. '), lines.join(' '));
}

async function start() {
  if (!token) {
    mount(main, h('h1', {}, 'Notification preferences'), h('p', {class: 'problem'}, 'This page needs the link from one of our messages.'));
    return;
  }
  try {
    render(await call('GET'));
  } catch (err) {
    mount(main, h('h1', {}, 'Notification preferences'),
      err.status === 401 ? h('p', {class: 'problem', role: 'alert'}, 'This link is invalid or has expired. Use the link in a recent message, or ask us for a new one.') : problemBox(err));
  }
}
start();
