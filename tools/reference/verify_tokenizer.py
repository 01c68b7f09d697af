#!/usr/bin/env python3
"""Checks an installed tokenizer copy against the acceptance checks of
../shared/data/qwen-tokenizer/SOURCE.txt; exits non-zero, saying why, if any fails (stdlib only).

  verify_tokenizer.py qwen3.5 DIR SHARED_QWEN_TOKENIZER_DIR
  verify_tokenizer.py qwen3   DIR
"""
import gzip
import hashlib
import json
import os
import sys

QWEN35_VOCAB_JSON_BLOB = "0aa0ce0658d60ac4a5d609f4eadb0e8e43514176"  # ComfyUI's vocab.json (SOURCE.txt)
QWEN35_MERGES_SHA256 = "a9d356d7bdf1ef4949e3e748e95b8e10ad9d4e2e838eddc38a0a7b6b94d1db8d"
QWEN3_GZ_SHA256 = "2cb7076bbf0655e2ef1705162dc361206cd3a2050c3ee1e4c3254fe0b582390b"


class Failed(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failed(msg)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def load_json(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def merge_strings(merges):
    return [m if isinstance(m, str) else " ".join(m) for m in merges]


def check_merges_consistent(vocab, merges):
    for i, m in enumerate(merges):
        a, b = m.split(" ")
        check(a in vocab and b in vocab and a + b in vocab, f"merge {i} '{m}' uses or makes a token not in the vocab")


def verify_qwen35(d, shared):
    doc = load_json(os.path.join(d, "tokenizer.json"))
    vocab = doc["model"]["vocab"]
    check(len(vocab) == 248044, f"BPE vocab has {len(vocab)} entries, expected 248,044")
    check(vocab.get("Ġderrota") == 200380, f'vocab["Ġderrota"] = {vocab.get("Ġderrota")}, expected 200380')
    check(vocab.get("Ġseputar") == 200407, f'vocab["Ġseputar"] = {vocab.get("Ġseputar")}, expected 200407')
    check(sorted(vocab.values()) == list(range(248044)), "BPE ids are not exactly 0..248043")
    text = json.dumps(dict(sorted(vocab.items(), key=lambda kv: kv[1])), indent=4, ensure_ascii=False).encode()
    blob = hashlib.sha1(b"blob %d\0" % len(text) + text).hexdigest()
    check(blob == QWEN35_VOCAB_JSON_BLOB, f"vocab.json rendering has git blob {blob}, expected {QWEN35_VOCAB_JSON_BLOB}")
    merges_path = os.path.join(shared, "qwen3.5-partial", "merges.txt")
    check(sha256_file(merges_path) == QWEN35_MERGES_SHA256, f"{merges_path} is not the file SOURCE.txt describes")
    with open(merges_path, encoding="utf-8") as f:
        reference = [line.rstrip("\n") for line in f if line.rstrip("\n")]
    merges = merge_strings(doc["model"]["merges"])
    check(merges == reference, "merges differ from qwen3.5-partial/merges.txt")
    check_merges_consistent(vocab, merges)
    added = {t["content"]: t["id"] for t in doc["added_tokens"]}
    check(added.get("<|im_end|>") == 248046, f"tokenizer.json <|im_end|> = {added.get('<|im_end|>')}, expected 248046")
    config = load_json(os.path.join(d, "tokenizer_config.json"))
    decoder = {int(k): v["content"] for k, v in config["added_tokens_decoder"].items()}
    check(sorted(decoder) == list(range(248044, 248077)), "tokenizer_config.json added tokens are not 248044..248076")
    check(decoder[248046] == "<|im_end|>", "tokenizer_config.json: 248046 is not <|im_end|>")
    for content, i in added.items():
        check(decoder.get(i) == content, f"added token {content} has id {i} in tokenizer.json but not in tokenizer_config.json")
    check("\\p{M}" in doc["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"], "pre-tokenizer regex lacks \\p{M}")
    check(doc["normalizer"] == {"type": "NFC"}, f"normalizer is {doc['normalizer']}, expected NFC")
    size = os.path.getsize(os.path.join(d, "tokenizer.json"))
    print(f"qwen3.5 tokenizer OK: 248,044 BPE + 33 added = 248,077 ids, vocab blob {blob[:8]}, tokenizer.json {size:,} bytes")


def verify_qwen3(d):
    gz = os.path.join(d, "tokenizer.json.gz")
    check(sha256_file(gz) == QWEN3_GZ_SHA256, f"{gz} sha256 differs from SOURCE.txt")
    doc = load_json(gz)
    vocab = doc["model"]["vocab"]
    check(len(vocab) == 151643, f"qwen3 vocab has {len(vocab)} entries, expected 151,643")
    check(len(doc["model"]["merges"]) == 151387, "qwen3 merges count is not 151,387")
    added = {t["content"]: t["id"] for t in doc["added_tokens"]}
    check(len(added) == 26 and added["<|im_end|>"] == 151645 and added["<|endoftext|>"] == 151643,
          "qwen3 added tokens are not the 26 expected (<|endoftext|>=151643, <|im_end|>=151645)")
    print("qwen3 tokenizer OK: 151,643 BPE + 26 added = 151,669 ids")


def main():
    try:
        if len(sys.argv) == 4 and sys.argv[1] == "qwen3.5":
            verify_qwen35(sys.argv[2], sys.argv[3])
        elif len(sys.argv) == 3 and sys.argv[1] == "qwen3":
            verify_qwen3(sys.argv[2])
        else:
            sys.exit(__doc__)
    except Failed as e:
        sys.exit(f"verify_tokenizer.py: REFUSED {sys.argv[1]} copy in {sys.argv[2]}: {e}")
    except (OSError, KeyError, ValueError) as e:
        sys.exit(f"verify_tokenizer.py: REFUSED {sys.argv[1]} copy in {sys.argv[2]}: unreadable or incomplete ({e!r})")


if __name__ == "__main__":
    main()
