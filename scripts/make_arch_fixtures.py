#!/usr/bin/env python3
"""Build tiny random-weight reference models for several architectures.

For each architecture (qwen2, qwen3, mistral, llama3) this writes

    <out>/<name>/config.json         as written by transformers' save_pretrained
    <out>/<name>/model.safetensors   float32 weights
    <out>/<name>/reference.json      reference logits / greedy continuation

The reference numbers are computed with Hugging Face transformers in float32
on the CPU (eager attention, TF32 off, no KV cache) from the model reloaded
from the saved folder, so the folder alone reproduces them.

Needs torch, transformers (4.4x or 5.x), safetensors, numpy.  Usage:

    python3 scripts/make_arch_fixtures.py [--out tests/fixtures/arch]
"""

import argparse
import json
import os
import random
import sys

import numpy as np
import torch
import transformers
from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig,
                          MistralForCausalLM, Qwen2Config, Qwen2ForCausalLM,
                          Qwen3Config, Qwen3ForCausalLM)

TF_MAJOR = int(transformers.__version__.split(".")[0])

WEIGHT_STD = 0.15      # linear weights
BIAS_STD = 0.2         # q/k/v biases (qwen2)
EMBED_STD = 0.5        # token embeddings (untied)
TIED_EMBED_STD = 0.2   # tied: the embedding is also the lm_head, keep logits ~N(0,1.6^2)
NORM_LO, NORM_HI = 0.5, 1.5  # every RMSNorm weight ~ U[0.5, 1.5]

LONG_LEN = 48
SHORT_LEN = 7
GREEDY_STEPS = 16
POS_VOCAB = 8          # all-position logits are stored for ids [0, POS_VOCAB)


def rope_kwargs(theta, scaling=None):
    """Rope settings in the format of the installed transformers."""
    if TF_MAJOR >= 5:
        params = {"rope_type": "default", "rope_theta": float(theta)}
        if scaling:
            params = dict(scaling)
            params["rope_theta"] = float(theta)
        return {"rope_parameters": params}
    kw = {"rope_theta": float(theta)}
    if scaling:
        kw["rope_scaling"] = dict(scaling)
    return kw


COMMON = dict(
    vocab_size=512,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    rms_norm_eps=1e-6,
    max_position_embeddings=512,
    hidden_act="silu",
    bos_token_id=None,
    eos_token_id=None,
    pad_token_id=None,
)

LLAMA3_SCALING = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 64,
}

ARCHS = [
    {
        "name": "qwen2",
        "config_cls": Qwen2Config,
        "model_cls": Qwen2ForCausalLM,
        "seed": 1001,
        "kwargs": dict(COMMON, num_key_value_heads=2, tie_word_embeddings=False,
                       use_sliding_window=False, **rope_kwargs(1e6)),
        "exercises": "q/k/v projection biases (non-zero), GQA 4:2, head_dim 16, "
                     "rope_theta 1e6, untied lm_head",
    },
    {
        "name": "qwen3",
        "config_cls": Qwen3Config,
        "model_cls": Qwen3ForCausalLM,
        "seed": 1002,
        "kwargs": dict(COMMON, num_key_value_heads=2, head_dim=32,
                       tie_word_embeddings=True, attention_bias=False,
                       use_sliding_window=False, **rope_kwargs(1e6)),
        "exercises": "per-head q_norm/k_norm RMSNorm (random weights) applied before "
                     "rope, explicit head_dim 32 != hidden/heads (q_proj 64->128, "
                     "o_proj 128->64), GQA 4:2, tied embeddings (no lm_head.weight "
                     "in the safetensors)",
    },
    {
        "name": "mistral",
        "config_cls": MistralConfig,
        "model_cls": MistralForCausalLM,
        "seed": 1003,
        "kwargs": dict(COMMON, num_key_value_heads=1, tie_word_embeddings=False,
                       sliding_window=None, **rope_kwargs(1e4)),
        "exercises": "GQA 4:1 (single KV head), sliding_window null, untied lm_head",
    },
    {
        "name": "llama3",
        "config_cls": LlamaConfig,
        "model_cls": LlamaForCausalLM,
        "seed": 1004,
        "kwargs": dict(COMMON, num_key_value_heads=2, tie_word_embeddings=False,
                       attention_bias=False, mlp_bias=False,
                       **rope_kwargs(5e5, LLAMA3_SCALING)),
        "exercises": "Llama-3 rope scaling (factor 8, low/high freq factor 1/4, "
                     "original_max_position_embeddings 64 so that at head_dim 16 "
                     "some frequencies are kept, some smoothed and some divided by 8), "
                     "rope_theta 5e5, GQA 4:2, untied lm_head",
    },
]


