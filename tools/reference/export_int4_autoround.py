"""INT4 W4A16 checkpoint produced by Intel AutoRound itself on CPU, in the layout of Intel's
Qwen3.5/3.6 int4-AutoRound releases: quant_method "auto-round", packing_format
"auto_round:auto_gptq", bits 4, group_size 128, sym true; per-expert 2-D experts; qweight int32
[K/8, N], qzeros int32 [K/128, N/8] (stored zero - 1, i.e. 7 for sym), scales F16 [K/128, N]; no g_idx.
Layers AutoRound keeps in 16 bits are listed in quantization_config.extra_config (router mlp.gate and
shared_expert_gate by AutoRound's MoE defaults; in_proj_a/b because their 8 rows are not a multiple
of 32 in the tiny model).

Difference from Intel's release, on purpose: iters=0 (RTN, no calibration data, deterministic) instead
of the default 200 tuning iterations; the format is identical.
"""
import os
import shutil
import tempfile

import torch

from checkpoint_writer import write_json
from tiny_model import TINY_GENERATION_CONFIG


def export_int4_autoround(bf16_dir, out_dir):
    from auto_round import AutoRound
    from transformers import Qwen3_5MoeForConditionalGeneration

    model = Qwen3_5MoeForConditionalGeneration.from_pretrained(bf16_dir, dtype=torch.bfloat16).eval()
    ar = AutoRound(model, tokenizer=None, bits=4, group_size=128, sym=True, iters=0,
                   disable_opt_rtn=True, device_map="cpu")
    with tempfile.TemporaryDirectory() as tmp:
        ar.quantize_and_save(tmp, format="auto_round")
        src = None
        for root, _, files in os.walk(tmp):
            if "config.json" in files:
                src = root
        if src is None:
            raise RuntimeError("AutoRound wrote no config.json")
        os.makedirs(out_dir, exist_ok=True)
        for fn in sorted(os.listdir(src)):
            shutil.copy(os.path.join(src, fn), os.path.join(out_dir, fn))
    write_json(os.path.join(out_dir, "generation_config.json"), TINY_GENERATION_CONFIG)
    return sorted(os.listdir(out_dir))
