#!/usr/bin/env python3
"""Times HF tokenizers (one thread) encoding tests/data/tokenizer/mixed_1mb.txt.gz with the
Qwen3.5/3.6 tokenizer from .cache/tokenizers/qwen3.5. Prints one JSON line:
  {"seconds_median", "seconds_min", "bytes", "tokens", "repetitions"}
Run with RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false (set here too, before the import).
"""
import gzip
import json
import os
import statistics
import sys
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from transformers import AutoTokenizer  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    tok = AutoTokenizer.from_pretrained(os.path.join(ROOT, ".cache", "tokenizers", "qwen3.5"))
    backend = tok.backend_tokenizer
    with gzip.open(os.path.join(ROOT, "tests", "data", "tokenizer", "mixed_1mb.txt.gz"), "rt", encoding="utf-8") as f:
        text = f.read()
    ids = backend.encode(text, add_special_tokens=False).ids  # warm-up (fills HF's BPE cache, as ours)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        backend.encode(text, add_special_tokens=False)
        times.append(time.perf_counter() - t0)
    print(json.dumps({"seconds_median": statistics.median(times), "seconds_min": min(times),
                      "bytes": len(text.encode("utf-8")), "tokens": len(ids), "repetitions": reps}))


if __name__ == "__main__":
    main()