def f32(v):
    """Shortest decimal that round-trips the float32 value."""
    return float(str(np.float32(v)))


def f32list(t):
    return [f32(v) for v in t.detach().to(torch.float32).reshape(-1).tolist()]


def reinit(model, seed, embed_std):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():  # tied params appear once
            if "norm" in name:
                p.copy_(torch.rand(p.shape, generator=g) * (NORM_HI - NORM_LO) + NORM_LO)
            elif name.endswith(".bias"):
                p.copy_(torch.randn(p.shape, generator=g) * BIAS_STD)
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=g) * embed_std)
            else:
                p.copy_(torch.randn(p.shape, generator=g) * WEIGHT_STD)


@torch.no_grad()
def logits_of(model, ids):
    x = torch.tensor([ids], dtype=torch.long)
    out = model(input_ids=x, use_cache=False)
    return out.logits[0]  # [T, V]


def greedy(model, prompt, steps):
    seq = list(prompt)
    ids, margins = [], []
    for _ in range(steps):
        last = logits_of(model, seq)[-1]
        top2 = torch.topk(last, 2)
        nxt = int(top2.indices[0])
        margins.append(f32(top2.values[0] - top2.values[1]))
        ids.append(nxt)
        seq.append(nxt)
    return ids, margins


def stats(t):
    t = t.double()
    return {"min": f32(t.min()), "max": f32(t.max()), "mean": f32(t.mean()),
            "std": f32(t.std())}


