// node bench/llamacpp-load.mjs PEER_DIR MODEL.gguf...: loads each GGUF with node-llama-cpp's
// prebuilt CPU llama.cpp, evaluates a few tokens and generates 4 greedily; prints one JSON
// line per file ({"model", "ok", "tokens"} or {"model", "ok": false, "error"}).
import path from "node:path";
import {pathToFileURL} from "node:url";

const [peer, ...files] = process.argv.slice(2);
const nlc = await import(pathToFileURL(path.join(peer, "node_modules", "node-llama-cpp", "dist", "index.js")).href);
const llama = await nlc.getLlama({gpu: false, build: "never", skipDownload: true, progressLogs: false,
                                  logLevel: nlc.LlamaLogLevel.error});
let failed = 0;
for (const f of files) {
  try {
    const model = await llama.loadModel({modelPath: f, gpuLayers: 0});
    const ctx = await model.createContext({contextSize: 64, threads: 1});
    const seq = ctx.getSequence();
    const out = [];
    for await (const t of seq.evaluate([1, 450, 4996, 17354], {temperature: 0, yieldEogToken: true})) {
      out.push(t);
      if (out.length === 4) break;
    }
    console.log(JSON.stringify({model: f, ok: true, tokens: out}));
    await ctx.dispose();
    await model.dispose();
  } catch (e) {
    failed++;
    console.log(JSON.stringify({model: f, ok: false, error: String(e?.message ?? e)}));
  }
}
process.exit(failed ? 1 : 0);
