// LoRA adapters served as model names, through the official openai client: a server with
// stories260K and an adapter (`tokenmill lora dummy`) answers greedy requests for the base and the
// adapter in one concurrent batch; the adapter's answer equals the merged model's (`lora merge`)
// served alone and `generate --lora`; vLLM's /v1/load_lora_adapter and /v1/unload_lora_adapter at
// run time; an unknown adapter gets 404 model_not_found; /v1/models lists adapters with their parent.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import OpenAI from 'openai';
import { startServer, sourceDir, binary, generateJson } from './lib/server.mjs';

const BASE = path.join(sourceDir, 'models/stories260K/stories260K.gguf');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tm-lora-'));
const servers = [];
after(async () => {
  for (const s of servers) assert.equal((await s.stop()).code, 0);
  fs.rmSync(dir, { recursive: true, force: true });
});

function tm(args) {
  const r = spawnSync(binary, args, { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
}
const ADAPTER = path.join(dir, 'a.gguf');
const OTHER = path.join(dir, 'b.gguf');
const MERGED = path.join(dir, 'merged.gguf');
const dummy = ['lora', 'dummy', '-m', BASE, '--targets', 'all', '--rank', '4', '--spread', '0.2', '-o'];
tm([...dummy, ADAPTER]);
tm([...dummy, OTHER, '--seed', '7']);
tm(['lora', 'merge', '-m', BASE, '--lora', ADAPTER, '-o', MERGED]);

async function start(args, apiKey = 'none') {
  const s = await startServer(args);
  servers.push(s);
  return { server: s, client: new OpenAI({ baseURL: s.baseURL, apiKey, maxRetries: 0 }) };
}

const PROMPT = 'Once upon a time, there was a little girl named Lily. She loved to';
const greedy = (client, model) => client.completions.create({ model, prompt: PROMPT, max_tokens: 16, temperature: 0 });

test('base and adapter in one concurrent batch; the adapter answers like the merged model', async () => {
  const merged = await start(['--model', MERGED]);
  const want = (await greedy(merged.client, 'merged')).choices[0].text;
  const gen = generateJson(['--model', BASE, '--lora', ADAPTER, '--prompt', PROMPT, '-n', '16', '--temperature', '0']);
  assert.equal(gen.text, want);  // generate --lora == the merged model

  const { server, client } = await start(['--model', BASE, '--lora-modules', `sql=${ADAPTER}`, `poet=${OTHER}`]);
  const list = await client.models.list();
  assert.deepEqual(list.data.map((m) => [m.id, m.parent]), [['stories260K', null], ['sql', 'stories260K'], ['poet', 'stories260K']]);
  assert.equal(list.data[1].root, ADAPTER);
  const base = (await greedy(client, 'stories260K')).choices[0].text;
  assert.notEqual(base, want);
  const names = ['stories260K', 'sql', 'poet', 'sql', 'stories260K', 'sql', 'poet', 'stories260K'];
  const got = await Promise.all(names.map((n) => greedy(client, n)));
  const poet = got[2].choices[0].text;
  got.forEach((r, i) => {
    assert.equal(r.model, names[i]);  // the response names the adapter
    const text = r.choices[0].text;
    if (names[i] === 'stories260K') assert.equal(text, base);
    if (names[i] === 'sql') assert.equal(text, want);
    if (names[i] === 'poet') assert.equal(text, poet);
  });
  assert.notEqual(poet, base);
  assert.notEqual(poet, want);
  // Chat too, streamed, names the adapter.
  const stream = await client.chat.completions.create({
    model: 'sql', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, temperature: 0, stream: true,
  });
  for await (const chunk of stream) assert.equal(chunk.model, 'sql');

  await assert.rejects(greedy(client, 'no-such-adapter'), (e) => e.status === 404 && e.code === 'model_not_found');
  // vLLM's info gauge, idle again once the batch is done.
  const idle = /^vllm:lora_requests_info\{model_name="stories260K",running_lora_adapters="",waiting_lora_adapters="",max_lora="8"\} \d/m;
  let metrics = '';
  for (let i = 0; i < 50; i++) {  // the engine reports a request done just after its last output
    metrics = await (await fetch(`${server.url}/metrics`)).text();
    if (idle.test(metrics)) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.match(metrics, idle);
});

test('adapters load and unload at run time (vLLM routes, behind the API key)', async () => {
  const { server, client } = await start(['--model', BASE, '--api-key', 'k'], 'k');
  const post = (route, body, key = 'k') =>
    fetch(`${server.baseURL}/${route}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...(key ? { Authorization: `Bearer ${key}` } : {}) },
      body: JSON.stringify(body),
    });
  await assert.rejects(greedy(client, 'late'), (e) => e.status === 404 && e.code === 'model_not_found');
  assert.equal((await post('load_lora_adapter', { lora_name: 'late', lora_path: ADAPTER }, null)).status, 401);
  const ok = await post('load_lora_adapter', { lora_name: 'late', lora_path: ADAPTER });
  assert.equal(ok.status, 200);
  assert.match(await ok.text(), /late/);
  const merged = await start(['--model', MERGED]);
  const want = (await greedy(merged.client, 'merged')).choices[0].text;
  const r = await greedy(client, 'late');
  assert.equal(r.model, 'late');
  assert.equal(r.choices[0].text, want);
  assert.ok((await client.models.list()).data.some((m) => m.id === 'late' && m.parent === 'stories260K'));

  const dup = await post('load_lora_adapter', { lora_name: 'late', lora_path: OTHER });
  assert.equal(dup.status, 400);
  assert.match((await dup.json()).error.message, /already been loaded/);
  const bad = await post('load_lora_adapter', { lora_name: 'x', lora_path: BASE });
  assert.equal(bad.status, 400);
  assert.match((await bad.json()).error.message, /not a LoRA adapter/);

  assert.equal((await post('unload_lora_adapter', { lora_name: 'late' })).status, 200);
  await assert.rejects(greedy(client, 'late'), (e) => e.status === 404 && e.code === 'model_not_found');
  const again = await post('unload_lora_adapter', { lora_name: 'late' });
  assert.equal(again.status, 404);
  assert.equal((await again.json()).error.code, 'model_not_found');
});

test('with several models an adapter sits on the model base_model_name names', async () => {
  const { client } = await start([
    '--model', `a=${BASE}`, '--model', `b=${BASE}`, '--memory-limit', '0',
    '--lora-modules', JSON.stringify({ name: 'sql', path: ADAPTER, base_model_name: 'b' }),
  ]);
  const list = await client.models.list();
  assert.deepEqual(list.data.map((m) => [m.id, m.parent]), [['a', null], ['b', null], ['sql', 'b']]);
  const merged = await start(['--model', MERGED]);
  const want = (await greedy(merged.client, 'merged')).choices[0].text;
  const r = await greedy(client, 'sql');
  assert.equal(r.model, 'sql');
  assert.equal(r.choices[0].text, want);
});
