// The JSON API client of the dashboard. Requests carry the session cookie
// (same origin) and, on unsafe methods, the session's CSRF token.

let csrf = '';

export function setCSRF(token) { csrf = token || ''; }

export class APIError extends Error {
  constructor(status, problem) {
    super(problem && problem.detail ? problem.detail : 'HTTP ' + status);
    this.status = status;
    this.problem = problem && typeof problem === 'object' ? problem : null;
  }
}

export async function api(method, path, body, headers) {
  const opts = {method, headers: Object.assign({Accept: 'application/json'}, headers || {}), credentials: 'same-origin'};
  if (body !== undefined) {
    opts.headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  if (method !== 'GET' && method !== 'HEAD' && csrf) opts.headers['X-CSRF-Token'] = csrf;
  const res = await fetch(path, opts);
  if (res.status === 204) return null;
  const ctype = res.headers.get('Content-Type') || '';
  const data = ctype.includes('json') ? await res.json() : await res.text();
  if (!res.ok) throw new APIError(res.status, data);
  return data;
}

export const get = (path) => api('GET', path);
export const enc = encodeURIComponent;
