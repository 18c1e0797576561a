// Structured output with the official openai client on the default model (stories260K, which the
// grammar forces into any shape): response_format json_schema (streaming and not) parses and
// validates, json_object, vLLM's guided_choice / structured_outputs regex, llama-server's grammar,
// a schema the engine cannot enforce is a 400 naming the field, and the metrics count both.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, scrape, metric } from './lib/server.mjs';

let server;
let client;
const MODEL = 'stories260K';

before(async () => {
  server = await startServer(['--max-num-seqs', '16']);
  client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  const r = await server.stop();
  assert.equal(r.code, 0, server.log());
});

const messages = [{ role: 'user', content: 'Tell me about a girl and her pet.' }];

const person = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 12 },
    age: { type: 'integer', minimum: 0, maximum: 120 },
    pet: { enum: ['cat', 'dog', 'bird'] },
    happy: { type: 'boolean' },
  },
  required: ['name', 'age', 'pet', 'happy'],
  additionalProperties: false,
};

// A hand-written check of `person` (no validator package in the e2e dependencies).
function validatePerson(v) {
  assert.equal(typeof v, 'object');
  assert.deepEqual(Object.keys(v), ['name', 'age', 'pet', 'happy']);  // the schema's order, as OpenAI
  assert.equal(typeof v.name, 'string');
  assert.ok([...v.name].length <= 12, v.name);
  assert.ok(Number.isInteger(v.age) && v.age >= 0 && v.age <= 120, String(v.age));
  assert.ok(['cat', 'dog', 'bird'].includes(v.pet));
  assert.equal(typeof v.happy, 'boolean');
}

const responseFormat = { type: 'json_schema', json_schema: { name: 'person', schema: person, strict: true } };

test('response_format json_schema: the output parses and validates (several seeds, n = 2)', async () => {
  for (const seed of [1, 2, 3]) {
    const r = await client.chat.completions.create({
      model: MODEL, messages, response_format: responseFormat, max_tokens: 200, temperature: 1, seed, n: 2,
    });
    for (const c of r.choices) {
      assert.equal(c.finish_reason, 'stop', c.message.content);
      validatePerson(JSON.parse(c.message.content));
    }
  }
});

test('response_format json_schema, streaming: the deltas join into valid JSON', async () => {
  const stream = await client.chat.completions.create({
    model: MODEL, messages, response_format: responseFormat, max_tokens: 200, temperature: 0.8, seed: 5, stream: true,
  });
  let text = '';
  let finish = null;
  let chunks = 0;
  for await (const c of stream) {
    chunks++;
    if (c.choices.length === 0) continue;
    text += c.choices[0].delta.content ?? '';
    finish = c.choices[0].finish_reason ?? finish;
  }
  assert.ok(chunks > 2);
  assert.equal(finish, 'stop', text);
  validatePerson(JSON.parse(text));
});

test('max_tokens cuts a schema with "length"', async () => {
  const r = await client.chat.completions.create({ model: MODEL, messages, response_format: responseFormat, max_tokens: 4 });
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 4);
});

test('response_format json_object on completions: a JSON object', async () => {
  // The tiny model likes to tell a story inside a string: a bias towards '"' and '}' (which the
  // grammar still places only where JSON allows them) lets it finish.
  const tok = await (await fetch(`${server.url}/tokenize`, {
    method: 'POST', body: JSON.stringify({ prompt: '"}', add_special_tokens: false }),
  })).json();
  const logit_bias = Object.fromEntries(tok.tokens.map((t) => [String(t), 6]));
  let stopped = 0;
  for (const seed of [1, 2, 3, 4]) {
    const r = await client.completions.create({
      model: MODEL, prompt: 'Once upon a time', response_format: { type: 'json_object' }, max_tokens: 120,
      temperature: 1, seed, logit_bias,
    });
    const c = r.choices[0];
    assert.ok(c.text.startsWith('{'), c.text);
    if (c.finish_reason !== 'stop') continue;
    stopped++;
    const v = JSON.parse(c.text);
    assert.ok(v !== null && typeof v === 'object' && !Array.isArray(v));
  }
  assert.ok(stopped >= 2, `only ${stopped} of 4 finished`);
});

