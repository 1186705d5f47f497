// The templates page: every notification type, shipped and custom, with
// its channels and locales; a type's text on demand; and, for a type with
// a stored template, the button that resets a shipped type to its shipped
// template or deletes a custom type (DELETE /v1/templates/{type}).

import {h, mount, problemBox, fmtTime, badge} from './dom.js';
import {api, get, enc} from './api.js';

export async function render(main) {
  const list = h('div');
  const out = h('div', {id: 'template-result'});
  mount(main, h('h1', {}, 'Templates'),
    h('p', {class: 'muted'}, 'The message templates of every notification type. A shipped type you replaced can be reset to its shipped template; a custom type can be deleted (new notifications of it are then refused).'),
    out, h('div', {class: 'card'}, list));
  const load = async () => {
    try {
      const page = await get('/v1/templates');
      draw(page.items);
    } catch (err) { mount(list, problemBox(err)); }
  };
  const remove = async (t, btn) => {
    const what = t.shipped ? `Reset ${t.type} to its shipped template?` : `Delete the custom type ${t.type}? New notifications of it will be refused.`;
    if (!window.confirm(what)) return;
    btn.disabled = true;
    try {
      await api('DELETE', '/v1/templates/' + enc(t.type));
      mount(out, h('div', {class: 'success'}, t.shipped ? `${t.type} is back to its shipped template.` : `Deleted the custom type ${t.type}.`));
      await load();
    } catch (err) { btn.disabled = false; mount(out, problemBox(err)); }
  };
  const expand = async (row, t) => {
    if (row.nextSibling && row.nextSibling.classList.contains('detail')) { row.nextSibling.remove(); return; }
    const cell = h('td', {colspan: 7}, h('p', {class: 'muted'}, 'Loading…'));
    row.after(h('tr', {class: 'detail'}, cell));
    try {
      const full = await get('/v1/templates/' + enc(t.type));
      mount(cell, h('table', {class: 'template-text'},
        h('thead', {}, h('tr', {}, ['channel', 'locale', 'subject', 'body'].map(c => h('th', {}, c)))),
        h('tbody', {}, Object.keys(full.channels).sort().flatMap(ch => Object.keys(full.channels[ch]).sort().map(loc =>
          h('tr', {}, h('td', {}, ch), h('td', {}, loc), h('td', {}, full.channels[ch][loc].subject || ''),
            h('td', {class: 'pre'}, full.channels[ch][loc].body || '')))))));
    } catch (err) { mount(cell, problemBox(err)); }
  };
  const draw = (items) => {
    if (!items.length) { mount(list, h('p', {class: 'muted'}, 'No templates.')); return; }
    mount(list, h('table', {id: 'templates'},
      h('thead', {}, h('tr', {}, ['type', 'category', 'state', 'channels', 'locales', 'updated', ''].map(c => h('th', {}, c)))),
      h('tbody', {}, items.map(t => {
        const state = t.default ? 'shipped' : t.shipped ? 'replaced' : 'custom';
        const row = h('tr', {'data-type': t.type},
          h('td', {}, h('a', {href: '#/templates', onclick: e => { e.preventDefault(); expand(row, t); }}, h('code', {}, t.type))),
          h('td', {}, t.category), h('td', {}, badge(state)),
          h('td', {}, t.channels.join(', ')), h('td', {}, t.locales.join(', ')),
          h('td', {}, fmtTime(t.updated_at)), h('td', {}));
        if (!t.default) {
          const btn = h('button', {class: t.shipped ? 'secondary reset' : 'secondary delete', onclick: () => remove(t, btn)},
            t.shipped ? 'Reset to default' : 'Delete');
          row.lastChild.append(btn);
        }
        return row;
      }))));
  };
  await load();
}
