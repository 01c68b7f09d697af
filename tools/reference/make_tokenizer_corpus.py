#!/usr/bin/env python3
"""Builds the tokenizer parity corpus, deterministically (seeded; no network data).

  python3 tools/reference/make_tokenizer_corpus.py
writes tests/data/tokenizer/corpus.jsonl ({"cat": ..., "text": ...} per line) and
tests/data/tokenizer/mixed_1mb.txt.gz (~1 MB of mixed text, one string). Then run
make_tokenizer_goldens.py for the expected ids.
"""
import gzip
import json
import os
import random

from tokenizer_corpus_samples import (ARABIC, CHINESE, CODE, EMOJI, ENGLISH, HINDI, JAPANESE, KOREAN,
                                      LOOKALIKES, SPECIAL_TOKENS_QWEN35, UNICODE_EDGE, VIETNAMESE)
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT_DIR = os.path.join(ROOT, "tests", "data", "tokenizer")
SEED = 20261129
WHITESPACE = [" ", "  ", "\t", "\n", "\r\n", "\n\n", " \n", "\u00a0", "\u3000", "\r", "\x0b", "\u2028"]


def pick(rng, items, k):
    return [rng.choice(items) for _ in range(k)]


def join_random(rng, parts):
    out = parts[0]
    for p in parts[1:]:
        out += rng.choice([" ", " ", "", "\n", ", ", "  ", "\t"]) + p
    return out


def english(rng, n):
    out = []
    for i in range(n):
        s = join_random(rng, pick(rng, ENGLISH, rng.randint(1, 4)))
        r = rng.random()
        if r < 0.1:
            s = s.upper()
        elif r < 0.2:
            s = s.lower()
        elif r < 0.3:
            s = " " + s
        elif r < 0.35:
            s = s + " " * rng.randint(1, 5)
        out.append(("english", s))
    return out


def code(rng, n_per_lang):
    out = []
    for lang, snippets in CODE.items():
        for i in range(n_per_lang):
            s = "".join(pick(rng, snippets, rng.randint(1, 3)))
            if rng.random() < 0.3:
                s = "\n".join(("    " * rng.randint(0, 3)) + line for line in s.split("\n"))
            if rng.random() < 0.2:
                s = s.replace("    ", "\t")
            out.append((f"code_{lang}", s))
    return out


def language(rng, name, samples, n, decomposed=False):
    out = []
    for i in range(n):
        s = join_random(rng, pick(rng, samples, rng.randint(1, 4)))
        if decomposed and rng.random() < 0.5:
            s = unicodedata.normalize("NFD", s)  # combining marks, recomposed by the NFC normalizer
        if rng.random() < 0.2:
            s += " " + str(rng.randint(0, 10**6))
        out.append((name, s))
    return out


def emoji(rng, n):
    out = []
    for i in range(n):
        parts = pick(rng, EMOJI, rng.randint(1, 6))
        s = join_random(rng, parts)
        if rng.random() < 0.5:
            s = rng.choice(ENGLISH)[:40] + " " + s + rng.choice(["", "!", " ok", "\n"])
        out.append(("emoji", s))
    return out


