// Rate limiting pages: policies (view, edit, delete), the simulator with a
// plot of allowed and refused requests over the simulated timeline, and
// emergency blocks.

import {h, mount, problemBox, fmtTime, fmtNum} from './dom.js';
import {api, get, enc} from './api.js';
import {barChart, lineChart, colors} from './chart.js';

const ALGORITHMS = ['token_bucket', 'gcra', 'fixed_window', 'sliding_window_log', 'sliding_window_counter', 'concurrency'];
const MODES = ['hard', 'soft', 'shadow'];

export async function renderPolicies(main) {
  const list = h('div');
  const editor = h('div', {class: 'card', id: 'policy-editor'});
  const sim = h('div', {class: 'card', id: 'simulator'});
  mount(main, h('h1', {}, 'Rate limit policies'), h('div', {class: 'card'}, list), editor, sim);

  const refresh = async (select) => {
    let items = [];
    try {
      items = (await get('/v1/ratelimit/policies')).items;
    } catch (err) {
      mount(list, problemBox(err));
      return;
    }
    mount(list, h('table', {id: 'policies'},
      h('thead', {}, h('tr', {}, ['name', 'algorithm', 'limit', 'period', 'burst', 'mode', 'source', ''].map(c => h('th', {}, c)))),
      h('tbody', {}, items.map(p => h('tr', {},
        h('td', {}, h('strong', {}, p.name), p.description ? h('div', {class: 'muted'}, p.description) : null),
        h('td', {}, p.algorithm), h('td', {class: 'num'}, fmtNum(p.limit)), h('td', {}, p.period),
        h('td', {class: 'num'}, fmtNum(p.burst)), h('td', {}, p.mode), h('td', {}, p.source),
        h('td', {}, h('button', {class: 'secondary', onclick: () => edit(p)}, 'Edit / simulate')))))));
    if (select) edit(items.find(p => p.name === select) || items[0]);
    else if (items.length && !editor.firstChild) edit(items[0]);
  };

  const edit = (p) => {
    p = p || {name: '', algorithm: 'token_bucket', limit: 60, period: '1m', burst: 60, mode: 'hard', burst_over: 0};
    const f = {};
    const field = (label, key, input) => { f[key] = input; return h('label', {}, label, input); };
    const select = (key, options) => h('select', {name: key}, options.map(o => h('option', {value: o, selected: p[key] === o}, o)));
    const out = h('div');
    const readOnly = p.source === 'config';
    mount(editor,
      h('h2', {}, p.name ? `Policy ${p.name}` : 'New policy'),
      readOnly ? h('p', {class: 'notice'}, 'This policy comes from the configuration file: it can be simulated, not changed here.') : null,
      h('form', {class: 'row', id: 'policy-form', onsubmit: async e => {
        e.preventDefault();
        const body = policyFrom(f);
        try {
          await api('PUT', '/v1/ratelimit/policies/' + enc(body.name), body);
          mount(out, h('div', {class: 'success'}, `Saved ${body.name}; every node applies it within a second.`));
          refresh(body.name);
        } catch (err) { mount(out, problemBox(err)); }
      }},
      field('name', 'name', h('input', {name: 'name', value: p.name, required: true, size: 14})),
      field('algorithm', 'algorithm', select('algorithm', ALGORITHMS)),
      field('limit', 'limit', h('input', {name: 'limit', type: 'number', min: 0, value: p.limit, size: 6})),
      field('period', 'period', h('input', {name: 'period', value: p.period, size: 6})),
      field('burst', 'burst', h('input', {name: 'burst', type: 'number', min: 0, value: p.burst, size: 6})),
      field('mode', 'mode', select('mode', MODES)),
      field('burst over (soft)', 'burst_over', h('input', {name: 'burst_over', type: 'number', min: 0, value: p.burst_over || 0, size: 6})),
      field('description', 'description', h('input', {name: 'description', value: p.description || '', size: 22})),
      h('button', {type: 'submit', disabled: readOnly}, 'Save'),
      p.name && !readOnly ? h('button', {type: 'button', class: 'danger', onclick: async () => {
        if (!confirm(`Delete policy ${p.name}?`)) return;
        try { await api('DELETE', '/v1/ratelimit/policies/' + enc(p.name)); editor.replaceChildren(); refresh(); }
        catch (err) { mount(out, problemBox(err)); }
      }}, 'Delete') : null,
      h('button', {type: 'button', class: 'secondary', onclick: () => edit(null)}, 'New policy')),
      out);
    renderSimulator(sim, () => policyFrom(f));
  };
  await refresh();
}

function policyFrom(f) {
  const p = {name: f.name.value.trim(), algorithm: f.algorithm.value, limit: Number(f.limit.value), period: f.period.value.trim(),
    burst: Number(f.burst.value), mode: f.mode.value, burst_over: Number(f.burst_over.value)};
  if (f.description.value.trim()) p.description = f.description.value.trim();
  return p;
}

// traffic builds the simulated requests: a steady rate, with an optional
// burst at a chosen second.
function traffic(rate, seconds, burstAt, burstSize) {
  const reqs = [];
  const n = Math.min(Math.round(rate * seconds), 20000);
  for (let i = 0; i < n; i++) reqs.push({at_ms: Math.floor(i * 1000 / rate), key: 'sim'});
  for (let i = 0; i < burstSize && burstAt < seconds; i++) reqs.push({at_ms: Math.floor(burstAt * 1000), key: 'sim'});
  return reqs.sort((a, b) => a.at_ms - b.at_ms);
}

