// Every series the deployment kit reads exists in a real tokenmill /metrics scrape (ctest
// deploy_metrics_coverage): the alert rules (deploy/prometheus/alert-rules.yml), the Grafana
// dashboard (deploy/grafana/tokenmill-dashboard.json), the HPA's Prometheus adapter rule
// (deploy/k8s/prometheus-adapter-rules.yaml), and the inference gateway's endpoint picker, whose
// series must also have the type and labels it parses (docs/deploy.md, "What the endpoint picker
// reads"). A name no file queries any more, or one the server stops exporting, fails the test.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer, sourceDir, binary } from '../e2e/lib/server.mjs';

const BASE = path.join(sourceDir, 'models/stories260K/stories260K.gguf');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tm-deploy-metrics-'));
const ADAPTER = path.join(dir, 'a.gguf');
const r = spawnSync(binary, ['lora', 'dummy', '-m', BASE, '--rank', '4', '-o', ADAPTER], { encoding: 'utf8' });
if (r.status !== 0) throw new Error(`lora dummy failed: ${r.stderr}`);

const failures = [];
const fail = (m) => failures.push(m);

// The endpoint picker's inputs (Gateway API Inference Extension, model server protocol; the EPP's
// defaults are vLLM's names): name, type, labels it reads, and a check of the value.
const now = Date.now() / 1000;
const PICKER = [
  { name: 'vllm:num_requests_waiting', type: 'gauge', labels: [], what: 'TotalQueuedRequests (queue-scorer, saturation)' },
  { name: 'vllm:num_requests_running', type: 'gauge', labels: [], what: 'TotalRunningRequests' },
  { name: 'vllm:kv_cache_usage_perc', type: 'gauge', labels: [], what: 'KVCacheUtilization (kv-cache-utilization-scorer), 0..1',
    value: (v) => v >= 0 && v <= 1 },
  { name: 'vllm:lora_requests_info', type: 'gauge', labels: ['running_lora_adapters', 'waiting_lora_adapters', 'max_lora'],
    what: 'LoRA affinity: value = a recent unix time, max_lora an integer',
    value: (v, l) => Math.abs(v - now) < 600 && /^\d+$/.test(l.max_lora) },
  { name: 'vllm:cache_config_info', type: 'gauge', labels: ['block_size', 'num_gpu_blocks'],
    what: 'prefix-cache-scorer: block_size and num_gpu_blocks integers',
    value: (v, l) => /^\d+$/.test(l.block_size) && Number(l.num_gpu_blocks) > 0 },
];

