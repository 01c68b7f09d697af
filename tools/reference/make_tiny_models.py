#!/usr/bin/env python3
"""Regenerates every tiny Qwen3.5-MoE checkpoint and its goldens under tests/data/models/.

  .venv/bin/python tools/reference/make_tiny_models.py [--out tests/data/models] [--only bf16,fp8,...]

Deterministic: fixed seeds, CPU only, single-threaded torch. Needs requirements-reference.txt
(torch, transformers 5.x, nvidia-modelopt, auto-round). See tools/reference/README.md.
"""
import argparse
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402

MODEL_SEED = 20261129
PROMPT_SEED = 4321  # first seed tried; greedy_margins.choose_prompts may move on to the next ones
CALIB_SEED = 777
HIDDEN_PROMPT_INDEX = 1  # the 7-token prompt: per-layer hidden states are stored for it
FORMATS = ("bf16", "fp8", "nvfp4", "int4")


def versions():
    import safetensors
    import transformers
    v = {"torch": torch.__version__, "transformers": transformers.__version__,
         "safetensors": safetensors.__version__, "numpy": np.__version__, "python": sys.version.split()[0]}
    for mod, key in (("modelopt", "nvidia-modelopt"), ("auto_round", "auto-round")):
        try:
            v[key] = __import__(mod).__version__
        except Exception as e:  # recorded, not fatal: only that format needs it
            v[key] = f"unavailable: {e}"
    return v