def build(arch, out_root):
    name = arch["name"]
    folder = os.path.join(out_root, name)
    os.makedirs(folder, exist_ok=True)

    torch.manual_seed(arch["seed"])
    cfg = arch["config_cls"](**arch["kwargs"])
    cfg._attn_implementation = "eager"
    model = arch["model_cls"](cfg).to(torch.float32).eval()
    embed_std = TIED_EMBED_STD if cfg.tie_word_embeddings else EMBED_STD
    reinit(model, arch["seed"], embed_std)
    emb = model.get_input_embeddings().weight
    head = model.get_output_embeddings().weight
    if cfg.tie_word_embeddings != (emb.data_ptr() == head.data_ptr()):
        raise SystemExit(f"{name}: tie_word_embeddings not honoured")
    for pname, p in model.named_parameters():
        if float(p.detach().abs().max()) == 0.0:
            raise SystemExit(f"{name}: parameter {pname} is all zero")
    model.save_pretrained(folder, safe_serialization=True)
    for extra in ("generation_config.json",):
        p = os.path.join(folder, extra)
        if os.path.exists(p):
            os.remove(p)

    # Reload from disk: the reference must come from exactly what was saved.
    ref_model = arch["model_cls"].from_pretrained(
        folder, attn_implementation="eager", dtype=torch.float32
    ) if TF_MAJOR >= 5 else arch["model_cls"].from_pretrained(
        folder, attn_implementation="eager", torch_dtype=torch.float32)
    ref_model = ref_model.to(torch.float32).eval()
    with torch.no_grad():
        sd0 = model.state_dict()
        for k, v in ref_model.state_dict().items():
            if k in sd0 and not torch.equal(sd0[k], v):
                raise SystemExit(f"{name}: reloaded tensor {k} differs")

    rng = random.Random(arch["seed"] + 77)
    V = cfg.vocab_size
    seqs = {
        "long": [rng.randrange(V) for _ in range(LONG_LEN)],
        "short": [rng.randrange(V) for _ in range(SHORT_LEN)],
    }

    model64 = arch["model_cls"].from_pretrained(
        folder, attn_implementation="eager").to(torch.float64).eval()

    seq_out = {}
    for key, ids in seqs.items():
        lg = logits_of(ref_model, ids)
        lg_same = logits_of(model, ids)
        if not torch.equal(lg, lg_same):
            print(f"  note: {name}/{key}: reloaded vs in-memory max diff "
                  f"{(lg - lg_same).abs().max().item():.3g}")
        lg64 = logits_of(model64, ids)
        if not torch.isfinite(lg).all():
            raise SystemExit(f"{name}: non-finite logits")
        entry = {
            "input_ids": ids,
            "last_logits": f32list(lg[-1]),
            "last_argmax": int(lg[-1].argmax()),
            "all_positions_logits_first8": [f32list(lg[t, :POS_VOCAB])
                                            for t in range(lg.shape[0])],
            "logit_stats": stats(lg),
            "max_abs_diff_f32_vs_f64": f32((lg.double() - lg64).abs().max()),
        }
        seq_out[key] = entry
        print(f"  {name}/{key}: T={len(ids)} stats={entry['logit_stats']} "
              f"f32-vs-f64={entry['max_abs_diff_f32_vs_f64']:.3g}")

    g_ids, g_margins = greedy(ref_model, seqs["short"], GREEDY_STEPS)
    seq_out["short"]["greedy_ids"] = g_ids
    seq_out["short"]["greedy_top1_minus_top2"] = g_margins
    print(f"  {name}: greedy {g_ids} min margin {min(g_margins):.4g}")

    inv_freq = None
    rot = getattr(ref_model.model, "rotary_emb", None)
    if rot is not None and hasattr(rot, "inv_freq"):
        inv_freq = f32list(rot.inv_freq)

    with open(os.path.join(folder, "config.json")) as f:
        saved_cfg = json.load(f)

    ref = {
        "model": name,
        "architecture": arch["model_cls"].__name__,
        "exercises": arch["exercises"],
        "versions": {"transformers": transformers.__version__,
                     "torch": torch.__version__, "numpy": np.__version__,
                     "python": sys.version.split()[0]},
        "how": "Random weights (seed %d): RMSNorm weights ~U[%g,%g], linear weights "
               "~N(0,%g^2), q/k/v biases ~N(0,%g^2), embeddings ~N(0,%g^2). Saved with "
               "save_pretrained (float32 safetensors), reloaded from the folder, and "
               "evaluated on CPU in float32, eager attention, TF32 off, no KV cache, "
               "no attention mask, positions 0..T-1, no BOS added."
               % (arch["seed"], NORM_LO, NORM_HI, WEIGHT_STD, BIAS_STD, embed_std),
        "fields": {
            "last_logits": "float32 logits of the last position, all vocab ids",
            "all_positions_logits_first8": "[position][id] float32 logits for ids 0..7 "
                                           "at every position",
            "greedy_ids": "16 argmax tokens continuing sequences.short; each step "
                          "recomputes the whole sequence",
            "greedy_top1_minus_top2": "logit gap of the chosen token over the "
                                      "runner-up at each greedy step",
            "max_abs_diff_f32_vs_f64": "same model run in float64 (rope angles still "
                                       "float32 in transformers): a hint of float32 "
                                       "rounding noise",
            "rotary_inv_freq": "the model's rotary inv_freq buffer (after any rope "
                               "scaling)",
        },
        "config_kwargs": json.loads(json.dumps(arch["kwargs"])),
        "config": saved_cfg,
        "rotary_inv_freq": inv_freq,
        "sequences": seq_out,
    }
    with open(os.path.join(folder, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1)
        f.write("\n")
    for fn in sorted(os.listdir(folder)):
        print(f"  {name}/{fn}: {os.path.getsize(os.path.join(folder, fn))} bytes")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "arch"))
    ap.add_argument("--only", nargs="*", help="subset of names")
    args = ap.parse_args()

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_default_dtype(torch.float32)
    torch.use_deterministic_algorithms(True)
    print(f"transformers {transformers.__version__} torch {torch.__version__}")
    for arch in ARCHS:
        if args.only and arch["name"] not in args.only:
            continue
        print(f"[{arch['name']}]")
        build(arch, os.path.abspath(args.out))


if __name__ == "__main__":
    main()
