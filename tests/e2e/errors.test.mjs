// Every error class with the right status and OpenAI's error shape, API keys, and a corpus of
// malformed requests (bad JSON, wrong types, missing fields, huge numbers, invalid UTF-8, wrong
// methods, unknown routes, oversized bodies, broken HTTP) that must all get 4xx JSON errors while the
// server keeps serving.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, rawRequest, parseResponse, scrape, metric, sleep } from './lib/server.mjs';

let server;
let client;
const MODEL = 'stories260K';
before(async () => {
  server = await startServer(['--max-body-size', '1MiB']);
  client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  await server.stop();
});

function assertErrorShape(body, status) {
  const j = typeof body === 'string' ? JSON.parse(body) : body;
  assert.equal(typeof j.error, 'object', JSON.stringify(j));
  assert.equal(typeof j.error.message, 'string');
  assert.ok(j.error.message.length > 0);
  assert.equal(typeof j.error.type, 'string');
  assert.ok('param' in j.error && 'code' in j.error);
  return j.error;
}

async function expectApiError(promise, status, Klass) {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof Klass, `${e.constructor.name}: ${e.message}`);
    assert.equal(e.status, status);
    return e;
  }
  assert.fail('expected an error');
}

test('400 invalid requests through the openai client', async () => {
  let e = await expectApiError(client.completions.create({ model: MODEL, prompt: 'x', max_tokens: 0 }), 400, OpenAI.BadRequestError);
  assert.equal(e.param, 'max_tokens');
  e = await expectApiError(client.chat.completions.create({ model: MODEL, messages: [] }), 400, OpenAI.BadRequestError);
  assert.equal(e.param, 'messages');
  e = await expectApiError(client.completions.create({ model: MODEL, prompt: 'x', n: 1000 }), 400, OpenAI.BadRequestError);
  assert.equal(e.param, 'n');
  e = await expectApiError(client.completions.create({ model: MODEL, prompt: 'x', temperature: 'warm' }), 400, OpenAI.BadRequestError);
  assert.equal(e.param, 'temperature');
  // Prompt + max_tokens over the context: both numbers in the message.
  e = await expectApiError(client.completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: 600 }), 400,
                           OpenAI.BadRequestError);
  assert.equal(e.code, 'context_length_exceeded');
  assert.match(e.message, /maximum context length is 512 tokens/);
  assert.match(e.message, /\(\d+ in the prompt, 600 in the completion\)/);
  const long = 'once upon a time '.repeat(200);
  e = await expectApiError(client.completions.create({ model: MODEL, prompt: long, max_tokens: 5 }), 400, OpenAI.BadRequestError);
  assert.match(e.message, /\d+ input tokens/);
  // ... unless truncated: the response says so.
  const t = await client.completions.create({ model: MODEL, prompt: long, max_tokens: 5, truncate_prompt_tokens: 100 });
  assert.equal(t.usage.prompt_tokens, 100);
  assert.equal(t.prompt_truncated, true);
});

test('404 unknown model and unknown route', async () => {
  const e = await expectApiError(client.completions.create({ model: 'gpt-4o', prompt: 'x' }), 404, OpenAI.NotFoundError);
  assert.equal(e.code, 'model_not_found');
  const r = await fetch(`${server.url}/v1/nothing`);
  assert.equal(r.status, 404);
  assertErrorShape(await r.text());
});

test('405 wrong method, with Allow', async () => {
  for (const [method, path, allow] of [['GET', '/v1/chat/completions', 'POST'], ['PUT', '/v1/completions', 'POST'],
                                       ['DELETE', '/v1/models', 'GET, HEAD'], ['POST', '/metrics', 'GET, HEAD']]) {
    const r = await fetch(`${server.url}${path}`, { method, body: method === 'GET' ? undefined : '{}' });
    assert.equal(r.status, 405, `${method} ${path}`);
    assert.equal(r.headers.get('allow'), allow);
    assert.equal(assertErrorShape(await r.text()).code, 'method_not_allowed');
  }
});