def check_bf16_loads_in_transformers(bf16_dir, dense_state, text_cfg):
    """The BF16 checkpoint must load with from_pretrained (fused experts, nested names) and give
    exactly the logits of our CausalLM built from the same weights."""
    from transformers import Qwen3_5MoeForConditionalGeneration
    from goldens import build_causal_lm
    ref = Qwen3_5MoeForConditionalGeneration.from_pretrained(
        bf16_dir, dtype=torch.bfloat16, attn_implementation="eager", experts_implementation="eager").eval()
    ours = build_causal_lm(text_cfg, dense_state, torch.bfloat16)
    ids = torch.tensor([[3, 141, 59, 265, 358, 97, 9, 323, 84, 62]])
    with torch.no_grad():
        a = ref(input_ids=ids).logits
        b = ours(input_ids=ids).logits
    if not torch.equal(a, b):
        raise RuntimeError(f"from_pretrained BF16 logits differ from the CausalLM reference: "
                           f"max |d| = {(a.float() - b.float()).abs().max().item()}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(HERE, "..", "..", "tests", "data", "models"))
    ap.add_argument("--only", default=",".join(FORMATS))
    args = ap.parse_args()
    only = [f for f in args.only.split(",") if f]
    for f in only:
        if f not in FORMATS:
            ap.error(f"unknown format {f!r}; choose from {FORMATS}")
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    from dequant import load_dense_text_state, read_json
    from export_bf16 import export_bf16
    from goldens import compute_goldens
    from greedy_margins import MIN_GREEDY_MARGIN, check_goldens_greedy, choose_prompts
    from tiny_model import LM_HEAD_BIGRAM_GAIN, TINY_TEXT_CONFIG, TINY_VISION_CONFIG, build_master_model

    out_root = os.path.abspath(args.out)
    dirs = {f: os.path.join(out_root, f"tiny-{f}") for f in FORMATS}
    vers = versions()

    # BF16 is the source of every other format: always (re)build it first.
    shutil.rmtree(dirs["bf16"], ignore_errors=True)
    master = build_master_model(MODEL_SEED)
    export_bf16(master, dirs["bf16"])
    del master
    # Prompts whose greedy continuations are decided by clear margins (greedy_margins.py), chosen on
    # the BF16 model and used for every format.
    bf16_text_cfg = read_json(os.path.join(dirs["bf16"], "config.json"))["text_config"]
    prompt_seed, prompts, min_margin = choose_prompts(
        bf16_text_cfg, load_dense_text_state(dirs["bf16"]), PROMPT_SEED,
        log=lambda m: print(m, flush=True))

    for fmt in only:
        d = dirs[fmt]
        if fmt == "fp8":
            from export_fp8_block import export_fp8_block
            shutil.rmtree(d, ignore_errors=True)
            export_fp8_block(dirs["bf16"], d)
            producer = "tools/reference/export_fp8_block.py (Qwen block FP8, 128x128, re-implemented)"
        elif fmt == "nvfp4":
            from export_nvfp4_modelopt import RECIPE, export_nvfp4_modelopt
            shutil.rmtree(d, ignore_errors=True)
            export_nvfp4_modelopt(dirs["bf16"], d, CALIB_SEED)
            producer = f"nvidia-modelopt {vers['nvidia-modelopt']} mtq.quantize + export_hf_checkpoint, recipe {RECIPE}, CPU"
        elif fmt == "int4":
            from export_int4_autoround import export_int4_autoround
            shutil.rmtree(d, ignore_errors=True)
            export_int4_autoround(dirs["bf16"], d)
            producer = f"auto-round {vers['auto-round']} AutoRound(bits=4, group_size=128, sym=True, iters=0), CPU"
        else:
            producer = "tools/reference/export_bf16.py (state dict of Qwen3_5MoeForConditionalGeneration)"

        cfg = read_json(os.path.join(d, "config.json"))
        dense = load_dense_text_state(d)
        if fmt == "bf16":
            check_bf16_loads_in_transformers(d, dense, cfg["text_config"])
        metadata = {
            "format": fmt,
            "producer": producer,
            "versions": vers,
            "seeds": {"model": MODEL_SEED, "prompts": prompt_seed, "calibration": CALIB_SEED},
            "lm_head_bigram_gain": LM_HEAD_BIGRAM_GAIN,
            "greedy_margin_criterion": (
                f"prompts chosen on the BF16 model (tools/reference/greedy_margins.py): for every prompt, "
                f"transformers' bf16 and f32 runs give the same 64 greedy tokens and every step's top-1 - top-2 "
                f"logit margin is >= {MIN_GREEDY_MARGIN} in both (min seen: {min_margin:.4f}); quantized formats "
                f"reuse these prompts without the check"),
            "min_greedy_margin": MIN_GREEDY_MARGIN,
            "model_class": "Qwen3_5MoeForCausalLM",
            "attn_implementation": "eager",
            "experts_implementation": "eager",
            "device": "cpu",
            "torch_num_threads": 1,
            "greedy": ("runs.<run>[i].greedy_tokens: 64 tokens, prefill then one-token decode steps with the "
                       "cache, token = argmax (first index among equal maxima); greedy_top2_margins: top1 - top2 "
                       "logit at each step (0 = tie)"),
            "weights": ("checkpoint tensors as stored" if fmt == "bf16" else
                        "dequantized to float32 by tools/reference/dequant.py (W = q * scales), activations "
                        "NOT quantized (no FP8/FP4 input quantization)"),
            "runs": {"bf16": "weights and activations bfloat16 (weights rounded from the dequantized f32)",
                     "f32": "weights and activations float32"},
            "gdn_kernels": ("transformers' torch fallbacks (torch_chunk_gated_delta_rule for prefill, chunk 64; "
                            "torch_recurrent_gated_delta_rule for 1-token decode; F.conv1d / torch_causal_conv1d_update): "
                            "flash-linear-attention and causal-conv1d are not installed"),
            "hidden_states": (f"prompt{HIDDEN_PROMPT_INDEX}/<run>/hidden_states [n_layers+1, T, hidden]: "
                              "transformers' output_hidden_states: index 0 = embeddings, i = output of decoder layer i-1 for "
                              "i < n_layers, index n_layers = output of the FINAL NORM (HF replaces the last layer's "
                              "output by norm(output)); lm_head(hidden_states[-1]) == logits"),
            "hidden_prompt_index": HIDDEN_PROMPT_INDEX,
            "step_logits": ("prompt<i>/bf16/step_logits [16, vocab]: row j = logits that chose greedy token j "
                            "(row 0 = last prefill position, rows >= 1 = one-token decode steps with the cache)"),
            "router": ("prompt<i>/<run>/router_topk [layers, T, top_k] i32 = experts chosen (HF order); "
                       "prompt<i>/<run>/router_margin [layers, T] f32 = p_k - p_(k+1) of the fp32 router softmax: "
                       "positions with a small margin may legitimately route differently in another implementation"),
            "tiny_text_config": TINY_TEXT_CONFIG,
            "tiny_vision_config": TINY_VISION_CONFIG,
        }
        doc = compute_goldens(cfg["text_config"], dense, prompts, HIDDEN_PROMPT_INDEX, d, metadata)
        if fmt == "bf16":
            check_goldens_greedy(doc)
        size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
        print(f"[make_tiny_models] {fmt}: {d} ({size / 1e6:.2f} MB)", flush=True)

    # The MTP block (BF16 model only) and its goldens; the trunk's goldens above are unaffected.
    if "bf16" in only:
        from make_tiny_mtp import add_mtp_to_tiny_models
        add_mtp_to_tiny_models(out_root, ("bf16",))


if __name__ == "__main__":
    main()
