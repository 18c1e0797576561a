// /v1/embeddings through the official openai client on a tiny random bert embedder (`tokenmill dummy
// --shape tiny-bert --pooling mean`): float and base64 (the client's default, decoded by the client)
// agree, vectors are unit length, `dimensions` truncates and renormalizes, usage counts tokens, a
// batch equals its inputs one by one; the generation routes answer 400 on this model; /v1/rerank on a
// bert reranker through plain fetch (the openai client has no rerank call).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import OpenAI from 'openai';
import { startServer, binary } from './lib/server.mjs';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tm-embed-e2e-'));
const servers = [];
after(async () => {
  for (const s of servers) assert.equal((await s.stop()).code, 0);
  fs.rmSync(dir, { recursive: true, force: true });
});
function dummy(name, args) {
  const file = path.join(dir, name);
  const r = spawnSync(binary, ['dummy', '--dtype', 'F32', '--seed', '4', ...args, '-o', file], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return file;
}
const EMBEDDER = dummy('embed.gguf', ['--shape', 'tiny-bert', '--pooling', 'mean']);
const RERANKER = dummy('rank.gguf', ['--shape', 'tiny-bert', '--pooling', 'rank']);
const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

test('embeddings through the openai client', async () => {
  const server = await startServer(['--model', EMBEDDER, '--served-model-name', 'emb']);
  servers.push(server);
  const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'none', maxRetries: 0 });
  const texts = ['hello world', 'the cat is fast', 'a dog'];
  const floats = await client.embeddings.create({ model: 'emb', input: texts, encoding_format: 'float' });
  assert.equal(floats.object, 'list');
  assert.equal(floats.model, 'emb');
  assert.equal(floats.data.length, 3);
  assert.ok(floats.usage.prompt_tokens >= 3 * 3 && floats.usage.total_tokens === floats.usage.prompt_tokens);
  for (const [i, d] of floats.data.entries()) {
    assert.equal(d.index, i);
    assert.equal(d.embedding.length, 64);
    assert.ok(Math.abs(norm(d.embedding) - 1) < 1e-5);
  }
  // the client's default is base64, which it decodes to the same floats
  const b64 = await client.embeddings.create({ model: 'emb', input: texts });
  for (let i = 0; i < 3; i++)
    for (let k = 0; k < 64; k++) assert.ok(Math.abs(b64.data[i].embedding[k] - floats.data[i].embedding[k]) < 1e-6);
  // one by one: the same vectors as in the batch
  for (let i = 0; i < 3; i++) {
    const one = await client.embeddings.create({ model: 'emb', input: texts[i], encoding_format: 'float' });
    for (let k = 0; k < 64; k++) assert.ok(Math.abs(one.data[0].embedding[k] - floats.data[i].embedding[k]) < 1e-4);
  }
  // Matryoshka truncation
  const small = await client.embeddings.create({ model: 'emb', input: 'hello world', dimensions: 8, encoding_format: 'float' });
  assert.equal(small.data[0].embedding.length, 8);
  assert.ok(Math.abs(norm(small.data[0].embedding) - 1) < 1e-5);
  // errors: 400 with the field
  await assert.rejects(client.embeddings.create({ model: 'emb', input: '' }), (e) => e.status === 400);
  await assert.rejects(client.embeddings.create({ model: 'emb', input: 'x', dimensions: 1000 }),
    (e) => e.status === 400 && e.param === 'dimensions');
  await assert.rejects(client.completions.create({ model: 'emb', prompt: 'hi', max_tokens: 4 }),
    (e) => e.status === 400 && /does not generate/.test(e.message));
  await assert.rejects(client.chat.completions.create({ model: 'emb', messages: [{ role: 'user', content: 'hi' }] }),
    (e) => e.status === 400 && /does not generate/.test(e.message));
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id), ['emb']);
});

test('rerank on a cross-encoder', async () => {
  const server = await startServer(['--model', RERANKER, '--served-model-name', 'rr']);
  servers.push(server);
  const docs = ['the cat is fast', 'hello world', 'a dog'];
  const r = await fetch(`${server.baseURL}/rerank`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'rr', query: 'cat', documents: docs, top_n: 2 }),
  });
  assert.equal(r.status, 200);
  const body = await r.json();
  assert.equal(body.results.length, 2);
  assert.ok(body.results[0].relevance_score >= body.results[1].relevance_score);
  assert.equal(body.results[0].document.text, docs[body.results[0].index]);
});
