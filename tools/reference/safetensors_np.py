"""Torch-free safetensors reading into numpy, including the dtypes numpy lacks (BF16, F8_E4M3).

Used by the default (torch-free) tests and by dequant.py, so that checking the committed
checkpoints needs only numpy.
"""
import json
import os
import struct

import numpy as np

_PLAIN = {"F32": np.float32, "F16": np.float16, "I32": np.int32, "I64": np.int64, "U8": np.uint8,
          "I8": np.int8, "BOOL": np.bool_, "F64": np.float64, "I16": np.int16}


def _e4m3_lut():
    """float32 value of every float8_e4m3fn byte (OCP: bias 7, no inf, NaN = S.1111.111)."""
    lut = np.zeros(256, dtype=np.float32)
    for b in range(256):
        s = -1.0 if b & 0x80 else 1.0
        e = (b >> 3) & 0xF
        m = b & 0x7
        if e == 0xF and m == 0x7:
            lut[b] = np.nan
        elif e == 0:
            lut[b] = s * (m / 8.0) * 2.0 ** -6
        else:
            lut[b] = s * (1.0 + m / 8.0) * 2.0 ** (e - 7)
    return lut


E4M3_LUT = _e4m3_lut()


def bf16_bits_to_f32(u16):
    return (u16.astype(np.uint32) << 16).view(np.float32)


def read_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    return header, 8 + n


def load_raw(path):
    """{name: (dtype string, shape, raw numpy array)}; BF16 -> uint16 bits, F8_E4M3 -> uint8 bits."""
    header, base = read_header(path)
    data = np.fromfile(path, dtype=np.uint8)
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt, shape, (b, e) = info["dtype"], info["shape"], info["data_offsets"]
        buf = data[base + b: base + e]
        if dt == "BF16":
            arr = buf.view(np.uint16)
        elif dt in ("F8_E4M3", "U8"):
            arr = buf.view(np.uint8)
        elif dt in _PLAIN:
            arr = buf.view(_PLAIN[dt])
        else:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {dt}")
        out[name] = (dt, list(shape), arr.reshape(shape))
    return out


def to_f32(dt, arr):
    """Decode a raw array (as returned by load_raw) to float32."""
    if dt == "BF16":
        return bf16_bits_to_f32(arr)
    if dt == "F8_E4M3":
        return E4M3_LUT[arr]
    return arr.astype(np.float32)


def checkpoint_files(model_dir):
    """The safetensors files of a checkpoint directory, via the index when there is one."""
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        return sorted({os.path.join(model_dir, v) for v in weight_map.values()})
    return [os.path.join(model_dir, "model.safetensors")]


def load_checkpoint_raw(model_dir):
    tensors = {}
    for fn in checkpoint_files(model_dir):
        for k, v in load_raw(fn).items():
            if k in tensors:
                raise ValueError(f"{model_dir}: tensor {k} appears in two shards")
            tensors[k] = v
    return tensors
