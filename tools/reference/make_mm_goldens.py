"""Logits goldens of image+text prompts on tests/data/models/tiny-bf16, computed by transformers'
Qwen3_5MoeForConditionalGeneration (5.12.1) with given image features in place of its vision tower.

What it pins down is the language-model side of images, independent of any tower: HF's
get_placeholder_mask + masked_scatter of the image rows into the bf16 embeddings, its M-RoPE
positions (get_rope_index, compute_3d_position_ids) and decoding with rope_deltas. The tower's
output is replaced by seeded features (get_image_features patched on the instance); the features
are stored with the goldens so the C++ test feeds the same rows through a fake VisionEncoder.

Writes tests/data/mrope/tiny_mm_goldens.{json,bin} (goldens.py's BinWriter layout): per prompt its
tokens, image offsets and grids, the features of each image ([tokens, hidden] f32 holding bf16 values),
the prompt's logits [len, vocab] (bf16), the greedy continuation and the decode-step logits.

Then the same with the checkpoint's own vision tower (tiny-bf16 carries a 1-block tower, patch 8) on
seeded pixel values: tests/data/mrope/tiny_mm_tower_goldens.{json,bin}, with each image's
pixel_values ([patches, 3*2*8*8] f32 holding bf16 values: HF casts them to the tower's dtype) and
the tower's features, so the C++ test runs pixels -> tower -> language model end to end.

    /tmp/refvenv/bin/python tools/reference/make_mm_goldens.py
"""

import json
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from goldens import BinWriter  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODEL = ROOT / "tests/data/models/tiny-bf16"
OUT = ROOT / "tests/data/mrope"
IMAGE, VSTART, VEND = 501, 503, 504
MERGE = 2
N_NEW = 8

# ("text", [ids]) or ("image", (t, h, w) in patches, feature seed).
PROMPTS = [
    [("text", [11, 42, 97, 230, 7]), ("image", ((1, 4, 6), 1)), ("text", [88, 19, 300, 45, 2, 61])],
    # The same prompt with another image: its logits must differ.
    [("text", [11, 42, 97, 230, 7]), ("image", ((1, 4, 6), 2)), ("text", [88, 19, 300, 45, 2, 61])],
    [("text", [5, 6, 7]), ("image", ((1, 8, 4), 3)), ("text", [101, 102]), ("image", ((1, 4, 4), 4)),
     ("text", [400, 401, 402, 403])],
    # Image first: its rows open the prompt (no text before the first position).
    [("image", ((1, 2, 12), 5)), ("text", [9, 8, 7, 6, 5, 4, 3])],
    # A large square image: 64 rows whose positions span only 8 per axis (delta -56).
    [("text", [12, 13]), ("image", ((1, 16, 16), 6)), ("text", [14, 15, 16, 17, 18, 19])],
]

# Patch grids for the tower (patch 8): images of 32x48, 64x32 and 16x16 pixels.
TOWER_PROMPTS = [
    [("text", [11, 42, 97, 230, 7]), ("image", ((1, 4, 6), 11)), ("text", [88, 19, 300, 45, 2, 61])],
    [("text", [5, 6, 7]), ("image", ((1, 8, 4), 12)), ("text", [101, 102]), ("image", ((1, 2, 2), 13)),
     ("text", [400, 401, 402, 403])],
]


def build(prompt, hidden, embed_std, patch_dim=None):
    ids, types_, grids, images, feats = [], [], [], [], []
    for kind, arg in prompt:
        if kind == "text":
            ids += arg
            types_ += [0] * len(arg)
            continue
        (t, h, w), seed = arg
        n = t * h * w // (MERGE * MERGE)
        ids.append(VSTART)
        types_.append(0)
        images.append({"offset": len(ids), "grid_thw": [t, h, w], "num_tokens": n, "seed": seed})
        ids += [IMAGE] * n
        types_ += [1] * n
        ids.append(VEND)
        types_.append(0)
        grids.append([t, h, w])
        g = torch.Generator().manual_seed(1000 + seed)
        if patch_dim is None:
            feats.append((torch.randn(n, hidden, generator=g) * embed_std).to(torch.bfloat16))
        else:  # pixel values of t*h*w patches, normalized-image-like
            feats.append(torch.randn(t * h * w, patch_dim, generator=g).to(torch.bfloat16))
    return ids, types_, grids, images, feats


