// One link's breakdown over the last 30 days, from GET /v1/links/{code}/stats
// (hourly rollups, never raw clicks): clicks per day (human and bot),
// conversions beside them, the hits by one dimension as a table, and the
// link's QR code (scans are counted as source "qr").

import {h, mount, problemBox, fmtNum} from './dom.js';
import {get, enc} from './api.js';
import {barChart, colors} from './chart.js';

const GROUPS = ['country', 'device', 'os', 'referrer', 'language', 'source'];
const DAY = 86400000;

export async function renderBreakdown(container, code, group = 'country', domain = '') {
  const dq = domain ? `&domain=${enc(domain)}` : '';
  const totals = h('p', {id: 'link-totals', class: 'muted'}, 'Loading…');
  const chart = h('div', {id: 'link-daily'});
  const table = h('div', {id: 'link-groups'});
  const qr = h('div', {id: 'link-qr'},
    h('img', {src: `/v1/links/${enc(code)}/qr?format=svg&size=160${dq}`, alt: `QR code of ${code}`, width: 160, height: 160}),
    h('p', {class: 'muted'}, h('a', {href: `/v1/links/${enc(code)}/qr?format=png&size=1024${dq}`, download: `${code}.png`}, 'PNG'),
      ' · scans count as source qr'));
  mount(container, h('h2', {}, 'Breakdown of ', h('code', {}, code), ', last 30 days'),
    h('div', {class: 'row'}, GROUPS.map(g => h('button', {class: g === group ? '' : 'secondary',
      onclick: () => renderBreakdown(container, code, g, domain)}, g))),
    totals, chart, h('div', {class: 'row top'}, table, qr));
  let st;
  try {
    const from = new Date(Date.now() - 30 * DAY).toISOString();
    st = await get(`/v1/links/${enc(code)}/stats?by=day&group=${group}&from=${enc(from)}${dq}`);
  } catch (err) {
    mount(totals, problemBox(err));
    return;
  }
  const t = st.totals;
  mount(totals, `${fmtNum(t.humans)} human clicks, ${fmtNum(t.bots)} bot hits, ${fmtNum(t.conversions)} conversions` +
    (t.conversion_value ? ` worth ${fmtNum(t.conversion_value, 2)}` : ''));
  const start = Date.parse(st.from), n = Math.max(1, Math.ceil((Date.parse(st.to) - start) / DAY));
  const human = new Array(n).fill(0), bot = new Array(n).fill(0), conv = new Array(n).fill(0);
  for (const b of st.series) {
    const i = Math.floor((Date.parse(b.start) - start) / DAY);
    if (i >= 0 && i < n) { human[i] += b.humans; bot[i] += b.bots; conv[i] += b.conversions; }
  }
  const labels = human.map((_, i) => new Date(start + i * DAY).toLocaleDateString(undefined, {month: 'short', day: 'numeric'}));
  barChart(chart, labels, [{name: 'human clicks', values: human, color: colors.human},
    {name: 'bot hits', values: bot, color: colors.bot}, {name: 'conversions', values: conv, color: colors.good}]);
  if (!st.groups.length) {
    mount(table, h('p', {class: 'muted'}, 'No hits in this span.'));
    return;
  }
  const most = Math.max(...st.groups.map(g => g.humans + g.bots));
  mount(table, h('table', {},
    h('thead', {}, h('tr', {}, [group, 'clicks', 'bot hits', ''].map((c, i) => h('th', {class: i === 1 || i === 2 ? 'num' : ''}, c)))),
    h('tbody', {}, st.groups.map(g => {
      const bar = h('div', {class: 'bar', title: `${g.humans} human, ${g.bots} bot`}, h('span', {class: 'h'}), h('span', {class: 'b'}));
      bar.children[0].style.width = (100 * g.humans / most) + '%';
      bar.children[1].style.width = (100 * g.bots / most) + '%';
      return h('tr', {}, h('td', {}, g.value ? h('code', {}, g.value) : h('span', {class: 'muted'}, 'unknown')),
        h('td', {class: 'num'}, fmtNum(g.humans)), h('td', {class: 'num'}, fmtNum(g.bots)), h('td', {}, bar));
    }))));
}

// The live panel: the link's hits as they are recorded, newest first, from
// GET /v1/links/{code}/stats/stream (Server-Sent Events, with the session's
// cookie). EventSource reconnects by itself, sending Last-Event-ID, so a
// dropped stream resumes without losing hits. One stream at a time: showing
// another link, or leaving the page, closes it (stopLive).
const LIVE_ROWS = 20;
let live = null;

export function stopLive() {
  if (live) live.close();
  live = null;
}

const count = (n, what) => `${fmtNum(n)} ${what}${n === 1 ? '' : 's'}`;

export function renderLive(container, code, domain = '') {
  stopLive();
  const status = h('p', {class: 'muted', id: 'live-status'}, 'Connecting…');
  const rows = h('tbody');
  mount(container, h('h2', {}, 'Live hits on ', h('code', {}, code)), status,
    h('table', {id: 'live-hits'},
      h('thead', {}, h('tr', {}, ['time', 'kind', 'country', 'device', 'os', 'referrer', 'language', 'target'].map(c => h('th', {}, c)))),
      rows));
  const es = new EventSource(`/v1/links/${enc(code)}/stats/stream${domain ? `?domain=${enc(domain)}` : ''}`);
  live = es;
  let humans = 0, bots = 0;
  const counted = () => humans + bots
    ? `${count(humans, 'human click')} and ${count(bots, 'bot hit')} since this panel opened; the newest ${LIVE_ROWS} below.`
    : 'Listening: each hit shows here about a second after the redirect, from whichever node served it.';
  es.onopen = () => mount(status, counted());
  es.onerror = () => mount(status, es.readyState === EventSource.CLOSED
    ? 'The live stream is closed (signed out, or this node holds as many streams as it may). Reload to try again.'
    : 'Reconnecting…');
  es.addEventListener('hit', e => {
    let hit;
    try { hit = JSON.parse(e.data); } catch { return; }
    if (hit.bot) bots++; else humans++;
    const cell = v => h('td', {}, v ? h('code', {}, v) : h('span', {class: 'muted'}, '–'));
    rows.insertBefore(h('tr', {class: hit.bot ? 'bot' : ''},
      h('td', {}, new Date(hit.at).toLocaleTimeString()),
      h('td', {}, hit.bot ? h('span', {class: 'badge warn', title: hit.bot_reason}, 'bot: ' + hit.bot_reason) : h('span', {class: 'badge ok'}, 'click')),
      cell(hit.country), cell(hit.device), cell(hit.os), cell(hit.referrer), cell(hit.language), cell(hit.target)), rows.firstChild);
    while (rows.children.length > LIVE_ROWS) rows.removeChild(rows.lastChild);
    mount(status, counted());
  });
}
