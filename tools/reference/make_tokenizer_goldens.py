#!/usr/bin/env python3
"""Computes the expected ids / decodes for the tokenizer parity suite with Hugging Face.

  .venv/bin/python tools/reference/make_tokenizer_goldens.py
Needs .cache/tokenizers/{qwen3.5,qwen3} (tools/reference/fetch_tokenizers.sh) and
tests/data/tokenizer/corpus.jsonl + mixed_1mb.txt.gz (make_tokenizer_corpus.py). Tokenizers are
loaded with transformers.AutoTokenizer, as vLLM does (this adds tokenizer_config.json's extra added
tokens); ids come from its Rust backend (`tokenizers`), decodes and DecodeStream too.

Writes tests/data/tokenizer/goldens_<name>.jsonl.gz, one JSON object per line:
  {"tokenizer", "corpus_sha256", "count", "vocab_size"}            header
  {"ids", "dec"?, "dec_skip"?, "stream"?, "stream_skip"?}  x count  same order as corpus.jsonl;
      dec / dec_skip only when they differ from the text / from dec; stream = DecodeStream.step
      outputs (null = None) for a subset
  {"mixed_1mb_ids": [...]}                                          the 1 MB file in one encode
  {"bytes_hex", "ids"}  x N        invalid UTF-8, expected = HF ids of the lossy (U+FFFD) repair
  {"decode_ids", "dec", "dec_skip"}  x N   random id sequences (split multi-byte chars, specials)
"""
import gzip
import hashlib
import json
import os
import random
import shutil
import tempfile

from tokenizers.decoders import DecodeStream
from transformers import AutoTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data", "tokenizer")
CACHE = os.path.join(ROOT, ".cache", "tokenizers")
STREAM_CATS = {"chinese", "japanese", "korean", "arabic", "hindi", "vietnamese", "emoji", "special", "mixed",
               "unicode_edge"}
INVALID_UTF8 = [
    b"\xff", b"abc\xffdef", b"\xe4\xb8", b"\xe4\xb8\xadx\xe4", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
    b"\xf0\x9f\xa6", b"\x80\x80\x80", b"ok \xf0\x9f\xa6\x99 \xf0\x9f", b"<|im_end|>\xfe<|im_end|>", b"e\xcc",
    b"\xe0\x80\x80", b"\xf8\x88\x80\x80\x80", b"caf\xe9", b"\xc3\x28", b"\xa0\xa1", b"\xe2\x82\x28",
    b"\xf0\x28\x8c\xbc", b"\xf0\x90\x28\xbc", b"Hello \xe4\xbd\xa0\xe5\xa5 world",
]


def load(name):
    src = os.path.join(CACHE, name)
    if os.path.exists(os.path.join(src, "tokenizer.json")):
        return AutoTokenizer.from_pretrained(src)
    tmp = tempfile.mkdtemp()
    shutil.copy(os.path.join(src, "tokenizer_config.json"), tmp)
    with gzip.open(os.path.join(src, "tokenizer.json.gz"), "rb") as f, open(os.path.join(tmp, "tokenizer.json"), "wb") as g:
        g.write(f.read())
    return AutoTokenizer.from_pretrained(tmp)


def stream(backend, ids, skip):
    ds = DecodeStream(skip_special_tokens=skip)
    return [ds.step(backend, i) for i in ids]


def main():
    corpus_path = os.path.join(DATA, "corpus.jsonl")
    with open(corpus_path, "rb") as f:
        corpus_sha = hashlib.sha256(f.read()).hexdigest()
    with open(corpus_path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    with gzip.open(os.path.join(DATA, "mixed_1mb.txt.gz"), "rt", encoding="utf-8") as f:
        big = f.read()
    for name in ("qwen3.5", "qwen3"):
        tok = load(name)
        backend = tok.backend_tokenizer
        rng = random.Random(7)
        out_path = os.path.join(DATA, f"goldens_{name}.jsonl.gz")
        n_stream = 0
        with gzip.GzipFile(out_path, "wb", mtime=0) as gz:
            def put(obj):
                gz.write((json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8"))
            put({"tokenizer": name, "corpus_sha256": corpus_sha, "count": len(rows), "vocab_size": len(tok)})
            for i, row in enumerate(rows):
                text = row["text"]
                ids = backend.encode(text, add_special_tokens=False).ids
                if i % 50 == 0:  # the transformers front door gives the same ids
                    assert tok(text)["input_ids"] == ids, (name, text)
                rec = {"ids": ids}
                dec = backend.decode(ids, skip_special_tokens=False)
                if dec != text:
                    rec["dec"] = dec
                dec_skip = backend.decode(ids, skip_special_tokens=True)
                if dec_skip != dec:
                    rec["dec_skip"] = dec_skip
                if row["cat"] in STREAM_CATS and len(ids) <= 400 and i % 2 == 0:
                    rec["stream"] = stream(backend, ids, False)
                    if row["cat"] == "special":
                        rec["stream_skip"] = stream(backend, ids, True)
                    n_stream += 1
                put(rec)
            put({"mixed_1mb_ids": backend.encode(big, add_special_tokens=False).ids})
            for b in INVALID_UTF8:
                put({"bytes_hex": b.hex(), "ids": backend.encode(b.decode("utf-8", errors="replace"),
                                                                  add_special_tokens=False).ids})
            special_ids = sorted(tok.added_tokens_decoder)
            byte_ids = [backend.token_to_id(t) for t in ("ä", "¸", "Ń", "ð", "Ł", "¦", "Ļ", "Ãħ")]
            for k in range(150):
                n = rng.randint(1, 12)
                ids = [rng.choice([rng.randrange(len(tok)), rng.choice(special_ids), rng.choice(byte_ids),
                                   rng.randrange(1000)]) for _ in range(n)]
                put({"decode_ids": ids, "dec": backend.decode(ids, skip_special_tokens=False),
                     "dec_skip": backend.decode(ids, skip_special_tokens=True)})
        print(f"{name}: {len(rows)} strings ({n_stream} with DecodeStream), 1 MB file, vocab {len(tok)} -> "
              f"{out_path} ({os.path.getsize(out_path):,} bytes)")


if __name__ == "__main__":
    main()
