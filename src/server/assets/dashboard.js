// The live dashboard (GET /dashboard): scrapes /metrics every 2 s, keeps the last 15 minutes in this
// page's memory, and computes rates and percentiles from counter and histogram deltas here, per
// model (the model_name label). Static facts come from /ui/info and /v1/models.
'use strict';

const $ = (id) => document.getElementById(id);
const el = TM.el;
const SVG = 'http://www.w3.org/2000/svg';  // the SVG namespace name (an identifier, never fetched)
const INTERVAL_MS = 2000;
const KEEP_S = 900;
const COLORS = ['#1a56db', '#e8590c', '#2f9e44', '#c2255c', '#7048e8', '#0c8599', '#a61e4d', '#5c940d'];

const samples = [];  // {t: seconds, series: Map('name{labels}' -> {name, labels, value})}
let facts = null, modelList = [], paused = false, scrapes = 0;

// --- Prometheus text -----------------------------------------------------------------------------

function parseMetrics(text) {
  const series = [];
  for (const line of text.split('\n')) {
    if (!line || line[0] === '#') continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    if (m[3]) for (const l of m[3].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    series.push({ name: m[1], labels, value: Number(m[4]) });
  }
  return series;
}

// Sum of the series named `name` for `model` whose labels include `extra`, in sample s.
function value(s, name, model, extra = {}) {
  let sum = null;
  for (const x of s.series) {
    if (x.name !== name || (model && x.labels.model_name !== model)) continue;
    if (Object.entries(extra).some(([k, v]) => x.labels[k] !== v)) continue;
    sum = (sum || 0) + x.value;
  }
  return sum;
}

function rate(i, name, model, extra) {
  if (i < 1) return null;
  const a = value(samples[i - 1], name, model, extra), b = value(samples[i], name, model, extra);
  if (a === null || b === null) return null;
  return Math.max(0, b - a) / (samples[i].t - samples[i - 1].t);
}

// The q-quantile of the observations a histogram got between samples i-w and i (linear inside the
// bucket, as Prometheus' histogram_quantile); null when it got none.
function quantile(i, name, model, q, w = 3) {
  const j = Math.max(0, i - w);
  if (j === i) return null;
  const buckets = (s) => {
    const m = new Map();
    for (const x of s.series)
      if (x.name === name + '_bucket' && (!model || x.labels.model_name === model))
        m.set(x.labels.le, (m.get(x.labels.le) || 0) + x.value);
    return m;
  };
  const a = buckets(samples[j]), b = buckets(samples[i]);
  const les = [...b.keys()].sort((x, y) => Number(x) - Number(y));
  const d = les.map((le) => ({ le: Number(le), n: b.get(le) - (a.get(le) || 0) }));
  const total = d.length ? d[d.length - 1].n : 0;
  if (total <= 0) return null;
  const rank = q * total;
  let prevLe = 0, prevN = 0;
  for (const { le, n } of d) {
    if (n >= rank) {
      if (!Number.isFinite(le)) return prevLe;
      return prevLe + (le - prevLe) * ((rank - prevN) / Math.max(1e-12, n - prevN));
    }
    prevLe = le; prevN = n;
  }
  return prevLe;
}

function histMean(i, name, model, w = 3) {
  const j = Math.max(0, i - w);
  if (j === i) return null;
  const dc = value(samples[i], name + '_count', model) - value(samples[j], name + '_count', model);
  const ds = value(samples[i], name + '_sum', model) - value(samples[j], name + '_sum', model);
  return dc > 0 ? ds / dc : null;
}

// --- Charts ----------------------------------------------------------------------------------------

// What each chart plots for a model: [{name, at(i) -> number|null}], and how its values read.
function chartDefs(model) {
  const pct = (name, scale) => [0.5, 0.95, 0.99].map((q) => ({
    name: `p${Math.round(q * 100)}`, at: (i) => { const v = quantile(i, name, model, q); return v === null ? null : v * scale; } }));
  const reasons = new Set();
  const last = samples[samples.length - 1];
  if (last) for (const x of last.series)
    if (x.name === 'tokenmill:request_failures_total' && x.labels.model_name === model && x.value > 0) reasons.add(x.labels.reason);
  return [
    { id: 'requests', title: 'Requests running and waiting', unit: '', series: [
      { name: 'running', at: (i) => value(samples[i], 'vllm:num_requests_running', model) },
      { name: 'waiting', at: (i) => value(samples[i], 'vllm:num_requests_waiting', model) }] },
    { id: 'tokens', title: 'Tokens per second', unit: 'tok/s', series: [
      { name: 'output', at: (i) => rate(i, 'vllm:generation_tokens_total', model) },
      { name: 'prompt', at: (i) => rate(i, 'vllm:prompt_tokens_total', model) }] },
    { id: 'ttft', title: 'Time to first token', unit: 'ms', series: pct('vllm:time_to_first_token_seconds', 1000) },
    { id: 'tpot', title: 'Time per output token (per request)', unit: 'ms',
      series: pct('vllm:request_time_per_output_token_seconds', 1000) },
    { id: 'itl', title: 'Inter-token latency', unit: 'ms', series: pct('vllm:inter_token_latency_seconds', 1000) },
    { id: 'queue', title: 'Queue time', unit: 'ms', series: pct('vllm:request_queue_time_seconds', 1000) },
    { id: 'kv', title: 'KV cache usage and prefix-cache hit rate', unit: '%', series: [
      { name: 'KV usage', at: (i) => { const v = value(samples[i], 'vllm:kv_cache_usage_perc', model); return v === null ? null : v * 100; } },
      { name: 'prefix hits', at: (i) => {
        const q = rate(i, 'vllm:prefix_cache_queries_total', model), h = rate(i, 'vllm:prefix_cache_hits_total', model);
        return q ? (100 * h) / q : null; } }] },
    { id: 'batch', title: 'Batch size (sequences per step)', unit: '', series: [
      { name: 'mean', at: (i) => histMean(i, 'tokenmill:batch_size', model) },
      { name: 'p95', at: (i) => quantile(i, 'tokenmill:batch_size', model, 0.95) }] },
    { id: 'failures', title: 'Preemptions and failures per second', unit: '/s', series: [
      { name: 'preemptions', at: (i) => rate(i, 'vllm:num_preemptions_total', model) },
      { name: 'client aborts', at: (i) => rate(i, 'tokenmill:requests_aborted_by_client_total', model) },
      ...[...reasons].sort().map((r) => ({ name: r, at: (i) => rate(i, 'tokenmill:request_failures_total', model, { reason: r }) }))] },
    { id: 'cpu', title: 'CPU (cores busy)', unit: '', series: [
      { name: 'process', at: (i) => rate(i, 'tokenmill:process_cpu_seconds_total', firstModel()) }] },
    { id: 'memory', title: 'Resident memory', unit: 'MiB', series: [
      { name: 'process', at: (i) => { const v = value(samples[i], 'tokenmill:process_resident_memory_bytes', firstModel());
                                      return v === null ? null : v / 1048576; } }] },
  ];
}

function fmt(v, unit) {
  if (v === null || v === undefined || !Number.isFinite(v)) return '–';
  const a = Math.abs(v);
  const s = Number.isInteger(v) || a >= 100 ? v.toFixed(0) : a >= 10 ? v.toFixed(1) : a >= 1 ? v.toFixed(2)
                                                                                     : v.toPrecision(2);
  return unit ? `${s} ${unit}` : s;
}

function svgEl(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
}

// One chart card: lines over the last `windowS` seconds (x: seconds ago), y from 0 to the maximum.
function drawChart(def, windowS) {
  const W = 420, H = 170, L = 44, R = 8, T = 8, B = 20;
  const now = samples.length ? samples[samples.length - 1].t : 0;
  // Until the page has seen a whole window, the x axis spans what it has (at least a minute).
  windowS = Math.min(windowS, Math.max(60, Math.ceil((now - (samples.length ? samples[0].t : now)) / 60) * 60));
  const first = samples.findIndex((s) => s.t >= now - windowS);
  const lines = def.series.map((s) => {
    const pts = [];
    for (let i = Math.max(0, first); i < samples.length; i++) pts.push([samples[i].t - now, s.at(i)]);
    return { name: s.name, pts };
  });
  let max = 0, count = 0;
  for (const l of lines) for (const [, v] of l.pts) if (v !== null && Number.isFinite(v)) { max = Math.max(max, v); count++; }
  const yMax = max > 0 ? niceCeil(max) : 1;
  const x = (t) => L + ((t + windowS) / windowS) * (W - L - R);
  const y = (v) => T + (1 - v / yMax) * (H - T - B);
  const svg = svgEl('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', class: 'chart', 'data-points': String(count),
                             'data-max': String(max), 'aria-label': `${def.title}${def.unit ? ' (' + def.unit + ')' : ''}` });
  for (let k = 0; k <= 4; k++) {
    const v = (yMax * k) / 4;
    svg.append(svgEl('line', { x1: L, x2: W - R, y1: y(v), y2: y(v), class: 'grid' }));
    const t = svgEl('text', { x: L - 4, y: y(v) + 3, 'text-anchor': 'end' });
    t.textContent = fmt(v, '');
    svg.append(t);
  }
  const step = [10, 15, 30, 60, 120, 180, 300].find((st) => windowS / st <= 5) || 300;
  for (let secs = 0; secs <= windowS + 1e-9; secs += step) {
    const t = svgEl('text', { x: x(-secs), y: H - 5, 'text-anchor': secs === 0 ? 'end' : 'middle' });
    t.textContent = secs === 0 ? 'now' : secs % 60 === 0 ? `-${secs / 60} min` : `-${secs} s`;
    svg.append(t);
  }
  lines.forEach((l, n) => {
    const color = COLORS[n % COLORS.length];
    let d = '', run = [];
    // A run of one point (a percentile between two idle stretches) is a dot, not an invisible line.
    const flush = () => {
      if (run.length === 1) svg.append(svgEl('circle', { cx: run[0][0], cy: run[0][1], r: 2.2, fill: color }));
      else run.forEach(([px, py], k) => { d += `${k ? 'L' : 'M'}${px.toFixed(1)},${py.toFixed(1)}`; });
      run = [];
    };
    for (const [t, v] of l.pts) {
      if (v === null || !Number.isFinite(v)) flush();
      else run.push([x(t), y(v)]);
    }
    flush();
    if (d) svg.append(svgEl('path', { d, fill: 'none', stroke: color, 'stroke-width': 1.8 }));
  });
  const legend = el('div', { class: 'legend' });
  lines.forEach((l, n) => {
    let latest = null;
    for (let k = l.pts.length - 1; k >= 0 && latest === null; k--) latest = l.pts[k][1];
    const item = el('span', { text: `${l.name}: ${fmt(latest, def.unit)}` });
    item.style.setProperty('--c', COLORS[n % COLORS.length]);
    legend.append(item);
  });
  const card = el('section', { class: 'card', 'data-chart': def.id, 'aria-label': def.title },
                  el('h2', { text: def.title + (def.unit ? ` (${def.unit})` : '') }), svg, legend);
  return card;
}

