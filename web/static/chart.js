// Charts drawn as SVG: a line chart of several series and a stacked bar
// chart. Small on purpose: axes, grid lines, a legend and a title per point.

const NS = 'http://www.w3.org/2000/svg';
export const colors = {good: '#1a9c5b', bad: '#d6453d', human: '#2f6fed', bot: '#f0a33a'};
export const palette = ['#2f6fed', '#d6453d', '#1a9c5b', '#f0a33a', '#8b5cf6', '#0ea5e9', '#e11d74', '#64748b', '#84cc16', '#a16207'];

function svg(tag, attrs, text) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

// The chart is drawn at its container's width in pixels, so text is never
// stretched; H is fixed.
let W = 640;
const H = 220, L = 48, R = 12, T = 10, B = 26;

// niceMax returns the top of the y axis: four equal steps of a round size
// covering v; whole steps when the data are whole numbers.
function niceMax(v, whole) {
  if (!(v > 0)) return 4;
  const raw = v / 4;
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) {
    const step = m * p;
    if (whole && !Number.isInteger(step)) continue;
    if (step >= raw) return step * 4;
  }
  return 40 * p;
}

function fmtTick(v) {
  if (v >= 1e6) return (v / 1e6).toFixed(1).replace(/\.0$/, '') + 'M';
  if (v >= 1e3) return (v / 1e3).toFixed(1).replace(/\.0$/, '') + 'k';
  return Number.isInteger(v) ? String(v) : v.toFixed(v < 1 ? 2 : 1);
}

function frame(root, yMax, xTicks) {
  for (let i = 0; i <= 4; i++) {
    const y = T + (H - T - B) * (1 - i / 4);
    root.appendChild(svg('line', {x1: L, x2: W - R, y1: y, y2: y, class: i ? 'gridline' : 'axis'}));
    root.appendChild(svg('text', {x: L - 6, y: y + 3, 'text-anchor': 'end'}, fmtTick(yMax * i / 4)));
  }
  for (const [x, label] of xTicks) {
    const anchor = x < L + 30 ? 'start' : x > W - R - 30 ? 'end' : 'middle';
    root.appendChild(svg('text', {x, y: H - 8, 'text-anchor': anchor}, label));
  }
}

const colorOf = (s, i) => s.color || palette[i % palette.length];

function legend(container, series) {
  const div = document.createElement('div');
  div.className = 'legend';
  series.forEach((s, i) => {
    const name = s.name;
    const item = document.createElement('span');
    const sw = document.createElement('span');
    sw.className = 'sw';
    sw.style.background = colorOf(s, i);
    item.append(sw, name);
    div.appendChild(item);
  });
  container.appendChild(div);
}

function shell(container, empty) {
  container.classList.add('chart');
  while (container.firstChild) container.removeChild(container.firstChild);
  W = Math.max(320, Math.round(container.clientWidth || 640));
  const root = svg('svg', {viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img'});
  container.appendChild(root);
  if (empty) root.appendChild(svg('text', {x: W / 2, y: H / 2, 'text-anchor': 'middle', class: 'empty'}, empty));
  return root;
}

// lineChart draws series [{name, points: [[x, y], ...]}] sharing an x axis
// (numbers, e.g. milliseconds); xLabel formats an x value for the ticks.
export function lineChart(container, series, {xLabel = String, emptyText = 'No data yet'} = {}) {
  const pts = series.flatMap(s => s.points);
  const root = shell(container, pts.length ? '' : emptyText);
  if (!pts.length) { legend(container, series); return; }
  const xs = pts.map(p => p[0]);
  const x0 = Math.min(...xs), x1 = Math.max(...xs) || x0 + 1;
  const yMax = niceMax(Math.max(...pts.map(p => p[1])), pts.every(p => Number.isInteger(p[1])));
  const sx = x => L + (W - L - R) * (x1 === x0 ? 0.5 : (x - x0) / (x1 - x0));
  const sy = y => T + (H - T - B) * (1 - y / yMax);
  frame(root, yMax, [0, 0.5, 1].map(f => [sx(x0 + f * (x1 - x0)), xLabel(x0 + f * (x1 - x0))]));
  series.forEach((s, i) => {
    if (!s.points.length) return;
    const d = s.points.map((p, j) => (j ? 'L' : 'M') + sx(p[0]).toFixed(1) + ' ' + sy(p[1]).toFixed(1)).join(' ');
    const color = colorOf(s, i);
    const attrs = {d, fill: 'none', stroke: color, 'stroke-width': 2};
    if (s.dash) attrs['stroke-dasharray'] = s.dash;
    root.appendChild(svg('path', attrs));
    const last = s.points[s.points.length - 1];
    const dot = svg('circle', {cx: sx(last[0]), cy: sy(last[1]), r: 2.5, fill: color});
    dot.appendChild(svg('title', {}, `${s.name}: ${fmtTick(last[1])}`));
    root.appendChild(dot);
  });
  legend(container, series);
}

// barChart draws stacked bars: labels[i] under bar i, and stacks
// [{name, values: [v0, v1, ...]}] piled in order.
export function barChart(container, labels, stacks, {emptyText = 'No data', tickEvery} = {}) {
  const totals = labels.map((_, i) => stacks.reduce((a, s) => a + (s.values[i] || 0), 0));
  const root = shell(container, labels.length ? '' : emptyText);
  if (!labels.length) { legend(container, stacks); return; }
  const yMax = niceMax(Math.max(...totals), totals.every(Number.isInteger));
  const n = labels.length, slot = (W - L - R) / n, bw = Math.max(1, slot * 0.8);
  const every = tickEvery || Math.max(1, Math.ceil(n / 8));
  const ticks = [];
  for (let i = 0; i < n; i += every) ticks.push([L + slot * (i + 0.5), labels[i]]);
  frame(root, yMax, ticks);
  const sy = v => (H - T - B) * v / yMax;
  for (let i = 0; i < n; i++) {
    let base = H - B;
    stacks.forEach((s, k) => {
      const v = s.values[i] || 0;
      if (!v) return;
      const hgt = sy(v);
      base -= hgt;
      const rect = svg('rect', {x: L + slot * i + (slot - bw) / 2, y: base, width: bw, height: hgt, fill: colorOf(s, k)});
      rect.appendChild(svg('title', {}, `${labels[i]} ${s.name}: ${v}`));
      root.appendChild(rect);
    });
  }
  legend(container, stacks);
}
