// Workflows: every workflow (key, version, trigger, steps, live runs); a
// workflow's steps and its runs, filtered by user and status, a page at a
// time; and a run's timeline: each step with its times, outcome and
// notification (linked to that notification's delivery timeline), and
// the wait the run is at. runsPanel shows a user's runs beside their
// notifications on the Notifications page. Shown runs that are still live
// are read again every few seconds, so a run is seen moving on.

import {h, mount, problemBox, fmtTime, fmtNum, badge} from './dom.js';
import {api, get, enc} from './api.js';
import {POLL_MS} from './stats.js';

const STATUSES = ['running', 'waiting', 'completed', 'canceled', 'failed'];
const KINDS = ['send', 'wait', 'wait_for', 'branch', 'split', 'exit'];
const live = run => run.status === 'running' || run.status === 'waiting';

const runBadge = status =>
  h('span', {class: {completed: 'badge ok', failed: 'badge bad', waiting: 'badge warn'}[status] || 'badge'}, status);

export async function render(main, ctx) {
  const params = new URLSearchParams(location.hash.split('?')[1] || '');
  if (params.get('key')) return renderWorkflow(main, ctx, params);
  return renderList(main);
}

// liveCounts reads the live runs per workflow and status from the node's
// sluice_workflow_runs gauge (GET /v1/stats, one request for them all;
// counted in the store every 15 s): a map key → {running, waiting}, or
// null when the stats are not readable (no admin scope) or the node does
// not export the workflow series (its lateness histogram is always there
// when it does, while the gauge has no series until a run is live).
async function liveCounts() {
  let snap;
  try { snap = await get('/v1/stats'); } catch { return null; }
  if (!snap.samples.some(s => s.name === 'sluice_workflow_resume_lateness_seconds_count')) return null;
  const out = new Map();
  for (const s of snap.samples.filter(s => s.name === 'sluice_workflow_runs' && s.labels)) {
    const c = out.get(s.labels.workflow) || {running: 0, waiting: 0};
    c[s.labels.status] = s.value;
    out.set(s.labels.workflow, c);
  }
  return out;
}

async function renderList(main) {
  const list = h('div', {id: 'workflow-list'});
  mount(main, h('h1', {}, 'Workflows'),
    h('p', {class: 'muted'}, 'A workflow starts a run for a user when its trigger event arrives (POST /v1/events); ' +
      'the run sends notifications and waits, for a time or for another event. Open one to see its steps and runs.'),
    h('div', {class: 'card'}, list));
  let items, counts;
  try { [{items}, counts] = await Promise.all([get('/v1/workflows'), liveCounts()]); }
  catch (err) { mount(list, problemBox(err)); return; }
  if (!items.length) {
    mount(list, h('p', {class: 'muted'}, 'No workflows yet. Define one with ', h('code', {}, 'PUT /v1/workflows/{key}'),
      ' or ', h('code', {}, 'sluice workflows put'), '.'));
    return;
  }
  const cols = ['key', 'version', 'trigger event', 'entry', 'steps', counts ? 'live runs (running / waiting)' : null, 'updated'];
  mount(list, h('table', {id: 'workflows'},
    h('thead', {}, h('tr', {}, cols.filter(c => c).map(c => h('th', {scope: 'col', class: c === 'version' || c === 'steps' ? 'num' : null}, c)))),
    h('tbody', {}, items.map(w => {
      const c = counts && (counts.get(w.key) || {running: 0, waiting: 0});
      return h('tr', {'data-key': w.key},
        h('th', {scope: 'row'}, h('a', {href: `#/workflows?key=${enc(w.key)}`}, w.key)),
        h('td', {class: 'num'}, fmtNum(w.version)),
        h('td', {}, h('code', {}, w.trigger.event)),
        h('td', {}, w.entry && w.entry.once_per ? `once per ${w.entry.once_per}` : 'every event'),
        h('td', {class: 'num'}, fmtNum(w.steps.length)),
        c ? h('td', {class: 'live'}, `${fmtNum(c.running)} / ${fmtNum(c.waiting)}`) : null,
        h('td', {}, fmtTime(w.updated_at)));
    }))),
  counts ? h('p', {class: 'muted'}, 'Live runs are counted in the store every 15 seconds.') : null);
}

