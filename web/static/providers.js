// Providers: what this node reports about the engines and providers it
// depends on. Readiness comes from /readyz; error rates per channel from
// the delivery counters; breaker and pacing state from any
// sluice_notify_provider_* / *breaker* / *pacing* metrics the server
// exports, and a note when it exports none.

import {h, mount, problemBox, fmtNum, badge} from './dom.js';
import {Poller, DELIVERED, FAILED, POLL_MS} from './stats.js';

export function render(main, ctx) {
  const ready = h('div');
  const channels = h('div');
  const provider = h('div');
  mount(main, h('h1', {}, 'Providers'),
    h('div', {class: 'card'}, h('h2', {}, 'Engines (readiness)'), ready),
    h('div', {class: 'card'}, h('h2', {}, 'Deliveries per channel since this node started'), channels),
    h('div', {class: 'card'}, h('h2', {}, 'Circuit breakers and pacing'), provider));

  const loadReady = async () => {
    try {
      const res = await fetch('/readyz', {headers: {Accept: 'application/json'}});
      const body = await res.json();
      const checks = body.checks || [];
      mount(ready, h('table', {id: 'ready'}, h('thead', {}, h('tr', {}, ['engine', 'status', 'latency (ms)', 'error'].map(c => h('th', {}, c)))),
        h('tbody', {}, checks.map(c => h('tr', {}, h('td', {}, c.name), h('td', {}, badge(c.status)),
          h('td', {class: 'num'}, fmtNum(c.duration_ms, 2)), h('td', {class: 'error'}, c.error || ''))))));
    } catch (err) { mount(ready, problemBox(err)); }
  };
  loadReady();
  const readyTimer = setInterval(loadReady, POLL_MS * 3);
  ctx.onStop(() => clearInterval(readyTimer));

  const poller = new Poller(p => {
    const snap = p.latest();
    if (!snap) { mount(channels, p.error ? problemBox(p.error) : null); return; }
    const per = new Map();
    for (const s of snap.samples) {
      if (s.name !== 'sluice_notify_deliveries_total') continue;
      const c = per.get(s.labels.channel) || {sent: 0, failed: 0, retried: 0, suppressed: 0};
      if (DELIVERED.includes(s.labels.status)) c.sent += s.value;
      else if (FAILED.includes(s.labels.status)) c.failed += s.value;
      else if (s.labels.status === 'queued') c.retried += s.value;
      else if (s.labels.status === 'suppressed') c.suppressed += s.value;
      per.set(s.labels.channel, c);
    }
    mount(channels, per.size ? h('table', {id: 'channels'},
      h('thead', {}, h('tr', {}, ['channel', 'sent', 'failed', 'retries scheduled', 'suppressed', 'error rate'].map((c, i) => h('th', {class: i ? 'num' : ''}, c)))),
      h('tbody', {}, [...per.entries()].sort().map(([ch, c]) => {
        const rate = c.sent + c.failed ? c.failed / (c.sent + c.failed) : 0;
        return h('tr', {}, h('td', {}, ch), h('td', {class: 'num'}, fmtNum(c.sent)), h('td', {class: 'num'}, fmtNum(c.failed)),
          h('td', {class: 'num'}, fmtNum(c.retried)), h('td', {class: 'num'}, fmtNum(c.suppressed)),
          h('td', {class: 'num'}, h('span', {class: rate > 0.05 ? 'badge bad' : 'badge ok'}, fmtNum(rate * 100, 1) + ' %')));
      }))) : h('p', {class: 'muted'}, 'No deliveries yet on this node.'));

    const state = snap.samples.filter(s => /^sluice_(notify_provider|provider)_|breaker|pacing/.test(s.name));
    mount(provider, state.length ? h('table', {id: 'breakers'},
      h('thead', {}, h('tr', {}, ['metric', 'labels', 'value'].map(c => h('th', {}, c)))),
      h('tbody', {}, state.map(s => h('tr', {}, h('td', {}, h('code', {}, s.name)),
        h('td', {}, Object.entries(s.labels || {}).map(([k, v]) => `${k}=${v}`).join(' ')), h('td', {class: 'num'}, fmtNum(s.value, 2))))))
      : h('p', {class: 'notice', id: 'no-breakers'}, 'This server does not report circuit breaker or pacing state yet. ',
        'Engine readiness and per-channel error rates above are what it measures today.'));
  });
  ctx.onStop(poller.start());
}
