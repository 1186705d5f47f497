// Overview: totals (the tiles) and live rates (the charts) drawn from
// /v1/stats, polled every few seconds.

import {h, mount, problemBox, fmtNum} from './dom.js';
import {lineChart, colors} from './chart.js';
import {Poller, timeLabel, topSeries, DELIVERED, FAILED, POLL_MS} from './stats.js';

export function render(main, ctx) {
  const tiles = h('div', {class: 'tiles'});
  const checks = h('div', {id: 'chart-checks'});
  const accepted = h('div', {id: 'chart-accepted'});
  const delivered = h('div', {id: 'chart-delivered'});
  const failed = h('div', {id: 'chart-failed'});
  const status = h('div');
  const quota = h('div', {id: 'rlqs-buckets'});
  mount(main,
    h('h1', {}, 'Overview'),
    h('p', {class: 'muted', id: 'overview-legend'}, `Tiles: totals on this node since it started. Charts: rates per second, from its counters polled every ${POLL_MS / 1000} s.`),
    status, tiles,
    h('div', {class: 'grid'},
      h('div', {class: 'card'}, h('h2', {}, 'Rate limit checks per second, per policy (allowed / refused)'), checks),
      h('div', {class: 'card'}, h('h2', {}, 'Notifications accepted per second'), accepted),
      h('div', {class: 'card'}, h('h2', {}, 'Deliveries sent or delivered per second, per channel'), delivered),
      h('div', {class: 'card'}, h('h2', {}, 'Deliveries failed, dead or expired per second, per channel'), failed)),
    h('div', {class: 'card'}, h('h2', {}, 'Envoy rate limit quota (RLQS): buckets and shares on this node'), quota));

  const poller = new Poller(p => {
    mount(status, p.error ? problemBox(p.error) : null);
    const opts = {xLabel: timeLabel, emptyText: p.history.length < 2 ? 'Collecting… (two polls make a rate)' : 'No traffic in this window'};
    const checkRates = p.rates(s => s.name === 'sluice_ratelimit_checks_total'
      ? `${s.labels.policy} ${s.labels.result === 'allowed' ? 'allowed' : 'refused'}` : null);
    // Allowed lines green, refused red, a shade per policy.
    const checkSeries = topSeries(checkRates, 8).map(s => Object.assign(s, {color: s.name.endsWith('refused') ? colors.bad : colors.good}));
    const shade = new Map();
    for (const s of checkSeries) {
      const policy = s.name.replace(/ (allowed|refused)$/, '');
      if (!shade.has(policy)) shade.set(policy, shade.size);
      if (shade.get(policy)) s.dash = String(2 + 2 * shade.get(policy));
    }
    lineChart(checks, checkSeries, opts);
    const acc = p.rates(s => s.name === 'sluice_http_requests_total' && s.labels.method === 'POST' &&
      (s.labels.route === '/v1/notifications' || s.labels.route === '/v1/notifications/batch') && /^20[02]$/.test(s.labels.code)
      ? (s.labels.route.endsWith('batch') ? 'batch requests' : 'notifications') : null);
    lineChart(accepted, topSeries(acc, 4), opts);
    const byStatus = list => p.rates(s => s.name === 'sluice_notify_deliveries_total' && list.includes(s.labels.status) ? s.labels.channel : null);
    lineChart(delivered, topSeries(byStatus(DELIVERED), 6), opts);
    lineChart(failed, topSeries(byStatus(FAILED), 6), opts);

    const sum = (name, pred = () => true) => p.total(s => s.name === name && pred(s.labels || {}));
    const tile = (k, v) => h('div', {class: 'tile'}, h('div', {class: 'v'}, v), h('div', {class: 'k'}, k));
    const storeUp = p.latest() && p.latest().samples.find(s => s.name === 'sluice_ratelimit_store_up');
    mount(tiles,
      tile('checks allowed (total)', fmtNum(sum('sluice_ratelimit_checks_total', l => l.result === 'allowed'))),
      tile('checks refused (total)', fmtNum(sum('sluice_ratelimit_checks_total', l => l.result !== 'allowed'))),
      tile('deliveries sent (total)', fmtNum(sum('sluice_notify_deliveries_total', l => DELIVERED.includes(l.status)))),
      tile('deliveries failed (total)', fmtNum(sum('sluice_notify_deliveries_total', l => FAILED.includes(l.status)))),
      tile('redirects (total)', fmtNum(sum('sluice_links_redirects_total', l => l.result === 'found'))),
      tile('rate limit store', storeUp ? (storeUp.value ? 'up' : 'DOWN (local fallback)') : '–'));
    mount(quota, quotaTable(p.latest()));
  });
  ctx.onStop(poller.start());
}

// quotaTable lists the RLQS rules this node's Envoys report buckets of:
// buckets, Envoy streams, the share assigned to them (requests per rule
// period, summed over the rule's buckets) and the requests they reported.
function quotaTable(snap) {
  const rows = new Map();
  for (const s of (snap && snap.samples) || []) {
    if (!s.name.startsWith('sluice_rlqs_') || !s.labels || s.labels.rule === undefined) continue;
    const key = `${s.labels.domain}\u0000${s.labels.rule}`;
    if (!rows.has(key)) rows.set(key, {domain: s.labels.domain, rule: s.labels.rule, buckets: 0, clients: 0, share: 0, allowed: 0, denied: 0});
    const r = rows.get(key);
    if (s.name === 'sluice_rlqs_buckets') r.buckets = s.value;
    else if (s.name === 'sluice_rlqs_clients') r.clients = s.value;
    else if (s.name === 'sluice_rlqs_assigned_share') r.share = s.value;
    else if (s.name === 'sluice_rlqs_reported_requests_total') r[s.labels.result === 'denied' ? 'denied' : 'allowed'] += s.value;
  }
  const live = [...rows.values()].filter(r => r.buckets > 0 || r.allowed > 0 || r.denied > 0);
  if (!live.length) return h('p', {class: 'muted'}, 'No Envoy reports buckets to this node.');
  live.sort((a, b) => (a.domain + a.rule).localeCompare(b.domain + b.rule));
  return h('table', {},
    h('thead', {}, h('tr', {}, ['domain', 'rule', 'buckets', 'Envoys', 'assigned share', 'reported allowed', 'reported denied'].map(c => h('th', {}, c)))),
    h('tbody', {}, live.map(r => h('tr', {},
      h('td', {}, r.domain || '(no rules)'), h('td', {}, r.rule || '(unmatched)'),
      h('td', {class: 'num'}, fmtNum(r.buckets)), h('td', {class: 'num'}, fmtNum(r.clients)),
      h('td', {class: 'num'}, fmtNum(r.share, 1)), h('td', {class: 'num'}, fmtNum(r.allowed)), h('td', {class: 'num'}, fmtNum(r.denied))))));
}
