"""Tiny vision tower checkpoint + goldens of its features, from transformers' own qwen3_5_moe classes.

Writes tests/data/models/tiny-vision/:
  config.json           the full Qwen3_5MoeConfig (tiny text config + the tiny vision config below), as the
                        release nests it (architectures Qwen3_5MoeForConditionalGeneration)
  model.safetensors     model.visual.* only, BF16, the release's names (the text weights are the tiny
                        models' business; leaving them out keeps the test data small)
  vision_goldens.json   index + metadata; vision_goldens.bin raw little-endian arrays:
                        per image its pixel_values (f32 [t*h*w, 3*2*16*16], HF's row order), and per case
                        the merger output of Qwen3_5MoeVisionModel (pooler_output) as f32 in two runs:
                        bf16 (weights and activations bf16, eager attention: what users run) and f32
                        (the same bf16-rounded weights in float32: how far bf16 itself is from exact).
Cases: each image alone, and two images in one call (cu_seqlens keeps their attention apart).

The tower keeps every structural property of the release's (Conv3d patch embed with temporal patch 2,
learned position table bilinearly interpolated from a square grid, 2-D rotary over the head dim, LayerNorm
blocks with gelu_pytorch_tanh MLP, 2x2 merger with exact GELU); widths are reduced. Grids are chosen
so the interpolation runs both up (10 rows from an 8-row table) and down (6 columns), with h != w.

Run: /tmp/refvenv/bin/python tools/reference/make_tiny_vision.py  (seconds; seeded, single-threaded).
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkpoint_writer import save_checkpoint, write_json  # noqa: E402
from tiny_model import TINY_SPECIAL_IDS, TINY_TEXT_CONFIG  # noqa: E402

SEED = 1919

TINY_VISION_TOWER_CONFIG = dict(
    depth=2,
    hidden_size=64,
    hidden_act="gelu_pytorch_tanh",
    intermediate_size=128,
    num_heads=4,                 # head_dim 16 -> rotary over 8 (h) + 8 (w) dims as 4 + 4 frequencies
    in_channels=3,
    patch_size=16,
    spatial_merge_size=2,
    temporal_patch_size=2,
    out_hidden_size=TINY_TEXT_CONFIG["hidden_size"],
    num_position_embeddings=64,  # an 8 x 8 table
    deepstack_visual_indexes=[],
    initializer_range=0.02,
)

# (t, h, w) patch grids of the golden images.
IMAGE_GRIDS = [(1, 10, 6), (1, 4, 8)]
CASES = [[0], [1], [0, 1]]


def randomize_visual_(visual, g):
    """Weights that make every op matter: LayerNorm weights around 1 with spread, non-zero biases,
    fan-in scaled projections, and a position table as large as the patch embedding's output."""
    def normal(t, std, mean=0.0):
        return (torch.randn(t.shape, generator=g, dtype=torch.float32) * std + mean).to(t.dtype)

    with torch.no_grad():
        for name, p in sorted(visual.named_parameters(), key=lambda kv: kv[0]):
            if "norm" in name and name.endswith("weight"):
                p.copy_(normal(p, 0.2, 1.0))
            elif name.endswith("pos_embed.weight"):
                p.copy_(normal(p, 0.5))
            elif p.dim() >= 2:
                p.copy_(normal(p, 1.0 / p[0].numel() ** 0.5))
            else:
                p.copy_(normal(p, 0.1))


def build_model():
    from transformers import Qwen3_5MoeConfig, Qwen3_5MoeForConditionalGeneration
    cfg = Qwen3_5MoeConfig(text_config=dict(TINY_TEXT_CONFIG), vision_config=dict(TINY_VISION_TOWER_CONFIG),
                           tie_word_embeddings=False, **TINY_SPECIAL_IDS)
    cfg._attn_implementation = "eager"
    cfg.vision_config._attn_implementation = "eager"
    cfg.text_config._attn_implementation = "eager"
    model = Qwen3_5MoeForConditionalGeneration(cfg).eval()
    randomize_visual_(model.model.visual, torch.Generator().manual_seed(SEED))
    return model


