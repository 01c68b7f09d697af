"""Writes safetensors checkpoints and JSON files the way Hugging Face releases lay them out."""
import json
import os

import torch
from safetensors.torch import save_file


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=True)
        f.write("\n")


def _nbytes(t):
    return t.numel() * t.element_size()


def save_checkpoint(tensors, out_dir, n_shards=1):
    """tensors: {name: torch.Tensor}. n_shards == 1 -> model.safetensors; otherwise
    model-0000i-of-0000n.safetensors + model.safetensors.index.json (split by size, names sorted)."""
    os.makedirs(out_dir, exist_ok=True)
    names = sorted(tensors)
    tensors = {k: tensors[k].contiguous() for k in names}
    if n_shards == 1:
        save_file(tensors, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
        return
    total = sum(_nbytes(t) for t in tensors.values())
    target = total / n_shards
    shards, current, acc = [], [], 0
    for k in names:
        if current and acc >= target * (len(shards) + 1) and len(shards) < n_shards - 1:
            shards.append(current)
            current = []
        current.append(k)
        acc += _nbytes(tensors[k])
    shards.append(current)
    weight_map = {}
    for i, keys in enumerate(shards):
        fn = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file({k: tensors[k] for k in keys}, os.path.join(out_dir, fn), metadata={"format": "pt"})
        weight_map.update({k: fn for k in keys})
    write_json(os.path.join(out_dir, "model.safetensors.index.json"),
               {"metadata": {"total_size": total}, "weight_map": weight_map})


def load_checkpoint_torch(model_dir):
    """{name: torch.Tensor} of a checkpoint directory (single file or sharded)."""
    from safetensors.torch import load_file
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    out = {}
    for fn in files:
        out.update(load_file(os.path.join(model_dir, fn)))
    return out