function niceCeil(v) {
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

// --- Tables and facts ------------------------------------------------------------------------------

function metricModels() {
  const names = new Set(modelList.map((m) => m.id));
  const last = samples[samples.length - 1];
  if (last) for (const x of last.series) if (x.labels.model_name) names.add(x.labels.model_name);
  return [...names];
}
function firstModel() { return metricModels()[0]; }

function renderTables() {
  const i = samples.length - 1;
  const head = (...cols) => el('tr', {}, ...cols.map(([t, num]) => el('th', { class: num ? 'num' : null, scope: 'col', text: t })));
  const mt = $('models-table');
  mt.replaceChildren(head(['model'], ['state'], ['running', 1], ['waiting', 1], ['KV usage', 1], ['output tok/s', 1],
                          ['TTFT p95', 1], ['finished', 1], ['failed', 1]));
  for (const m of metricModels()) {
    const listed = modelList.find((x) => x.id === m);
    const loaded = value(samples[i], 'tokenmill:model_loaded', m);
    const state = listed && listed.state ? listed.state : loaded === 1 ? 'ready' : loaded === 0 ? 'loading' : '–';
    const kv = value(samples[i], 'vllm:kv_cache_usage_perc', m);
    const ttft = quantile(i, 'vllm:time_to_first_token_seconds', m, 0.95);
    const cell = (t, num) => el('td', { class: num ? 'num' : null, text: t });
    mt.append(el('tr', {}, el('th', { scope: 'row', text: m }), cell(state), cell(fmt(value(samples[i], 'vllm:num_requests_running', m)), 1),
                 cell(fmt(value(samples[i], 'vllm:num_requests_waiting', m)), 1), cell(fmt(kv === null ? null : kv * 100, '%'), 1),
                 cell(fmt(rate(i, 'vllm:generation_tokens_total', m)), 1), cell(fmt(ttft === null ? null : ttft * 1000, 'ms'), 1),
                 cell(fmt(value(samples[i], 'vllm:request_success_total', m)), 1),
                 cell(fmt(value(samples[i], 'tokenmill:request_failures_total', m)), 1)));
  }
  const ft = $('failures-table');
  ft.replaceChildren(head(['model'], ['reason'], ['count', 1]));
  let any = false;
  for (const x of samples[i].series) {
    if (x.name !== 'tokenmill:request_failures_total' || !(x.value > 0)) continue;
    any = true;
    ft.append(el('tr', {}, el('td', { text: x.labels.model_name || '' }), el('td', { text: x.labels.reason || '' }),
                 el('td', { class: 'num', text: fmt(x.value) })));
  }
  if (!any) ft.append(el('tr', {}, el('td', { colspan: 3, class: 'muted', text: 'No failures.' })));
}

function gib(b) {
  if (b === undefined) return '–';
  return b >= 1073741824 ? `${(b / 1073741824).toFixed(2)} GiB` : `${(b / 1048576).toFixed(1)} MiB`;
}
function duration(s) {
  if (s === null || s === undefined) return '–';
  const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
  return d ? `${d}d ${h}h ${m}m` : h ? `${h}h ${m}m` : `${m}m ${Math.floor(s % 60)}s`;
}

function renderFacts() {
  const dl = $('facts');
  const rows = [];
  const add = (k, v) => rows.push(el('dt', { text: k }), el('dd', { text: String(v) }));
  const last = samples[samples.length - 1];
  add('Version', facts ? facts.version : '–');
  add('Uptime', duration(last ? value(last, 'tokenmill:uptime_seconds', firstModel()) : null));
  const sel = $('model').value;
  const m = facts && facts.models ? facts.models.find((x) => x.id === sel) || facts.models[0] : null;
  const listed = modelList.find((x) => x.id === sel);
  add('Model', sel || '–');
  if (m) {
    add('File', m.path);
    add('Architecture', m.architecture);
    add('Quantization', m.weight_type);
    add('Parameters', m.n_params ? `${(m.n_params / 1e6).toFixed(1)} M` : '–');
    add('Max model length', m.max_model_len);
    const p = m.memory_plan || {};
    add('Memory plan', `weights ${gib(p.weight_bytes)}, KV cache ${gib(p.kv_bytes)} (${p.kv_dtype})`);
    add('KV cache', `${p.kv_tokens} tokens in ${p.num_blocks} blocks; ${p.max_full_sequences} full-length sequences`);
    if (p.note) add('Note', p.note);
  } else if (listed && listed.max_model_len) add('Max model length', listed.max_model_len);
  const load = last ? value(last, 'tokenmill:model_load_seconds', sel) : null;
  if (load !== null) add('Load time', `${load.toFixed(2)} s`);
  dl.replaceChildren(...rows);
}

// --- Loop --------------------------------------------------------------------------------------------

function renderAll() {
  if (!samples.length) return;
  const sel = $('model');
  const models = metricModels();
  if ([...sel.options].map((o) => o.value).join('\n') !== models.join('\n')) {
    const keep = sel.value;
    sel.replaceChildren(...models.map((m) => el('option', { value: m, text: m })));
    if (models.includes(keep)) sel.value = keep;
  }
  const windowS = Number($('window').value);
  $('charts').replaceChildren(...chartDefs(sel.value).map((d) => drawChart(d, windowS)));
  renderTables();
  renderFacts();
}

async function scrape() {
  try {
    const res = await fetch('/metrics', { cache: 'no-store' });
    if (!res.ok) throw new Error(`/metrics: ${res.status}`);
    const series = parseMetrics(await res.text());
    samples.push({ t: performance.now() / 1000, series });
    while (samples.length && samples[samples.length - 1].t - samples[0].t > KEEP_S) samples.shift();
    scrapes++;
    document.body.dataset.scrapes = String(scrapes);
    $('status').textContent = `Updated ${new Date().toLocaleTimeString()} (every ${INTERVAL_MS / 1000} s).`;
    $('status').classList.remove('error');
    if (!paused) renderAll();
  } catch (e) {
    $('status').textContent = `Cannot read the metrics: ${e.message}`;
    $('status').classList.add('error');
  }
}

async function loadFacts() {
  try {
    modelList = await TM.models();
    const res = await TM.api('/ui/info');
    if (res.ok) facts = await res.json();
  } catch (e) {
    $('status').textContent = `Cannot read the server facts: ${e.message}`;
  }
  renderAll();
}

function init() {
  TM.setupKeyButton();
  $('model').addEventListener('change', renderAll);
  $('window').addEventListener('change', renderAll);
  $('pause').addEventListener('click', () => {
    paused = !paused;
    $('pause').textContent = paused ? 'Resume' : 'Pause';
    $('pause').setAttribute('aria-pressed', String(paused));
    if (!paused) renderAll();
  });
  scrape();
  setInterval(scrape, INTERVAL_MS);
  loadFacts();
  setInterval(loadFacts, 30000);
}

init();
