"""Numpy dequantization of every checkpoint format, back to the dense HF text-model layout.

Torch-free on purpose: the default tests use it to check the committed files, and make_tiny_models.py
uses it to build the weights the goldens are computed from ("transformers on the dequantized weights").
Formulas (docs/quant-formats.md §5.1, src/tensor/int4_gptq.h; checked against ModelOpt/AutoRound in
tests/test_reference_tools.py):
  FP8 block (Qwen):   W = fp8 * weight_scale_inv[r // 128, c // 128]
  FP8 tensor (ModelOpt): W = fp8 * weight_scale
  NVFP4 (ModelOpt):   W = e2m1(nibble) * e4m3(weight_scale[r, c // 16]) * weight_scale_2   (low nibble = even column)
  INT4 (auto_gptq packing, sym): q = 4-bit field (8 per int32 along K, low bits first),
                      zero = qzeros field + 1, W[k, n] = (q - zero) * scales[k // group, n]; stored [K, N] -> W^T
"""
import json
import os
import re

import numpy as np

from safetensors_np import load_checkpoint_raw, to_f32

E2M1_VALUES = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32)


def dequant_fp8_block(w_u8, scale_f32, block=(128, 128)):
    from safetensors_np import E4M3_LUT
    n, k = w_u8.shape
    bn, bk = block
    s = np.repeat(np.repeat(scale_f32, bn, axis=0), bk, axis=1)[:n, :k]  # ceil-div blocks: crop the edge
    return E4M3_LUT[w_u8] * s


def dequant_fp8_tensor(w_u8, scale_f32):
    from safetensors_np import E4M3_LUT
    return E4M3_LUT[w_u8] * np.float32(scale_f32)


def unpack_nvfp4(w_u8):
    """[N, K/2] packed bytes -> [N, K] nibble codes (element 2j in the low nibble of byte j)."""
    n, half = w_u8.shape
    codes = np.empty((n, half * 2), dtype=np.uint8)
    codes[:, 0::2] = w_u8 & 0x0F
    codes[:, 1::2] = w_u8 >> 4
    return codes


def dequant_nvfp4(w_u8, scale_u8, scale_2, group=16):
    from safetensors_np import E4M3_LUT
    vals = E2M1_VALUES[unpack_nvfp4(w_u8)]
    block_scale = np.repeat(E4M3_LUT[scale_u8], group, axis=1)
    # fp32 products, in the order ModelOpt's dequantize uses: e2m1 * (block_scale * scale_2)
    return vals * (block_scale * np.float32(scale_2))


def unpack_int32_nibbles(packed, axis):
    """Unpack 8 4-bit fields per int32 (field i = bits 4i..4i+3) along `axis`."""
    u = packed.view(np.uint32)
    fields = [(u >> (4 * i)) & 0xF for i in range(8)]
    stacked = np.stack(fields, axis=axis + 1)  # [..., n, 8, ...]
    shape = list(packed.shape)
    shape[axis] *= 8
    return stacked.reshape(shape).astype(np.int32)


def dequant_gptq_int4(qweight, qzeros, scales_f32, group, zero_offset=1):
    """auto_gptq packing: qweight [K/8, N] int32, qzeros [K/g, N/8] int32, scales [K/g, N]. Returns W [N, K]."""
    q = unpack_int32_nibbles(qweight, axis=0)          # [K, N]
    z = unpack_int32_nibbles(qzeros, axis=1) + zero_offset  # [K/g, N]
    k = q.shape[0]
    gi = np.arange(k) // group
    w = (q - z[gi]).astype(np.float32) * scales_f32[gi]
    return w.T.copy()


def read_json(path):
    with open(path) as f:
        return json.load(f)


def detect_format(model_dir):
    cfg = read_json(os.path.join(model_dir, "config.json"))
    q = cfg.get("quantization_config")
    if q is None:
        return "bf16"
    method = q.get("quant_method")
    if method == "fp8":
        return "fp8"
    if method == "modelopt":
        return "nvfp4"
    if method == "auto-round":
        return "int4"
    raise ValueError(f"{model_dir}: unknown quant_method {method!r}")


TEXT_PREFIX = "model.language_model."


