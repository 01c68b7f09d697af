"""BF16 checkpoint laid out like Qwen/Qwen3.6-35B-A3B: nested config, model.language_model.* names,
fused 3-D experts (no .weight suffix), A_log and linear_attn.norm.weight stored F32.

transformers 5.x save_pretrained would NOT produce this layout: its qwen3_5_moe_text conversion
mapping (inherited from qwen2_moe) splits experts into per-expert 2-D tensors on save and casts
A_log/norm to the model dtype. So the state dict is written directly.
"""
import os

import torch

from checkpoint_writer import save_checkpoint, write_json
from tiny_model import F32_PARAM_SUFFIXES, TINY_GENERATION_CONFIG


def bf16_release_tensors(master):
    out = {}
    for name, t in master.state_dict().items():
        if name.endswith(F32_PARAM_SUFFIXES):
            out[name] = t.detach().to(torch.float32).clone()
        else:
            out[name] = t.detach().to(torch.bfloat16).clone()
    return out


def write_config(master, out_dir):
    cfg = master.config
    cfg.architectures = ["Qwen3_5MoeForConditionalGeneration"]
    d = cfg.to_dict()
    d["dtype"] = "bfloat16"
    d["text_config"]["dtype"] = "bfloat16"
    write_json(os.path.join(out_dir, "config.json"), d)
    write_json(os.path.join(out_dir, "generation_config.json"), TINY_GENERATION_CONFIG)


def export_bf16(master, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    save_checkpoint(bf16_release_tensors(master), out_dir, n_shards=2)
    write_config(master, out_dir)
