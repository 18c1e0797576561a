// Several models in one server (--model NAME=FILE, --models-file) and tiered routing, through the
// official openai client: each model answers under its name; `auto` routes by each rule kind and
// says which rule matched; an on-demand model loads on first use and unloads after its idle time
// while another model keeps streaming; an overloaded model falls back to the next of its chain;
// the memory budget refuses what does not fit with 503 model_unavailable.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { startServer, scrape, metric, sourceDir, sleep } from './lib/server.mjs';

const MODEL_FILE = path.join(sourceDir, 'models/stories260K/stories260K.gguf');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tm-multimodel-'));
const servers = [];
after(async () => {
  for (const s of servers) assert.equal((await s.stop()).code, 0);
  fs.rmSync(dir, { recursive: true, force: true });
});

async function start(args, opts, apiKey = 'none') {
  const s = await startServer(args, opts);
  servers.push(s);
  return { server: s, client: new OpenAI({ baseURL: s.baseURL, apiKey, maxRetries: 0 }) };
}

function modelsFile(name, text) {
  const p = path.join(dir, name);
  fs.writeFileSync(p, text);
  return p;
}

const CONFIG = `
models:
  - name: small
    file: ${MODEL_FILE}
    aliases: [fast]
    kv_cache_memory: 8MiB
  - name: big
    file: ${MODEL_FILE}
    kv_cache_memory: 8MiB
    max_num_seqs: 1
  - name: mid
    file: ${MODEL_FILE}
    kv_cache_memory: 8MiB
  - name: od
    file: ${MODEL_FILE}
    residency: on_demand
    idle_unload: 1500ms
    kv_cache_memory: 8MiB
routers:
  - name: auto
    default: small
    rules:
      - {name: long, min_prompt_tokens: 60, model: big}
      - {name: tools, has_tools: true, model: big}
      - {name: json, has_json_schema: true, model: mid}
      - {name: code, last_user_regex: "\\\\bcode\\\\b", model: big}
      - {name: premium, header: {name: X-Tier, equals: premium}, model: [big, small]}
      - {name: gold, metadata: {key: tier, equals: gold}, model: mid}
      - {name: ondemand, metadata: {key: tier, equals: od}, model: od}
  - name: judge
    default: small
    classifier: {model: small, question: "Is the user's request easy or hard?", choices: [easy, hard]}
    rules:
      - {name: easy, classifier: {equals: easy}, model: big}
      - {name: hard, classifier: {equals: hard}, model: mid}
`;

const chat = (content) => [{ role: 'user', content }];

test('two models answer under their names; unknown names get 404 model_not_found', async () => {
  const { server, client } = await start(['--model', `a=${MODEL_FILE}`, '--model', `b=${MODEL_FILE}`]);
  const list = await client.models.list();
  assert.deepEqual(list.data.map((m) => [m.id, m.state, m.max_model_len]), [['a', 'loaded', 512], ['b', 'loaded', 512]]);
  for (const name of ['a', 'b']) {
    const r = await client.completions.create({ model: name, prompt: 'Once upon', max_tokens: 6, temperature: 0 });
    assert.equal(r.model, name);
    assert.equal(r.usage.completion_tokens, 6);
    assert.equal((await client.models.retrieve(name)).id, name);
  }
  await assert.rejects(client.completions.create({ model: 'c', prompt: 'x', max_tokens: 2 }), (e) => {
    assert.equal(e.status, 404);
    assert.equal(e.code, 'model_not_found');
    return true;
  });
  const m = await scrape(server.url);
  assert.equal(metric(m, 'vllm:request_success_total', 'model_name="a",finished_reason="length"'), 1);
  assert.equal(metric(m, 'vllm:request_success_total', 'model_name="b",finished_reason="length"'), 1);
  assert.equal(metric(m, 'tokenmill:model_loaded', 'model_name="b"'), 1);
});

