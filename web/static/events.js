// Event subscriptions: the URLs that receive status events, each with its
// health (consecutive failures, the last error, why it was disabled), a
// form to add one (its secret is shown once), and recover / delete.

import {h, mount, problemBox, fmtTime, fmtNum} from './dom.js';
import {api, get, enc} from './api.js';

const statusBadge = status =>
  h('span', {class: {enabled: 'badge ok', failing: 'badge warn', disabled: 'badge bad'}[status] || 'badge'}, status);

const TYPES = ['notification.accepted', 'delivery.sent', 'delivery.delivered', 'delivery.failed', 'delivery.dead', 'link.clicked'];

export async function render(main) {
  const list = h('div');
  const out = h('div', {id: 'subscription-result'});
  const url = h('input', {name: 'url', id: 'subscription-url', required: true, type: 'url', size: 40, placeholder: 'https://hooks.example.com/sluice'});
  const boxes = TYPES.map(t => h('label', {class: 'event-type'}, h('input', {type: 'checkbox', name: 'events', value: t,
    checked: t === 'delivery.failed' || t === 'delivery.dead'}), ' ', h('code', {}, t)));
  const form = h('form', {id: 'subscription-form', onsubmit: async e => {
    e.preventDefault();
    const events = boxes.map(b => b.querySelector('input')).filter(i => i.checked).map(i => i.value);
    try {
      const sub = await api('POST', '/v1/event-subscriptions', {url: url.value, events});
      url.value = '';
      mount(out, h('div', {class: 'success'}, 'Subscribed ', h('code', {}, sub.id), '. Its signing secret, shown only now: ',
        h('code', {id: 'subscription-secret'}, sub.secret)));
      await load();
    } catch (err) { mount(out, problemBox(err)); }
  }}, h('label', {}, 'URL', url), h('div', {}, boxes), h('p', {}, h('button', {type: 'submit'}, 'Subscribe')));
  mount(main, h('h1', {}, 'Event subscriptions'),
    h('p', {class: 'muted'}, 'Status events go to these URLs as signed Standard Webhooks, retried with backoff. ' +
      'A subscription that keeps failing is disabled; Recover enables it and resends what it missed.'),
    out, h('div', {class: 'card'}, list), h('div', {class: 'card'}, h('h2', {}, 'New subscription'), form));

  const recover = async sub => {
    const from = sub.first_failure_at || sub.disabled_at || new Date(Date.now() - 3600e3).toISOString();
    const since = prompt('Resend the events generated since (RFC 3339):', from);
    if (!since) return;
    try {
      const r = await api('POST', `/v1/event-subscriptions/${enc(sub.id)}/recover?since=${enc(since)}`);
      mount(out, h('div', {class: 'success'}, `Queued ${fmtNum(r.queued)} event${r.queued === 1 ? '' : 's'} to `, h('code', {}, sub.id),
        r.more ? `; more remain after ${fmtTime(r.until)}, recover again from there.` : '.'));
      await load();
    } catch (err) { mount(out, problemBox(err)); }
  };
  const remove = async sub => {
    if (!confirm(`Delete the subscription to ${sub.url}?`)) return;
    try { await api('DELETE', `/v1/event-subscriptions/${enc(sub.id)}`); await load(); }
    catch (err) { mount(out, problemBox(err)); }
  };
  const load = async () => {
    try {
      const {items} = await get('/v1/event-subscriptions');
      if (!items.length) { mount(list, h('p', {class: 'muted'}, 'No event subscriptions.')); return; }
      mount(list, h('table', {id: 'event-subscriptions'},
        h('thead', {}, h('tr', {}, ['url', 'events', 'status', 'failures', 'last error', 'last success', ''].map(c => h('th', {}, c)))),
        h('tbody', {}, items.map(s => h('tr', {'data-id': s.id},
          h('td', {}, h('code', {}, s.url), h('div', {class: 'muted'}, s.id)),
          h('td', {}, s.events.join(', ')),
          h('td', {}, statusBadge(s.status), s.disabled_reason ? h('div', {class: 'error'}, `since ${fmtTime(s.disabled_at)}: ${s.disabled_reason}`) : null),
          h('td', {class: 'num'}, fmtNum(s.failures), s.first_failure_at ? h('div', {class: 'muted'}, 'since ' + fmtTime(s.first_failure_at)) : null),
          h('td', {class: 'error'}, s.last_error ? [s.last_error, h('div', {class: 'muted'}, fmtTime(s.last_failure_at))] : ''),
          h('td', {}, s.last_success_at ? fmtTime(s.last_success_at) : '–'),
          h('td', {}, h('button', {class: 'secondary recover', onclick: () => recover(s)}, 'Recover'), ' ',
            h('button', {class: 'secondary delete', onclick: () => remove(s)}, 'Delete')))))));
    } catch (err) { mount(list, problemBox(err)); }
  };
  await load();
}
