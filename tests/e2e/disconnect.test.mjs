// A client that goes away aborts its request at once: within one second vllm:num_requests_running
// drops and the KV cache usage returns to its idle value (streaming, and non-streaming while queued
// or running).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import OpenAI from 'openai';
import { startServer, scrape, metric, sleep } from './lib/server.mjs';

let server;
// The engine sleeps 2 ms after each step (hidden testing option): a 500-token request runs >= 1 s on
// any machine, so the test sees it running before the client leaves.
before(async () => {
  server = await startServer(['--debug-step-delay-ms', '2']);
});
after(async () => {
  await server.stop();
});

async function waitIdleAfter(t0, what) {
  for (;;) {
    const m = await scrape(server.url);
    const running = metric(m, 'vllm:num_requests_running');
    const kv = metric(m, 'vllm:kv_cache_usage_perc');
    if (running === 0 && kv === 0) return { ms: Date.now() - t0, m };
    if (Date.now() - t0 > 5000) assert.fail(`${what}: still running=${running} kv=${kv} after 5 s`);
    await sleep(10);
  }
}

async function abortedCount() {
  return metric(await scrape(server.url), 'vllm:request_success_total', 'finished_reason="abort"');
}

test('idle KV usage is 0', async () => {
  const m = await scrape(server.url);
  assert.equal(metric(m, 'vllm:kv_cache_usage_perc'), 0);
  assert.equal(metric(m, 'vllm:num_requests_running'), 0);
});

test('streaming client aborts mid-stream', async () => {
  const before = await abortedCount();
  const clientAborts = metric(await scrape(server.url), 'tokenmill:requests_aborted_by_client_total');
  const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'x', maxRetries: 0 });
  const controller = new AbortController();
  const stream = await client.completions.create(
    { model: 'stories260K', prompt: 'Once', max_tokens: 500, ignore_eos: true, stream: true },
    { signal: controller.signal });
  let chunks = 0;
  try {
    for await (const _ of stream) {
      if (++chunks === 3) {
        // The request is running now.
        const m = await scrape(server.url);
        assert.equal(metric(m, 'vllm:num_requests_running'), 1);
        assert.ok(metric(m, 'vllm:kv_cache_usage_perc') > 0);
        controller.abort();
      }
    }
  } catch (e) {
    assert.ok(e.name === 'AbortError' || /abort/i.test(e.message), e.message);
  }
  const t0 = Date.now();
  const { ms, m } = await waitIdleAfter(t0, 'stream');
  assert.ok(ms < 1000, `idle after ${ms} ms`);
  assert.equal(metric(m, 'vllm:request_success_total', 'finished_reason="abort"'), before + 1);
  assert.equal(metric(m, 'tokenmill:requests_aborted_by_client_total'), clientAborts + 1);
});

test('non-streaming client disconnects while its request runs', async () => {
  const before = await abortedCount();
  const body = JSON.stringify({ prompt: 'Once', max_tokens: 500, ignore_eos: true });
  const sock = net.connect(server.port, '127.0.0.1');
  await new Promise((r) => sock.on('connect', r));
  sock.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
  // Wait until it is running.
  for (let i = 0; ; i++) {
    const m = await scrape(server.url);
    if (metric(m, 'vllm:num_requests_running') === 1) break;
    assert.ok(i < 500, 'request never started');
    await sleep(2);
  }
  sock.destroy();
  const t0 = Date.now();
  const { ms, m } = await waitIdleAfter(t0, 'non-streaming');
  assert.ok(ms < 1000, `idle after ${ms} ms`);
  assert.equal(metric(m, 'vllm:request_success_total', 'finished_reason="abort"'), before + 1);
});

test('a client that leaves while queued is dropped too', async () => {
  // Fill the engine with a long stream, then queue and drop a second request.
  const s = await startServer(['--max-num-seqs', '1', '--debug-step-delay-ms', '2']);
  try {
    const long = await fetch(`${s.baseURL}/completions`, { method: 'POST',
      body: JSON.stringify({ prompt: 'Once', max_tokens: 400, ignore_eos: true, stream: true }) });
    assert.equal(long.status, 200);
    const body = JSON.stringify({ prompt: 'The', max_tokens: 5 });
    const sock = net.connect(s.port, '127.0.0.1');
    await new Promise((r) => sock.on('connect', r));
    sock.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    for (let i = 0; ; i++) {
      const m = await scrape(s.url);
      if (metric(m, 'tokenmill:admission_queue_requests') === 1) break;
      assert.ok(i < 500, 'second request never queued');
      await sleep(2);
    }
    sock.destroy();
    const t0 = Date.now();
    for (;;) {
      const m = await scrape(s.url);
      if (metric(m, 'tokenmill:admission_queue_requests') === 0 && metric(m, 'vllm:num_requests_waiting') === 0) break;
      assert.ok(Date.now() - t0 < 1000, 'queued request not dropped within 1 s');
      await sleep(10);
    }
    await long.text();
  } finally {
    await s.stop();
  }
});

test('a request past its "timeout" (or --max-request-time) stops: 408, or an error event ending the stream; KV freed', async () => {
  const s = await startServer(['--debug-step-delay-ms', '20', '--max-request-time', '30']);
  try {
    const body = { model: 'stories260K', prompt: 'Once upon a time', max_tokens: 400, ignore_eos: true, temperature: 0 };
    const before = metric(await scrape(s.url), 'tokenmill:request_timeouts_total');
    const t0 = Date.now();
    let r = await fetch(`${s.url}/v1/completions`, { method: 'POST', body: JSON.stringify({ ...body, timeout: 0.5 }) });
    const ms = Date.now() - t0;
    assert.equal(r.status, 408);
    const e = (await r.json()).error;
    assert.equal(e.code, 'request_timeout');
    assert.ok(ms >= 450 && ms < 3000, `answered after ${ms} ms`);
    // Streaming: some tokens, then the error event and [DONE].
    r = await fetch(`${s.url}/v1/completions`, { method: 'POST', body: JSON.stringify({ ...body, timeout: 0.5, stream: true }) });
    assert.equal(r.status, 200);
    const text = await r.text();
    const events = text.split('\n\n').filter((x) => x.startsWith('data: ')).map((x) => x.slice(6));
    assert.equal(events.at(-1), '[DONE]');
    assert.equal(JSON.parse(events.at(-2)).error.code, 'request_timeout');
    assert.ok(events.length > 3, text.slice(0, 300));
    // Both free their KV within a step or two, and were counted.
    const t1 = Date.now();
    let m;
    for (;;) {
      m = await scrape(s.url);
      if (metric(m, 'vllm:num_requests_running') === 0 && metric(m, 'vllm:kv_cache_usage_perc') === 0) break;
      assert.ok(Date.now() - t1 < 2000, 'KV still in use 2 s after the deadline');
      await sleep(10);
    }
    assert.equal(metric(m, 'tokenmill:request_timeouts_total'), before + 2);
    // Bad values are a 400 naming the field; a short request is unaffected.
    r = await fetch(`${s.url}/v1/completions`, { method: 'POST', body: JSON.stringify({ ...body, timeout: -1 }) });
    assert.equal(r.status, 400);
    assert.equal((await r.json()).error.param, 'timeout');
    r = await fetch(`${s.url}/v1/completions`, { method: 'POST', body: JSON.stringify({ ...body, max_tokens: 3, timeout: 20 }) });
    assert.equal(r.status, 200);
  } finally {
    await s.stop();
  }
});
