// `promtool check metrics` on a real /metrics scrape after some traffic (successes, a stream, errors).
// Exit 77 (ctest: skipped) when promtool is not installed.
//
// promtool's linter rejects every metric name containing ':' ("metric names should not contain
// ':'", colons being meant for recording rules). vLLM's names (vllm:...) and our tokenmill:... names
// have one by design, so that message is accepted, and so is the "_total" suffix of vLLM's histogram
// vllm:iteration_tokens_total; any other lint problem, and any parse error, fails the test.
import { spawnSync } from 'node:child_process';
import { startServer } from './lib/server.mjs';

const which = spawnSync('sh', ['-c', 'command -v promtool'], { encoding: 'utf8' });
if (which.status !== 0) {
  console.log('promtool not found (Debian package prometheus): skipped');
  process.exit(77);
}
const server = await startServer();
let failed = false;
try {
  const post = (path, body) => fetch(`${server.baseURL}${path}`, { method: 'POST', body: JSON.stringify(body) }).then((r) => r.text());
  await post('/completions', { prompt: 'Once', max_tokens: 8 });
  await post('/chat/completions', { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 8, stream: true });
  await post('/completions', { prompt: 'x', max_tokens: 0 });
  await post('/completions', { prompt: 'x', max_tokens: 100000 });
  await fetch(`${server.url}/nope`);
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const r = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  const out = (r.stdout + r.stderr).split('\n').filter((l) => l.trim());
  // vLLM names a histogram vllm:iteration_tokens_total; promtool wants "_total" on counters only.
  const accepted = [/metric names should not contain ':'/, /^vllm:iteration_tokens_total non-counter metrics should not have "_total" suffix$/];
  const problems = out.filter((l) => !accepted.some((re) => re.test(l.trim())));
  console.log(`promtool exit ${r.status}; ${out.length} lint line(s), ${problems.length} other than the ':' rule`);
  if (r.status !== 0 && r.status !== 3) failed = true;  // 1: parse error
  if (problems.length) {
    console.log(problems.join('\n'));
    failed = true;
  }
  for (const name of ['vllm:num_requests_running', 'vllm:time_to_first_token_seconds_bucket', 'vllm:e2e_request_latency_seconds_count',
                      'vllm:iteration_tokens_total_bucket', 'tokenmill:process_resident_memory_bytes', 'tokenmill:batch_size_bucket']) {
    if (!text.includes(name)) {
      console.log(`missing ${name}`);
      failed = true;
    }
  }
} finally {
  await server.stop();
}
process.exit(failed ? 1 : 0);
