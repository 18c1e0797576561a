// The other APIs tokenmill serves, through their own official clients where one exists: Anthropic's
// Messages API with @anthropic-ai/sdk (create, stream, countTokens, a forced tool call and its
// result), OpenAI's Responses API with the openai client (create, stream, a function call), Ollama's
// API with the ollama client (chat, generate, list, show, version), and llama-server's native
// /completion (no client library: plain fetch, as its users call it). Each answer is checked against
// the chat route's greedy text on the same prompt.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { Ollama } from 'ollama';
import { startServer } from './lib/server.mjs';

let server;
let openai;
let anthropic;
const MODEL = 'stories260K';
const prompt = 'Once upon a time';

const weather = {
  name: 'get_weather',
  description: 'The weather in a city',
  schema: {
    type: 'object',
    properties: { city: { enum: ['Paris', 'Rome'] } },
    required: ['city'],
    additionalProperties: false,
  },
};

// The chat route's greedy answer to the one user message, for comparison.
async function chatText(maxTokens) {
  const r = await openai.chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: prompt }],
    max_tokens: maxTokens,
    temperature: 0,
  });
  return r.choices[0].message.content;
}

before(async () => {
  // claude-test is an alias: clients that send their own model name reach the served model.
  server = await startServer(['--served-model-name', MODEL, 'claude-test', '--api-key', 'k1']);
  openai = new OpenAI({ baseURL: server.baseURL, apiKey: 'k1', maxRetries: 0 });
  anthropic = new Anthropic({ baseURL: server.url, apiKey: 'k1', maxRetries: 0 });  // sends x-api-key
});

after(async () => {
  await server?.stop();
});

test('Anthropic SDK: messages.create and messages.stream give the chat route text', async () => {
  const want = await chatText(12);
  const msg = await anthropic.messages.create({
    model: 'claude-test',
    max_tokens: 12,
    temperature: 0,
    messages: [{ role: 'user', content: prompt }],
  });
  assert.equal(msg.type, 'message');
  assert.equal(msg.role, 'assistant');
  assert.equal(msg.content[0].type, 'text');
  assert.equal(msg.content[0].text, want);
  assert.equal(msg.stop_reason, 'max_tokens');
  assert.equal(msg.usage.output_tokens, 12);

  const stream = anthropic.messages.stream({
    model: 'claude-test',
    max_tokens: 12,
    temperature: 0,
    messages: [{ role: 'user', content: prompt }],
  });
  let text = '';
  stream.on('text', (t) => (text += t));
  const final = await stream.finalMessage();
  assert.equal(text, want);
  assert.equal(final.content[0].text, want);
  assert.equal(final.stop_reason, 'max_tokens');

  const count = await anthropic.messages.countTokens({ model: 'claude-test', messages: [{ role: 'user', content: prompt }] });
  const chat = await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: prompt }], max_tokens: 1 });
  assert.equal(count.input_tokens, chat.usage.prompt_tokens);
});

test('Anthropic SDK: a forced tool_use, streamed too, and its tool_result', async () => {
  const tools = [{ name: weather.name, description: weather.description, input_schema: weather.schema }];
  const msg = await anthropic.messages.create({
    model: 'claude-test',
    max_tokens: 60,
    temperature: 0,
    tools,
    tool_choice: { type: 'tool', name: 'get_weather' },
    messages: [{ role: 'user', content: 'Weather in Paris?' }],
  });
  const use = msg.content.find((b) => b.type === 'tool_use');
  assert.ok(use, JSON.stringify(msg));
  assert.equal(use.name, 'get_weather');
  assert.ok(['Paris', 'Rome'].includes(use.input.city), JSON.stringify(use));

  const stream = anthropic.messages.stream({
    model: 'claude-test',
    max_tokens: 60,
    temperature: 0,
    tools,
    tool_choice: { type: 'any' },
    messages: [{ role: 'user', content: 'Weather in Paris?' }],
  });
  const final = await stream.finalMessage();  // the SDK assembles input_json_delta into the input
  const streamedUse = final.content.find((b) => b.type === 'tool_use');
  assert.ok(streamedUse, JSON.stringify(final));
  assert.deepEqual(streamedUse.input, use.input);

  const next = await anthropic.messages.create({
    model: 'claude-test',
    max_tokens: 5,
    tools,
    messages: [
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: [use] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'Sunny' }] },
    ],
  });
  assert.equal(next.type, 'message');
  assert.ok(next.usage.input_tokens + next.usage.cache_read_input_tokens > msg.usage.input_tokens);
});