function renderSimulator(card, policy) {
  const rate = h('input', {name: 'rate', type: 'number', min: 0.1, step: 'any', value: 2, size: 5});
  const seconds = h('input', {name: 'seconds', type: 'number', min: 1, value: 120, size: 5});
  const burstAt = h('input', {name: 'burst_at', type: 'number', min: 0, value: 30, size: 5});
  const burstSize = h('input', {name: 'burst_size', type: 'number', min: 0, value: 50, size: 5});
  const summary = h('div');
  const bars = h('div', {id: 'sim-chart'});
  const remaining = h('div', {id: 'sim-remaining'});
  mount(card, h('h2', {}, 'Simulator'),
    h('p', {class: 'muted'}, 'Replays synthetic traffic against the policy above (saved or not) on a clock starting at 0. Pure: no live counter changes.'),
    h('form', {class: 'row', id: 'sim-form', onsubmit: async e => {
      e.preventDefault();
      const secs = Number(seconds.value);
      const reqs = traffic(Number(rate.value), secs, Number(burstAt.value), Number(burstSize.value));
      try {
        const res = await api('POST', '/v1/ratelimit/simulate', {policy: policy(), requests: reqs});
        plot(reqs, res, secs);
      } catch (err) { mount(summary, problemBox(err)); bars.replaceChildren(); remaining.replaceChildren(); }
    }},
    h('label', {}, 'requests / s', rate), h('label', {}, 'for seconds', seconds),
    h('label', {}, 'burst at second', burstAt), h('label', {}, 'burst size', burstSize),
    h('button', {type: 'submit'}, 'Simulate')),
    summary, bars, remaining);

  const plot = (reqs, res, secs) => {
    const width = Math.max(1, Math.ceil(secs / 60)); // seconds per bar, at most ~60 bars
    const nb = Math.ceil(secs / width);
    const allowed = new Array(nb).fill(0), refused = new Array(nb).fill(0);
    const rem = [];
    reqs.forEach((r, i) => {
      const d = res.decisions[i];
      const b = Math.min(nb - 1, Math.floor(r.at_ms / 1000 / width));
      (d.allowed ? allowed : refused)[b]++;
      rem.push([r.at_ms / 1000, d.remaining]);
    });
    mount(summary, h('p', {}, h('strong', {}, fmtNum(res.allowed)), ' allowed, ', h('strong', {}, fmtNum(res.refused)), ' refused',
      res.would_refuse ? [', ', h('strong', {}, fmtNum(res.would_refuse)), ' would be refused in hard mode'] : null,
      ` of ${fmtNum(reqs.length)} requests.`));
    barChart(bars, allowed.map((_, i) => `${i * width}s`), [{name: 'allowed', values: allowed, color: colors.good}, {name: 'refused', values: refused, color: colors.bad}]);
    lineChart(remaining, [{name: 'remaining after each request', points: rem}], {xLabel: x => `${Math.round(x)}s`});
  };
}

export async function renderBlocks(main) {
  const list = h('div');
  const out = h('div');
  const f = {
    key: h('input', {name: 'key', required: true, placeholder: 'api_key:abc or 203.0.113.9', size: 24}),
    policy: h('input', {name: 'policy', placeholder: 'every policy', size: 12}),
    duration: h('input', {name: 'duration', value: '15m', size: 6}),
    reason: h('input', {name: 'reason', placeholder: 'why', size: 24}),
  };
  mount(main, h('h1', {}, 'Blocks'),
    h('div', {class: 'card'}, h('h2', {}, 'Block a key'),
      h('p', {class: 'muted'}, 'Every node refuses the key within a second, under one policy or all of them, until the block expires.'),
      h('form', {class: 'row', id: 'block-form', onsubmit: async e => {
        e.preventDefault();
        const body = {key: f.key.value.trim(), duration: f.duration.value.trim(), reason: f.reason.value.trim()};
        if (f.policy.value.trim()) body.policy = f.policy.value.trim();
        try { await api('POST', '/v1/ratelimit/blocks', body); mount(out); f.key.value = ''; refresh(); }
        catch (err) { mount(out, problemBox(err)); }
      }},
      h('label', {}, 'key', f.key), h('label', {}, 'policy', f.policy), h('label', {}, 'duration', f.duration),
      h('label', {}, 'reason', f.reason), h('button', {type: 'submit'}, 'Block')), out),
    h('div', {class: 'card'}, h('h2', {}, 'Active blocks'), list));
  const refresh = async () => {
    try {
      const items = (await get('/v1/ratelimit/blocks')).items;
      mount(list, items.length ? h('table', {id: 'blocks'},
        h('thead', {}, h('tr', {}, ['key', 'policy', 'reason', 'since', 'until', ''].map(c => h('th', {}, c)))),
        h('tbody', {}, items.map(b => h('tr', {},
          h('td', {}, h('code', {}, b.key)), h('td', {}, b.policy || h('span', {class: 'muted'}, 'every policy')),
          h('td', {}, b.reason), h('td', {}, fmtTime(b.created_at)), h('td', {}, fmtTime(b.expires_at)),
          h('td', {}, h('button', {class: 'danger', onclick: async () => {
            try {
              const q = b.policy ? '?policy=' + enc(b.policy) : '?policy=';
              await api('DELETE', '/v1/ratelimit/blocks/' + enc(b.key) + q);
              refresh();
            } catch (err) { mount(out, problemBox(err)); }
          }}, 'Unblock')))))) : h('p', {class: 'muted'}, 'No key is blocked.'));
    } catch (err) { mount(list, problemBox(err)); }
  };
  await refresh();
}

