// SIGTERM / SIGINT drain: in-flight streams finish with [DONE], new connections are refused, exit 0.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, readSse, sleep } from './lib/server.mjs';

for (const signal of ['SIGTERM', 'SIGINT']) {
  test(`${signal} lets in-flight streams finish and exits 0`, async () => {
    const server = await startServer();
    const res = await fetch(`${server.baseURL}/completions`, { method: 'POST',
      body: JSON.stringify({ prompt: 'Once', max_tokens: 300, ignore_eos: true, stream: true }) });
    assert.equal(res.status, 200);
    const done = readSse(res);
    server.proc.kill(signal);
    await sleep(300);
    // The listening socket is closed (or the server answers 503 while it shuts down).
    let refused = false;
    try {
      const r = await fetch(`${server.url}/health`);
      assert.equal(r.status, 503);  // only possible on a keep-alive connection opened before the signal
    } catch {
      refused = true;
    }
    const { events, raw } = await done;
    assert.ok(raw.endsWith('data: [DONE]\n\n'));
    const text = events.slice(0, -1).map((e) => e.choices[0].text).join('');
    assert.ok(text.length > 0);
    const finish = events.filter((e) => e !== '[DONE]' && e.choices[0].finish_reason);
    assert.equal(finish[0].choices[0].finish_reason, 'length');
    const r = await server.exit;
    assert.equal(r.code, 0, server.log());
    if (!refused) console.log('health answered 503 on an old keep-alive connection');
    assert.match(server.log(), /draining/);
  });
}

test('a drain timeout aborts what is left and still exits 0', async () => {
  // One sequence at a time, four long streams queued, and the engine sleeping 2 ms per step (hidden
  // testing option): several seconds of work on any machine, far more than the 0.2 s drain timeout.
  const server = await startServer(['--drain-timeout', '0.2', '--max-num-seqs', '1', '--debug-step-delay-ms', '2']);
  const body = JSON.stringify({ prompt: 'Once', max_tokens: 500, ignore_eos: true, stream: true });
  const first = await fetch(`${server.baseURL}/completions`, { method: 'POST', body });
  const rest = [1, 2, 3].map(() => fetch(`${server.baseURL}/completions`, { method: 'POST', body }).then((r) => r.text()).catch(() => ''));
  await sleep(50);
  server.proc.kill('SIGTERM');
  const r = await server.exit;
  assert.equal(r.code, 0, server.log());
  await first.text().catch(() => '');
  await Promise.all(rest);
  assert.match(server.log(), /drain timeout: aborting/);
});

test('a second signal within 1 s is the same stop (still drains, exits 0); one later exits at once (1)', async () => {
  // GNU timeout and a terminal's Ctrl-C signal the whole process group: the server sees one stop twice.
  const body = JSON.stringify({ prompt: 'Once', max_tokens: 400, ignore_eos: true, stream: true });
  {
    const server = await startServer(['--debug-step-delay-ms', '3']);
    const res = await fetch(`${server.baseURL}/completions`, { method: 'POST', body });
    const done = readSse(res);
    server.proc.kill('SIGTERM');
    await sleep(20);
    server.proc.kill('SIGTERM');
    const { raw } = await done;
    assert.ok(raw.endsWith('data: [DONE]\n\n'));
    const r = await server.exit;
    assert.equal(r.code, 0, server.log());
    assert.match(server.log(), /again within 1 s: ignored/);
    assert.match(server.log(), /server stopped/);
  }
  {
    // 400 steps of >= 3 ms: the stream is still running 1.3 s after the first signal.
    const server = await startServer(['--debug-step-delay-ms', '5']);
    const res = await fetch(`${server.baseURL}/completions`, { method: 'POST', body });
    const done = readSse(res).catch(() => null);
    server.proc.kill('SIGTERM');
    await sleep(1300);
    server.proc.kill('SIGTERM');
    const r = await server.exit;
    assert.equal(r.code, 1, server.log());
    assert.match(server.log(), /exiting without draining/);
    await done;
  }
});
