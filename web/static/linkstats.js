// One link's breakdown over the last 30 days, from GET /v1/links/{code}/stats
// (hourly rollups, never raw clicks): clicks per day (human and bot),
// conversions beside them, the hits by one dimension as a table, and the
// link's QR code (scans are counted as source "qr").

import {h, mount, problemBox, fmtNum} from './dom.js';
import {get, enc} from './api.js';
import {barChart, colors} from './chart.js';

const GROUPS = ['country', 'device', 'os', 'referrer', 'language', 'source'];
const DAY = 86400000;

export async function renderBreakdown(container, code, group = 'country') {
  const totals = h('p', {id: 'link-totals', class: 'muted'}, 'Loading…');
  const chart = h('div', {id: 'link-daily'});
  const table = h('div', {id: 'link-groups'});
  const qr = h('div', {id: 'link-qr'},
    h('img', {src: `/v1/links/${enc(code)}/qr?format=svg&size=160`, alt: `QR code of ${code}`, width: 160, height: 160}),
    h('p', {class: 'muted'}, h('a', {href: `/v1/links/${enc(code)}/qr?format=png&size=1024`, download: `${code}.png`}, 'PNG'),
      ' · scans count as source qr'));
  mount(container, h('h2', {}, 'Breakdown of ', h('code', {}, code), ', last 30 days'),
    h('div', {class: 'row'}, GROUPS.map(g => h('button', {class: g === group ? '' : 'secondary',
      onclick: () => renderBreakdown(container, code, g)}, g))),
    totals, chart, h('div', {class: 'row top'}, table, qr));
  let st;
  try {
    const from = new Date(Date.now() - 30 * DAY).toISOString();
    st = await get(`/v1/links/${enc(code)}/stats?by=day&group=${group}&from=${enc(from)}`);
  } catch (err) {
    mount(totals, problemBox(err));
    return;
  }
  const t = st.totals;
  mount(totals, `${fmtNum(t.humans)} human clicks, ${fmtNum(t.bots)} bot hits, ${fmtNum(t.conversions)} conversions` +
    (t.conversion_value ? ` worth ${fmtNum(t.conversion_value, 2)}` : ''));
  const start = Date.parse(st.from), n = Math.max(1, Math.round((Date.parse(st.to) - start) / DAY));
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
