"""Qwen block-FP8 checkpoint laid out like Qwen/Qwen3.6-35B-A3B-FP8.

Every projection GEMM is F8_E4M3 with a `weight_scale_inv` per 128x128 block (ceil-div blocks at the
edges, as Qwen/DeepSeek block FP8 does); experts are per-expert 2-D tensors
`mlp.experts.{e}.{gate,up,down}_proj.weight`. Dense (listed in modules_to_not_convert, mirroring the
release's list): embeddings, lm_head, norms, A_log, dt_bias, conv1d, in_proj_a/b, router, shared
expert gate and the vision tower. `weight_scale_inv` is BF16 as in the release's headers
([CENSUS], docs/model-arch.md §0); it is the dequant multiplier: W = fp8 * weight_scale_inv.
"""
import os
import re

import torch

from checkpoint_writer import load_checkpoint_torch, save_checkpoint, write_json
from decoder_layout import layer_kinds
from tiny_model import TINY_GENERATION_CONFIG

BLOCK = (128, 128)
FP8_MAX = 448.0

QUANTIZED_SUFFIXES = (
    "linear_attn.in_proj_qkv.weight", "linear_attn.in_proj_z.weight", "linear_attn.out_proj.weight",
    "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight",
    "mlp.shared_expert.gate_proj.weight", "mlp.shared_expert.up_proj.weight", "mlp.shared_expert.down_proj.weight",
)


def quantize_block_fp8(w, block=BLOCK, scale_dtype=torch.bfloat16):
    """w [N, K] -> (fp8 [N, K], scale_inv [ceil(N/bn), ceil(K/bk)]) with W ~= fp8 * scale_inv."""
    w = w.to(torch.float32)
    n, k = w.shape
    bn, bk = block
    nb, kb = -(-n // bn), -(-k // bk)
    padded = torch.zeros(nb * bn, kb * bk, dtype=torch.float32)
    padded[:n, :k] = w
    blocks = padded.view(nb, bn, kb, bk)
    amax = blocks.abs().amax(dim=(1, 3))
    scale = torch.where(amax > 0, amax / FP8_MAX, torch.ones_like(amax)).to(scale_dtype)
    full = scale.to(torch.float32).repeat_interleave(bn, 0).repeat_interleave(bk, 1)[:n, :k]
    q = (w / full).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q, scale


def modules_to_not_convert(text_cfg, vision_depth):
    """The release's list, instantiated for the tiny model (sorted; includes the release's
    `model.embed_tokens` spelling and the Qwen3-Next-era `in_proj_ba` entry that matches nothing)."""
    names = ["lm_head", "model.embed_tokens"]
    for i, kind in enumerate(layer_kinds(text_cfg)):
        p = f"model.language_model.layers.{i}."
        names += [p + "input_layernorm", p + "post_attention_layernorm", p + "mlp.gate", p + "mlp.shared_expert_gate"]
        if kind == "linear_attention":
            names += [p + "linear_attn." + s for s in ("A_log", "conv1d", "dt_bias", "in_proj_a", "in_proj_b",
                                                        "in_proj_ba", "norm")]
        else:
            names += [p + "self_attn.k_norm", p + "self_attn.q_norm"]
    for b in range(vision_depth):
        p = f"model.visual.blocks.{b}."
        names += [p + "attn.proj", p + "attn.qkv", p + "mlp.linear_fc1", p + "mlp.linear_fc2"]
    names += ["model.visual.merger.linear_fc1", "model.visual.merger.linear_fc2"]
    return sorted(names)


def export_fp8_block(bf16_dir, out_dir):
    import json
    os.makedirs(out_dir, exist_ok=True)
    src = load_checkpoint_torch(bf16_dir)
    with open(os.path.join(bf16_dir, "config.json")) as f:
        cfg = json.load(f)
    text_cfg = cfg["text_config"]
    out = {}
    fused = re.compile(r"^(.*\.mlp\.experts)\.(gate_up_proj|down_proj)$")
    for name, t in src.items():
        m = fused.match(name)
        if m and m.group(2) == "gate_up_proj":
            inter = t.shape[1] // 2
            for e in range(t.shape[0]):
                for proj, rows in (("gate_proj", t[e, :inter]), ("up_proj", t[e, inter:])):
                    q, s = quantize_block_fp8(rows)
                    out[f"{m.group(1)}.{e}.{proj}.weight"] = q
                    out[f"{m.group(1)}.{e}.{proj}.weight_scale_inv"] = s
        elif m:
            for e in range(t.shape[0]):
                q, s = quantize_block_fp8(t[e])
                out[f"{m.group(1)}.{e}.down_proj.weight"] = q
                out[f"{m.group(1)}.{e}.down_proj.weight_scale_inv"] = s
        elif name.startswith("model.language_model.") and name.endswith(QUANTIZED_SUFFIXES):
            q, s = quantize_block_fp8(t)
            out[name] = q
            out[name[: -len(".weight")] + ".weight_scale_inv"] = s
        else:
            out[name] = t  # dense, dtype unchanged (A_log / linear_attn.norm stay F32)
    save_checkpoint(out, out_dir, n_shards=2)
    cfg["quantization_config"] = {
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "modules_to_not_convert": modules_to_not_convert(text_cfg, cfg["vision_config"]["depth"]),
        "quant_method": "fp8",
        "weight_block_size": list(BLOCK),
    }
    write_json(os.path.join(out_dir, "config.json"), cfg)
    write_json(os.path.join(out_dir, "generation_config.json"), TINY_GENERATION_CONFIG)
