"""M-RoPE position goldens: transformers' own Qwen3_5MoeModel.get_rope_index on a few prompt layouts.

Writes tests/data/mrope/rope_index_goldens.json: per case the token types (0 text, 1 image), the
image grids (patches, before the spatial merge, as image_grid_thw), transformers' position ids
[3][len] and its rope delta. tests/unit/model/mrope_positions_test.cpp compares ours against them.

Run with the reference venv (transformers 5.12.1):
    /tmp/refvenv/bin/python tools/reference/make_mrope_goldens.py [--out tests/data/mrope]
"""

import argparse
import json
import pathlib
import types

import torch
from transformers.models.qwen3_5_moe.modeling_qwen3_5_moe import Qwen3_5MoeModel

IMAGE_TOKEN = 501
MERGE = 2

# Each layout: ("text", n) or ("image", (t, h, w)) in patches (h and w multiples of MERGE).
CASES = {
    "one_image_middle": [("text", 5), ("image", (1, 4, 6)), ("text", 7)],
    "image_first": [("image", (1, 6, 4)), ("text", 9)],
    "image_last": [("text", 3), ("image", (1, 8, 8))],
    "two_images": [("text", 4), ("image", (1, 4, 10)), ("text", 2), ("image", (1, 12, 2)), ("text", 6)],
    "tall_wide_square": [("text", 1), ("image", (1, 2, 16)), ("text", 1), ("image", (1, 16, 2)), ("text", 1),
                         ("image", (1, 6, 6)), ("text", 3)],
    "single_token_image": [("text", 2), ("image", (1, 2, 2)), ("text", 2)],
    "text_only_control": [("text", 12)],
}


def run_case(layout):
    types_, grids = [], []
    for kind, arg in layout:
        if kind == "text":
            types_ += [0] * arg
        else:
            t, h, w = arg
            grids.append([t, h, w])
            types_ += [1] * (t * h * w // (MERGE * MERGE))
    input_ids = torch.tensor([[IMAGE_TOKEN if k == 1 else 7 for k in types_]])
    mm = torch.tensor([types_], dtype=torch.int32)
    fake = types.SimpleNamespace(
        config=types.SimpleNamespace(vision_config=types.SimpleNamespace(spatial_merge_size=MERGE)))
    fake.get_vision_position_ids = types.MethodType(Qwen3_5MoeModel.get_vision_position_ids, fake)
    grid = torch.tensor(grids, dtype=torch.long) if grids else None
    pos, delta = Qwen3_5MoeModel.get_rope_index(fake, input_ids, mm_token_type_ids=mm, image_grid_thw=grid)
    return {"token_types": types_, "image_grid_thw": grids, "positions": pos[:, 0, :].tolist(),
            "rope_delta": int(delta.reshape(-1)[0])}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(pathlib.Path(__file__).resolve().parents[2] / "tests/data/mrope"))
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import transformers
    doc = {"transformers": transformers.__version__, "spatial_merge_size": MERGE,
           "cases": {name: run_case(layout) for name, layout in CASES.items()}}
    (out / "rope_index_goldens.json").write_text(json.dumps(doc, indent=1) + "\n")
    print("wrote", out / "rope_index_goldens.json")


if __name__ == "__main__":
    main()