test('auto routes by each rule kind and names the rule; aliases answer as their model', async () => {
  const { server, client } = await start(['--models-file', modelsFile('route.yaml', CONFIG)]);
  const ask = async (params, opts) => {
    const { data, response } = await client.chat.completions
      .create({ model: 'auto', max_tokens: 4, temperature: 0, ...params }, opts)
      .withResponse();
    return [data.model, response.headers.get('x-tokenmill-route')];
  };
  assert.deepEqual(await ask({ messages: chat('hi') }), ['small', 'auto/default']);
  const long = 'Once upon a time there was a little girl who lived in a big house with her mom and dad. '.repeat(4);
  assert.deepEqual(await ask({ messages: chat(long) }), ['big', 'auto/long']);
  const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: {} } } }];
  assert.deepEqual(await ask({ messages: chat('hi'), tools }), ['big', 'auto/tools']);
  assert.deepEqual(await ask({ messages: chat('hi'), response_format: { type: 'json_object' } }), ['mid', 'auto/json']);
  assert.deepEqual(await ask({ messages: chat('write some code please') }), ['big', 'auto/code']);
  assert.deepEqual(await ask({ messages: chat('hi') }, { headers: { 'X-Tier': 'premium' } }), ['big', 'auto/premium']);
  assert.deepEqual(await ask({ messages: chat('hi'), metadata: { tier: 'gold' } }), ['mid', 'auto/gold']);
  // The classifier (a `choice` constraint on small) picks one of its rules, never the default.
  const { data, response } = await client.chat.completions
    .create({ model: 'judge', messages: chat('Prove the Riemann hypothesis.'), max_tokens: 4 })
    .withResponse();
  const rule = response.headers.get('x-tokenmill-route');
  assert.ok(['judge/easy', 'judge/hard'].includes(rule), rule);
  assert.equal(data.model, rule === 'judge/easy' ? 'big' : 'mid');
  // An alias is its model.
  const r = await client.chat.completions.create({ model: 'fast', messages: chat('hi'), max_tokens: 2 });
  assert.equal(r.model, 'small');
  // /tokenize takes a model name, an alias or a router (its tokenizer model).
  for (const model of ['big', 'fast', 'auto']) {
    const t = await (await fetch(`${server.url}/tokenize`, { method: 'POST', body: JSON.stringify({ model, prompt: 'Once upon' }),
                                                            headers: { 'Content-Type': 'application/json' } })).json();
    assert.equal(t.count, 3, model);  // BOS + two tokens
  }
  const m = await scrape(server.url);
  assert.equal(metric(m, 'tokenmill:router_requests_total', 'router="auto",rule="long",model_name="big"'), 1);
  assert.equal(metric(m, 'tokenmill:router_requests_total', 'router="auto",rule="default",model_name="small"'), 1);
  const models = (await client.models.list()).data.map((x) => [x.id, x.state]);
  assert.deepEqual(models, [['small', 'loaded'], ['big', 'loaded'], ['mid', 'loaded'], ['od', 'unloaded'],
                            ['auto', 'router'], ['judge', 'router']]);
});

test('an on-demand model loads on first use and unloads when idle while another model streams', async () => {
  const { server, client } = await start(['--models-file', modelsFile('od.yaml', CONFIG), '--debug-step-delay-ms', '40']);
  const state = async (id) => (await client.models.retrieve(id)).state;
  assert.equal(await state('od'), 'unloaded');
  // A long stream on small: its chunks keep coming while od loads, serves and unloads.
  const gaps = [];
  const streaming = (async () => {
    const stream = await client.completions.create({ model: 'small', prompt: 'Once', max_tokens: 100, stream: true,
                                                     temperature: 0, ignore_eos: true });
    let last = Date.now();
    let n = 0;
    for await (const c of stream) {
      const now = Date.now();
      gaps.push(now - last);
      last = now;
      n += c.choices.length ? 1 : 0;
    }
    return n;
  })();
  await sleep(300);
  const r = await client.chat.completions.create({ model: 'auto', metadata: { tier: 'od' }, messages: chat('hi'),
                                                   max_tokens: 3 });
  assert.equal(r.model, 'od');
  assert.equal(await state('od'), 'loaded');
  let unloadedAt = null;
  for (let i = 0; i < 60 && unloadedAt === null; i++) {
    await sleep(100);
    if ((await state('od')) === 'unloaded') unloadedAt = i;
  }
  assert.notEqual(unloadedAt, null, 'od unloaded after its idle time');
  assert.ok((await streaming) >= 50);
  assert.ok(Math.max(...gaps.slice(1)) < 1000, `a stream gap of ${Math.max(...gaps.slice(1))} ms`);
  let m = await scrape(server.url);
  assert.equal(metric(m, 'tokenmill:model_loaded', 'model_name="od"'), 0);
  assert.equal(metric(m, 'vllm:request_success_total', 'model_name="od",finished_reason="length"'), 1);
  // keep_alive (Ollama's): "-1" keeps it past its idle time, 0 unloads it as soon as the request is done.
  await client.chat.completions.create({ model: 'od', messages: chat('hi'), max_tokens: 2, keep_alive: '-1' });
  await sleep(2500);
  assert.equal(await state('od'), 'loaded');
  await client.chat.completions.create({ model: 'od', messages: chat('hi'), max_tokens: 2, keep_alive: 0 });
  await sleep(500);
  assert.equal(await state('od'), 'unloaded');
  for (const keep_alive of ['soon', 1e300, '-']) {  // 1e300 s overflowed the clock; '-' was 0 s
    await assert.rejects(client.chat.completions.create({ model: 'od', messages: chat('hi'), keep_alive }), (e) => {
      assert.equal(e.status, 400);
      assert.equal(e.param, 'keep_alive');
      return true;
    });
  }
  m = await scrape(server.url);
  assert.equal(metric(m, 'tokenmill:model_loads_total'), 5);  // small, big, mid at start; od twice
});

