"""NVIDIA ModelOpt NVFP4 mixed-precision checkpoint, produced by ModelOpt itself on CPU with the recipe
the real nvidia/Qwen3.6-35B-A3B-NVFP4 release names: huggingface/qwen3_5_moe/ptq/
w4a16_nvfp4-fp8_attn-kv_fp8_cast (W4A16 NVFP4 routed + shared experts and lm_head, FP8 W8A8 per-tensor
attention and GDN in_proj_qkv/in_proj_z/out_proj, FP8 KV cast with constant amax, the rest BF16).

The model is loaded from the BF16 checkpoint exactly as a user would (from_pretrained, bf16), so
A_log / linear_attn.norm come out BF16, as ModelOpt exports them. Calibration ("max") runs on a few
deterministic random token sequences; it only sets the FP8 input_scale of the W8A8 layers.
Two documented post-steps make the files match the published release where ModelOpt 0.47 differs:
add_w4a16_input_scales and match_release_config (below).
"""
import json
import os
import shutil
import tempfile

import torch

from checkpoint_writer import write_json
from tiny_model import TINY_GENERATION_CONFIG

# input_scale = amax(x) / (E2M1_MAX * E4M3_MAX): docs/quant-formats.md §1.4
NVFP4_INPUT_SCALE_DIVISOR = 6.0 * 448.0

RECIPE = "huggingface/qwen3_5_moe/ptq/w4a16_nvfp4-fp8_attn-kv_fp8_cast"


def calibration_batches(seed, n=4, length=64, vocab=500):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, (1, length), generator=g) for _ in range(n)]


@torch.no_grad()
def w4a16_input_amax(model, batches):
    """Input amax of every W4A16 module, measured on the calibration batches.

    The published nvidia/Qwen3.6-35B-A3B-NVFP4 (ModelOpt 0.37/0.44) carries an `input_scale` on its
    W4A16 modules although W4A16 never quantizes activations (docs/quant-formats.md §1.4: vLLM loads and
    ignores them); ModelOpt 0.47 no longer writes them. We add them, computed the way ModelOpt computes
    an NVFP4 input scale (amax / 2688; one input quantizer per projection type shared by all experts of
    a layer), so loaders meet the release's tensor set."""
    amax = {}

    def note(name, x):
        v = float(x.detach().abs().amax().float())
        amax[name] = max(amax.get(name, 0.0), v)

    hooks = []
    for name, mod in model.named_modules():
        if name.endswith(("mlp.shared_expert.gate_proj", "mlp.shared_expert.up_proj",
                          "mlp.shared_expert.down_proj")) or name == "lm_head":
            hooks.append(mod.register_forward_pre_hook(lambda m, a, n=name: note(n, a[0])))
        elif name.endswith("mlp.experts") and hasattr(mod, "gate_up_proj"):
            def experts_hook(m, args, n=name):
                hidden, top_idx = args[0], args[1]
                inter = m.gate_up_proj.shape[1] // 2
                for e in top_idx.unique().tolist():
                    x = hidden[(top_idx == e).any(dim=-1)]
                    note(n + ".gate_up", x)
                    gate, up = torch.nn.functional.linear(x, m.gate_up_proj[e]).split(inter, dim=-1)
                    note(n + ".down", m.act_fn(gate) * up)
            hooks.append(mod.register_forward_pre_hook(experts_hook))
    for ids in batches:
        model(input_ids=ids)
    for h in hooks:
        h.remove()
    return amax


def add_w4a16_input_scales(out_dir, amax, num_experts):
    from safetensors.torch import load_file, save_file
    path = os.path.join(out_dir, "model.safetensors")
    tensors = load_file(path)
    for name, value in sorted(amax.items()):
        scale = torch.tensor(value / NVFP4_INPUT_SCALE_DIVISOR, dtype=torch.float32)
        if name.endswith(".gate_up") or name.endswith(".down"):
            base, kind = name.rsplit(".", 1)
            projs = ("gate_proj", "up_proj") if kind == "gate_up" else ("down_proj",)
            for e in range(num_experts):
                for proj in projs:
                    key = f"{base}.{e}.{proj}.input_scale"
                    assert f"{base}.{e}.{proj}.weight_scale_2" in tensors, key
                    tensors[key] = scale.clone()
        else:
            assert name + ".weight_scale_2" in tensors, name
            tensors[name + ".input_scale"] = scale.clone()
    save_file(tensors, path, metadata={"format": "pt"})


def match_release_config(out_dir):
    """Two quirks of the published config.json that ModelOpt 0.47 no longer produces, kept so that
    loaders are tested against them: (1) no `kv_cache_scheme` in config.json (FP8 KV is declared only
    by hf_quant_config.json's kv_cache_quant_algo), (2) the W4A16 config group declares 4-bit input
    activations although its layers are W4A16_NVFP4 in quantized_layers."""
    path = os.path.join(out_dir, "config.json")
    with open(path) as f:
        cfg = json.load(f)
    q = cfg["quantization_config"]
    q.pop("kv_cache_scheme", None)
    for group in q["config_groups"].values():
        w = group["weights"]
        if w.get("num_bits") == 4 and "input_activations" not in group:
            group["input_activations"] = {"dynamic": False, "num_bits": 4, "type": "float", "group_size": 16}
    write_json(path, cfg)


def export_nvfp4_modelopt(bf16_dir, out_dir, calib_seed, batches=None, generation_config=TINY_GENERATION_CONFIG):
    """batches: calibration token-id tensors [1, T] (default: calibration_batches(calib_seed), random ids of
    the tiny vocabulary); a trained model must be calibrated on what it sees (the canary model)."""
    import modelopt.torch.quantization as mtq
    from modelopt.recipe import load_recipe
    from modelopt.torch.export import export_hf_checkpoint
    from transformers import Qwen3_5MoeForConditionalGeneration

    model = Qwen3_5MoeForConditionalGeneration.from_pretrained(bf16_dir, dtype=torch.bfloat16).eval()
    quant_cfg = load_recipe(RECIPE).quantize.model_dump()
    if batches is None:
        batches = calibration_batches(calib_seed)

    def forward_loop(m):
        with torch.no_grad():
            for ids in batches:
                m(input_ids=ids)

    input_amax = w4a16_input_amax(model, batches)
    model = mtq.quantize(model, quant_cfg, forward_loop=forward_loop)
    with tempfile.TemporaryDirectory() as tmp:
        with torch.no_grad():
            export_hf_checkpoint(model, export_dir=tmp)
        os.makedirs(out_dir, exist_ok=True)
        for fn in sorted(os.listdir(tmp)):
            shutil.copy(os.path.join(tmp, fn), os.path.join(out_dir, fn))
    add_w4a16_input_scales(out_dir, input_amax, model.config.text_config.num_experts)
    match_release_config(out_dir)
    # The release ships the original generation_config.json; ModelOpt writes HF's default one.
    write_json(os.path.join(out_dir, "generation_config.json"), generation_config)
    return sorted(os.listdir(out_dir))