def load_visual(model_dir, dtype):
    from transformers import Qwen3_5MoeForConditionalGeneration
    from transformers.utils import logging
    logging.set_verbosity_error()
    model = Qwen3_5MoeForConditionalGeneration.from_pretrained(model_dir, dtype=dtype, attn_implementation="eager")
    visual = model.model.visual.eval()
    assert visual.config._attn_implementation == "eager", visual.config._attn_implementation
    return visual


def tower_output(visual, pixel_values, grids):
    grid = torch.tensor(grids, dtype=torch.int64)
    with torch.no_grad():
        out = visual(pixel_values.to(visual.dtype), grid_thw=grid)
    return out.pooler_output.float()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "models",
                                                   "tiny-vision"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    out_dir = os.path.abspath(args.out)
    os.makedirs(out_dir, exist_ok=True)

    model = build_model()
    visual = model.model.visual
    assert visual.config._attn_implementation == "eager", visual.config._attn_implementation
    tensors = {"model.visual." + k: v.detach().to(torch.bfloat16).clone() for k, v in visual.state_dict().items()}
    save_checkpoint(tensors, out_dir, n_shards=1)
    cfg = model.config
    cfg.architectures = ["Qwen3_5MoeForConditionalGeneration"]
    d = cfg.to_dict()
    d["dtype"] = "bfloat16"
    d["text_config"]["dtype"] = "bfloat16"
    for k in ("_attn_implementation", "_experts_implementation"):
        d.pop(k, None)
        d["text_config"].pop(k, None)
        d["vision_config"].pop(k, None)
    write_json(os.path.join(out_dir, "config.json"), d)

    # The references load the written checkpoint the way users do (from_pretrained; the text weights it
    # lacks are initialised and unused). Not visual.to(bfloat16): that would also cast the rotary's
    # inv_freq buffer to bf16, which from_pretrained keeps in fp32.
    visual_bf16 = load_visual(out_dir, torch.bfloat16)
    visual_f32 = load_visual(out_dir, torch.float32)
    assert visual_bf16.rotary_pos_emb.inv_freq.dtype == torch.float32

    g = torch.Generator().manual_seed(SEED + 1)
    patch_dim = 3 * 2 * 16 * 16
    images = [torch.randn((t * h * w, patch_dim), generator=g, dtype=torch.float32) for t, h, w in IMAGE_GRIDS]

    blob = bytearray()
    index = {"images": [], "cases": []}

    def put(arr, dtype):
        a = np.ascontiguousarray(arr, dtype=dtype)
        off = len(blob)
        blob.extend(a.tobytes())
        return {"offset": off, "shape": list(a.shape), "dtype": "f32"}

    for grid, px in zip(IMAGE_GRIDS, images):
        index["images"].append({"grid_thw": list(grid), "pixel_values": put(px.numpy(), np.float32)})
    for case in CASES:
        px = torch.cat([images[i] for i in case])
        grids = [IMAGE_GRIDS[i] for i in case]
        bf = tower_output(visual_bf16, px, grids)
        f32 = tower_output(visual_f32, px, grids)
        err = (bf - f32).abs()
        entry = {"images": case, "bf16": put(bf.numpy(), np.float32), "f32": put(f32.numpy(), np.float32),
                 "bf16_vs_f32_max_abs": float(err.max()), "f32_max_abs": float(f32.abs().max()),
                 "bf16_vs_f32_rel_l2": float((bf - f32).norm() / f32.norm())}
        index["cases"].append(entry)
        print(f"case {case}: out {tuple(bf.shape)}, HF bf16 vs f32 max abs {entry['bf16_vs_f32_max_abs']:.4g} "
              f"(max |f32| {entry['f32_max_abs']:.3g}), rel l2 {entry['bf16_vs_f32_rel_l2']:.3g}")
    import transformers
    index["metadata"] = {"transformers": transformers.__version__, "torch": torch.__version__, "seed": SEED,
                         "attn_implementation": "eager", "vision_config": TINY_VISION_TOWER_CONFIG}
    with open(os.path.join(out_dir, "vision_goldens.bin"), "wb") as f:
        f.write(bytes(blob))
    write_json(os.path.join(out_dir, "vision_goldens.json"), index)


if __name__ == "__main__":
    main()