def load_dense_text_state(model_dir):
    """Dequantized text-model weights as float32 numpy arrays, named like Qwen3_5MoeForCausalLM's
    state dict (model.layers.N..., lm_head.weight), experts fused ([E, 2I, H] / [E, H, I])."""
    fmt = detect_format(model_dir)
    cfg = read_json(os.path.join(model_dir, "config.json"))
    raw = load_checkpoint_raw(model_dir)
    dense = {}
    consumed = set()

    def get(name):
        consumed.add(name)
        dt, _, arr = raw[name]
        return dt, arr

    modules = sorted({k.rsplit(".", 1)[0] for k in raw})
    for mod in modules:
        if mod.startswith("model.visual") or mod.startswith("mtp"):
            continue
        keys = {k.rsplit(".", 1)[1] for k in raw if k.rsplit(".", 1)[0] == mod}
        if "weight_scale_inv" in keys:        # Qwen block FP8
            _, w = get(mod + ".weight")
            dt, s = get(mod + ".weight_scale_inv")
            blk = tuple(cfg["quantization_config"]["weight_block_size"])
            dense[mod + ".weight"] = dequant_fp8_block(w, to_f32(dt, s), blk)
        elif "weight_scale_2" in keys:       # ModelOpt NVFP4
            _, w = get(mod + ".weight")
            _, s = get(mod + ".weight_scale")
            _, s2 = get(mod + ".weight_scale_2")
            dense[mod + ".weight"] = dequant_nvfp4(w, s, s2.reshape(()))
            if mod + ".input_scale" in raw:
                get(mod + ".input_scale")
        elif "weight_scale" in keys:         # ModelOpt FP8 per-tensor
            _, w = get(mod + ".weight")
            _, s = get(mod + ".weight_scale")
            dense[mod + ".weight"] = dequant_fp8_tensor(w, s.reshape(()))
            if mod + ".input_scale" in raw:
                get(mod + ".input_scale")
        elif "qweight" in keys:              # AutoRound / GPTQ int4
            _, qw = get(mod + ".qweight")
            _, qz = get(mod + ".qzeros")
            dt, sc = get(mod + ".scales")
            group = cfg["quantization_config"]["group_size"]
            dense[mod + ".weight"] = dequant_gptq_int4(qw, qz, to_f32(dt, sc), group)
            if mod + ".g_idx" in raw:
                get(mod + ".g_idx")
        else:
            for leaf in keys:
                dt, arr = get(mod + "." + leaf)
                dense[mod + "." + leaf] = to_f32(dt, arr)
    leftovers = [k for k in raw if k not in consumed and not k.startswith(("model.visual", "mtp"))]
    if leftovers:
        raise ValueError(f"{model_dir} ({fmt}): tensors not understood: {leftovers[:5]}")

    # Per-expert 2-D tensors -> HF fused experts.
    text_cfg = cfg["text_config"]
    n_exp, inter = text_cfg["num_experts"], text_cfg["moe_intermediate_size"]
    out = {}
    expert_re = re.compile(r"^(.*\.mlp\.experts)\.(\d+)\.(gate|up|down)_proj\.weight$")
    per_layer = {}
    for name, arr in dense.items():
        m = expert_re.match(name)
        if m:
            per_layer.setdefault(m.group(1), {})[(int(m.group(2)), m.group(3))] = arr
        else:
            out[name] = arr
    for prefix, parts in per_layer.items():
        if len(parts) != 3 * n_exp:
            raise ValueError(f"{model_dir}: {prefix} has {len(parts)} expert projections, want {3 * n_exp}")
        out[prefix + ".gate_up_proj"] = np.stack(
            [np.concatenate([parts[(e, "gate")], parts[(e, "up")]], axis=0) for e in range(n_exp)])
        out[prefix + ".down_proj"] = np.stack([parts[(e, "down")] for e in range(n_exp)])
        assert out[prefix + ".gate_up_proj"].shape[1] == 2 * inter

    renamed = {}
    for name, arr in out.items():
        if name.startswith(TEXT_PREFIX):
            renamed["model." + name[len(TEXT_PREFIX):]] = arr
        elif name == "lm_head.weight":
            renamed[name] = arr
        else:
            raise ValueError(f"{model_dir}: unexpected tensor {name}")
    return renamed
