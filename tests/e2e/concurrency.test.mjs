// 64 concurrent streams all complete, each with exactly one final chunk and a data: [DONE] ending.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, readSse, scrape, metric } from './lib/server.mjs';
import { runStreams } from './lib/streams.mjs';

let server;
before(async () => {
  server = await startServer(['--max-num-seqs', '64']);
});
after(async () => {
  const r = await server.stop();
  assert.equal(r.code, 0);
});

test('64 concurrent chat and completion streams', async () => {
  const results = await runStreams(server, 64, 48);
  assert.equal(results.length, 64);
  const m = await scrape(server.url);
  assert.equal(metric(m, 'vllm:num_requests_running'), 0);
  assert.equal(metric(m, 'tokenmill:request_failures_total', 'reason="engine_error"'), 0);
});
