// The OpenAI API surface of `tokenmill serve` with the official openai client, on the bundled
// default model: models, chat and completions (streaming and not), usage, stop strings, seeds, n,
// logprobs, echo, token prompts, prefix-cache usage details, tokenize/detokenize, version.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, readSse } from './lib/server.mjs';

let server;
let client;
const MODEL = 'stories260K';

before(async () => {
  server = await startServer(['--max-num-seqs', '16']);
  client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  const r = await server.stop();
  assert.equal(r.code, 0, server.log());
});

async function collectChat(params) {
  const stream = await client.chat.completions.create({ ...params, stream: true });
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  return chunks;
}

test('GET /v1/models lists the served model with max_model_len', async () => {
  const list = await client.models.list();
  assert.equal(list.data.length, 1);
  const m = list.data[0];
  assert.equal(m.id, MODEL);
  assert.equal(m.object, 'model');
  assert.equal(m.owned_by, 'tokenmill');
  assert.equal(m.max_model_len, 512);
  const one = await client.models.retrieve(MODEL);
  assert.equal(one.id, MODEL);
});

test('chat completion: shape, usage, greedy equals streaming', async () => {
  const params = { model: MODEL, messages: [{ role: 'user', content: 'Tell me a story.' }], max_tokens: 24, temperature: 0 };
  const r = await client.chat.completions.create(params);
  assert.equal(r.object, 'chat.completion');
  assert.match(r.id, /^chatcmpl-[0-9a-f]{32}$/);
  assert.equal(r.model, MODEL);
  assert.equal(r.choices.length, 1);
  const c = r.choices[0];
  assert.equal(c.index, 0);
  assert.equal(c.message.role, 'assistant');
  assert.equal(typeof c.message.content, 'string');
  assert.ok(['stop', 'length'].includes(c.finish_reason));
  assert.ok(r.usage.prompt_tokens > 5);
  assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 24);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);

  const chunks = await collectChat({ ...params, stream_options: { include_usage: true } });
  assert.equal(chunks[0].object, 'chat.completion.chunk');
  assert.equal(chunks[0].choices[0].delta.role, 'assistant');
  const last = chunks[chunks.length - 1];
  assert.deepEqual(last.choices, []);
  assert.deepEqual(last.usage.prompt_tokens, r.usage.prompt_tokens);
  assert.deepEqual(last.usage.completion_tokens, r.usage.completion_tokens);
  const text = chunks.map((k) => k.choices[0]?.delta?.content ?? '').join('');
  assert.equal(text, c.message.content);
  const finals = chunks.filter((k) => k.choices[0]?.finish_reason);
  assert.equal(finals.length, 1);
  assert.equal(finals[0].choices[0].finish_reason, c.finish_reason);
  for (const k of chunks.slice(0, -1)) assert.equal(k.usage, null);  // include_usage: null until the end
});

test('completion: non-streaming and streaming agree; max_tokens gives finish_reason length', async () => {
  const params = { model: MODEL, prompt: 'Once upon a time', max_tokens: 30, temperature: 0, ignore_eos: true };
  const r = await client.completions.create(params);
  assert.equal(r.object, 'text_completion');
  assert.match(r.id, /^cmpl-/);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 30);
  const stream = await client.completions.create({ ...params, stream: true });
  let text = '';
  let finish = null;
  for await (const k of stream) {
    text += k.choices[0].text;
    if (k.choices[0].finish_reason) finish = k.choices[0].finish_reason;
  }
  assert.equal(text, r.choices[0].text);
  assert.equal(finish, 'length');
});