test("vLLM's guided_choice and structured_outputs.choice", async () => {
  const choices = ['sunny', 'rainy', 'a big storm'];
  for (const extra of [{ guided_choice: choices }, { structured_outputs: { choice: choices } }]) {
    for (const stream of [false, true]) {
      const params = { model: MODEL, prompt: 'The weather was', max_tokens: 20, temperature: 1, seed: 3, ...extra };
      let text = '';
      if (stream) {
        for await (const c of await client.completions.create({ ...params, stream: true })) text += c.choices[0]?.text ?? '';
      } else {
        text = (await client.completions.create(params)).choices[0].text;
      }
      assert.ok(choices.includes(text), `${JSON.stringify(extra)}: ${text}`);
    }
  }
});

test('structured_outputs.regex and guided_regex', async () => {
  for (const extra of [{ structured_outputs: { regex: '[0-9]{3}-[a-z]{2,4}' } }, { guided_regex: '[0-9]{3}-[a-z]{2,4}' }]) {
    const r = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 30, temperature: 1, seed: 4, ...extra });
    assert.match(r.choices[0].message.content, /^[0-9]{3}-[a-z]{2,4}$/);
    assert.equal(r.choices[0].finish_reason, 'stop');
  }
});

test("llama-server's grammar and json_schema fields", async () => {
  const grammar = 'root ::= "The answer is " [0-9] [0-9]? "."';
  const r = await client.completions.create({ model: MODEL, prompt: 'Q: 6 times 7?', grammar, max_tokens: 20, temperature: 0 });
  assert.match(r.choices[0].text, /^The answer is [0-9][0-9]?\.$/);
  const s = await client.completions.create({
    model: MODEL, prompt: 'Once', json_schema: person, max_tokens: 200, temperature: 0.5, seed: 2,
  });
  validatePerson(JSON.parse(s.choices[0].text));
});

test('a constraint that cannot compile is a 400 naming the field; two constraints are a 400', async () => {
  const bad = [
    [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { $ref: '#/$defs/missing' } } } }, 'response_format'],
    [{ grammar: 'root ::= ( "unclosed"' }, 'grammar'],
    [{ guided_regex: '(ab' }, 'guided_regex'],
    [{ guided_choice: ['a'], guided_regex: 'a' }, 'guided_choice'],
    [{ response_format: { type: 'yaml' } }, 'response_format'],
  ];
  for (const [extra, param] of bad) {
    await assert.rejects(client.chat.completions.create({ model: MODEL, messages, max_tokens: 5, ...extra }), (e) => {
      assert.equal(e.status, 400, JSON.stringify(extra));
      assert.equal(e.param, param, JSON.stringify(extra));
      assert.ok(e.message.length > 0);
      return true;
    });
  }
});

test('a bad schema is a 400 naming the field and the keyword (chat and completions, streaming too)', async () => {
  const schema = { type: 'object', properties: { x: { type: 'number', multipleOf: 0.37 } } };
  const calls = [
    () => client.chat.completions.create({ model: MODEL, messages, max_tokens: 5,
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema } } }),
    () => client.chat.completions.create({ model: MODEL, messages, max_tokens: 5, stream: true,
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema } } }),
    () => client.completions.create({ model: MODEL, prompt: 'x', max_tokens: 5, guided_json: schema }),
  ];
  for (const [i, call] of calls.entries()) {
    await assert.rejects(call(), (e) => {
      assert.equal(e.status, 400);
      assert.equal(e.param, i === 2 ? 'guided_json' : 'response_format');
      assert.match(e.message, /multipleOf/);
      assert.match(e.message, /\/properties\/x/);
      return true;
    });
  }
});

test('metrics count structured requests and compile failures', async () => {
  const m = await scrape(server.url);
  assert.ok(metric(m, 'tokenmill:structured_requests_total') >= 10);
  assert.ok(metric(m, 'tokenmill:grammar_compile_failures_total') >= 3);
});
