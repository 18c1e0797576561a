// The chat playground (GET /): streams /v1/chat/completions, shows reasoning and tool calls apart
// from the answer, TTFT and tokens/s per message; the conversation lives in localStorage. Model
// output only ever reaches the page as text nodes (renderMarkdown builds elements, never HTML).
'use strict';

const STORE = 'tokenmill.chat';
const $ = (id) => document.getElementById(id);
const el = TM.el;

let state = { messages: [], settings: {} };
let controller = null;  // the running generation's AbortController

function load() {
  try {
    const s = JSON.parse(localStorage.getItem(STORE) || 'null');
    if (s && Array.isArray(s.messages)) state = { messages: s.messages, settings: s.settings || {} };
  } catch (_) { /* a broken store starts a new chat */ }
}
function save() { localStorage.setItem(STORE, JSON.stringify(state)); }

const SETTINGS = ['system', 'temperature', 'top_p', 'max_tokens', 'seed', 'schema', 'tools'];

// --- Markdown: paragraphs, headings, lists, fenced code, inline code, bold, italic ----------------

function inline(parent, text) {
  const re = /(`[^`\n]+`)|(\*\*[^*\n]+\*\*)|(\*[^*\s\n][^*\n]*\*)/g;
  let last = 0;
  for (let m; (m = re.exec(text));) {
    if (m.index > last) parent.append(text.slice(last, m.index));
    const t = m[0];
    if (m[1]) parent.append(el('code', { text: t.slice(1, -1) }));
    else if (m[2]) parent.append(el('strong', { text: t.slice(2, -2) }));
    else parent.append(el('em', { text: t.slice(1, -1) }));
    last = m.index + t.length;
  }
  if (last < text.length) parent.append(text.slice(last));
}

function renderMarkdown(text) {
  const out = document.createDocumentFragment();
  const lines = text.split('\n');
  let para = null, list = null;
  const endBlocks = () => { para = null; list = null; };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = /^\s*```(.*)$/.exec(line);
    if (fence) {
      endBlocks();
      const code = [];
      for (i++; i < lines.length && !/^\s*```\s*$/.test(lines[i]); i++) code.push(lines[i]);
      const c = el('code', { text: code.join('\n') });
      if (fence[1].trim()) c.dataset.lang = fence[1].trim();
      out.append(el('pre', {}, c));
      continue;
    }
    if (!line.trim()) { endBlocks(); continue; }
    const h = /^(#{1,6})\s+(.*)$/.exec(line);
    if (h) {
      endBlocks();
      const e = el('h' + Math.min(6, h[1].length + 2));
      inline(e, h[2]);
      out.append(e);
      continue;
    }
    const li = /^\s*(?:([-*+])|(\d+)[.)])\s+(.*)$/.exec(line);
    if (li) {
      const tag = li[1] ? 'ul' : 'ol';
      if (!list || list.tagName.toLowerCase() !== tag) { para = null; list = el(tag); out.append(list); }
      const item = el('li');
      inline(item, li[3]);
      list.append(item);
      continue;
    }
    if (!para) { list = null; para = el('p'); out.append(para); } else para.append(el('br'));
    inline(para, line);
  }
  return out;
}

// --- Rendering -------------------------------------------------------------------------------------

function statsText(s) {
  if (!s) return '';
  const parts = [];
  if (s.tokens !== undefined) parts.push(`${s.tokens} tokens`);
  if (s.ttft_ms !== undefined) parts.push(`TTFT ${Math.round(s.ttft_ms)} ms`);
  if (s.tps) parts.push(`${s.tps.toFixed(1)} tokens/s`);
  if (s.finish) parts.push(s.finish);
  return parts.join(' · ');
}

function messageElement(m, idx) {
  const last = idx === state.messages.length - 1;
  const box = el('article', { class: `msg ${m.role}`, 'data-role': m.role, 'data-state': m.state || 'done',
                             'aria-label': m.role === 'user' ? 'Your message' : 'Model reply' });
  box.append(el('div', { class: 'who', text: m.role === 'user' ? 'You' : (m.model || 'Model') }));
  if (m.reasoning) {
    const d = el('details', { class: 'reasoning', open: m.state === 'streaming' && !m.content });
    d.append(el('summary', { text: 'Reasoning' }), el('div', { class: 'reasoning-text' }, renderMarkdown(m.reasoning)));
    box.append(d);
  }
  const body = el('div', { class: 'body' });
  body.append(renderMarkdown(m.content || ''));
  box.append(body);
  if (m.tool_calls && m.tool_calls.length) {
    const t = el('div', { class: 'tools', 'aria-label': 'Tool calls' });
    for (const c of m.tool_calls) {
      let args = c.function.arguments || '';
      try { args = JSON.stringify(JSON.parse(args), null, 2); } catch (_) { /* shown as streamed */ }
      t.append(el('div', { class: 'muted', text: `Tool call: ${c.function.name || '?'}` }),
               el('pre', { class: 'tool' }, el('code', { text: args })));
    }
    box.append(t);
  }
  if (m.error) box.append(el('p', { class: 'error', role: 'alert', text: m.error }));
  const st = statsText(m.stats);
  if (st) box.append(el('div', { class: 'muted stats', text: st }));
  if (m.state !== 'streaming' && !controller) {
    const actions = el('div', { class: 'actions' });
    if (m.role === 'user')
      actions.append(el('button', { type: 'button', text: 'Edit', 'aria-label': 'Edit this message', onclick: () => edit(idx) }));
    if (m.role === 'assistant' && last)
      actions.append(el('button', { type: 'button', text: 'Regenerate', 'aria-label': 'Regenerate this reply',
                                    onclick: () => regenerate(idx) }));
    if (actions.childElementCount) box.append(actions);
  }
  return box;
}

function render() {
  const list = $('messages');
  const atEnd = list.scrollHeight - list.scrollTop - list.clientHeight < 40;
  list.replaceChildren(...state.messages.map(messageElement));
  if (atEnd) list.scrollTop = list.scrollHeight;
  $('send').disabled = !!controller;
  $('stop').disabled = !controller;
}

let renderQueued = false;
function renderSoon() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => { renderQueued = false; render(); });
}

function setStatus(text, isError = false) {
  $('status').textContent = text;
  $('status').classList.toggle('error', isError);
}

// --- The request -----------------------------------------------------------------------------------

function requestBody() {
  const v = (id) => $(id).value.trim();
  const body = { model: $('model').value, stream: true, stream_options: { include_usage: true } };
  const msgs = [];
  if (v('system')) msgs.push({ role: 'system', content: v('system') });
  for (const m of state.messages) {
    const x = { role: m.role, content: m.content || '' };
    if (m.tool_calls && m.tool_calls.length) x.tool_calls = m.tool_calls;
    msgs.push(x);
  }
  body.messages = msgs;
  const num = (id, key, int) => {
    if (v(id) === '') return;
    const n = Number(v(id));
    if (!Number.isFinite(n)) throw new Error(`${$(id).labels[0].textContent}: not a number`);
    body[key] = int ? Math.trunc(n) : n;
  };
  num('temperature', 'temperature');
  num('top_p', 'top_p');
  num('max_tokens', 'max_tokens', true);
  num('seed', 'seed', true);
  if (v('schema')) {
    let schema;
    try { schema = JSON.parse(v('schema')); } catch (e) { throw new Error(`JSON schema: not valid JSON (${e.message})`); }
    body.response_format = { type: 'json_schema', json_schema: { name: 'response', schema, strict: true } };
  }
  if (v('tools')) {
    let tools;
    try { tools = JSON.parse(v('tools')); } catch (e) { throw new Error(`Tools: not valid JSON (${e.message})`); }
    if (!Array.isArray(tools)) throw new Error('Tools: must be a JSON list');
    body.tools = tools;
  }
  return body;
}

// Reads an SSE body, calling onEvent(json) per data event.
async function readEvents(res, onEvent) {
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      for (const line of block.split('\n')) {
        if (!line.startsWith('data:')) continue;
        const data = line.slice(5).trim();
        if (data === '[DONE]') return;
        onEvent(JSON.parse(data));
      }
    }
  }
}

async function generate() {
  let body;
  try { body = requestBody(); } catch (e) { setStatus(e.message, true); return; }
  const m = { role: 'assistant', model: body.model, content: '', reasoning: '', tool_calls: [], state: 'streaming', stats: {} };
  state.messages.push(m);
  controller = new AbortController();
  setStatus('Generating… (Esc or Stop to stop)');
  render();
  const t0 = performance.now();
  let tFirst = null, tLast = null, chunks = 0;
  try {
    const res = await TM.api('/v1/chat/completions', {
      method: 'POST', body: JSON.stringify(body), signal: controller.signal,
      headers: { 'Content-Type': 'application/json' },
    });
    if (!res.ok) throw new Error(await TM.errorText(res));
    await readEvents(res, (ev) => {
      if (ev.error) throw new Error(ev.error.message || JSON.stringify(ev.error));
      if (ev.usage) m.stats.tokens = ev.usage.completion_tokens;
      for (const ch of ev.choices || []) {
        const d = ch.delta || {};
        const got = d.content || d.reasoning_content || (d.tool_calls && d.tool_calls.length);
        if (got) {
          tLast = performance.now();
          if (tFirst === null) { tFirst = tLast; m.stats.ttft_ms = tFirst - t0; }
          chunks++;
        }
        if (d.content) m.content += d.content;
        if (d.reasoning_content) m.reasoning += d.reasoning_content;
        for (const tc of d.tool_calls || []) {
          const slot = m.tool_calls[tc.index || 0] ||
                       (m.tool_calls[tc.index || 0] = { id: '', type: 'function', function: { name: '', arguments: '' } });
          if (tc.id) slot.id = tc.id;
          if (tc.function && tc.function.name) slot.function.name += tc.function.name;
          if (tc.function && tc.function.arguments) slot.function.arguments += tc.function.arguments;
        }
        if (ch.finish_reason) m.stats.finish = ch.finish_reason;
      }
      renderSoon();
    });
    m.state = 'done';
    setStatus('');
  } catch (e) {
    if (e.name === 'AbortError') { m.state = 'stopped'; m.stats.finish = 'stopped'; setStatus('Stopped.'); }
    else { m.state = 'error'; m.error = e.message; setStatus(e.message, true); }
  }
  const tokens = m.stats.tokens !== undefined ? m.stats.tokens : chunks;
  m.stats.tokens = tokens;
  if (tFirst !== null && tLast > tFirst && tokens > 1) m.stats.tps = (tokens - 1) / ((tLast - tFirst) / 1000);
  if (!m.tool_calls.length) delete m.tool_calls;
  if (!m.reasoning) delete m.reasoning;
  controller = null;
  save();
  render();
}

function send() {
  const text = $('input').value;
  if (!text.trim() || controller) return;
  state.messages.push({ role: 'user', content: text });
  $('input').value = '';
  save();
  generate();
}

function stop() { if (controller) controller.abort(); }

function edit(idx) {
  if (controller) return;
  $('input').value = state.messages[idx].content;
  state.messages.splice(idx);
  save();
  render();
  setStatus('Editing: change the message and send it again.');
  $('input').focus();
}

function regenerate(idx) {
  if (controller) return;
  state.messages.splice(idx);
  save();
  generate();
}

// --- Setup -----------------------------------------------------------------------------------------

async function loadModels() {
  const sel = $('model');
  try {
    const models = await TM.models();
    sel.replaceChildren(...models.map((m) => el('option', {
      value: m.id, text: m.state && m.state !== 'ready' ? `${m.id} (${m.state})` : m.id })));
    if (state.settings.model && models.some((m) => m.id === state.settings.model)) sel.value = state.settings.model;
    if (!models.length) setStatus('The server lists no model.', true);
  } catch (e) {
    setStatus(`Could not list the models: ${e.message}`, true);
  }
}

function init() {
  load();
  for (const id of SETTINGS) {
    if (state.settings[id] !== undefined) $(id).value = state.settings[id];
    $(id).addEventListener('change', () => { state.settings[id] = $(id).value; save(); });
  }
  $('model').addEventListener('change', () => { state.settings.model = $('model').value; save(); });
  $('composer').addEventListener('submit', (ev) => { ev.preventDefault(); send(); });
  $('input').addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) { ev.preventDefault(); send(); }
  });
  document.addEventListener('keydown', (ev) => { if (ev.key === 'Escape' && controller) stop(); });
  $('stop').addEventListener('click', stop);
  $('new-chat').addEventListener('click', () => {
    stop();
    state.messages = [];
    save();
    render();
    setStatus('');
    $('input').focus();
  });
  $('settings-toggle').addEventListener('click', () => {
    const open = $('settings').classList.toggle('open');
    $('settings-toggle').setAttribute('aria-expanded', String(open));
  });
  TM.setupKeyButton();
  render();
  loadModels().then(() => { document.body.dataset.ready = '1'; });
  $('input').focus();
}

init();
