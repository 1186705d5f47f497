// Small DOM helpers. Text always goes in through textContent, never
// innerHTML, so values from the API cannot inject markup.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'value') el.value = v;
    else if (k === 'checked' || k === 'disabled' || k === 'selected' || k === 'hidden') el[k] = !!v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

export function mount(el, ...children) {
  clear(el);
  append(el, children);
  return el;
}

// problemBox renders an API error (RFC 9457 problem details) for people:
// the detail, and each invalid field.
export function problemBox(err) {
  const p = err && err.problem;
  if (!p) return h('div', {class: 'problem', role: 'alert'}, String(err && err.message || err));
  return h('div', {class: 'problem', role: 'alert'},
    h('strong', {}, p.title || 'Error'), ' ', p.detail || '',
    p.errors && p.errors.length ? h('ul', {}, p.errors.map(e => h('li', {}, h('code', {}, e.field), ': ', e.detail))) : null);
}

export function fmtTime(s) {
  if (!s) return '';
  const d = new Date(s);
  return isNaN(d) ? s : d.toLocaleString(undefined, {dateStyle: 'medium', timeStyle: 'medium'});
}

export function fmtNum(n, digits = 0) {
  if (n === undefined || n === null || isNaN(n)) return '–';
  return Number(n).toLocaleString(undefined, {maximumFractionDigits: digits, minimumFractionDigits: digits});
}

export function badge(status) {
  const good = ['sent', 'delivered', 'ok', 'allowed', 'ready', 'closed'];
  const bad = ['failed', 'dead', 'expired', 'failing', 'refused', 'open', 'blocked'];
  const cls = good.includes(status) ? 'badge ok' : bad.includes(status) ? 'badge bad' : 'badge';
  return h('span', {class: cls}, status);
}