test('raw SSE ends with data: [DONE]', async () => {
  const res = await fetch(`${server.baseURL}/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: 'Once', max_tokens: 5, stream: true }),
  });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type'), /^text\/event-stream/);
  const { events, raw } = await readSse(res);
  assert.ok(raw.endsWith('data: [DONE]\n\n'));
  assert.equal(events.filter((e) => e === '[DONE]').length, 1);
});

test('stop strings cut the text and set stop_reason', async () => {
  const base = { model: MODEL, prompt: 'Once upon a time', max_tokens: 60, temperature: 0, ignore_eos: true };
  const full = (await client.completions.create(base)).choices[0].text;
  // A word from the middle of the greedy text.
  const words = full.trim().split(/\s+/);
  const stop = words[Math.min(5, words.length - 1)];
  const at = full.indexOf(stop);
  assert.ok(at > 0, `stop word ${stop} in ${full}`);
  const r = await client.completions.create({ ...base, stop: [stop, 'zzzz-never'] });
  assert.equal(r.choices[0].text, full.slice(0, at));
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.equal(r.choices[0].stop_reason, stop);
  const incl = await client.completions.create({ ...base, stop, include_stop_str_in_output: true });
  assert.equal(incl.choices[0].text, full.slice(0, at + stop.length));
  // Streaming gives the same cut.
  const stream = await client.completions.create({ ...base, stop: [stop], stream: true });
  let text = '';
  for await (const k of stream) text += k.choices[0].text;
  assert.equal(text, full.slice(0, at));
});

test('a seed reproduces a sampled completion', async () => {
  const p = { model: MODEL, prompt: 'The dog', max_tokens: 40, temperature: 1.0, ignore_eos: true };
  const a = await client.completions.create({ ...p, seed: 1234 });
  const b = await client.completions.create({ ...p, seed: 1234 });
  assert.equal(a.choices[0].text, b.choices[0].text);
  const others = await Promise.all([1, 2, 3].map((s) => client.completions.create({ ...p, seed: s })));
  assert.ok(others.some((o) => o.choices[0].text !== a.choices[0].text), 'different seeds give different text');
});

test('n=2 returns two choices (streaming and not)', async () => {
  const p = { model: MODEL, prompt: 'The cat', max_tokens: 20, temperature: 1.0, seed: 7, n: 2, ignore_eos: true };
  const r = await client.completions.create(p);
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1]);
  assert.notEqual(r.choices[0].text, r.choices[1].text);
  assert.equal(r.usage.completion_tokens, 40);
  const chat = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }],
                                                     max_tokens: 10, n: 2, seed: 3 });
  assert.equal(chat.choices.length, 2);
  const chunks = await collectChat({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 10, n: 2, seed: 3 });
  const texts = ['', ''];
  const finished = new Set();
  for (const k of chunks) {
    for (const c of k.choices) {
      texts[c.index] += c.delta.content ?? '';
      if (c.finish_reason) finished.add(c.index);
    }
  }
  assert.deepEqual([...finished].sort(), [0, 1]);
  assert.deepEqual(texts, chat.choices.map((c) => c.message.content));  // same seed, same choices
});

test('chat logprobs with top_logprobs', async () => {
  const r = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }],
                                                  max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 3,
                                                  ignore_eos: true });
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, 8);
  for (const e of content) {
    assert.equal(typeof e.token, 'string');
    assert.ok(e.logprob <= 0);
    assert.equal(e.top_logprobs.length, 3);
    // Greedy: the chosen token is the most likely one.
    assert.equal(e.top_logprobs[0].token, e.token);
    assert.ok(Math.abs(e.top_logprobs[0].logprob - e.logprob) < 1e-5);
    assert.ok(e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob);
    assert.deepEqual(e.bytes, [...Buffer.from(e.token, 'utf8')]);
  }
  assert.equal(content.map((e) => e.token).join(''), r.choices[0].message.content);
});

test('completion logprobs: tokens, token_logprobs, top_logprobs, text_offset', async () => {
  const r = await client.completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: 10,
                                             temperature: 0, logprobs: 2, ignore_eos: true });
  const lp = r.choices[0].logprobs;
  assert.equal(lp.tokens.length, 10);
  assert.equal(lp.tokens.join(''), r.choices[0].text);
  assert.equal(lp.text_offset[0], 0);
  for (let i = 1; i < 10; i++) assert.equal(lp.text_offset[i], lp.text_offset[i - 1] + [...lp.tokens[i - 1]].length);
  for (let i = 0; i < 10; i++) {
    assert.ok(lp.token_logprobs[i] <= 0);
    assert.ok(Object.keys(lp.top_logprobs[i]).length >= 2);
    assert.ok(lp.tokens[i] in lp.top_logprobs[i]);
  }
});

test('echo, token-id prompts and prompt batches', async () => {
  const echo = await client.completions.create({ model: MODEL, prompt: 'Once upon', max_tokens: 5, echo: true, temperature: 0 });
  assert.ok(echo.choices[0].text.startsWith('Once upon'));
  const tok = await (await fetch(`${server.url}/tokenize`, { method: 'POST', body: JSON.stringify({ prompt: 'Once upon' }) })).json();
  const byIds = await client.completions.create({ model: MODEL, prompt: tok.tokens, max_tokens: 5, temperature: 0 });
  const byText = await client.completions.create({ model: MODEL, prompt: 'Once upon', max_tokens: 5, temperature: 0 });
  assert.equal(byIds.choices[0].text, byText.choices[0].text);
  assert.equal(byIds.usage.prompt_tokens, tok.count);
  const batch = await client.completions.create({ model: MODEL, prompt: ['Once upon', 'The dog'], max_tokens: 5, temperature: 0 });
  assert.deepEqual(batch.choices.map((c) => c.index), [0, 1]);
  assert.equal(batch.choices[0].text, byText.choices[0].text);
  const batchIds = await client.completions.create({ model: MODEL, prompt: [tok.tokens, tok.tokens], max_tokens: 5, temperature: 0 });
  assert.equal(batchIds.choices[1].text, byText.choices[0].text);
});

test('max_tokens absent: chat runs to the rest of the context (or EOS)', async () => {
  const r = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Go' }],
                                                  temperature: 0, ignore_eos: true });
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.prompt_tokens + r.usage.completion_tokens, 512);
});

test('a repeated prompt is served from the prefix cache', async () => {
  const prompt = 'Once upon a time there was a little girl named Lily. She loved to play outside in the park.';
  const p = { model: MODEL, prompt, max_tokens: 2, temperature: 0 };
  await client.completions.create(p);
  const again = await client.completions.create(p);
  assert.ok(again.usage.prompt_tokens_details.cached_tokens >= 16, JSON.stringify(again.usage));
});

test('tokenize / detokenize / version / health', async () => {
  const t = await (await fetch(`${server.url}/tokenize`, {
    method: 'POST', body: JSON.stringify({ prompt: 'Hello world', return_token_strs: true }) })).json();
  assert.equal(t.count, t.tokens.length);
  assert.equal(t.max_model_len, 512);
  assert.equal(t.token_strs.length, t.count);
  // As vLLM: special tokens are kept when decoding.
  const d = await (await fetch(`${server.url}/detokenize`, { method: 'POST', body: JSON.stringify({ tokens: t.tokens }) })).json();
  assert.equal(d.prompt, '<s> Hello world');
  const plain = await (await fetch(`${server.url}/tokenize`, {
    method: 'POST', body: JSON.stringify({ prompt: 'Hello world', add_special_tokens: false }) })).json();
  assert.equal(plain.count, t.count - 1);
  const d2 = await (await fetch(`${server.url}/detokenize`, { method: 'POST', body: JSON.stringify({ tokens: plain.tokens }) })).json();
  assert.equal(d2.prompt, 'Hello world');
  const chatTok = await (await fetch(`${server.url}/tokenize`, {
    method: 'POST', body: JSON.stringify({ messages: [{ role: 'user', content: 'Hi' }] }) })).json();
  const chat = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 1 });
  assert.equal(chatTok.count, chat.usage.prompt_tokens);
  const v = await (await fetch(`${server.url}/version`)).json();
  assert.match(v.version, /^\d+\.\d+\.\d+/);
  assert.equal((await fetch(`${server.url}/health`)).status, 200);
});

test('truncation auto drops the oldest whole turns of a chat too long for the context', async () => {
  const messages = [{ role: 'system', content: 'You tell short stories.' }];
  for (let t = 0; t < 12; t++) {
    messages.push({ role: 'user', content: `Tell me a story about a cat called Tom number ${t}, please, a nice one.` });
    messages.push({ role: 'assistant', content: `Once upon a time there was a cat called Tom number ${t}. He was happy.` });
  }
  messages.push({ role: 'user', content: 'Now one about a dog.' });
  // stories260K has a 512-token context: the whole conversation does not fit.
  await assert.rejects(client.chat.completions.create({ model: 'stories260K', messages, max_tokens: 16 }), (e) => {
    assert.equal(e.status, 400);
    assert.equal(e.code, 'context_length_exceeded');
    return true;
  });
  const r = await client.chat.completions.create({ model: 'stories260K', messages, max_tokens: 16, truncation: 'auto', temperature: 0 });
  assert.equal(r.choices.length, 1);
  assert.ok(r.usage.prompt_tokens + 16 <= 512, JSON.stringify(r.usage));
  assert.ok(r.usage.truncation.dropped_messages > 0 && r.usage.truncation.dropped_messages % 2 === 0, JSON.stringify(r.usage));
  assert.ok(r.usage.truncation.dropped_prompt_tokens > 0);
  // Streaming reports it in the usage chunk too.
  const stream = await client.chat.completions.create({
    model: 'stories260K', messages, max_tokens: 4, truncation: 'auto', stream: true, stream_options: { include_usage: true },
  });
  let usage = null;
  for await (const chunk of stream) if (chunk.usage) usage = chunk.usage;
  assert.deepEqual(usage.truncation, r.usage.truncation);
});
