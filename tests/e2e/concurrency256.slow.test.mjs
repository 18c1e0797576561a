// 256 concurrent streaming connections on one server, without errors (label: slow).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, scrape, metric } from './lib/server.mjs';
import { runStreams } from './lib/streams.mjs';

let server;
before(async () => {
  server = await startServer(['--max-num-seqs', '256', '--max-queued-requests', '1024']);
});
after(async () => {
  const r = await server.stop();
  assert.equal(r.code, 0);
});

test('256 concurrent streams', async () => {
  const t0 = Date.now();
  const results = await runStreams(server, 256, 32);
  assert.equal(results.length, 256);
  const m = await scrape(server.url);
  assert.equal(metric(m, 'vllm:num_requests_running'), 0);
  assert.equal(metric(m, 'vllm:kv_cache_usage_perc'), 0);
  console.log(`256 streams in ${Date.now() - t0} ms`);
});
