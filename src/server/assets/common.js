// Shared by the chat page and the dashboard: the API key (asked for when the server answers 401,
// kept in this browser's localStorage, sent as Bearer), fetch helpers and the model list.
'use strict';

const TM = (() => {
  const KEY_STORE = 'tokenmill.apiKey';
  let keyPrompt = null;  // the pending "enter your key" promise, shared by concurrent callers

  function apiKey() { return localStorage.getItem(KEY_STORE) || ''; }

  function headers(extra = {}) {
    const h = { ...extra };
    const k = apiKey();
    if (k) h.Authorization = 'Bearer ' + k;
    return h;
  }

  // Shows the key dialog (#key-dialog in both pages) and resolves once a key was entered.
  function askKey(message) {
    if (keyPrompt) return keyPrompt;
    const dlg = document.getElementById('key-dialog');
    const form = dlg.querySelector('form');
    const input = dlg.querySelector('input');
    dlg.querySelector('.key-message').textContent = message;
    keyPrompt = new Promise((resolve) => {
      form.onsubmit = (ev) => {
        ev.preventDefault();
        localStorage.setItem(KEY_STORE, input.value.trim());
        dlg.close();
        keyPrompt = null;
        resolve();
      };
    });
    input.value = '';
    if (!dlg.open) dlg.showModal();
    input.focus();
    return keyPrompt;
  }

  // fetch() with the key; on 401 asks for a key and tries again.
  async function api(path, opts = {}) {
    for (;;) {
      const res = await fetch(path, { ...opts, headers: headers(opts.headers || {}) });
      if (res.status !== 401) return res;
      await askKey(apiKey() ? 'The server refused this API key. Enter another one.'
                            : 'This server needs an API key.');
    }
  }

  // The error message of a failed API response (OpenAI error body or plain text).
  async function errorText(res) {
    const text = await res.text();
    try {
      const j = JSON.parse(text);
      if (j && j.error && j.error.message) return `${res.status}: ${j.error.message}`;
    } catch (_) { /* not JSON */ }
    return `${res.status}: ${text.slice(0, 300)}`;
  }

  // [{id, state?, max_model_len?}] from GET /v1/models.
  async function models() {
    const res = await api('/v1/models');
    if (!res.ok) throw new Error(await errorText(res));
    const j = await res.json();
    return (j.data || []).map((m) => ({ id: m.id, state: m.state, max_model_len: m.max_model_len }));
  }

  // Element helper: el('div', {class: 'x', text: 'y'}, child...). Text only ever goes in as text.
  function el(tag, attrs = {}, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'text') e.textContent = v;
      else if (k === 'class') e.className = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : v);
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }

  function setupKeyButton() {
    const b = document.getElementById('key-button');
    if (b) b.addEventListener('click', () => askKey('Enter the API key to use from this browser.'));
  }

  return { api, apiKey, askKey, errorText, models, el, headers, setupKeyButton };
})();