// stepKind is the kind of a step as given in a definition.
const stepKind = st => KINDS.find(k => k in st) || '?';

async function renderWorkflow(main, ctx, params) {
  const key = params.get('key');
  const def = h('div', {id: 'workflow-definition'}, h('p', {class: 'muted'}, 'Loading…'));
  const runs = h('div', {id: 'workflow-runs'});
  const user = h('input', {name: 'user', id: 'runs-user', value: params.get('user') || '', placeholder: 'any user', size: 18});
  const status = h('select', {name: 'status', id: 'runs-status'},
    h('option', {value: ''}, 'any status'), STATUSES.map(s => h('option', {value: s, selected: params.get('status') === s}, s)));
  mount(main, h('p', {}, h('a', {href: '#/workflows'}, '← All workflows')),
    h('h1', {}, 'Workflow ', h('code', {}, key)),
    h('div', {class: 'card'}, def),
    h('div', {class: 'card'}, h('h2', {}, 'Runs'),
      h('form', {class: 'row', id: 'runs-filter', onsubmit: e => {
        e.preventDefault();
        const u = user.value.trim();
        location.hash = `#/workflows?key=${enc(key)}${u ? '&user=' + enc(u) : ''}${status.value ? '&status=' + enc(status.value) : ''}`;
      }}, h('label', {}, 'user id', user), h('label', {}, 'run status', status), h('button', {type: 'submit'}, 'Filter')),
      runs));
  const q = new URLSearchParams();
  if (params.get('user')) q.set('user_id', params.get('user'));
  if (params.get('status')) q.set('status', params.get('status'));
  runList(runs, `/v1/workflows/${enc(key)}/runs?${q}`, ctx, {user: true, empty: 'No run matches.'});
  try {
    const w = await get('/v1/workflows/' + enc(key));
    mount(def, h('p', {},
      'Version ', h('strong', {}, fmtNum(w.version)), ', started by the event ', h('code', {}, w.trigger.event),
      w.entry && w.entry.once_per ? `, at most once per ${w.entry.once_per} per user` : '',
      '; updated ', fmtTime(w.updated_at), '.'),
    h('table', {id: 'workflow-steps'},
      h('caption', {class: 'muted'}, 'Steps (runs keep the version they started on)'),
      h('thead', {}, h('tr', {}, ['#', 'name', 'kind', 'definition'].map(c => h('th', {scope: 'col'}, c)))),
      h('tbody', {}, w.steps.map((st, i) => {
        const kind = stepKind(st);
        const rest = Object.assign({}, st);
        delete rest.name;
        delete rest[kind];
        return h('tr', {},
          h('td', {class: 'num'}, i), h('td', {}, st.name || ''), h('td', {}, h('code', {}, kind)),
          h('td', {}, h('code', {}, JSON.stringify(st[kind])),
            Object.keys(rest).length ? [' ', h('code', {class: 'muted'}, JSON.stringify(rest))] : null));
      }))));
  } catch (err) { mount(def, problemBox(err)); }
}

// runsPanel shows user's runs of every workflow in el (the Notifications
// page's side panel).
export function runsPanel(el, user, ctx) {
  const list = h('div');
  mount(el, h('h2', {}, 'Workflow runs'), list);
  runList(list, `/v1/users/${enc(user)}/workflow-runs?`, ctx, {compact: true, empty: 'No workflow run for this user.'});
}