test('an overloaded model falls back to the next of its chain', async () => {
  const { server, client } = await start(['--models-file', modelsFile('fb.yaml', CONFIG), '--debug-step-delay-ms', '30',
                                          '--max-queued-requests', '2']);
  // big runs one sequence and lets two wait; the rest go to small (a 429 only if small is full too).
  const settled = await Promise.allSettled(Array.from({ length: 6 }, () =>
    client.chat.completions.create({ model: 'auto', messages: chat('hi'), max_tokens: 20, ignore_eos: true },
                                   { headers: { 'X-Tier': 'premium' } })));
  for (const s of settled) if (s.status === 'rejected') assert.equal(s.reason.status, 429);
  const by = settled.filter((s) => s.status === 'fulfilled').map((s) => s.value.model);
  assert.ok(by.includes('big'), by.join());
  assert.ok(by.includes('small'), by.join());
  const m = await scrape(server.url);
  assert.ok(metric(m, 'tokenmill:router_fallbacks_total', 'from="big",to="small",reason="queue_full"') >= 1);
});

test('the memory budget refuses a model that cannot fit (503 model_unavailable); admin load/unload', async () => {
  // small + big (one file, 8 MiB KV each) fit in 20 MiB; od's 8 MiB more do not. The limit is 24 MiB:
  // 4 MiB of it is the request memory (--buffer-memory).
  const cfg = `
memory_limit: 24MiB
models:
  - {name: small, file: ${MODEL_FILE}, kv_cache_memory: 8MiB}
  - {name: big, file: ${MODEL_FILE}, kv_cache_memory: 8MiB}
  - {name: od, file: ${MODEL_FILE}, kv_cache_memory: 8MiB, residency: on_demand}
routers:
  - {name: auto, default: [od, small]}
`;
  const { server, client } = await start(['--models-file', modelsFile('budget.yaml', cfg), '--api-key', 'k1',
                                          '--buffer-memory', '4MiB'], {}, 'k1');
  await assert.rejects(client.chat.completions.create({ model: 'od', messages: chat('hi'), max_tokens: 2 }), (e) => {
    assert.equal(e.status, 503);
    assert.equal(e.code, 'model_unavailable');
    assert.match(e.message, /`od` needs .* memory limit/);
    return true;
  });
  // A chain whose first model cannot be loaded falls back to the next (reason "unavailable").
  const viaAuto = await client.chat.completions.create({ model: 'auto', messages: chat('hi'), max_tokens: 2 });
  assert.equal(viaAuto.model, 'small');
  assert.equal(metric(await scrape(server.url), 'tokenmill:router_fallbacks_total',
                      'from="od",to="small",reason="unavailable"'), 1);
  const post = (p, body, key = 'k1') => fetch(`${server.url}${p}`, {
    method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` }, body: JSON.stringify(body) });
  let r = await post('/models/unload', { model: 'big' }, 'wrong');
  assert.equal(r.status, 401);  // admin routes need the API key
  r = await post('/models/load', { model: 'od' });
  assert.equal(r.status, 503);
  r = await post('/models/unload', { model: 'big' });
  assert.equal(r.status, 200);
  assert.equal((await r.json()).model.state, 'unloaded');
  r = await post('/models/load', { model: 'od' });
  assert.equal(r.status, 200);
  assert.equal((await client.models.retrieve('od')).state, 'loaded');
  r = await post('/models/reload', { model: 'od' });  // unloads and loads it again
  assert.equal(r.status, 200);
  assert.equal((await r.json()).model.state, 'loaded');
  assert.equal(metric(await scrape(server.url), 'tokenmill:model_loads_total'), 4);  // small, big, od, od
  r = await post('/models/unload', { model: 'nope' });
  assert.equal(r.status, 404);
});
