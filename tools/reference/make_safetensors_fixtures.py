#!/usr/bin/env python3
"""Writes tests/data/safetensors/python_all_dtypes.safetensors with the official `safetensors`
package (the Rust crate behind safetensors.torch.save_file), so the C++ reader is checked against a
file it did not write, and the C++ writer against the reference bytes.

Content, mirrored by tests/unit/checkpoint/python_fixture_test.cpp:
  t_<dtype> for every dtype fp4serve reads, shape [2, 3], byte j = (7*j + 13*k) & 0xff where k is
  the dtype's position in DTYPES (BOOL bytes are j & 1);
  "empty" F32 [0, 4]; "scalar" F32 [] holding 1.5; metadata {"format": "pt"}.
It also writes the libFuzzer seed corpus fuzz/corpus/safetensors/ (small valid files).
Run: .venv/bin/python tools/reference/make_safetensors_fixtures.py   (needs only `safetensors`)
"""
import pathlib
import struct

from safetensors import serialize_file

# (safetensors dtype, name serialize_file accepts, element size)
DTYPES = [
    ("BOOL", "bool", 1), ("U8", "uint8", 1), ("I8", "int8", 1), ("U16", "uint16", 2),
    ("I16", "int16", 2), ("U32", "uint32", 4), ("I32", "int32", 4), ("U64", "uint64", 8),
    ("I64", "int64", 8), ("F16", "float16", 2), ("BF16", "bfloat16", 2), ("F32", "float32", 4),
    ("F64", "float64", 8), ("F8_E4M3", "float8_e4m3fn", 1), ("F8_E5M2", "float8_e5m2", 1),
    ("F8_E8M0", "float8_e8m0fnu", 1),
]


def pattern(k: int, st_name: str, nbytes: int) -> bytes:
    if st_name == "BOOL":
        return bytes(j & 1 for j in range(nbytes))
    return bytes((7 * j + 13 * k) & 0xFF for j in range(nbytes))


def main() -> None:
    out = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data" / "safetensors"
    out.mkdir(parents=True, exist_ok=True)
    tensors = {}
    for k, (st_name, py_name, size) in enumerate(DTYPES):
        tensors[f"t_{st_name.lower()}"] = {
            "dtype": py_name, "shape": [2, 3], "data": pattern(k, st_name, 6 * size)}
    tensors["empty"] = {"dtype": "float32", "shape": [0, 4], "data": b""}
    tensors["scalar"] = {"dtype": "float32", "shape": [], "data": struct.pack("<f", 1.5)}
    path = out / "python_all_dtypes.safetensors"
    serialize_file(tensors, str(path), {"format": "pt"})
    print(f"wrote {path} ({path.stat().st_size} bytes)")

    corpus = out.parents[2] / "fuzz" / "corpus" / "safetensors"
    corpus.mkdir(parents=True, exist_ok=True)
    (corpus / "all_dtypes.safetensors").write_bytes(path.read_bytes())
    serialize_file({}, str(corpus / "empty.safetensors"), None)
    serialize_file({"w": {"dtype": "bfloat16", "shape": [2, 2], "data": bytes(range(8))}},
                   str(corpus / "one_tensor.safetensors"), None)
    serialize_file({"a": {"dtype": "float8_e4m3fn", "shape": [4, 0], "data": b""},
                    "b.weight_scale": {"dtype": "float32", "shape": [], "data": struct.pack("<f", 0.5)},
                    "c": {"dtype": "uint8", "shape": [3], "data": b"xyz"}},
                   str(corpus / "metadata_and_empty.safetensors"),
                   {"format": "pt", "quantization": "nvfp4"})
    print(f"wrote seed corpus {corpus}")


if __name__ == "__main__":
    main()