// runList mounts the runs read from path (a list route and its query,
// ending in ? or a parameter) into el, 50 at a time with "Load more";
// each row opens its timeline, and a live run has a Cancel button. opts:
// user (show the user column), compact (three columns for a side panel:
// the run with its workflow, its status, the buttons), empty (the text
// for no runs).
function runList(el, path, ctx, opts) {
  const shown = new Map(); // run id → {run, row}
  const body = h('tbody');
  const cols = opts.compact ? ['run', 'status', 'actions'] : ['started', 'run', opts.user ? 'user' : null, 'status', 'at', 'actions'].filter(c => c);
  const table = h('table', {class: opts.compact ? 'runs compact' : 'runs'},
    h('thead', {}, h('tr', {}, cols.map(c => h('th', {scope: 'col'}, c === 'actions' ? h('span', {class: 'sr-only'}, c) : c)))), body);
  const foot = h('div');
  let cursor = '';
  const page = c => get(`${path}${path.endsWith('?') ? '' : '&'}limit=50${c ? '&cursor=' + enc(c) : ''}`);
  // draw mounts the table once it has rows (never again while it is
  // there: moving it would take the focus off its buttons).
  const draw = () => {
    if (shown.size && table.parentNode === el) return;
    mount(el, shown.size ? table : h('p', {class: 'muted'}, opts.empty), foot);
  };

  const show = (run, before) => {
    const had = shown.get(run.id);
    // A read that started before a change (a cancel, say) answers later
    // with the run as it was: an older run never replaces a newer one.
    if (had && (had.run.updated_at === run.updated_at || Date.parse(run.updated_at) < Date.parse(had.run.updated_at))) return;
    const row = runRow(run, opts, () => toggle(run.id), () => cancel(run.id));
    if (had) {
      const open = isOpen(had.row);
      const focus = had.row.contains(document.activeElement) && document.activeElement.classList.item(1);
      if (open) had.row.nextSibling.remove();
      had.row.replaceWith(row);
      shown.set(run.id, {run, row});
      if (open) toggle(run.id);
      const again = focus && row.querySelector('button.' + focus);
      if (again) again.focus();
    } else {
      body.insertBefore(row, before || null);
      shown.set(run.id, {run, row});
    }
  };
  const toggle = id => {
    const {run, row} = shown.get(id);
    const btn = row.querySelector('button.open-timeline');
    if (isOpen(row)) {
      row.nextSibling.remove();
      btn.setAttribute('aria-expanded', 'false');
      return;
    }
    btn.setAttribute('aria-expanded', 'true');
    row.after(h('tr', {class: 'expand', 'data-run': id}, h('td', {colspan: cols.length}, runTimeline(run))));
  };
  const cancel = async id => {
    const {run, row} = shown.get(id);
    const btn = row.querySelector('button.cancel-run');
    btn.disabled = true;
    try {
      const r = await api('POST', `/v1/workflows/${enc(run.workflow)}/cancel`, {run_id: id});
      const now = await get('/v1/workflow-runs/' + enc(id));
      show(now);
      if (!isOpen(shown.get(id).row)) toggle(id);
      shown.get(id).row.nextSibling.querySelector('td').prepend(h('p', {class: 'cancel-outcome', role: 'status'},
        r.canceled.includes(id) ? 'Run canceled.' : `The run had already ended (${now.status}).`));
    } catch (err) {
      btn.disabled = false;
      row.querySelector('td:last-child').append(problemBox(err));
    }
  };
  const more = async () => {
    try {
      const p = await page(cursor);
      cursor = p.next_cursor;
      for (const run of p.items) show(run);
      mount(foot, cursor ? h('p', {}, h('button', {class: 'secondary', onclick: more}, 'Load more runs')) : null);
      draw();
    } catch (err) { mount(foot, problemBox(err)); }
  };

  // refresh reads the first page again (new runs go on top, changed ones
  // are redrawn) and each shown live run it did not hold (at most 20).
  let timer = null, stopped = false;
  const refresh = async () => {
    try {
      const p = await page('');
      const first = body.firstChild;
      for (const run of p.items) show(run, shown.has(run.id) ? null : first);
      const seen = new Set(p.items.map(r => r.id));
      const stale = [...shown.values()].filter(s => live(s.run) && !seen.has(s.run.id)).slice(0, 20);
      for (const s of stale) show(await get('/v1/workflow-runs/' + enc(s.run.id)));
      draw();
    } catch { /* shown as it was; the next tick tries again */ }
    if (!stopped) timer = setTimeout(refresh, POLL_MS);
  };
  ctx.onStop(() => { stopped = true; clearTimeout(timer); });
  mount(el, h('p', {class: 'muted'}, 'Loading…'));
  more().then(() => { if (!stopped) timer = setTimeout(refresh, POLL_MS); });
}

const isOpen = row => !!(row.nextSibling && row.nextSibling.classList && row.nextSibling.classList.contains('expand'));