function parse(text) {
  const types = {}, series = [];
  for (const line of text.split('\n')) {
    const t = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (t) types[t[1]] = t[2];
    if (!line || line.startsWith('#')) continue;
    const m = /^([^{ ]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) { fail(`unparsable line: ${line}`); continue; }
    const labels = {};
    for (const lm of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[lm[1]] = lm[2];
    series.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return { types, series };
}

const server = await startServer(['--model', BASE, '--lora-modules', `a=${ADAPTER}`]);
let scraped;
try {
  const post = (body) => fetch(`${server.baseURL}/completions`, { method: 'POST', headers: { 'Content-Type': 'application/json' },
                                                                   body: JSON.stringify(body) }).then((x) => x.text());
  await post({ model: 'stories260K', prompt: 'Once', max_tokens: 8 });
  await post({ model: 'a', prompt: 'Once', max_tokens: 8 });
  await post({ model: 'stories260K', prompt: 'Once', max_tokens: 8, stream: true });
  await post({ model: 'stories260K', prompt: 'x', max_tokens: -1 });  // a failure with a reason
  scraped = parse(await (await fetch(`${server.url}/metrics`)).text());
} finally {
  await server.stop();
}
const { types, series } = scraped;
const labelsOf = (fam) => new Set(series.filter((s) => s.name === fam || s.name.startsWith(fam + '_')).flatMap((s) => Object.keys(s.labels)));
// The family a queried name belongs to: itself, or a histogram's _bucket/_sum/_count.
function family(name) {
  if (types[name]) return name;
  const m = /^(.*)_(bucket|sum|count)$/.exec(name);
  if (m && types[m[1]] === 'histogram') return m[1];
  return null;
}

// 1. The endpoint picker's series: type, labels, one series per model, value.
for (const p of PICKER) {
  if (types[p.name] !== p.type) { fail(`picker: ${p.name} has type ${types[p.name]}, the EPP reads a ${p.type}`); continue; }
  const ss = series.filter((s) => s.name === p.name);
  if (ss.length !== 1) fail(`picker: ${p.name} has ${ss.length} series; the EPP takes one per endpoint`);
  for (const s of ss) {
    for (const l of [...p.labels, 'model_name'])
      if (!(l in s.labels)) fail(`picker: ${p.name} lacks label ${l}`);
    if (p.value && !p.value(s.value, s.labels)) fail(`picker: ${p.name} ${JSON.stringify(s.labels)} ${s.value}: not ${p.what}`);
  }
  console.log(`picker  ${p.name.padEnd(30)} ${p.type}  {${Object.keys(ss[0]?.labels ?? {}).join(',')}}  ${p.what}`);
}
const eppCfg = fs.readFileSync(path.join(sourceDir, 'deploy/k8s/gateway/epp-config.yaml'), 'utf8');
const doc = fs.readFileSync(path.join(sourceDir, 'docs/deploy.md'), 'utf8');
for (const p of PICKER) {
  if (!eppCfg.includes(p.name)) fail(`deploy/k8s/gateway/epp-config.yaml does not list ${p.name}`);
  if (!doc.includes(p.name)) fail(`docs/deploy.md does not list ${p.name}`);
}

// 2. Every metric name and label the kit's queries use.
const TARGET_LABELS = new Set(['le', 'instance', 'job', 'namespace', 'pod', 'deployment']);
const files = {
  'deploy/prometheus/alert-rules.yml': (t) => [...t.matchAll(/expr: \|?\n?([\s\S]*?)\n\s+(?:for|labels):/g)].map((m) => m[1]),
  'deploy/grafana/tokenmill-dashboard.json': (t) => {
    const j = JSON.parse(t), out = [];
    for (const p of j.panels) for (const tg of p.targets ?? []) out.push(tg.expr);
    for (const v of j.templating.list) if (v.definition) out.push(v.definition);
    return out;
  },
  'deploy/k8s/prometheus-adapter-rules.yaml': (t) => [...t.matchAll(/seriesQuery: '([^']+)'/g)].map((m) => m[1]),
};
let checked = 0;
for (const [file, extract] of Object.entries(files)) {
  const exprs = extract(fs.readFileSync(path.join(sourceDir, file), 'utf8'));
  if (!exprs.length) fail(`${file}: no queries found`);
  for (const e of exprs) {
    const names = [...new Set([...e.matchAll(/\b((?:vllm|tokenmill):[a-zA-Z0-9_:]+)/g)].map((m) => m[1]))];
    if (!names.length && !/\bup\b/.test(e)) fail(`${file}: a query reads no tokenmill series: ${e}`);
    const fams = [];
    for (const n of names) {
      const f = family(n);
      if (!f) fail(`${file}: ${n} is not in /metrics`);
      else fams.push(f);
      checked++;
    }
    // Labels grouped by or matched on must exist on a series the query reads.
    const used = new Set();
    for (const m of e.matchAll(/\bby \(([^)]*)\)/g)) m[1].split(',').map((x) => x.trim()).filter(Boolean).forEach((x) => used.add(x));
    for (const m of e.matchAll(/\{([^}]*)\}/g)) for (const lm of m[1].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)/g)) used.add(lm[1]);
    for (const l of used) {
      if (TARGET_LABELS.has(l) || !fams.length) continue;
      if (!fams.some((f) => labelsOf(f).has(l))) fail(`${file}: label ${l} is on none of ${fams.join(', ')} (${e.slice(0, 80)}...)`);
    }
  }
}
console.log(`${checked} metric references checked in the rules, dashboard and adapter rule`);
fs.rmSync(dir, { recursive: true, force: true });
if (failures.length) {
  console.log(failures.join('\n'));
  process.exit(1);
}
console.log('deploy metrics: OK');
