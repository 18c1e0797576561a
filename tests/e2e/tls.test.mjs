// TLS (--ssl-certfile / --ssl-keyfile, vLLM's names) with a self-signed certificate made by
// `openssl req` at test time: health, a completion and a stream over HTTPS; plain HTTP on the TLS
// port gets no HTTP answer; TLS 1.1 is refused; client certificates with --ssl-ca-certs and
// --ssl-cert-reqs 2 (required: none -> handshake refused, a signed one -> served) and 1 (optional).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import https from 'node:https';
import tls from 'node:tls';
import { startServer, rawRequest, sleep } from './lib/server.mjs';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tm-tls-'));
const file = (n) => path.join(dir, n);

function openssl(args) {
  const r = spawnSync('openssl', args, { encoding: 'utf8' });
  assert.equal(r.status, 0, `openssl ${args.join(' ')}: ${r.stderr}`);
}

// GET/POST over HTTPS; resolves { status, body } or rejects on a TLS/connection error.
function request(port, pathName, { body, cert, key } = {}) {
  return new Promise((resolve, reject) => {
    const req = https.request({ host: '127.0.0.1', port, path: pathName, method: body ? 'POST' : 'GET',
      ca: fs.readFileSync(file('cert.pem')), servername: 'localhost', cert, key, agent: false,
      headers: body ? { 'content-type': 'application/json' } : {} }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode, body: text }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function startTls(extra = []) {
  const server = await startServer(['--ssl-certfile', file('cert.pem'), '--ssl-keyfile', file('key.pem'), ...extra],
                                   { waitReady: false });
  const deadline = Date.now() + 60000;
  for (;;) {
    try {
      const r = await request(server.port, '/health', { cert: fs.readFileSync(file('client.pem')), key: fs.readFileSync(file('client-key.pem')) });
      if (r.status === 200) break;
    } catch {}
    if (server.exited()) throw new Error(`server exited:\n${server.log()}`);
    if (Date.now() > deadline) throw new Error(`server not healthy over TLS:\n${server.log()}`);
    await sleep(50);
  }
  return server;
}

before(() => {
  // The server's certificate (self-signed, also the CA of the client certificate).
  openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', file('key.pem'), '-out', file('cert.pem'),
           '-days', '1', '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1']);
  openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', file('client-key.pem'), '-out', file('client.csr'),
           '-subj', '/CN=client']);
  openssl(['x509', '-req', '-in', file('client.csr'), '-CA', file('cert.pem'), '-CAkey', file('key.pem'),
           '-CAcreateserial', '-out', file('client.pem'), '-days', '1']);
});

after(() => fs.rmSync(dir, { recursive: true, force: true }));

test('HTTPS: health, a completion and a stream; plain HTTP and TLS 1.1 are refused', async () => {
  const server = await startTls();
  try {
    assert.equal((await request(server.port, '/health')).status, 200);
    // The start-up lines name the scheme the server speaks.
    assert.match(server.log(), /listening on https:\/\/127\.0\.0\.1:\d+/);
    assert.match(server.log(), /ready: serving .* on https:\/\//);
    assert.doesNotMatch(server.log(), /on http:\/\//);
    const c = await request(server.port, '/v1/completions', { body: JSON.stringify({ prompt: 'Once', max_tokens: 5, temperature: 0 }) });
    assert.equal(c.status, 200);
    assert.equal(JSON.parse(c.body).choices.length, 1);
    const s = await request(server.port, '/v1/completions',
                            { body: JSON.stringify({ prompt: 'Once', max_tokens: 20, stream: true, temperature: 0 }) });
    assert.equal(s.status, 200);
    assert.ok(s.body.endsWith('data: [DONE]\n\n'), s.body.slice(-200));
    // Plain HTTP to the TLS port: no HTTP response comes back.
    const plain = await rawRequest(server.port, 'GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
      .catch((e) => `connection error: ${e.code}`);  // a reset, or TLS alert bytes: never HTTP
    assert.ok(!plain.startsWith('HTTP/'), plain.slice(0, 100));
    // TLS 1.1 is below the server's minimum.
    await assert.rejects(new Promise((resolve, reject) => {
      const s = tls.connect({ host: '127.0.0.1', port: server.port, maxVersion: 'TLSv1.1', minVersion: 'TLSv1',
                              ca: fs.readFileSync(file('cert.pem')), servername: 'localhost' }, () => { s.end(); resolve(); });
      s.on('error', reject);
    }));
    // Still serving.
    assert.equal((await request(server.port, '/health')).status, 200);
    assert.equal(server.exited(), null);
  } finally {
    await server.stop();
  }
});

test('client certificates: required (--ssl-cert-reqs 2) and optional (1)', async () => {
  const client = { cert: fs.readFileSync(file('client.pem')), key: fs.readFileSync(file('client-key.pem')) };
  const required = await startTls(['--ssl-ca-certs', file('cert.pem'), '--ssl-cert-reqs', '2']);
  try {
    assert.equal((await request(required.port, '/health', client)).status, 200);
    await assert.rejects(request(required.port, '/health'));  // no certificate: the handshake fails
  } finally {
    await required.stop();
  }
  const optional = await startTls(['--ssl-ca-certs', file('cert.pem'), '--ssl-cert-reqs', '1']);
  try {
    assert.equal((await request(optional.port, '/health')).status, 200);
    assert.equal((await request(optional.port, '/health', client)).status, 200);
  } finally {
    await optional.stop();
  }
});

test('bad TLS configuration is refused at start-up with a clear message', () => {
  const bin = process.env.TM_BINARY ?? 'build/tokenmill';
  const run = (args) => spawnSync(bin, ['serve', '--port', '0', ...args], { encoding: 'utf8', timeout: 30000 });
  let r = run(['--ssl-certfile', file('cert.pem')]);
  assert.notEqual(r.status, 0);
  assert.match(r.stdout + r.stderr, /--ssl-keyfile/);
  r = run(['--ssl-certfile', file('cert.pem'), '--ssl-keyfile', file('client-key.pem')]);
  assert.notEqual(r.status, 0);
  assert.match(r.stdout + r.stderr, /--ssl-keyfile .*(mismatch|does not match)/);
});
