"""Shared paths/loaders for the tests of the committed tiny checkpoints (torch-free)."""
import json
import os

import numpy as np

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
MODELS = os.path.join(REPO, "tests", "data", "models")
FORMATS = ("bf16", "fp8", "nvfp4", "int4")


def model_dir(fmt):
    return os.path.join(MODELS, f"tiny-{fmt}")


def read_json(path):
    with open(path) as f:
        return json.load(f)


def load_goldens(fmt):
    d = model_dir(fmt)
    doc = read_json(os.path.join(d, "goldens.json"))
    blob = np.fromfile(os.path.join(d, "goldens.bin"), dtype=np.uint8)
    return doc, blob


def golden_array(doc, blob, name):
    t = doc["tensors"][name]
    raw = blob[t["offset"]: t["offset"] + t["nbytes"]]
    if t["dtype"] == "bf16":
        arr = (raw.view("<u2").astype(np.uint32) << 16).view(np.float32)
    elif t["dtype"] == "i32":
        arr = raw.view("<i4").astype(np.int32)
    else:
        arr = raw.view("<f4").astype(np.float32)
    return arr.reshape(t["shape"])
