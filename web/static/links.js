// Links: the most clicked links, one link's clicks over time (human and
// bot), why bots were counted as bots, and its hits live as they come.

import {h, mount, problemBox, fmtTime, fmtNum} from './dom.js';
import {get, enc} from './api.js';
import {barChart, colors} from './chart.js';
import {renderBreakdown, renderLive, stopLive} from './linkstats.js';

const SPANS = [['1h', '1m'], ['24h', '1h'], ['168h', '6h'], ['720h', '24h']];

export async function render(main, ctx) {
  const top = h('div');
  const detail = h('div', {class: 'card', id: 'link-detail'});
  const liveCard = h('div', {class: 'card', id: 'link-live'});
  const breakdown = h('div', {class: 'card', id: 'link-breakdown'});
  mount(main, h('h1', {}, 'Links'),
    h('div', {class: 'card'}, h('h2', {}, 'Top links'), top), detail, liveCard, breakdown);
  if (ctx) ctx.onStop(stopLive);
  let items;
  try {
    items = (await get('/v1/stats/links?limit=20')).items;
  } catch (err) {
    mount(top, problemBox(err));
    detail.hidden = true;
    liveCard.hidden = true;
    breakdown.hidden = true;
    return;
  }
  if (!items.length) {
    mount(top, h('p', {class: 'muted'}, 'No links yet. Create one with ', h('code', {}, 'sluice shorten https://example.com'), '.'));
    detail.hidden = true;
    liveCard.hidden = true;
    breakdown.hidden = true;
    return;
  }
  mount(top, h('table', {id: 'top-links'},
    h('thead', {}, h('tr', {}, ['code', 'target', 'clicks', 'bot hits', 'human / bot', 'first click', ''].map((c, i) => h('th', {class: i === 2 || i === 3 ? 'num' : ''}, c)))),
    h('tbody', {}, items.map(l => {
      const total = l.clicks + l.bot_hits;
      const hb = h('div', {class: 'bar', title: `${l.clicks} human, ${l.bot_hits} bot`}, h('span', {class: 'h'}), h('span', {class: 'b'}));
      if (total) {
        hb.children[0].style.width = (100 * l.clicks / total) + '%';
        hb.children[1].style.width = (100 * l.bot_hits / total) + '%';
      }
      return h('tr', {},
        h('td', {}, h('a', {href: l.short_url, target: '_blank', rel: 'noopener noreferrer'}, h('code', {}, l.code)),
          l.domain ? h('span', {class: 'muted'}, ' on ' + l.domain) : ''),
        h('td', {class: 'mono'}, l.url.length > 60 ? l.url.slice(0, 57) + '…' : l.url),
        h('td', {class: 'num'}, fmtNum(l.clicks)), h('td', {class: 'num'}, fmtNum(l.bot_hits)), h('td', {}, hb),
        h('td', {}, fmtTime(l.first_click_at) || h('span', {class: 'muted'}, 'none yet')),
        h('td', {}, h('button', {class: 'secondary', onclick: () => showAll(l.code, l.domain)}, 'Clicks over time')));
    }))));

  let span = SPANS[1];
  // domain is the link's custom domain, if any: the same code may be a
  // link on each domain.
  const show = async (code, domain) => {
    const chart = h('div', {id: 'clicks-chart'});
    const reasons = h('div');
    mount(detail, h('h2', {}, 'Clicks on ', h('code', {}, code)),
      h('div', {class: 'row'}, SPANS.map(s => h('button', {class: s === span ? '' : 'secondary', onclick: () => { span = s; show(code, domain); }}, 'last ' + label(s[0])))),
      chart, reasons);
    try {
      const series = await get(`/v1/links/${enc(code)}/clicks?since=${span[0]}&bucket=${span[1]}${domainQuery(domain)}`);
      const width = series.bucket_seconds * 1000;
      const start = Math.floor(Date.parse(series.since) / width) * width;
      const n = Math.ceil((Date.parse(series.until) - start) / width);
      const human = new Array(n).fill(0), bot = new Array(n).fill(0);
      for (const b of series.buckets) {
        const i = Math.floor((Date.parse(b.start) - start) / width);
        if (i >= 0 && i < n) { human[i] += b.human; bot[i] += b.bot; }
      }
      const labels = human.map((_, i) => tick(start + i * width, width));
      barChart(chart, labels, [{name: 'human clicks', values: human, color: colors.human}, {name: 'bot hits', values: bot, color: colors.bot}]);
      const rs = Object.entries(series.bot_reasons || {}).sort((a, b) => b[1] - a[1]);
      mount(reasons, rs.length
        ? h('p', {}, 'Bot hits by reason: ', rs.map(([r, n], i) => [i ? ', ' : '', h('code', {}, r), ' ', fmtNum(n)]))
        : h('p', {class: 'muted'}, 'No bot hits in this span.'));
    } catch (err) { mount(reasons, problemBox(err)); }
  };
  const showAll = (code, domain) => { show(code, domain); renderLive(liveCard, code, domain); renderBreakdown(breakdown, code, 'country', domain); };
  showAll(items[0].code, items[0].domain);
}

// domainQuery names a link's custom domain in a /v1/links/{code} URL.
function domainQuery(domain) {
  return domain ? `&domain=${enc(domain)}` : '';
}

function label(d) {
  return {'1h': 'hour', '24h': 'day', '168h': 'week', '720h': '30 days'}[d] || d;
}

function tick(t, width) {
  const d = new Date(t);
  if (width >= 86400000) return d.toLocaleDateString(undefined, {month: 'short', day: 'numeric'});
  if (width >= 3600000) return d.toLocaleString(undefined, {weekday: 'short', hour: '2-digit'});
  return d.toLocaleTimeString(undefined, {hour: '2-digit', minute: '2-digit'});
}