// runRow is one run's row: what it is at (the step in flight, or the wait
// with its event and deadline), its timeline toggle and, while live, Cancel.
function runRow(run, opts, onToggle, onCancel) {
  const last = run.steps[run.steps.length - 1];
  const at = run.waiting_for ? waitText(run.waiting_for)
    : last ? `#${last.index} ${last.name || last.kind}${last.outcome ? ': ' + last.outcome : ''}` : '–';
  const actions = h('td', {class: 'actions'},
    h('button', {class: 'secondary open-timeline', type: 'button', 'aria-expanded': 'false', 'aria-label': `Timeline of run ${run.id}`, onclick: onToggle}, 'Timeline'),
    live(run) ? [' ', h('button', {class: 'danger cancel-run', type: 'button', 'aria-label': `Cancel run ${run.id}`, onclick: onCancel}, 'Cancel')] : null);
  const attrs = {'data-id': run.id, 'data-status': run.status};
  if (opts.compact) {
    return h('tr', attrs,
      h('td', {}, h('a', {href: `#/workflows?key=${enc(run.workflow)}`}, run.workflow), h('span', {class: 'muted'}, ` v${run.version}`),
        h('div', {}, h('code', {class: 'id'}, run.id)), h('div', {class: 'muted'}, fmtTime(run.created_at))),
      h('td', {}, runBadge(run.status), h('div', {class: 'at'}, at)),
      actions);
  }
  return h('tr', attrs,
    h('td', {}, fmtTime(run.created_at)),
    h('td', {}, h('code', {}, run.id)),
    opts.user ? h('td', {}, h('a', {href: `#/notifications?user=${enc(run.user_id)}`, title: `${run.user_id}'s notifications`}, run.user_id)) : null,
    h('td', {}, runBadge(run.status)),
    h('td', {class: 'at'}, at),
    actions);
}

// waitText says what a waiting run waits for: an event (with the values
// its data must hold) until a deadline, or a time.
function waitText(w) {
  const match = w.match ? ' matching ' + Object.entries(w.match).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(', ') : '';
  if (w.event) return `waiting for ${w.event}${match}${w.until ? ' until ' + fmtTime(w.until) : ', no deadline'}`;
  return `waiting until ${fmtTime(w.until)}`;
}

// runTimeline is a run's steps in the order they ran: index, name, kind,
// status, start and end, the outcome, the notification a send made (a
// link to its delivery timeline) and, on a waiting step, what it awaits.
export function runTimeline(run) {
  const cls = {completed: 'ok', failed: 'bad', canceled: 'off', waiting: 'warn'};
  return h('div', {class: 'run-timeline'},
    h('p', {}, 'Run ', h('code', {}, run.id), ' of ', h('code', {}, run.workflow), ` version ${run.version} for `, h('strong', {}, run.user_id),
      ': ', runBadge(run.status), ' · started ', fmtTime(run.created_at), ' · updated ', fmtTime(run.updated_at)),
    run.steps.length ? h('ol', {class: 'timeline run-steps', 'aria-label': `Steps of run ${run.id}`}, run.steps.map(s => h('li', {class: cls[s.status] || '', 'data-index': s.index},
      h('div', {}, h('strong', {}, `#${s.index}`), ' ', s.name || h('span', {class: 'muted'}, '(unnamed)'), ' ', h('code', {}, s.kind), ' ', badge(s.status)),
      h('div', {class: 'muted'}, 'started ', fmtTime(s.started_at), s.ended_at ? ' · ended ' + fmtTime(s.ended_at) : ''),
      s.outcome ? h('div', {class: s.status === 'failed' ? 'error' : ''}, s.outcome, s.attempts ? ` (attempt ${s.attempts})` : '') : null,
      s.notification_id ? h('div', {}, 'notification ', h('a', {class: 'notification', href: `#/notifications?user=${enc(run.user_id)}&id=${enc(s.notification_id)}`,
        title: 'Open its delivery timeline'}, h('code', {}, s.notification_id))) : null,
      s.status === 'waiting' && run.waiting_for ? h('div', {class: 'wait'}, waitText(run.waiting_for)) : null)))
      : h('p', {class: 'muted'}, 'No step has run yet.'),
    h('details', {}, h('summary', {}, 'Run data'), h('pre', {class: 'mono'}, JSON.stringify(run.data, null, 2))));
}
