// The llama.cpp side of bench/peer-llamacpp (see that script for usage), through
// node-llama-cpp's prebuilt CPU binaries. It loads the GGUF once, starts
// `brisk bench --driver` (which loads the same file and warms up once), and then
// alternates one repetition of brisk and one of llama.cpp, pp then tg, for -r rounds,
// swapping who goes first every round. With -d D both first hold D cached tokens (made
// once by forward passes, untimed; llama-bench's -d), and each pp or tg runs after them.
//
// llama.cpp is driven through the lowest layer node-llama-cpp has: the context's native
// batch API (initBatch / addToBatch / decodeBatch / sampleToken), which skips the
// sequence's scheduling (a setImmediate hop per decode), locks and token bookkeeping.
// --mode evaluate uses the public LlamaContextSequence.evaluate() generator instead;
// --overhead compares both against llama.cpp's own eval timer (llama_perf) to show
// what the JS layer costs per token.
import {spawn} from "node:child_process";
import path from "node:path";
import readline from "node:readline";
import {pathToFileURL} from "node:url";

function parseArgs(argv) {
  const o = {p: 512, n: 128, d: 0, r: 5, t: 0, json: false, mode: "api", overhead: false, fa: "off",
             kvType: "", brisk: "", model: "", peer: "", sleepMs: 300};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i], v = () => argv[++i];
    if (a === "-m" || a === "--model") o.model = v();
    else if (a === "-t" || a === "--threads") o.t = parseInt(v());
    else if (a === "-p" || a === "--n-prompt") o.p = parseInt(v());
    else if (a === "-n" || a === "--n-gen") o.n = parseInt(v());
    else if (a === "-d" || a === "--n-depth") o.d = parseInt(v());
    else if (a === "--kv-type") o.kvType = v();
    else if (a === "-r" || a === "--repetitions") o.r = parseInt(v());
    else if (a === "--json") o.json = true;
    else if (a === "--mode") o.mode = v();
    else if (a === "--overhead") o.overhead = true;
    else if (a === "--fa") o.fa = v();
    else if (a === "--brisk") o.brisk = v();
    else if (a === "--peer-dir") o.peer = v();
    else if (a === "--sleep-ms") o.sleepMs = parseInt(v());
    else if (a === "--quiet") o.quiet = true;
    else throw new Error(`unknown argument '${a}'`);
  }
  if (!o.model) throw new Error("-m MODEL is required");
  if (!(o.p >= 0) || !(o.n >= 0) || !(o.d >= 0) || !(o.r >= 1) || !(o.t >= 1) || o.p + o.n === 0)
    throw new Error("-p, -n and -d must be >= 0 (-p/-n 0: skip that test, not both), -r and -t >= 1");
  if (o.d > 0 && (o.mode !== "api" || o.overhead)) throw new Error("-d: only with --mode api, without --overhead");
  if (!["api", "evaluate"].includes(o.mode)) throw new Error("--mode: api|evaluate");
  if (!["on", "off"].includes(o.fa)) throw new Error("--fa: on|off");
  return o;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const median = (v) => {
  const s = [...v].sort((a, b) => a - b), k = s.length;
  return k % 2 ? s[(k - 1) / 2] : (s[k / 2 - 1] + s[k / 2]) / 2;
};
const summary = (v) => ({median: median(v), min: Math.min(...v), max: Math.max(...v), samples: v});
function loadavg() {
  try { return (globalThis.__fs.readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")); }
  catch { return "?"; }
}

// Fixed pseudo-random prompt (token values do not change the cost of a forward pass).
function promptTokens(count, nVocab) {
  let s = 12345;
  const out = new Uint32Array(count);
  for (let i = 0; i < count; i++) {
    s = (s * 1103515245 + 12345) >>> 0;
    out[i] = 1 + (s % (nVocab - 1));
  }
  return out;
}

// One Llama instance per process (node-llama-cpp's native logger is process-wide).
const llamaLogs = [];
async function getCpuLlama(nlc, verbose) {
  const {getLlama, LlamaLogLevel} = nlc;
  return await getLlama({
    gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true, progressLogs: false,
    maxThreads: 0, logLevel: verbose ? LlamaLogLevel.info : LlamaLogLevel.warn,
    logger: (level, msg) => { llamaLogs.push(msg); if (level === "error" || level === "fatal") process.stderr.write(msg + "\n"); },
  });
}

class LlamaSide {
  constructor(o, nlc, llama) { this.o = o; this.nlc = nlc; this.llama = llama; this.logs = llamaLogs; }
  async load(performanceTracking = false) {
    this.model = await this.llama.loadModel({modelPath: this.o.model, gpuLayers: 0});
    const need = this.o.d + this.o.p + this.o.n + 8;
    this.ctx = await this.model.createContext({
      contextSize: need, batchSize: Math.max(this.o.p, 512), threads: this.o.t, sequences: 1,
      flashAttention: this.o.fa === "on", performanceTracking,
    });
    this.seq = this.ctx.getSequence();
    this.c = this.ctx._ctx;            // the native context (node-llama-cpp's addon object)
    this.seqId = this.seq._sequenceId;
    this.sampler = new this.nlc._LlamaSamplerCtor(this.model);  // see main(): same class the library uses
    this.sampler.applyConfig(this.seq._resolveSamplerConfig({temperature: 0}));  // greedy
  }
  info() {
    return {threads_used: this.c.getThreads(), context_size: this.ctx.contextSize,
            batch_size: this.ctx.batchSize, flash_attention: this.o.fa === "on", gpu: this.llama.gpu,
            cpu_build: this.llama.buildType, mode: this.o.mode};
  }
  // Drops everything after the first d cached tokens, making them first if needed
  // (untimed, in batches of the context's batch size).
  async clear(depthTokens) {
    if (this.o.mode === "evaluate") return await this.seq.clearHistory();
    const d = this.o.d;
    this.c.removeTokenCellsFromSequence(this.seqId, this.filled ? d : 0, -1);
    if (this.filled || d === 0) return;
    for (let s = 0; s < d; s += this.ctx.batchSize) {
      const part = depthTokens.subarray(s, Math.min(d, s + this.ctx.batchSize));
      this.c.initBatch(part.length);
      this.c.addToBatch(this.seqId, s, part, Uint32Array.of(part.length - 1));
      await this.c.decodeBatch();
    }
    this.filled = true;
  }
  // tokens: the d depth tokens, then the prompt.
  async pp(tokens) {
    const d = this.o.d, prompt = tokens.subarray(d);
    await this.clear(tokens);
    if (this.o.mode === "evaluate") {
      const t0 = process.hrtime.bigint();
      await this.seq.evaluateWithoutGeneratingNewTokens(Array.from(prompt));
      return prompt.length / (Number(process.hrtime.bigint() - t0) / 1e9);
    }
    const t0 = process.hrtime.bigint();
    this.c.initBatch(prompt.length);
    this.c.addToBatch(this.seqId, d, prompt, Uint32Array.of(prompt.length - 1));
    await this.c.decodeBatch();
    return prompt.length / (Number(process.hrtime.bigint() - t0) / 1e9);
  }
  async tg(tokens, n) {
    const d = this.o.d, first = tokens[d];
    await this.clear(tokens);
    if (this.o.mode === "evaluate") {
      const t0 = process.hrtime.bigint();
      let k = 0;
      for await (const _ of this.seq.evaluate([first], {temperature: 0, yieldEogToken: true})) {
        if (++k === n) break;  // the generator evaluates one token per iteration
      }
      return n / (Number(process.hrtime.bigint() - t0) / 1e9);
    }
    const c = this.c, s = this.sampler._sampler, one = Uint32Array.of(0), tok = new Uint32Array(1);
    tok[0] = first;
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < n; i++) {
      c.initBatch(1);
      const [li] = c.addToBatch(this.seqId, d + i, tok, one);
      await c.decodeBatch();
      tok[0] = await c.sampleToken(li, s);
    }
    return n / (Number(process.hrtime.bigint() - t0) / 1e9);
  }
  // llama.cpp's own accounting of the last evaluations (llama_perf_context_print).
  async perf() {
    this.logs.length = 0;
    await this.ctx.printTimings();
    const text = this.logs.join("\n");
    const m = /eval time =\s*([\d.]+) ms \/\s*(\d+) runs/.exec(text.split("\n").find((l) => / eval time/.test(l) && !/prompt eval/.test(l)) ?? "");
    return m ? {eval_ms: parseFloat(m[1]), runs: parseInt(m[2])} : {raw: text};
  }
}

class BriskSide {
  constructor(o) { this.o = o; }
  async start() {
    this.proc = spawn(this.o.brisk, ["bench", "--driver", "-m", this.o.model, "-t", String(this.o.t),
                                     "-p", String(this.o.p), "-n", String(this.o.n), "-d", String(this.o.d),
                                     ...(this.o.kvType ? ["--kv-type", this.o.kvType] : [])],
                      {stdio: ["pipe", "pipe", "inherit"]});
    this.lines = readline.createInterface({input: this.proc.stdout})[Symbol.asyncIterator]();
    this.ready = await this.next();
    if (!this.ready.ready) throw new Error("brisk bench --driver: " + JSON.stringify(this.ready));
  }
  async next() {
    const {value, done} = await this.lines.next();
    if (done) throw new Error("brisk bench --driver exited early");
    return JSON.parse(value);
  }
  async run(kind) {
    this.proc.stdin.write(kind + "\n");
    const r = await this.next();
    if (r.error) throw new Error("brisk: " + r.error);
    return r.tps;
  }
  stop() { this.proc.stdin.end("quit\n"); }
}

async function overheadStudy(o, nlc) {
  // Same model, same settings: per-token wall time of each JS path vs the time llama.cpp's
  // own timer puts inside llama_decode for the same tokens.
  const out = {};
  const llama = await getCpuLlama(nlc, true);
  for (const mode of ["api", "evaluate"]) {
    const side = new LlamaSide({...o, mode}, nlc, llama);
    await side.load(true);
    const tokens = promptTokens(o.p, 256);  // any ids are as costly as any other
    await side.tg(tokens, o.n);  // warm-up
    await side.perf();
    const walls = [], evals = [];
    for (let r = 0; r < o.r; r++) {
      const tps = await side.tg(tokens, o.n);
      const p = await side.perf();
      walls.push(1e3 / tps);
      if (p.eval_ms != null) evals.push(p.eval_ms / p.runs);
      else if (process.env.PEER_DEBUG) console.error("perf:", JSON.stringify(p));
    }
    out[mode] = {wall_ms_per_token: median(walls), llama_eval_ms_per_token: evals.length ? median(evals) : null,
                 js_overhead_ms_per_token: evals.length ? median(walls) - median(evals) : null};
    await side.ctx.dispose();
    await side.model.dispose();
  }
  return out;
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  globalThis.__fs = await import("node:fs");
  const base = path.join(o.peer, "node_modules", "node-llama-cpp", "dist");
  const nlc = {...await import(pathToFileURL(path.join(base, "index.js")).href)};
  nlc._LlamaSamplerCtor = (await import(pathToFileURL(path.join(base, "evaluator", "LlamaContext", "LlamaSampler.js")).href)).LlamaSampler;

  if (o.overhead) {
    const r = await overheadStudy(o, nlc);
    console.log(o.json ? JSON.stringify({model: o.model, threads: o.t, n_gen: o.n, reps: o.r, overhead: r}) : r);
    return;
  }

  const brisk = new BriskSide(o);
  await brisk.start();
  const nVocab = brisk.ready.n_vocab;
  const tokens = promptTokens(o.d + Math.max(o.p, 1), nVocab);
  const llama = new LlamaSide(o, nlc, await getCpuLlama(nlc, false));
  await llama.load();
  const kinds = [...(o.p > 0 ? ["pp"] : []), ...(o.n > 0 ? ["tg"] : [])];
  if (o.p > 0) await llama.pp(tokens);  // warm-up (brisk warmed up in --driver)
  if (o.n > 0) await llama.tg(tokens, o.n);
  const res = {brisk: {pp: [], tg: []}, llamacpp: {pp: [], tg: []}, load: []};
  for (let r = 0; r < o.r; r++) {
    res.load.push(loadavg());
    for (const kind of kinds) {
      const order = r % 2 === 0 ? ["brisk", "llamacpp"] : ["llamacpp", "brisk"];
      for (const who of order) {
        await sleep(o.sleepMs);  // lets the other engine's spinning threads park
        const tps = who === "brisk" ? await brisk.run(kind)
                                    : kind === "pp" ? await llama.pp(tokens) : await llama.tg(tokens, o.n);
        res[who][kind].push(tps);
        if (!o.quiet) process.stderr.write(`peer-llamacpp: round ${r + 1}/${o.r} ${kind} ${who} ${tps.toFixed(2)} t/s (load ${loadavg().split(" ")[0]})\n`);
      }
    }
  }
  brisk.stop();
  res.load.push(loadavg());
  const bw = brisk.ready.membw_gbps;
  const tgBytes = brisk.ready.tg_bytes_per_token, wBytes = brisk.ready.weight_bytes_per_token;
  const llamaTgBytes = wBytes + brisk.ready.kv_f16_bytes_per_token;  // llama.cpp keeps K/V in f16
  const mk = (kind) => {
    if (res.brisk[kind].length === 0) return null;
    const b = summary(res.brisk[kind]), l = summary(res.llamacpp[kind]);
    return {brisk_tps: b.median, llamacpp_tps: l.median, ratio: b.median / l.median, brisk: b, llamacpp: l};
  };
  const out = {
    model: o.model, threads: o.t, n_prompt: o.p, n_gen: o.n, n_depth: o.d, brisk_kv_type: brisk.ready.kv_type, reps: o.r, pp: mk("pp"), tg: mk("tg"),
    membw_gbps: bw, weight_bytes_per_token: wBytes,
    roofline: o.n > 0 ? {brisk_tg_share: tgBytes * median(res.brisk.tg) / (bw * 1e9),
                         llamacpp_tg_share: llamaTgBytes * median(res.llamacpp.tg) / (bw * 1e9),
                         membw_gbps: bw, brisk_bytes_per_token: tgBytes, llamacpp_bytes_per_token: llamaTgBytes}
                      : null,
    load: res.load, llamacpp: llama.info(), node_llama_cpp: nlc.__version ?? "3.21.1",
  };
  if (o.json) {
    console.log(JSON.stringify(out));
  } else {
    const f = (x) => x.toFixed(2);
    console.log(`model ${o.model}, ${o.t} threads, depth ${o.d}, ${o.r} alternating rounds, brisk K/V ${out.brisk_kv_type}, llama.cpp via node-llama-cpp ${out.node_llama_cpp} (${o.mode} path, ${out.llamacpp.cpu_build ?? ""} CPU, fa ${o.fa}, K/V f16)`);
    console.log(`| test  | brisk t/s (min..max) | llama.cpp t/s (min..max) | brisk/llama.cpp |`);
    console.log(`|-------|----------------------|--------------------------|-----------------|`);
    for (const [name, kind] of [[`pp${o.p}`, "pp"], [`tg${o.n}`, "tg"]]) {
      const x = out[kind];
      if (!x) continue;
      console.log(`| ${name.padEnd(5)} | ${f(x.brisk.median)} (${f(x.brisk.min)}..${f(x.brisk.max)}) | ${f(x.llamacpp.median)} (${f(x.llamacpp.min)}..${f(x.llamacpp.max)}) | ${x.ratio.toFixed(3)} |`);
    }
    if (out.roofline) console.log(`roofline (tg, ${f(bw)} GB/s at ${o.t} threads): brisk ${(out.roofline.brisk_tg_share * 100).toFixed(1)}%, llama.cpp ${(out.roofline.llamacpp_tg_share * 100).toFixed(1)}%`);
    console.log(`load average per round: ${res.load.join(" | ")}`);
  }
  await llama.ctx.dispose();
  await llama.model.dispose();
}

main().catch((e) => { console.error("peer-llamacpp:", e?.stack ?? e); process.exit(1); });
