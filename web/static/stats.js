// Polls /v1/stats and turns counter snapshots into per-second rates.

import {get} from './api.js';

// POLL_MS is the poll interval: 3 s, or ?poll=<ms> in the page URL (at
// least 250), which the browser tests use to see rates sooner.
export const POLL_MS = Math.max(250, Number(new URLSearchParams(location.search).get('poll')) || 3000);
const KEEP = 60; // snapshots kept: three minutes at the default interval

// sampleKey names one series: metric name and sorted labels.
function sampleKey(s) {
  const labels = Object.entries(s.labels || {}).sort().map(([k, v]) => `${k}=${v}`).join(',');
  return `${s.name}{${labels}}`;
}

// Poller keeps the recent snapshots; each is {t (ms), samples: [..], byKey}.
export class Poller {
  constructor(onUpdate) {
    this.history = [];
    this.onUpdate = onUpdate;
    this.timer = null;
    this.error = null;
  }
  start() {
    const tick = async () => {
      try {
        const snap = await get('/v1/stats');
        const byKey = new Map(snap.samples.map(s => [sampleKey(s), s]));
        this.history.push({t: Date.parse(snap.time), samples: snap.samples, byKey});
        if (this.history.length > KEEP) this.history.shift();
        this.error = null;
      } catch (e) {
        this.error = e;
      }
      this.onUpdate(this);
      this.timer = setTimeout(tick, POLL_MS);
    };
    tick();
    return () => clearTimeout(this.timer);
  }
  latest() { return this.history[this.history.length - 1]; }

  // rates returns, for each group, points [t, per-second rate] between
  // consecutive snapshots. group(sample) names the group of a sample (or
  // returns null to skip it); samples of one group are summed.
  rates(group) {
    const out = new Map();
    for (let i = 1; i < this.history.length; i++) {
      const prev = this.history[i - 1], cur = this.history[i];
      const dt = (cur.t - prev.t) / 1000;
      if (!(dt > 0)) continue;
      const sums = new Map();
      for (const s of cur.samples) {
        const g = group(s);
        if (g === null || g === undefined) continue;
        const before = prev.byKey.get(sampleKey(s));
        let delta = s.value - (before ? before.value : 0);
        if (delta < 0) delta = s.value; // the counter restarted
        sums.set(g, (sums.get(g) || 0) + delta / dt);
      }
      for (const [g, v] of sums) {
        if (!out.has(g)) out.set(g, []);
        out.get(g).push([cur.t, v]);
      }
    }
    return out;
  }

  // total sums the latest values of the samples that match.
  total(match) {
    const snap = this.latest();
    if (!snap) return 0;
    return snap.samples.filter(match).reduce((a, s) => a + s.value, 0);
  }
}

export const timeLabel = t => new Date(t).toLocaleTimeString(undefined, {hour: '2-digit', minute: '2-digit', second: '2-digit'});

// topSeries turns a rates map into chart series, the busiest first.
export function topSeries(rates, limit, name = g => g) {
  return [...rates.entries()]
    .map(([g, points]) => ({name: name(g), points, sum: points.reduce((a, p) => a + p[1], 0)}))
    .sort((a, b) => b.sum - a.sum || a.name.localeCompare(b.name))
    .slice(0, limit);
}

export const DELIVERED = ['sent', 'delivered'];
export const FAILED = ['failed', 'dead', 'expired'];
