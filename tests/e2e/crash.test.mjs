// A SIGKILL in the middle of the load (issue 25, "crash safety"): every client whose response was
// not complete sees an error — a stream ends without its terminating chunk (so without
// `data: [DONE]`), a non-streamed answer never arrives or arrives short of its Content-Length —
// never a 200 that looks complete. Responses that were complete before the kill parse and finish.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { startServer } from './lib/server.mjs';

let server = null;
after(async () => {
  if (server && !server.exited()) await server.stop('SIGKILL');
});

// One request over a raw socket: everything received until the peer closes or resets.
function raw(port, body, onData) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    let got = Buffer.alloc(0);
    let first = null;
    s.on('connect', () => s.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
                                  `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`));
    s.on('data', (d) => {
      first ??= Date.now();
      got = Buffer.concat([got, d]);
      onData();
    });
    let done = false;
    const finish = (how) => {
      if (done) return;
      done = true;
      resolve({ text: got.toString('latin1'), how, first });
    };
    s.on('end', () => finish('end'));
    s.on('error', (e) => finish(e.code ?? 'error'));
    s.on('close', () => finish('close'));
  });
}

// Is this raw HTTP/1.1 response complete by its own framing?
function complete(text) {
  const i = text.indexOf('\r\n\r\n');
  if (i < 0) return false;
  const head = text.slice(0, i);
  const body = text.slice(i + 4);
  const cl = /\r\ncontent-length: (\d+)/i.exec(head);
  if (cl) return Buffer.byteLength(body, 'latin1') >= Number(cl[1]);
  if (/\r\ntransfer-encoding: chunked/i.test(head)) return /(^|\r\n)0\r\n\r\n$/.test(body);
  return false;
}

test('SIGKILL mid-load: no client takes a cut response for a complete one', async (t) => {
  // One sequence at a time: most requests are queued or generating when the kill comes.
  server = await startServer(['--max-num-seqs', '2', '--threads', '1']);
  const { port } = server;
  const streams = [], plain = [];
  let started;
  const startedP = new Promise((r) => (started = r));
  for (let i = 0; i < 8; i++) {
    streams.push(raw(port, JSON.stringify({ prompt: 'Once upon a time', max_tokens: 400, stream: true,
                                            temperature: 1, seed: i, ignore_eos: true }), started));
    plain.push(raw(port, JSON.stringify({ prompt: 'Once upon a time', max_tokens: 400, temperature: 1, seed: i,
                                          ignore_eos: true }), started));
  }
  // Kill once the first response has ended (the others are queued, generating or streaming).
  const timeout = (ms) => new Promise((r) => setTimeout(r, ms).unref());
  await Promise.race([startedP, timeout(10000)]);
  await Promise.race([...streams, ...plain, timeout(5000)]);
  server.proc.kill('SIGKILL');
  await server.exit;
  const results = await Promise.all([...streams, ...plain]);
  let cut = 0, whole = 0;
  for (const r of results) {
    if (complete(r.text)) {
      whole++;
      assert.match(r.text, /^HTTP\/1\.1 200 /);
      const body = r.text.slice(r.text.indexOf('\r\n\r\n') + 4);
      if (/text\/event-stream/.test(r.text)) assert.match(body, /data: \[DONE\]/);
      else assert.ok(JSON.parse(body).choices[0].finish_reason, 'a complete answer has its finish_reason');
    } else {
      cut++;
      // What a client library does with it: a stream without its end, or a body short of its length.
      assert.doesNotMatch(r.text, /data: \[DONE\]/);
    }
  }
  t.diagnostic(`${whole} responses complete before the kill, ${cut} cut`);
  assert.ok(cut > 0, `every response was complete before the kill (${whole}): the kill came too late to test anything`);
  server = null;
});
