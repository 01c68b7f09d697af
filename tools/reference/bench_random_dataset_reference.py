#!/usr/bin/env python3
"""Reference for tests/unit/tools/bench_dataset_test.cpp (BenchRandomDataset.QwenPromptsMatchVllm).

Builds `vllm bench serve --dataset-name random` prompts the way vLLM's RandomDataset.sample and
gen_prompt_decode_to_target_len do (vllm/benchmarks/datasets.py, dataset_utils.py), with the Hugging
Face Qwen3.5 tokenizer and numpy's default_rng, and prints per request: prompt_len,
expected_output_len and the FNV-1a 64 hash of the prompt's UTF-8 bytes. vLLM itself is not needed.

    .venv/bin/python tools/reference/bench_random_dataset_reference.py [.cache/tokenizers/qwen3.5]
"""
import math
import sys

import numpy as np
from transformers import AutoTokenizer


def fnv1a64(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def sample(tok, num, input_len, output_len, ratio, prefix_len, seed):
    rng = np.random.default_rng(seed)
    real = max(0, input_len - tok.num_special_tokens_to_add())
    in_lens = rng.integers(math.floor(real * (1 - ratio)), math.ceil(real * (1 + ratio)) + 1, size=num)
    out_lo = max(math.floor(output_len * (1 - ratio)), 1)
    out_hi = max(math.ceil(output_len * (1 + ratio)), 1)
    out_lens = rng.integers(out_lo, out_hi + 1, size=num)
    offsets = rng.integers(0, tok.vocab_size, size=num)
    allowed = np.array(sorted(set(range(tok.vocab_size)) - set(tok.all_special_ids)))
    prefix = allowed[rng.integers(0, len(allowed), size=prefix_len)].tolist() if prefix_len > 0 else []
    result = []
    for i in range(num):
        ids = prefix + allowed[(offsets[i] + i + np.arange(in_lens[i])) % len(allowed)].tolist()
        target = prefix_len + int(in_lens[i])
        retries = 10
        while True:
            prompt = tok.decode(ids)
            ids = tok.encode(prompt, add_special_tokens=False)
            if retries <= 0 or len(ids) == target:
                break
            if len(ids) < target:
                ids.extend(rng.integers(0, tok.vocab_size, size=target - len(ids)).tolist())
            else:
                ids = ids[:target]
            retries -= 1
        result.append((len(ids), int(out_lens[i]), fnv1a64(prompt.encode("utf-8"))))
    return result


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else ".cache/tokenizers/qwen3.5"
    tok = AutoTokenizer.from_pretrained(path)
    for prompt_len, out_len, h in sample(tok, 8, 64, 32, 0.3, 5, 0):
        print(f"{{{prompt_len}, {out_len}, 0x{h:016x}ULL}},")


if __name__ == "__main__":
    main()
