// End-to-end checks of `brisk serve` through the official `openai` npm client.
// Usage: node openai_e2e.mjs CASE...   (env: BRISK_URL, BRISK_BIN, BRISK_API_KEY optional)
// Each case throws on a mismatch; the process exits non-zero if any case failed.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import OpenAI from 'openai';

const url = process.env.BRISK_URL;
const bin = process.env.BRISK_BIN;
if (!url) throw new Error('BRISK_URL is not set');
const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: process.env.BRISK_API_KEY || 'none', maxRetries: 0, timeout: 300_000 });
let modelId;

async function model() {
  if (!modelId) modelId = (await client.models.list()).data[0].id;
  return modelId;
}

async function complete(prompt, opts = {}) {
  return client.completions.create({ model: await model(), prompt, ...opts });
}

async function completeStream(prompt, opts = {}) {
  const stream = await client.completions.create({ model: await model(), prompt, stream: true, ...opts });
  let text = '', finish = null, usage = null, chunks = 0, tokens = [];
  for await (const chunk of stream) {
    chunks++;
    assert.equal(chunk.object, 'text_completion');
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.text;
      if (c.tokens) tokens.push(...c.tokens);
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { text, finish, usage, chunks, tokens };
}

async function chat(messages, opts = {}) {
  return client.chat.completions.create({ model: await model(), messages, ...opts });
}

async function chatStream(messages, opts = {}) {
  const stream = await client.chat.completions.create({ model: await model(), messages, stream: true, ...opts });
  let text = '', finish = null, usage = null, role = null, id = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (id) assert.equal(chunk.id, id); else id = chunk.id;
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta.role) role = c.delta.role;
      if (c.delta.content) text += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { text, finish, usage, role, id };
}

const PROMPTS = [
  'The old lighthouse keeper climbed the stairs and',
  'Once upon a time, in a small village by the sea,',
  'The recipe calls for two cups of flour,',
  'In the year 1850, the railway reached',
];

