(function () {
'use strict';
const NS = 'http://www.w3.org/2000/svg';
const COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22', '#17becf'];
let nCharts = 0;
function fail(msg) {
  document.body.setAttribute('data-render', 'error');
  document.body.setAttribute('data-render-error', String(msg));
}
window.addEventListener('error', e => fail(e.message || 'script error'));

function svgEl(tag, attrs, parent, text) {
  const e = document.createElementNS(NS, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text != null) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}
function htmlEl(tag, attrs, parent, text) {
  const e = document.createElement(tag);
  for (const k in (attrs || {})) e.setAttribute(k, attrs[k]);
  if (text != null) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}
function fmt(v) {
  if (v == null || !isFinite(v)) return '-';
  const a = Math.abs(v);
  if (a >= 1000) return v.toFixed(0);
  if (a >= 100) return v.toFixed(1);
  if (a >= 1 || a === 0) return v.toFixed(2);
  return v.toPrecision(2);
}
function ticks(lo, hi, n) {
  const raw = (hi - lo) / n, mag = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / mag;
  const step = (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toFixed(10));
  return out;
}
const finite = p => isFinite(p[0]) && isFinite(p[1]) && p[1] !== null;
const tickFmt = v => Math.abs(v) >= 1e6 ? v.toExponential(1) : String(+v.toPrecision(6));

// opts: {title, xLabel, yLabel, series: [{name, color, points: [[x, y]], band: [[x, lo, hi]],
//        type: 'line'|'scatter'|'bar', dash, markers}], hlines: [{y, label}], vlines: [{x, label}],
//        xLog, yMin, xMin, yMax, barWidth}
function chart(parent, o) {
  const W = o.width || 640, L = 66, R = 18, B = 48;
  // Legend rows go between the title and the plot.
  const named = (o.series || []).filter(s => s.name);
  const legend = [];
  if (named.length > 1 || o.legend) {
    let lx = L, row = 0;
    for (const s of named) {
      const w = 16 + 6.2 * s.name.length;
      if (lx + w > W - R && lx > L) { lx = L; row++; }
      legend.push({s, x: lx, row});
      lx += w + 10;
    }
  }
  const rows = legend.length ? legend[legend.length - 1].row + 1 : 0;
  const xs = [], ys = [];
  for (const s of o.series || []) {
    for (const p of s.points || []) if (finite(p)) { xs.push(p[0]); ys.push(p[1]); }
    for (const b of s.band || []) if (isFinite(b[1]) && isFinite(b[2])) { xs.push(b[0]); ys.push(b[1], b[2]); }
  }
  for (const h of o.hlines || []) ys.push(h.y);
  const hasData = xs.length > 0;
  for (const v of o.vlines || []) xs.push(v.x);
  let x0 = o.xMin != null ? o.xMin : Math.min(...xs), x1 = Math.max(...xs);
  if (!(x1 > x0)) { x0 -= 0.5; x1 += 0.5; }
  const logx = !!o.xLog && x0 > 0;
  const tx = v => logx ? Math.log(v) : v;
  const fx = x => L + (tx(x) - tx(x0)) / (tx(x1) - tx(x0)) * (W - L - R);
  // Vertical-line labels sit horizontally in rows above the plot (never over it): a label that
  // would overlap the previous one in its row goes to the next row.
  const vlab = [], rowEnd = [];
  if (hasData) for (const v of o.vlines || []) {
    if (!v.label) continue;
    const w = 6 * String(v.label).length + 6, x = Math.min(fx(v.x) + 3, W - R - w);
    let row = 0;
    while (rowEnd[row] != null && rowEnd[row] > x) row++;
    rowEnd[row] = x + w;
    vlab.push({v, x, row});
  }
  const T = 34 + rows * 15 + rowEnd.length * 13, H = (o.height || 300) + rows * 15 + rowEnd.length * 13;
  const svg = svgEl('svg', {class: 'chart', width: W, height: H, viewBox: `0 0 ${W} ${H}`,
                            role: 'img', 'aria-label': o.title, 'data-chart': o.id || o.title}, parent);
  svgEl('text', {x: W / 2, y: 20, 'text-anchor': 'middle', 'font-size': 14, 'font-weight': 600}, svg, o.title);
  for (const it of legend) {
    const c = it.s.color || COLORS[(o.series || []).indexOf(it.s) % COLORS.length];
    svgEl('rect', {x: it.x, y: 27 + it.row * 15, width: 10, height: 10, fill: c}, svg);
    svgEl('text', {x: it.x + 13, y: 36 + it.row * 15, 'font-size': 11}, svg, it.s.name);
  }
  nCharts++;
  if (!hasData) {
    svgEl('text', {x: W / 2, y: H / 2, 'text-anchor': 'middle', fill: '#8a94a6'}, svg, 'no data');
    return svg;
  }
  let y0 = o.yMin != null ? o.yMin : Math.min(0, ...ys), y1 = o.yMax != null ? o.yMax : Math.max(...ys);
  if (!(y1 > y0)) y1 = y0 + 1;
  if (o.yMax == null) y1 += (y1 - y0) * 0.06;
  const fy = y => H - B - (y - y0) / (y1 - y0) * (H - T - B);
  const grid = svgEl('g', {stroke: '#e9edf3'}, svg);
  for (const t of ticks(y0, y1, 5)) {
    svgEl('line', {x1: L, x2: W - R, y1: fy(t), y2: fy(t)}, grid);
    svgEl('text', {x: L - 6, y: fy(t) + 4, 'text-anchor': 'end', 'font-size': 11, fill: '#5a6475'}, svg, tickFmt(t));
  }
  const xt = logx ? [...new Set(xs)].sort((a, b) => a - b) : ticks(x0, x1, 6);
  for (const t of xt) {
    if (t < x0 || t > x1) continue;
    svgEl('line', {x1: fx(t), x2: fx(t), y1: T, y2: H - B}, grid);
    svgEl('text', {x: fx(t), y: H - B + 15, 'text-anchor': 'middle', 'font-size': 11, fill: '#5a6475'}, svg, tickFmt(t));
  }
  svgEl('line', {x1: L, x2: W - R, y1: H - B, y2: H - B, stroke: '#5a6475'}, svg);
  svgEl('line', {x1: L, x2: L, y1: T, y2: H - B, stroke: '#5a6475'}, svg);
  svgEl('text', {x: L + (W - L - R) / 2, y: H - 10, 'text-anchor': 'middle', 'font-size': 12}, svg, o.xLabel || '');
  svgEl('text', {x: 14, y: T + (H - T - B) / 2, 'text-anchor': 'middle', 'font-size': 12,
                 transform: `rotate(-90 14 ${T + (H - T - B) / 2})`}, svg, o.yLabel || '');
  const plot = svgEl('g', {}, svg);
  (o.series || []).forEach((s, i) => {
    const c = s.color || COLORS[i % COLORS.length];
    const band = (s.band || []).filter(b => isFinite(b[1]) && isFinite(b[2]));
    if (band.length > 1) {
      const up = band.map(b => `${fx(b[0])},${fy(b[2])}`), lo = band.slice().reverse().map(b => `${fx(b[0])},${fy(b[1])}`);
      svgEl('polygon', {points: up.concat(lo).join(' '), fill: c, 'fill-opacity': 0.15, stroke: 'none'}, plot);
    }
    const pts = (s.points || []).filter(finite);
    if (s.type === 'bar') {
      const bw = Math.max(1.5, (fx(x0 + (s.barWidth || 1)) - fx(x0)) * 0.8);
      for (const p of pts) {
        const top = fy(Math.max(p[1], 0)), base = fy(Math.max(y0, 0));
        svgEl('rect', {x: fx(p[0]) - bw / 2, y: top, width: bw, height: Math.max(0, base - top), fill: c, 'fill-opacity': 0.75}, plot);
      }
    } else if (s.type === 'scatter') {
      for (const p of pts) svgEl('circle', {cx: fx(p[0]), cy: fy(p[1]), r: 2.6, fill: c, 'fill-opacity': 0.7}, plot);
    } else if (pts.length) {
      const d = pts.map((p, k) => (k ? 'L' : 'M') + fx(p[0]).toFixed(1) + ',' + fy(p[1]).toFixed(1)).join('');
      const path = svgEl('path', {d, fill: 'none', stroke: c, 'stroke-width': 2, 'stroke-dasharray': s.dash || 'none'}, plot);
      if (s.title) svgEl('title', {}, path, s.title);  // the run's name on hover
      if (s.markers || pts.length === 1) for (const p of pts) svgEl('circle', {cx: fx(p[0]), cy: fy(p[1]), r: 3.2, fill: c}, plot);
    }
  });
  for (const h of o.hlines || []) {
    svgEl('line', {x1: L, x2: W - R, y1: fy(h.y), y2: fy(h.y), stroke: h.color || '#c62828', 'stroke-dasharray': '5 4'}, plot);
    svgEl('text', {x: W - R - 4, y: fy(h.y) - 4, 'text-anchor': 'end', 'font-size': 11, fill: h.color || '#c62828'}, plot, h.label);
  }
  for (const v of o.vlines || [])
    svgEl('line', {x1: fx(v.x), x2: fx(v.x), y1: T, y2: H - B, stroke: '#8a94a6', 'stroke-dasharray': '3 3'}, plot);
  for (const l of vlab) {
    const ly = T - 4 - (rowEnd.length - 1 - l.row) * 13;
    svgEl('line', {x1: fx(l.v.x), x2: fx(l.v.x), y1: ly + 2, y2: T, stroke: '#8a94a6', 'stroke-dasharray': '3 3'}, plot);
    svgEl('text', {x: l.x, y: ly, 'font-size': 10, fill: '#5a6475'}, plot, l.v.label);
  }
  return svg;
}

// Empirical CDF as a step line: 0 % just before the smallest value, 100 % at the largest.
function cdf(values) {
  const v = values.filter(x => isFinite(x)).sort((a, b) => a - b), out = [];
  v.forEach((x, i) => { out.push([x, i / v.length * 100], [x, (i + 1) / v.length * 100]); });
  return out;
}
function okValues(run, key) {
  const r = run.requests || {}, out = [];
  (r[key] || []).forEach((v, i) => { if (!r.error[i]) out.push(v); });
  return out;
}
function table(parent, head, rows, textCols) {
  const t = htmlEl('table', {}, parent), tr = htmlEl('tr', {}, t);
  head.forEach((h, i) => htmlEl('th', {class: i < textCols ? 'l' : ''}, tr, h));
  for (const row of rows) {
    const r = htmlEl('tr', {}, t);
    row.forEach((c, i) => {
      const td = htmlEl('td', {class: i < textCols ? 'l' : ''}, r);
      if (c && c.nodeType) td.appendChild(c); else td.textContent = c;
    });
  }
  return t;
}
const badge = s => htmlEl('span', {class: 'badge ' + s}, null, s);

function render() {
  const d = JSON.parse(document.getElementById('bench-data').textContent);
  const root = document.getElementById('report');
  document.getElementById('meta').textContent =
    `scenario ${d.scenario} | ${d.endpoint} endpoint | started ${d.started_at} | ${fmt(d.duration_s)} s | ` +
    `tokenmill ${d.version}` + (d.max_model_len ? ` | max_model_len ${d.max_model_len}` : '') +
    ` | /metrics ${d.metrics && d.metrics.available ? 'scraped' : 'not available'}`;

  htmlEl('h2', {}, root, 'Summary');
  table(root, ['Scenario', 'Status', 'Verdict'], d.scenarios.map(s => [s.name, badge(s.status), s.verdict]), 3);
  const rows = [];
  for (const s of d.scenarios) for (const r of s.runs)
    rows.push([s.name, r.label, r.completed, r.failed, fmt(r.request_throughput), fmt(r.output_throughput),
               fmt(r.ttft_ms.p50), fmt(r.ttft_ms.p99), fmt(r.tpot_ms.p50), fmt(r.tpot_ms.p99), fmt(r.e2el_ms.p50),
               r.request_goodput == null ? '-' : fmt(r.request_goodput), r.peak_concurrency]);
  table(root, ['Scenario', 'Run', 'OK', 'Failed', 'req/s', 'out tok/s', 'TTFT p50 ms', 'TTFT p99 ms', 'TPOT p50 ms',
               'TPOT p99 ms', 'E2E p50 ms', 'goodput req/s', 'peak conc.'], rows, 2);

  // Whole-benchmark timeline (seconds since the benchmark started).
  htmlEl('h2', {}, root, 'Timeline');
  const tl = htmlEl('div', {class: 'charts'}, root);
  // Each run is its own step line over its own time span (runs follow each other; the JSON's 1 s
  // slices of a run overrun its end, so one line per scenario went back in time), coloured by
  // scenario; the legend names the scenarios, hovering a line names the run.
  const tokS = [], concS = [], errP = [], starts = [];
  d.scenarios.forEach((s, si) => {
    const c = COLORS[si % COLORS.length];
    s.runs.forEach((r, ri) => {
      if (ri === 0) starts.push({x: r.start_s, label: s.name});
      const t = r.timeline, tp = [], cp = [];
      const bucket = t.t.length > 1 ? t.t[1] - t.t[0] : Math.max(r.duration_s, 1e-9);
      // Slices clipped to the run; a last sliver under half a slice joins the one before it (a
      // rate over a few milliseconds would be noise).
      const sl = [];
      t.t.forEach((x, i) => {
        const w = Math.min(bucket, r.duration_s - x);
        if (!(w > 1e-9)) return;
        const q = {a: r.start_s + x, w, tok: t.output_tokens[i], busy: t.concurrency[i] * bucket, err: t.errors[i]};
        const prev = sl[sl.length - 1];
        if (prev && w < bucket / 2) { prev.w += w; prev.tok += q.tok; prev.busy += q.busy; prev.err += q.err; }
        else sl.push(q);
      });
      for (const q of sl) {
        tp.push([q.a, q.tok / q.w], [q.a + q.w, q.tok / q.w]);
        cp.push([q.a, q.busy / q.w], [q.a + q.w, q.busy / q.w]);
        if (q.err > 0) errP.push([q.a + q.w / 2, q.err / q.w]);
      }
      const name = ri === 0 ? s.name : undefined, title = `${s.name}: ${r.label}`;
      tokS.push({name, title, color: c, points: tp});
      concS.push({name, title, color: c, points: cp});
    });
  });
  const errS = errP.length ? [{name: 'errors (per s)', color: '#c62828', type: 'bar', barWidth: 0.5, points: errP}] : [];
  chart(tl, {id: 'timeline-tokens', title: 'Output throughput over time (one line per run)', xLabel: 'time since start (s)',
             yLabel: 'output tokens/s', series: tokS, vlines: starts, width: 1300, legend: true});
  chart(tl, {id: 'timeline-errors', title: 'Requests in flight and errors over time (one line per run)',
             xLabel: 'time since start (s)', yLabel: 'in flight / errors per s', series: concS.concat(errS),
             vlines: starts, width: 1300, legend: true});

  for (const s of d.scenarios) {
    htmlEl('h2', {id: 'scenario-' + s.name}, root, 'Scenario: ' + s.name);
    htmlEl('div', {class: 'sub'}, root, s.title);
    const v = htmlEl('div', {class: 'verdict'}, root);
    v.appendChild(badge(s.status));
    v.appendChild(document.createTextNode(' ' + s.verdict));
    const box = htmlEl('div', {class: 'charts'}, root);
    if (!s.runs.length) continue;
    const many = s.runs.slice(0, 10);
    chart(box, {id: s.name + '-ttft-cdf', title: 'TTFT distribution (CDF)', xLabel: 'time to first token (ms)',
                yLabel: '% of requests', yMin: 0, yMax: 100,
                series: many.map(r => ({name: r.label, points: cdf(okValues(r, 'ttft_ms'))}))});
    chart(box, {id: s.name + '-tpot-cdf', title: 'TPOT distribution (CDF)', xLabel: 'time per output token (ms)',
                yLabel: '% of requests', yMin: 0, yMax: 100,
                series: many.map(r => ({name: r.label, points: cdf(okValues(r, 'tpot_ms').filter(x => x > 0))}))});
    const det = s.details || {};
    if (s.name === 'concurrency' && det.levels) {
      const L = det.levels;
      chart(box, {id: 'sweep-throughput', title: 'Throughput vs concurrency', xLabel: 'concurrent requests', xLog: true,
                  yLabel: 'output tokens/s', series: [{name: 'output tok/s', markers: true, points: L.map(l => [l.concurrency, l.output_throughput])}]});
      chart(box, {id: 'sweep-ttft', title: 'TTFT vs concurrency (band: p50 to p99)', xLabel: 'concurrent requests', xLog: true,
                  yLabel: 'TTFT (ms)', hlines: [{y: det.slo_ttft_ms, label: `SLO ${det.slo_ttft_ms} ms`}],
                  series: [{name: 'p50', markers: true, points: L.map(l => [l.concurrency, l.ttft_p50_ms]), band: L.map(l => [l.concurrency, l.ttft_p50_ms, l.ttft_p99_ms])},
                           {name: 'p99', dash: '4 3', points: L.map(l => [l.concurrency, l.ttft_p99_ms])}]});
      chart(box, {id: 'sweep-tpot', title: 'TPOT vs concurrency (band: p50 to p99)', xLabel: 'concurrent requests', xLog: true,
                  yLabel: 'TPOT (ms)', series: [{name: 'p50', markers: true, color: COLORS[2], points: L.map(l => [l.concurrency, l.tpot_p50_ms]),
                                                band: L.map(l => [l.concurrency, l.tpot_p50_ms, l.tpot_p99_ms])},
                                               {name: 'p99', dash: '4 3', color: COLORS[2], points: L.map(l => [l.concurrency, l.tpot_p99_ms])}]});
    }
    if (s.name === 'long-prompt' && det.levels) {
      const L = det.levels.filter(l => l.prompt_tokens_mean > 0);
      chart(box, {id: 'long-prompt-ttft', title: 'TTFT vs prompt length (band: p50 to p99)', xLabel: 'prompt tokens (server count)', xMin: 0,
                  yLabel: 'TTFT (ms)', series: [{name: 'TTFT p50', markers: true, points: L.map(l => [l.prompt_tokens_mean, l.ttft_p50_ms]),
                                                band: L.map(l => [l.prompt_tokens_mean, l.ttft_p50_ms, l.ttft_p99_ms])}],
                  vlines: [{x: det.context_len, label: 'context ' + det.context_len}]});
    }
    if (s.name === 'long-output' && det.itl_by_position_ms && det.itl_by_position_ms.length) {
      const n = det.itl_by_position_ms.length;
      chart(box, {id: 'long-output-drift', title: 'Per-token gap along the output', xLabel: 'position in the output (%)',
                  yLabel: 'gap per token (ms)', series: [{name: 'mean gap', markers: true,
                  points: det.itl_by_position_ms.map((v, i) => [(i + 0.5) / n * 100, v])}]});
    }
    if (s.name === 'oom-boundary' && det.steps) {
      const st = det.steps;
      chart(box, {id: 'oom-steps', title: 'Load steps: outcome per step', xLabel: 'tokens in flight (concurrency x (prompt + output))',
                  yLabel: 'requests', xLog: true, series: [
                    {name: 'completed', color: COLORS[2], markers: true, points: st.map(x => [x.tokens_in_flight, x.completed])},
                    {name: 'failed', color: '#c62828', markers: true, points: st.map(x => [x.tokens_in_flight, x.failed])},
                    {name: 'preemptions', color: COLORS[4], dash: '4 3', points: st.map(x => [x.tokens_in_flight, x.preemptions])}]});
    }
    if (s.name === 'recovery' && s.runs[0] && s.runs[0].requests) {
      const r = s.runs[0], q = r.requests, byPhase = [[], [], []], failed = [];
      q.send_s.forEach((t, i) => { if (q.error[i]) failed.push([t, 0]); else (byPhase[q.phase[i]] || byPhase[2]).push([t, q.ttft_ms[i]]); });
      const names = det.phase_names || ['baseline', 'overload', 'after'];
      chart(box, {id: 'recovery-ttft', title: 'TTFT by send time: baseline, overload, recovery', xLabel: 'send time (s since run start)',
                  yLabel: 'TTFT (ms)', series: byPhase.map((p, i) => ({name: names[i] || ('phase ' + i), type: 'scatter', color: [COLORS[0], COLORS[3], COLORS[2]][i], points: p}))
                    .concat(failed.length ? [{name: 'failed', type: 'scatter', color: '#000', points: failed}] : []),
                  hlines: det.baseline_p50_ttft_ms ? [{y: det.limit_ms || 1.5 * det.baseline_p50_ttft_ms, label: 'recovered below', color: '#2e8b57'}] : [],
                  vlines: (det.phase_starts_s || []).map((x, i) => ({x, label: names[i]}))});
    }
  }

  const m = d.metrics;
  if (m && m.available && m.series && m.series.t.length) {
    htmlEl('h2', {}, root, 'Server metrics (scraped from /metrics)');
    const box = htmlEl('div', {class: 'charts'}, root);
    const S = m.series, pts = key => S.t.map((t, i) => [t, S[key][i]]).filter(p => p[1] != null);
    const starts2 = d.scenarios.filter(s => s.runs.length).map(s => ({x: s.runs[0].start_s, label: s.name}));
    chart(box, {id: 'metrics-kv', title: 'KV cache usage', xLabel: 'time since start (s)', yLabel: 'KV cache used (%)', yMin: 0,
                series: [{name: 'kv_cache_usage_perc', points: pts('kv_cache_usage_perc').map(p => [p[0], p[1] * 100])}], vlines: starts2});
    chart(box, {id: 'metrics-queue', title: 'Requests running / waiting on the server', xLabel: 'time since start (s)', yLabel: 'requests',
                series: [{name: 'running', points: pts('num_requests_running')}, {name: 'waiting', color: COLORS[3], points: pts('num_requests_waiting')}],
                vlines: starts2});
    chart(box, {id: 'metrics-preemptions', title: 'Preemptions (cumulative)', xLabel: 'time since start (s)', yLabel: 'preemptions',
                series: [{name: 'num_preemptions_total', color: COLORS[4], points: pts('num_preemptions_total')}], vlines: starts2});
  }
  document.body.setAttribute('data-charts', String(nCharts));
  if (document.body.getAttribute('data-render') !== 'error') document.body.setAttribute('data-render', 'ok');
}

try { render(); } catch (e) { fail(e && e.stack ? e.stack : e); }
})();