def whitespace(rng, n):
    out = []
    for i in range(n):
        if i % 5 == 0:
            length = rng.choice([100, 1000, 5000, 20000])
            s = rng.choice([" ", "\t", "\n", "\r\n", " \t"]) * (length // 2)
            s = rng.choice(["", "x", "Hello"]) + s + rng.choice(["", "y", " world", "\n"])
        else:
            s = "".join(rng.choice(WHITESPACE) * rng.randint(1, 8) + rng.choice(["", "a", "Hi", "1", "!", "中"])
                        for _ in range(rng.randint(1, 8)))
        out.append(("whitespace", s))
    return out


def specials(rng):
    out = []
    contexts = ["{t}", "hello{t}world", "hello {t} world", " {t}", "{t} ", "\n{t}\n", "{t}{t}", "a{t}b{t}c",
                "{t}user\nHi there{t}\n", "中文{t}日本語", "{t}\u0301", "e{t}\u0301", "12{t}34", "🦙{t}🦙"]
    for t in SPECIAL_TOKENS_QWEN35:
        for c in contexts[:6]:
            out.append(("special", c.format(t=t)))
    for i in range(60):
        toks = pick(rng, SPECIAL_TOKENS_QWEN35, rng.randint(2, 5))
        c = rng.choice(contexts)
        out.append(("special", "".join(c.format(t=t) for t in toks)))
    chat = ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat's 2+2?<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nSimple arithmetic.\n</think>\n\n2+2 = 4.<|im_end|>\n")
    out.append(("special", chat))
    out.append(("special", "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"))
    return out


def lookalikes(rng):
    out = [("lookalike", s) for s in LOOKALIKES]
    for i in range(120):
        s = rng.choice(LOOKALIKES)
        out.append(("lookalike", rng.choice(["", "x", "Hello ", "\n"]) + s + rng.choice(["", "y", " end", "<|im_end|>"])))
    return out


def unicode_edge(rng):
    out = [("unicode_edge", s) for s in UNICODE_EDGE]
    for s in UNICODE_EDGE:
        out.append(("unicode_edge", "a" + s + "b " + s + " 1" + s))
    for i in range(100):
        out.append(("unicode_edge", "".join(pick(rng, UNICODE_EDGE, rng.randint(2, 6)))))
    return out


def numbers(rng, n):
    out = []
    for i in range(n):
        r = rng.random()
        if r < 0.3:
            s = str(rng.randint(0, 10**rng.randint(1, 20)))
        elif r < 0.6:
            s = f"{rng.uniform(-1e6, 1e6):.{rng.randint(0, 8)}f}"
        else:
            s = " ".join(str(rng.randint(0, 9999)) for _ in range(rng.randint(2, 10)))
        out.append(("numbers", s))
    return out


ALL_SAMPLES = (ENGLISH + [s for v in CODE.values() for s in v] + CHINESE + JAPANESE + KOREAN + ARABIC + HINDI +
               VIETNAMESE + EMOJI + UNICODE_EDGE + LOOKALIKES)


def mixed(rng, n):
    out = []
    for i in range(n):
        parts = pick(rng, ALL_SAMPLES + SPECIAL_TOKENS_QWEN35[:5], rng.randint(2, 8))
        out.append(("mixed", join_random(rng, parts)))
    return out


def mixed_megabyte(rng):
    parts, size = [], 0
    while size < 1_000_000:
        p = rng.choice(ALL_SAMPLES)
        if rng.random() < 0.1:
            p = unicodedata.normalize("NFD", p)
        p += rng.choice(["\n", " ", "\n\n", "  ", "\t", " " * rng.randint(1, 40), "\n" * rng.randint(1, 6)])
        if rng.random() < 0.01:
            p += rng.choice(SPECIAL_TOKENS_QWEN35)
        parts.append(p)
        size += len(p.encode("utf-8"))
    return "".join(parts)


def main():
    rng = random.Random(SEED)
    rows = []
    rows += english(rng, 320)
    rows += code(rng, 64)
    for name, samples, n in [("chinese", CHINESE, 90), ("japanese", JAPANESE, 90), ("korean", KOREAN, 90),
                             ("arabic", ARABIC, 90), ("hindi", HINDI, 90)]:
        rows += language(rng, name, samples, n)
    rows += language(rng, "vietnamese", VIETNAMESE, 120, decomposed=True)
    rows += emoji(rng, 160)
    rows += whitespace(rng, 160)
    rows += specials(rng)
    rows += lookalikes(rng)
    rows += unicode_edge(rng)
    rows += numbers(rng, 100)
    rows += mixed(rng, 250)
    os.makedirs(OUT_DIR, exist_ok=True)
    with open(os.path.join(OUT_DIR, "corpus.jsonl"), "w", encoding="utf-8") as f:
        for cat, text in rows:
            f.write(json.dumps({"cat": cat, "text": text}, ensure_ascii=False) + "\n")
    big = mixed_megabyte(rng)
    with gzip.GzipFile(os.path.join(OUT_DIR, "mixed_1mb.txt.gz"), "wb", mtime=0) as f:
        f.write(big.encode("utf-8"))
    cats = {}
    for cat, _ in rows:
        cats[cat] = cats.get(cat, 0) + 1
    print(f"corpus: {len(rows)} strings {cats}; mixed_1mb: {len(big.encode('utf-8')):,} bytes")


if __name__ == "__main__":
    main()