test('413 body too large (Content-Length and chunked)', async () => {
  const big = JSON.stringify({ prompt: 'x'.repeat(2 << 20) });
  let r = await fetch(`${server.baseURL}/completions`, { method: 'POST', body: big });
  assert.equal(r.status, 413);
  assert.equal(assertErrorShape(await r.text()).code, 'request_too_large');
  // Chunked (no Content-Length): bounded while reading.
  const chunk = Buffer.alloc(64 << 10, 0x20);
  const stream = new ReadableStream({
    i: 0,
    pull(c) {
      if (this.i++ < 40) c.enqueue(chunk);
      else c.close();
    },
  });
  r = await fetch(`${server.baseURL}/completions`, { method: 'POST', body: stream, duplex: 'half' });
  assert.equal(r.status, 413);
  assertErrorShape(await r.text());
});

test('the malformed-request corpus: every case is a 4xx JSON error and the server keeps serving', async () => {
  const post = (path, body, extra = '') =>
    `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${extra}Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n`;
  const cases = [];
  const add = (name, raw) => cases.push({ name, raw });
  const addBody = (path, name, body) => add(`${path} ${name}`, Buffer.concat([Buffer.from(post(path, body)), Buffer.from(body)]));
  const addBytes = (path, name, bytes) =>
    add(`${path} ${name}`, Buffer.concat([Buffer.from(post(path, 'x'.repeat(bytes.length))), bytes]));

  // Bad JSON, for both generation endpoints and tokenize.
  const badJson = ['', '{', '}', '{"prompt":}', '{"prompt":"x",}', "{'prompt':'x'}", '{"prompt":"x"} trailing', 'null',
                   '[]', '"just a string"', '42', 'true', '{"prompt":NaN}', '{"prompt":Infinity}', '{"prompt":"x" /*c*/}',
                   '{"prompt":"a\u0001b"}', '{"prompt":"\\x41"}', '{"prompt":"\\ud800"}', '{"prompt" "x"}', '{,}'];
  for (const path of ['/v1/completions', '/v1/chat/completions', '/completion', '/v1/responses'])
    badJson.forEach((b, i) => addBody(path, `bad json ${i}`, b));
  // Anthropic's route answers in Anthropic's error shape ({"type": "error", "error": {"type", "message"}}).
  const anthropic = [];
  badJson.forEach((b, i) => anthropic.push([`bad json ${i}`, b]));
  for (const b of [{}, { messages: 'x' }, { messages: [{ role: 'system', content: 'x' }] },
                   { messages: [{ role: 'user', content: [{ type: 'image', source: {} }] }] },
                   { messages: [{ role: 'user', content: 'x' }], tools: [{ type: 'web_search_20250305', name: 'w' }] },
                   { messages: [{ role: 'user', content: 'x' }], max_tokens: 0 },
                   { messages: [{ role: 'user', content: 'x' }], model: 'claude-nope' }])
    anthropic.push([JSON.stringify(b).slice(0, 50), JSON.stringify(b)]);
  // llama-server's /completion and the Responses API: their own fields, wrong.
  for (const b of [{}, { prompt: 'x', n_predict: -5 }, { prompt: 'x', mirostat: 2 }, { prompt: 'x', n_probs: 'a' },
                   { prompt: 'x', logit_bias: [[1]] }, { prompt: [1, null] }, { prompt: 'x', response_fields: 'content' },
                   { prompt: { prompt_string: 'x', multimodal_data: ['AA'] } }])
    addBody('/completion', `types ${JSON.stringify(b).slice(0, 40)}`, JSON.stringify(b));
  for (const b of [{}, { input: 5 }, { input: 'x', previous_response_id: 'resp_1' }, { input: 'x', tools: [{ type: 'web_search' }] },
                   { input: [{ type: 'item_reference', id: 'm' }] }, { input: 'x', text: { format: { type: 'xml' } } },
                   { input: 'x', max_output_tokens: 0 }])
    addBody('/v1/responses', `types ${JSON.stringify(b).slice(0, 40)}`, JSON.stringify(b));
  // Wrong types and missing fields: completions.
  const comp = [{}, { prompt: null }, { prompt: 5 }, { prompt: {} }, { prompt: [] }, { prompt: [[]] }, { prompt: [1, null] },
                { prompt: ['a', true] }, { prompt: [1, 'a', [2]] }, { prompt: [-1] }, { prompt: [1e6] }, { prompt: 'x', max_tokens: '5' },
                { prompt: 'x', max_tokens: -1 }, { prompt: 'x', max_tokens: 0 }, { prompt: 'x', max_tokens: 1.5 },
                { prompt: 'x', max_tokens: 1e300 }, { prompt: 'x', max_tokens: 18446744073709551616 },
                { prompt: 'x', temperature: [] }, { prompt: 'x', temperature: -0.5 }, { prompt: 'x', top_p: 0 },
                { prompt: 'x', top_p: 2 }, { prompt: 'x', top_k: 'all' }, { prompt: 'x', min_p: -1 }, { prompt: 'x', n: 0 },
                { prompt: 'x', n: 100 }, { prompt: 'x', n: 'two' }, { prompt: 'x', stop: 1 }, { prompt: 'x', stop: [null] },
                { prompt: 'x', seed: 'seed' }, { prompt: 'x', seed: 1.5 }, { prompt: 'x', logprobs: 100 },
                { prompt: 'x', logprobs: -1 }, { prompt: 'x', echo: 'yes' }, { prompt: 'x', stream: 1 },
                { prompt: 'x', stream_options: { include_usage: true } }, { prompt: 'x', logit_bias: { x: 1 } },
                { prompt: 'x', logit_bias: { 1: 1000 } }, { prompt: 'x', logit_bias: [] }, { prompt: 'x', presence_penalty: 9 },
                { prompt: 'x', frequency_penalty: '1' }, { prompt: 'x', repetition_penalty: -1 }, { prompt: 'x', min_tokens: 'a' },
                { prompt: 'x', ignore_eos: 0 }, { prompt: 'x', skip_special_tokens: 'no' }, { prompt: 'x', user: 1 },
                { prompt: 'x', priority: 5 }, { prompt: 'x', suffix: 'y' }, { prompt: 'x', best_of: 3 },
                { prompt: 'x', truncate_prompt_tokens: 0 }, { prompt: 'x', stop_token_ids: ['a'] },
                { prompt: 'x', model: 5 }, { prompt: 'x', model: 'nope' }, { prompt: 'x', response_format: { type: 'xml' } }];
  comp.forEach((b, i) => addBody('/v1/completions', `types ${i} ${JSON.stringify(b).slice(0, 40)}`, JSON.stringify(b)));
  // Wrong types and missing fields: chat.
  const user = [{ role: 'user', content: 'x' }];
  const chat = [{}, { messages: null }, { messages: 'x' }, { messages: [] }, { messages: [1] }, { messages: [{}] },
                { messages: [{ role: 'user' }] }, { messages: [{ role: 1, content: 'x' }] }, { messages: [{ role: '', content: 'x' }] },
                { messages: [{ role: 'user', content: 1 }] }, { messages: [{ role: 'user', content: [{ type: 'image_url' }] }] },
                { messages: [{ role: 'user', content: [{ text: 'x' }] }] }, { messages: [{ role: 'user', content: [1] }] },
                { messages: user, max_tokens: 0 }, { messages: user, max_completion_tokens: '1' }, { messages: user, max_tokens: 100000 },
                { messages: user, logprobs: 1 }, { messages: user, top_logprobs: 2 }, { messages: user, logprobs: true, top_logprobs: 99 },
                { messages: user, tools: 'x' }, { messages: user, tool_choice: 'required' }, { messages: user, n: -1 },
                { messages: user, temperature: null, top_p: 'x' }, { messages: user, stop: { a: 1 } },
                { messages: user, chat_template: '{% for %}' }, { messages: user, chat_template_kwargs: 1 },
                { messages: user, continue_final_message: true, add_generation_prompt: true }, { messages: user, model: 'other' }];
  chat.forEach((b, i) => addBody('/v1/chat/completions', `types ${i} ${JSON.stringify(b).slice(0, 40)}`, JSON.stringify(b)));
  // tokenize / detokenize.
  for (const b of [{}, { prompt: 1 }, { messages: [] }, { prompt: 'x', model: 'nope' }]) addBody('/tokenize', JSON.stringify(b), JSON.stringify(b));
  for (const b of [{}, { tokens: 'x' }, { tokens: [-1] }, { tokens: [1e9] }, { tokens: ['a'] }]) addBody('/detokenize', JSON.stringify(b), JSON.stringify(b));
  // Invalid UTF-8 inside JSON strings.
  const utf8 = [[0xff], [0xc0, 0x80], [0xe2, 0x28, 0xa1], [0xed, 0xa0, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80], [0x80]];
  for (const bad of utf8) {
    addBytes('/v1/completions', `utf8 ${bad}`, Buffer.concat([Buffer.from('{"prompt":"a'), Buffer.from(bad), Buffer.from('"}')]));
    addBytes('/v1/chat/completions', `utf8 ${bad}`,
             Buffer.concat([Buffer.from('{"messages":[{"role":"user","content":"'), Buffer.from(bad), Buffer.from('"}]}')]));
  }
  // Deep nesting.
  addBody('/v1/completions', 'deep', '{"prompt":' + '['.repeat(5000) + ']'.repeat(5000) + '}');
  // Wrong methods, unknown routes.
  for (const [m, p] of [['GET', '/v1/completions'], ['PUT', '/v1/chat/completions'], ['PATCH', '/tokenize'], ['DELETE', '/health'],
                        ['POST', '/v1/models'], ['GET', '/v2/completions'], ['GET', '/v1/chat'], ['POST', '/'], ['GET', '/admin']])
    add(`${m} ${p}`, `${m} ${p} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`);
  // Oversized (declared) bodies, broken Content-Length, broken HTTP.
  add('content-length 100MB', 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 104857600\r\n\r\n{"prompt":');
  add('content-length abc', 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\nConnection: close\r\n\r\n{}');
  add('content-length -5', 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\nConnection: close\r\n\r\n{}');
  add('post without length', 'POST /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n{"prompt":"x"}');
  add('garbage request line', 'GARBAGE\r\n\r\n');
  add('bad method token', 'FROB /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  add('header line over 8 KiB', `GET /health HTTP/1.1\r\nX-Big: ${'a'.repeat(9000)}\r\nConnection: close\r\n\r\n`);
  add('unknown HTTP version', 'GET /health HTTP/9.9\r\nConnection: close\r\n\r\n');
  add('lower-case method', 'get /health HTTP/1.1\r\nConnection: close\r\n\r\n');
  add('no path', 'GET HTTP/1.1\r\nConnection: close\r\n\r\n');
  add('broken chunked body', 'POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\nZZ\r\nabc\r\n0\r\n\r\n');
  add('uri too long', `GET /${'a'.repeat(10000)} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);

  assert.ok(cases.length >= 100, `corpus has ${cases.length} cases`);
  for (const c of cases) {
    const text = await rawRequest(server.port, c.raw);
    const r = parseResponse(text);
    assert.ok(r.status >= 400 && r.status < 500, `${c.name}: status ${r.status}\n${text.slice(0, 300)}`);
    let err;
    try {
      err = assertErrorShape(r.body);
    } catch (e) {
      assert.fail(`${c.name}: not a JSON error body: ${JSON.stringify(r.body.slice(0, 200))} (${e.message})`);
    }
    assert.ok(err.message.length > 0, c.name);
  }
  for (const [name, body] of anthropic) {
    const r = parseResponse(await rawRequest(server.port, Buffer.concat([Buffer.from(post('/v1/messages', body)), Buffer.from(body)])));
    assert.ok(r.status >= 400 && r.status < 500, `/v1/messages ${name}: status ${r.status}`);
    const j = JSON.parse(r.body);
    assert.equal(j.type, 'error', `/v1/messages ${name}: ${r.body}`);
    assert.equal(typeof j.error.type, 'string');
    assert.ok(j.error.message.length > 0, `/v1/messages ${name}`);
  }
  // Still serving, and nothing counted as a server error.
  assert.equal((await fetch(`${server.url}/health`)).status, 200);
  const ok = await client.completions.create({ model: MODEL, prompt: 'Once', max_tokens: 3 });
  assert.equal(ok.choices.length, 1);
  assert.equal(server.exited(), null);
  const m = await scrape(server.url);
  assert.ok(metric(m, 'tokenmill:request_failures_total', 'reason="invalid_request"') >= 100);
  assert.equal(metric(m, 'tokenmill:request_failures_total', 'reason="engine_error"'), 0);
});

test('API keys: 401 without or with a wrong key, open /health and /metrics, env key works', async () => {
  const s = await startServer(['--api-key', 'key-one', '--api-key', 'key-two'], { env: { TOKENMILL_API_KEY: 'key-env' } });
  try {
    const noKey = new OpenAI({ baseURL: s.baseURL, apiKey: 'wrong', maxRetries: 0 });
    const e = await expectApiError(noKey.models.list(), 401, OpenAI.AuthenticationError);
    assert.equal(e.code, 'invalid_api_key');
    const r = await fetch(`${s.baseURL}/completions`, { method: 'POST', body: JSON.stringify({ prompt: 'x' }) });
    assert.equal(r.status, 401);
    assertErrorShape(await r.text());
    for (const key of ['key-one', 'key-two', 'key-env']) {
      const c = new OpenAI({ baseURL: s.baseURL, apiKey: key, maxRetries: 0 });
      const out = await c.completions.create({ model: MODEL, prompt: 'Once', max_tokens: 2 });
      assert.equal(out.choices.length, 1);
    }
    assert.equal((await fetch(`${s.url}/health`)).status, 200);
    assert.equal((await fetch(`${s.url}/metrics`)).status, 200);
    assert.equal((await fetch(`${s.url}/tokenize`, { method: 'POST', body: '{"prompt":"x"}' })).status, 401);
  } finally {
    await s.stop();
  }
});

test('429 with Retry-After when the queue is full', async () => {
  // 2 ms per engine step (hidden testing option): the first request still runs when the last arrives.
  const s = await startServer(['--max-num-seqs', '1', '--max-queued-requests', '1', '--debug-step-delay-ms', '2']);
  try {
    const c = new OpenAI({ baseURL: s.baseURL, apiKey: 'x', maxRetries: 0 });
    const results = await Promise.allSettled(Array.from({ length: 12 }, () =>
      c.completions.create({ model: MODEL, prompt: 'Once', max_tokens: 300, ignore_eos: true })));
    const ok = results.filter((x) => x.status === 'fulfilled');
    const rejected = results.filter((x) => x.status === 'rejected').map((x) => x.reason);
    assert.ok(rejected.length >= 1, 'some requests are turned away');
    assert.ok(ok.length >= 1);
    for (const e of rejected) {
      assert.ok(e instanceof OpenAI.RateLimitError, `${e.constructor.name}: ${e.message}`);
      assert.equal(e.status, 429);
      assert.equal(e.headers['retry-after'], '1');
      assert.equal(e.code, 'queue_full');
    }
    for (const r of ok) assert.equal(r.value.usage.completion_tokens, 300);
    const m = await scrape(s.url);
    assert.equal(metric(m, 'tokenmill:requests_rejected_total'), rejected.length);
  } finally {
    await s.stop();
  }
});

test('503 when a request waits in the queue longer than --request-timeout', async () => {
  // The engine sleeps 5 ms after each step (hidden testing option), so the first request holds the
  // only slot for ~1 s on any machine; the second waits past its 0.05 s queue timeout.
  const s = await startServer(['--max-num-seqs', '1', '--request-timeout', '0.05', '--debug-step-delay-ms', '5']);
  try {
    const long = fetch(`${s.baseURL}/completions`, { method: 'POST',
      body: JSON.stringify({ prompt: 'Once', max_tokens: 200, ignore_eos: true, stream: true }) });
    const first = await long;  // streaming: answered once the first token exists, i.e. it holds the only slot
    assert.equal(first.status, 200);
    const r = await fetch(`${s.baseURL}/completions`, { method: 'POST', body: JSON.stringify({ prompt: 'x', max_tokens: 2 }) });
    const text = await r.text();
    await first.text();
    assert.equal(r.status, 503, text);
    assert.equal(assertErrorShape(text).code, 'queue_timeout');
    const m = await scrape(s.url);
    assert.equal(metric(m, 'tokenmill:request_timeouts_total'), 1);
  } finally {
    await s.stop();
  }
});

test('X-Request-Id is echoed (or generated) on every response and carried in error bodies', async () => {
  const ok = await fetch(`${server.url}/v1/models`, { headers: { 'X-Request-Id': 'abc-123' } });
  assert.equal(ok.status, 200);
  assert.equal(ok.headers.get('x-request-id'), 'abc-123');
  const gen = await fetch(`${server.url}/health`);
  assert.match(gen.headers.get('x-request-id'), /^req-[0-9a-f]{32}$/);
  // An error: the same id in the header and in error.request_id.
  const bad = await fetch(`${server.url}/v1/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json', 'X-Request-Id': 'client-7' },
    body: JSON.stringify({ model: MODEL, prompt: 'x', max_tokens: -3 }),
  });
  assert.equal(bad.status, 400);
  assert.equal(bad.headers.get('x-request-id'), 'client-7');
  assert.equal((await bad.json()).error.request_id, 'client-7');
  // Errors before the body is read (unknown route) and a generated id.
  const nf = await fetch(`${server.url}/nope`);
  assert.equal(nf.status, 404);
  const id = nf.headers.get('x-request-id');
  assert.match(id, /^req-[0-9a-f]{32}$/);
  assert.equal((await nf.json()).error.request_id, id);
  // A value that is not visible ASCII (or too long) is replaced, never reflected.
  const long = await fetch(`${server.url}/health`, { headers: { 'X-Request-Id': 'x'.repeat(200) } });
  assert.match(long.headers.get('x-request-id'), /^req-[0-9a-f]{32}$/);
});

test('--log-requests writes one access line per request with its id, never the prompt or the key', async () => {
  const s = await startServer(['--log-requests', '--api-key', 'sekrit-key']);
  try {
    const r = await fetch(`${s.url}/v1/completions`, {
      method: 'POST', headers: { Authorization: 'Bearer sekrit-key', 'X-Request-Id': 'log-me-1' },
      body: JSON.stringify({ prompt: 'a very private prompt', max_tokens: 2 }),
    });
    assert.equal(r.status, 200);
    await r.text();
    await sleep(200);
    assert.match(s.log(), /request log-me-1 POST \/v1\/completions -> 200 in [0-9.]+ ms/);
    assert.ok(!s.log().includes('very private'), 'the prompt is not logged');
    assert.ok(!s.log().includes('sekrit-key'), 'the key is not logged');
  } finally {
    await s.stop();
  }
  // Without the flag: no access lines.
  assert.ok(!server.log().includes('request req-'), 'no access log by default');
});

test('CORS: off by default; --allowed-origins answers preflights and tags responses for allowed origins', async () => {
  const raw = (port, text) => rawRequest(port, text).then(parseResponse);
  // Off: no CORS headers, a preflight is not answered as one.
  let r = await raw(server.port, 'GET /v1/models HTTP/1.1\r\nHost: x\r\nOrigin: http://a.example\r\nConnection: close\r\n\r\n');
  assert.equal(r.status, 200);
  assert.equal(r.headers['access-control-allow-origin'], undefined);
  r = await raw(server.port, 'OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: x\r\nOrigin: http://a.example\r\n' +
    'Access-Control-Request-Method: POST\r\nConnection: close\r\n\r\n');
  assert.notEqual(r.status, 204);
  const cors = await startServer(['--allowed-origins', '["http://a.example", "http://c.example"]', '--allowed-headers', 'Authorization, Content-Type']);
  try {
    r = await raw(cors.port, 'GET /v1/models HTTP/1.1\r\nHost: x\r\nOrigin: http://a.example\r\nConnection: close\r\n\r\n');
    assert.equal(r.status, 200);
    assert.equal(r.headers['access-control-allow-origin'], 'http://a.example');
    assert.equal(r.headers['vary'], 'Origin');
    assert.match(r.headers['access-control-expose-headers'], /X-Request-Id/);
    r = await raw(cors.port, 'GET /v1/models HTTP/1.1\r\nHost: x\r\nOrigin: http://b.example\r\nConnection: close\r\n\r\n');
    assert.equal(r.status, 200);
    assert.equal(r.headers['access-control-allow-origin'], undefined);
    r = await raw(cors.port, 'OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: x\r\nOrigin: http://c.example\r\n' +
      'Access-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: content-type\r\nConnection: close\r\n\r\n');
    assert.equal(r.status, 204);
    assert.equal(r.headers['access-control-allow-origin'], 'http://c.example');
    assert.equal(r.headers['access-control-allow-methods'], 'GET, POST, DELETE, OPTIONS');
    assert.equal(r.headers['access-control-allow-headers'], 'Authorization, Content-Type');
    r = await raw(cors.port, 'OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: x\r\nOrigin: http://evil.example\r\n' +
      'Access-Control-Request-Method: POST\r\nConnection: close\r\n\r\n');
    assert.equal(r.status, 403);
    assert.equal(JSON.parse(r.body).error.code, 'origin_not_allowed');
  } finally {
    await cors.stop();
  }
});