@torch.no_grad()
def main():
    from transformers import Qwen3_5MoeForConditionalGeneration, __version__
    from transformers.modeling_outputs import BaseModelOutputWithPooling

    model = Qwen3_5MoeForConditionalGeneration.from_pretrained(
        MODEL, dtype=torch.bfloat16, attn_implementation="eager", experts_implementation="eager").eval()
    assert model.model.language_model.rotary_emb.inv_freq.dtype == torch.float32
    hidden = model.config.text_config.hidden_size
    embed_std = float(model.model.language_model.embed_tokens.weight.float().std())
    current = {}

    def fake_image_features(pixel_values, image_grid_thw=None, **kwargs):
        return BaseModelOutputWithPooling(pooler_output=tuple(current["feats"]))

    real_image_features = model.model.get_image_features
    write(model, PROMPTS, lambda prompt: build(prompt, hidden, embed_std), fake_image_features, current, "tiny_mm_goldens",
          __version__)
    vc = model.config.vision_config
    patch_dim = vc.in_channels * vc.temporal_patch_size * vc.patch_size ** 2
    write(model, TOWER_PROMPTS, lambda prompt: build(prompt, hidden, embed_std, patch_dim), real_image_features,
          current, "tiny_mm_tower_goldens", __version__)


@torch.no_grad()
def write(model, prompt_list, build_fn, image_features, current, stem, version):
    model.model.get_image_features = image_features
    tower = image_features is not None and getattr(image_features, "__self__", None) is model.model
    w = BinWriter()
    prompts = []
    for p_i, prompt in enumerate(prompt_list):
        ids, types_, grids, images, feats = build_fn(prompt)
        current["feats"] = feats
        model.model.rope_deltas = None
        n_patches = sum(t * h * ww for t, h, ww in grids)
        pixel_values = torch.cat(feats) if tower else torch.zeros(n_patches, 1)
        out = model(input_ids=torch.tensor([ids]), pixel_values=pixel_values,
                    image_grid_thw=torch.tensor(grids), mm_token_type_ids=torch.tensor([types_]), use_cache=True)
        w.add(f"prompt{p_i}/logits", out.logits[0])
        for i, f in enumerate(feats):
            if tower:
                w.add(f"prompt{p_i}/image{i}/pixel_values", f.float())
                rows = model.model.get_image_features(f, torch.tensor([grids[i]])).pooler_output[0]
                w.add(f"prompt{p_i}/image{i}/features", rows.float())
            else:
                w.add(f"prompt{p_i}/image{i}/features", f.float())
        past, logits = out.past_key_values, out.logits[0, -1]
        tokens, step_logits = [], []
        for _ in range(N_NEW):
            step_logits.append(logits.clone())
            tok = int(torch.argmax(logits))
            tokens.append(tok)
            out = model(input_ids=torch.tensor([[tok]]), past_key_values=past, use_cache=True)
            past, logits = out.past_key_values, out.logits[0, -1]
        w.add(f"prompt{p_i}/step_logits", torch.stack(step_logits))
        prompts.append({"tokens": ids, "images": images, "greedy_tokens": tokens,
                        "rope_delta": int(model.model.rope_deltas.reshape(-1)[0])})
    OUT.mkdir(parents=True, exist_ok=True)
    doc = {"transformers": version, "model": "tiny-bf16", "spatial_merge_size": MERGE, "prompts": prompts,
           "tensors": w.index}
    with open(OUT / f"{stem}.bin", "wb") as f:
        for c in w.chunks:
            f.write(c)
    (OUT / f"{stem}.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print("wrote", OUT / f"{stem}.json", w.offset, "bytes of tensors")


if __name__ == "__main__":
    torch.manual_seed(0)
    torch.set_num_threads(1)
    main()