const cases = {
  async models() {
    const list = await client.models.list();
    assert.ok(list.data.length === 1 && typeof list.data[0].id === 'string');
    assert.equal(list.data[0].object, 'model');
  },

  async completions() {
    const r = await complete(PROMPTS[0], { max_tokens: 12, temperature: 0 });
    assert.match(r.id, /^cmpl-/);
    assert.equal(r.object, 'text_completion');
    assert.equal(r.model, await model());
    assert.ok(Number.isInteger(r.created));
    assert.equal(r.choices.length, 1);
    assert.equal(typeof r.choices[0].text, 'string');
    assert.ok(r.choices[0].text.length > 0);
    assert.ok(['length', 'stop'].includes(r.choices[0].finish_reason));
    assert.ok(r.usage.prompt_tokens > 0);
    assert.ok(r.usage.completion_tokens > 0 && r.usage.completion_tokens <= 12);
    assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  },

  async completions_stream() {
    const whole = await complete(PROMPTS[1], { max_tokens: 20, temperature: 0, ignore_eos: true });
    const s = await completeStream(PROMPTS[1], { max_tokens: 20, temperature: 0, ignore_eos: true,
                                                 stream_options: { include_usage: true } });
    assert.equal(s.text, whole.choices[0].text);
    assert.equal(s.finish, 'length');
    assert.ok(s.chunks >= 3);
    assert.equal(s.usage.completion_tokens, 20);
    assert.equal(s.usage.prompt_tokens, whole.usage.prompt_tokens);
  },

  async chat() {
    const r = await chat([{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Tell me about the sea.' }],
                         { max_tokens: 16, temperature: 0 });
    assert.match(r.id, /^chatcmpl-/);
    assert.equal(r.object, 'chat.completion');
    assert.equal(r.choices[0].message.role, 'assistant');
    assert.equal(typeof r.choices[0].message.content, 'string');
    assert.ok(['length', 'stop'].includes(r.choices[0].finish_reason));
    assert.ok(r.usage.prompt_tokens > 10);
  },

  async chat_stream() {
    const msgs = [{ role: 'user', content: 'Write a line about a lighthouse.' }];
    const whole = await chat(msgs, { max_completion_tokens: 16, temperature: 0 });
    const s = await chatStream(msgs, { max_completion_tokens: 16, temperature: 0, stream_options: { include_usage: true } });
    assert.equal(s.role, 'assistant');
    assert.equal(s.text, whole.choices[0].message.content);
    assert.equal(s.finish, whole.choices[0].finish_reason);
    assert.equal(s.usage.completion_tokens, whole.usage.completion_tokens);
  },

  async stop_strings() {
    const base = (await complete(PROMPTS[0], { max_tokens: 40, temperature: 0, ignore_eos: true })).choices[0].text;
    // A stop string taken from the middle of the greedy text: the output ends just before its
    // first occurrence, with finish_reason "stop", streaming or not.
    const k = Math.floor(base.length / 2);
    const stop = base.slice(k, k + 3);
    const expected = base.slice(0, base.indexOf(stop));
    const r = await complete(PROMPTS[0], { max_tokens: 40, temperature: 0, ignore_eos: true, stop: [stop, 'zzzzqqq'] });
    assert.equal(r.choices[0].text, expected, `stop ${JSON.stringify(stop)}`);
    assert.equal(r.choices[0].finish_reason, 'stop');
    const s = await completeStream(PROMPTS[0], { max_tokens: 40, temperature: 0, ignore_eos: true, stop });
    assert.equal(s.text, expected);
    assert.equal(s.finish, 'stop');
  },

  async seed_determinism() {
    const opts = { max_tokens: 24, temperature: 1.0, top_p: 0.95, ignore_eos: true };
    const a = await complete(PROMPTS[2], { ...opts, seed: 1234 });
    const b = await complete(PROMPTS[2], { ...opts, seed: 1234 });
    assert.equal(a.choices[0].text, b.choices[0].text);
    const s = await completeStream(PROMPTS[2], { ...opts, seed: 1234 });
    assert.equal(s.text, a.choices[0].text);
    const others = await Promise.all([1, 2, 3, 4].map((d) => complete(PROMPTS[2], { ...opts, seed: 1234 + d })));
    assert.ok(others.some((o) => o.choices[0].text !== a.choices[0].text), 'different seeds all gave the same text');
  },

  async logprobs() {
    const r = await complete(PROMPTS[0], { max_tokens: 5, temperature: 0, logprobs: 3, ignore_eos: true });
    const lp = r.choices[0].logprobs;
    assert.equal(lp.tokens.length, 5);
    assert.equal(lp.token_logprobs.length, 5);
    assert.equal(lp.top_logprobs.length, 5);
    assert.equal(lp.text_offset.length, 5);
    assert.equal(lp.tokens.join(''), r.choices[0].text);
    for (let i = 0; i < 5; i++) {
      assert.ok(lp.token_logprobs[i] <= 0);
      const alts = Object.values(lp.top_logprobs[i]);
      assert.ok(alts.length >= 1 && alts.length <= 3);
      // Greedy: the chosen token is the most likely one.
      assert.ok(Math.abs(Math.max(...alts) - lp.token_logprobs[i]) < 1e-4);
    }
    const c = await chat([{ role: 'user', content: 'Hi' }], { max_tokens: 4, temperature: 0, logprobs: true, top_logprobs: 2 });
    const content = c.choices[0].logprobs.content;
    assert.ok(content.length >= 1);
    for (const t of content) {
      assert.equal(typeof t.token, 'string');
      assert.ok(t.logprob <= 0);
      assert.ok(Array.isArray(t.bytes));
      assert.equal(t.top_logprobs.length, 2);
      assert.ok(t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob);
    }
  },

  // The server's greedy output equals `brisk run --temp 0 --ignore-eos --json` for the same prompt.
  async greedy_equals_run() {
    assert.ok(bin, 'BRISK_BIN is not set');
    for (const prompt of PROMPTS.slice(0, 2)) {
      const run = JSON.parse(execFileSync(bin, ['run', '-p', prompt, '-n', '32', '--temp', '0', '--ignore-eos', '--json'],
                                          { encoding: 'utf8', maxBuffer: 1 << 24 }));
      const r = await complete(prompt, { max_tokens: 32, temperature: 0, ignore_eos: true, return_tokens: true });
      assert.deepEqual(r.choices[0].tokens, run.tokens);
      assert.equal(r.choices[0].text, run.text);
      assert.equal(r.usage.prompt_tokens, run.prompt_tokens);
      const s = await completeStream(prompt, { max_tokens: 32, temperature: 0, ignore_eos: true, return_tokens: true });
      assert.deepEqual(s.tokens, run.tokens);
      assert.equal(s.text, run.text);
    }
  },

  // logit_bias as the openai client sends it: -100 removes the greedy first token, +100
  // forces a token everywhere, both in streams and whole answers, and the server agrees
  // with `brisk run --logit-bias`.
  async logit_bias() {
    assert.ok(bin, 'BRISK_BIN is not set');
    const opts = { max_tokens: 8, temperature: 0, ignore_eos: true, return_tokens: true };
    const plain = (await complete(PROMPTS[0], opts)).choices[0].tokens;
    const first = plain[0];
    const banned = await complete(PROMPTS[0], { ...opts, logit_bias: { [first]: -100 } });
    assert.notEqual(banned.choices[0].tokens[0], first);
    assert.ok(!banned.choices[0].tokens.includes(first), 'a -100 token was generated');
    const run = JSON.parse(execFileSync(bin, ['run', '-p', PROMPTS[0], '-n', '8', '--temp', '0', '--ignore-eos', '--json',
                                              '--logit-bias', `${first}-100`], { encoding: 'utf8', maxBuffer: 1 << 24 }));
    assert.deepEqual(banned.choices[0].tokens, run.tokens);
    const forced = await completeStream(PROMPTS[1], { ...opts, temperature: 0.9, seed: 7, logit_bias: { 1000: 100 } });
    assert.deepEqual(forced.tokens, Array(8).fill(1000));
    await assert.rejects(complete(PROMPTS[0], { ...opts, logit_bias: { 1: 101 } }),
                         (e) => e.status === 400 && e.error?.param === 'logit_bias');
  },

  // 32 concurrent streams all complete, each equal to its single-request greedy output.
  async concurrent_32() {
    const prompts = Array.from({ length: 32 }, (_, i) => `${PROMPTS[i % PROMPTS.length]} (${i})`);
    const opts = { max_tokens: 24, temperature: 0, ignore_eos: true };
    const alone = [];
    for (const p of prompts) alone.push((await complete(p, opts)).choices[0].text);
    const together = await Promise.all(prompts.map((p) => completeStream(p, opts)));
    for (let i = 0; i < 32; i++) {
      assert.equal(together[i].finish, 'length', `stream ${i}`);
      assert.equal(together[i].text, alone[i], `stream ${i} differs from its single-request output`);
    }
  },

  async errors_through_client() {
    await assert.rejects(complete(PROMPTS[0], { max_tokens: 0 }), (e) => e.status === 400 && e.error?.param === 'max_tokens');
    await assert.rejects(complete(PROMPTS[0], { temperature: -1 }), (e) => e.status === 400 && e.error?.type === 'invalid_request_error');
    await assert.rejects(chat([], {}), (e) => e.status === 400);
  },
};

const names = process.argv.slice(2);
if (names.length === 0) names.push(...Object.keys(cases));
let failed = 0;
for (const name of names) {
  const fn = cases[name];
  if (!fn) { console.error(`unknown case ${name}`); failed++; continue; }
  const t0 = Date.now();
  try {
    await fn();
    console.log(`ok   ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e.stack || e}`);
  }
}
process.exit(failed ? 1 : 0);
