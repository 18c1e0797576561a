// Runs `count` concurrent streaming requests (alternating chat / completions) with raw fetch and
// checks each SSE body: JSON events, one role chunk per chat stream, exactly one finish_reason,
// the usage chunk, and a final "data: [DONE]".
import assert from 'node:assert/strict';
import { readSse } from './server.mjs';

export async function runStreams(server, count, maxTokens) {
  const one = async (i) => {
    const chat = i % 2 === 0;
    const body = chat
      ? { messages: [{ role: 'user', content: `Story ${i}` }], max_tokens: maxTokens, stream: true,
          stream_options: { include_usage: true }, seed: i }
      : { prompt: `Once upon a time ${i}`, max_tokens: maxTokens, stream: true, stream_options: { include_usage: true },
          seed: i };
    const res = await fetch(`${server.baseURL}/${chat ? 'chat/completions' : 'completions'}`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    assert.equal(res.status, 200, `stream ${i}: ${res.status}`);
    const { events, raw } = await readSse(res);
    assert.ok(raw.endsWith('data: [DONE]\n\n'), `stream ${i} ends with [DONE]`);
    assert.equal(events.at(-1), '[DONE]');
    const json = events.slice(0, -1);
    const usage = json.at(-1);
    assert.deepEqual(usage.choices, []);
    assert.ok(usage.usage.completion_tokens >= 1 && usage.usage.completion_tokens <= maxTokens);
    const finals = json.filter((e) => e.choices.length && e.choices[0].finish_reason);
    assert.equal(finals.length, 1, `stream ${i}: one finish_reason`);
    if (chat) assert.equal(json[0].choices[0].delta.role, 'assistant');
    return usage.usage;
  };
  return Promise.all(Array.from({ length: count }, (_, i) => one(i)));
}