test('Anthropic SDK: errors are its typed errors', async () => {
  await assert.rejects(
    anthropic.messages.create({
      model: 'claude-test',
      max_tokens: 5,
      messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AA' } }] }],
    }),
    (e) => e instanceof Anthropic.BadRequestError && /text only/.test(e.message),
  );
  await assert.rejects(
    anthropic.messages.create({ model: 'claude-other', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }),
    (e) => e instanceof Anthropic.NotFoundError,
  );
  const noKey = new Anthropic({ baseURL: server.url, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(
    noKey.messages.create({ model: 'claude-test', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }),
    (e) => e instanceof Anthropic.AuthenticationError,
  );
});

test('OpenAI SDK: responses.create and a streamed response give the chat route text', async () => {
  const want = await chatText(12);
  const r = await openai.responses.create({ model: MODEL, input: prompt, max_output_tokens: 12, temperature: 0 });
  assert.equal(r.object, 'response');
  assert.equal(r.status, 'incomplete');
  assert.equal(r.output_text, want);  // the SDK's own join of the output_text parts
  assert.equal(r.usage.output_tokens, 12);

  const stream = await openai.responses.create({
    model: MODEL,
    input: [{ role: 'user', content: prompt }],
    max_output_tokens: 12,
    temperature: 0,
    stream: true,
  });
  let text = '';
  let last = null;
  for await (const ev of stream) {
    if (ev.type === 'response.output_text.delta') text += ev.delta;
    last = ev;
  }
  assert.equal(text, want);
  assert.equal(last.type, 'response.incomplete');
  assert.equal(last.response.output[0].content[0].text, want);
});

test('OpenAI SDK: a function call through the Responses API and its output sent back', async () => {
  const tools = [{ type: 'function', name: weather.name, description: weather.description, parameters: weather.schema, strict: true }];
  const r = await openai.responses.create({
    model: MODEL,
    input: 'Weather in Paris?',
    tools,
    tool_choice: 'required',
    max_output_tokens: 60,
    temperature: 0,
  });
  const call = r.output.find((i) => i.type === 'function_call');
  assert.ok(call, JSON.stringify(r));
  assert.equal(call.name, 'get_weather');
  assert.ok(['Paris', 'Rome'].includes(JSON.parse(call.arguments).city));
  const next = await openai.responses.create({
    model: MODEL,
    input: [{ role: 'user', content: 'Weather in Paris?' }, call, { type: 'function_call_output', call_id: call.call_id, output: 'Sunny' }],
    tools,
    max_output_tokens: 5,
  });
  assert.equal(next.object, 'response');
  // the call's response is stored: the conversation continues from it
  const cont = await openai.responses.create({
    model: MODEL,
    previous_response_id: r.id,
    input: [{ type: 'function_call_output', call_id: call.call_id, output: 'Sunny' }],
    tools,
    max_output_tokens: 5,
  });
  assert.equal(cont.previous_response_id, r.id);
  assert.equal(cont.usage.input_tokens, next.usage.input_tokens, 'the same conversation as sent whole');
  const { output_text: _, ...stored } = cont;  // (output_text: the SDK's own convenience field on create)
  const { output_text: __, ...retrieved } = await openai.responses.retrieve(cont.id);
  assert.deepEqual(retrieved, stored);
  const items = [];
  for await (const item of openai.responses.inputItems.list(cont.id, { limit: 1, order: 'asc' })) items.push(item);
  assert.deepEqual(items.map((i) => i.type ?? 'message'), ['message', ...r.output.map((i) => i.type), 'function_call_output']);
  await openai.responses.del(cont.id);
  await assert.rejects(openai.responses.retrieve(cont.id), (e) => e instanceof OpenAI.NotFoundError);
  await assert.rejects(
    openai.responses.create({ model: MODEL, input: 'x', previous_response_id: cont.id }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'previous_response_id',
  );
});

test("llama-server's /completion: the chat-free greedy text, streamed without [DONE]", async () => {
  const headers = { 'Content-Type': 'application/json', Authorization: 'Bearer k1' };
  const oai = await openai.completions.create({ model: MODEL, prompt, max_tokens: 12, temperature: 0 });
  const res = await fetch(`${server.url}/completion`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ prompt, n_predict: 12, temperature: 0 }),
  });
  assert.equal(res.status, 200);
  const j = await res.json();
  assert.equal(j.content, oai.choices[0].text);
  assert.equal(j.stop_type, 'limit');
  assert.equal(j.timings.predicted_n, 12);
  const sres = await fetch(`${server.url}/completion`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ prompt, n_predict: 12, temperature: 0, stream: true }),
  });
  const body = await sres.text();
  assert.ok(!body.includes('[DONE]'));
  const events = body.split('\n\n').filter((e) => e.startsWith('data: ')).map((e) => JSON.parse(e.slice(6)));
  assert.equal(events.map((e) => e.content).join(''), j.content);
  assert.equal(events.at(-1).stop, true);
  const props = await (await fetch(`${server.url}/props`, { headers })).json();
  assert.equal(props.model_alias, MODEL);
});

test('ollama client: chat (streamed and not), generate, list, show, version', async () => {
  const want = await chatText(12);
  const ollama = new Ollama({ host: server.url, headers: { Authorization: 'Bearer k1' } });
  const res = await ollama.chat({
    model: `${MODEL}:latest`,
    messages: [{ role: 'user', content: prompt }],
    options: { temperature: 0, num_predict: 12 },
  });
  assert.equal(res.message.content, want);
  assert.equal(res.done, true);
  assert.equal(res.eval_count, 12);
  let text = '';
  let last = null;
  for await (const part of await ollama.chat({
    model: MODEL,
    messages: [{ role: 'user', content: prompt }],
    options: { temperature: 0, num_predict: 12 },
    stream: true,
  })) {
    text += part.message.content;
    last = part;
  }
  assert.equal(text, want);
  assert.equal(last.done, true);
  assert.equal(last.done_reason, 'length');
  const gen = await ollama.generate({ model: MODEL, prompt, options: { temperature: 0, num_predict: 12 } });
  assert.equal(gen.response, want);
  const list = await ollama.list();
  assert.ok(list.models.some((m) => m.name === MODEL));
  const show = await ollama.show({ model: MODEL });
  assert.equal(show.details.family, 'llama');
  const version = await ollama.version();
  assert.equal(typeof version.version, 'string');
  await assert.rejects(ollama.chat({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }), (e) => e.status_code === 404);
});
