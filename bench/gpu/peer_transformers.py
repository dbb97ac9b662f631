#!/usr/bin/env python3
"""The GPU peer: PyTorch + transformers on the same weights brisk runs.

    python3 bench/gpu/peer_transformers.py HF_DIR OUT.json

HF_DIR is the folder `brisk synth --shape llama-3.1-8b --type bf16 X.gguf --hf-out HF_DIR`
writes next to the GGUF, so both engines read the same random weights. Measures, as the
transformers documentation recommends for fast generation (bf16, static KV cache,
torch.compile in "reduce-overhead" mode, i.e. CUDA graphs, done by generate() itself):
  - batch-1 greedy decode: a 32-token prompt, then 256 new tokens; tok/s = 256 /
    (time(generate 257) - time(generate 1)), so prefill and set-up cancel out;
  - prefill: one 2,048-token forward (logits of the last position only), median of 3.
"""
import json
import statistics
import sys
import time

import torch
import transformers
from transformers import AutoModelForCausalLM


def timed(fn, reps):
    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main():
    hf_dir, out = sys.argv[1], sys.argv[2]
    try:
        model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.bfloat16)
    except TypeError:  # transformers < 4.56 spells it torch_dtype
        model = AutoModelForCausalLM.from_pretrained(hf_dir, torch_dtype=torch.bfloat16)
    model = model.cuda().eval()
    vocab = model.config.vocab_size
    g = torch.Generator().manual_seed(1)
    prompt = torch.randint(3, vocab, (1, 32), generator=g).cuda()
    long_ids = torch.randint(3, vocab, (1, 2048), generator=g).cuda()

    with torch.no_grad():
        # Prefill, eager (torch.compile of a 2,048-token shape would only add compile time).
        def prefill():
            try:
                model(input_ids=long_ids, use_cache=False, logits_to_keep=1)
            except TypeError:
                model(input_ids=long_ids, use_cache=False)
        prefill()
        t_prefill = timed(prefill, 3)

        # generate() compiles the decoding step itself when the cache is static
        # (transformers >= 4.48); compiling model.forward by hand breaks its CUDA graphs.
        model.generation_config.cache_implementation = "static"
        if hasattr(transformers, "CompileConfig"):
            model.generation_config.compile_config = transformers.CompileConfig(fullgraph=True, mode="reduce-overhead")

        def gen(n):
            return lambda: model.generate(prompt, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                                          pad_token_id=0)
        t0 = time.perf_counter()
        for _ in range(3):  # compile and capture the graphs
            gen(16)()
        t_compile = time.perf_counter() - t0
        t1 = timed(gen(1), 3)
        t257 = timed(gen(257), 3)

    res = {
        "engine": f"transformers {transformers.__version__}, torch {torch.__version__}",
        "gpu": torch.cuda.get_device_name(),
        "decode_tok_s": 256 / (t257 - t1),
        "prefill_2048_tok_s": 2048 / t_prefill,
        "warmup_compile_s": t_compile,
        "decode_compiled": getattr(model, "_compiled_call", None) is not None,
    }
    print(json.dumps(res, indent=1))
    with open(out, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
