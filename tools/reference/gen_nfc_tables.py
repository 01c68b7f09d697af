#!/usr/bin/env python3
"""Generates src/tokenizer/unicode_nfc_data.cpp: the Unicode tables our NFC normalizer needs.

The tables are taken from Hugging Face `tokenizers` itself (its NFD/NFC normalizers), not from
Python's unicodedata alone, because `tokenizers` 0.22 normalizes with an older Unicode version
(crate unicode-normalization-alignments) than Python 3.11 (Unicode 14): ~100 code points assigned
later have no canonical combining class / decomposition there. Parity with HF wins.

  .venv/bin/python tools/reference/gen_nfc_tables.py   (rewrites the .cpp; commit it)

Every table entry is checked against HF, and the finished tables are replayed through a Python
model of our C++ algorithm against HF NFC for every code point and for mark sequences.
"""
import os
import sys
import unicodedata

from tokenizers import normalizers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "src", "tokenizer", "unicode_nfc_data.cpp")

HF_NFC = normalizers.NFC()
HF_NFD = normalizers.NFD()
S_BASE, L_BASE, V_BASE, T_BASE = 0xAC00, 0x1100, 0x1161, 0x11A7
L_COUNT, V_COUNT, T_COUNT = 19, 21, 28
N_COUNT = V_COUNT * T_COUNT
S_COUNT = L_COUNT * N_COUNT


def code_points():
    for c in range(0x110000):
        if 0xD800 <= c < 0xE000:
            continue
        yield c


def is_hangul_syllable(c):
    return S_BASE <= c < S_BASE + S_COUNT


def build_tables():
    decomp = {}
    for c in code_points():
        if is_hangul_syllable(c):
            continue
        d = HF_NFD.normalize_str(chr(c))
        if d != chr(c):
            decomp[c] = [ord(x) for x in d]
    ccc = {}
    for c in code_points():
        k = unicodedata.combining(chr(c))
        if not k:
            continue
        # HF's canonical ordering reveals whether it knows this mark (ccc are stable once assigned).
        probe = "a" + chr(0x0301) + chr(c) + chr(0x0316)
        if HF_NFD.normalize_str(probe) != unicodedata.normalize("NFD", probe):
            continue  # unassigned in HF's Unicode version: ccc 0 there
        ccc[c] = k
    compose = {}
    for c in code_points():
        if is_hangul_syllable(c):
            continue
        dec = unicodedata.decomposition(chr(c))
        if not dec or dec.startswith("<"):
            continue
        parts = [int(x, 16) for x in dec.split()]
        if len(parts) != 2:
            continue
        if HF_NFC.normalize_str(chr(parts[0]) + chr(parts[1])) == chr(c):
            compose[(parts[0], parts[1])] = c
    return decomp, ccc, compose


def model_nfc(s, decomp, ccc, compose):
    """Python twin of src/tokenizer/unicode_nfc.cpp, used only to validate the tables."""
    out = []
    for ch in s:
        c = ord(ch)
        if is_hangul_syllable(c):
            si = c - S_BASE
            out += [L_BASE + si // N_COUNT, V_BASE + (si % N_COUNT) // T_COUNT]
            if si % T_COUNT:
                out.append(T_BASE + si % T_COUNT)
        else:
            out += decomp.get(c, [c])
    i = 0
    while i < len(out):  # canonical ordering: stable sort of each run of non-starters
        if ccc.get(out[i], 0) == 0:
            i += 1
            continue
        j = i
        while j < len(out) and ccc.get(out[j], 0) != 0:
            j += 1
        out[i:j] = sorted(out[i:j], key=lambda x: ccc[x])
        i = j
    res = []
    starter = -1  # index in res of the last starter
    last_ccc = 0  # ccc of the last code point kept in res
    for c in out:
        k = ccc.get(c, 0)
        if starter >= 0 and (starter == len(res) - 1 or (last_ccc != 0 and last_ccc < k)):
            s_cp = res[starter]
            comp = None
            if L_BASE <= s_cp < L_BASE + L_COUNT and V_BASE <= c < V_BASE + V_COUNT:
                comp = S_BASE + ((s_cp - L_BASE) * V_COUNT + (c - V_BASE)) * T_COUNT
            elif is_hangul_syllable(s_cp) and (s_cp - S_BASE) % T_COUNT == 0 and T_BASE < c < T_BASE + T_COUNT:
                comp = s_cp + (c - T_BASE)
            else:
                comp = compose.get((s_cp, c))
            if comp is not None:
                res[starter] = comp
                continue
        if k == 0:
            starter = len(res)
        last_ccc = k
        res.append(c)
    return "".join(map(chr, res))


def validate(decomp, ccc, compose):
    bad = 0
    probes = []
    for c in code_points():
        probes.append(chr(c))
    marks = sorted(ccc)[::7] + [0x0300, 0x0301, 0x0323, 0x0327, 0x0308, 0x302, 0x1161, 0x11A8]
    for (a, b) in list(compose)[:: 3]:
        probes.append(chr(a) + chr(b))
        probes.append(chr(a) + chr(0x0323) + chr(b))
        probes.append(chr(a) + chr(0x0315) + chr(b))
    for m in marks:
        probes.append("e" + chr(m) + chr(0x0301) + "o" + chr(0x0302) + chr(m))
        probes.append("\u1100" + chr(m) + "\u1161\u11a8")
    probes += ["\u1100\u1161\u11a8", "\uac00\u11a8", "\u1100\u1161\u0301\u11a8", "e\u0301\u0301", "\u0301e"]
    for p in probes:
        if model_nfc(p, decomp, ccc, compose) != HF_NFC.normalize_str(p):
            bad += 1
            if bad < 10:
                print("mismatch", [hex(ord(x)) for x in p], file=sys.stderr)
    return bad


def write_cpp(decomp, ccc, compose):
    lines = [
        "// GENERATED by tools/reference/gen_nfc_tables.py from Hugging Face tokenizers' own NFD/NFC",
        "// (its Unicode version, not the newest). Do not edit by hand; rerun the script.",
        '#include "tokenizer/unicode_nfc_data.h"',
        "",
        "namespace fp4serve::tokenizer::nfc_data {",
        "",
    ]
    pool = []
    entries = []
    for c in sorted(decomp):
        d = decomp[c]
        entries.append((c, len(pool), len(d)))
        pool += d
    lines.append(f"const std::uint32_t kDecompositionPool[{len(pool)}] = {{")
    for i in range(0, len(pool), 12):
        lines.append("  " + ", ".join(f"0x{x:X}" for x in pool[i:i + 12]) + ",")
    lines.append("};")
    lines.append(f"const Decomposition kDecompositions[{len(entries)}] = {{")
    for i in range(0, len(entries), 4):
        lines.append("  " + " ".join(f"{{0x{c:X}, {o}, {n}}}," for c, o, n in entries[i:i + 4]))
    lines.append("};")
    lines.append(f"const std::size_t kDecompositionCount = {len(entries)};")
    ranges = []
    for c in sorted(ccc):
        if ranges and ranges[-1][1] == c - 1 and ranges[-1][2] == ccc[c]:
            ranges[-1][1] = c
        else:
            ranges.append([c, c, ccc[c]])
    lines.append(f"const CombiningClassRange kCombiningClasses[{len(ranges)}] = {{")
    for i in range(0, len(ranges), 4):
        lines.append("  " + " ".join(f"{{0x{a:X}, 0x{b:X}, {k}}}," for a, b, k in ranges[i:i + 4]))
    lines.append("};")
    lines.append(f"const std::size_t kCombiningClassCount = {len(ranges)};")
    comps = sorted(((a << 21) | b, c) for (a, b), c in compose.items())
    lines.append(f"const Composition kCompositions[{len(comps)}] = {{")
    for i in range(0, len(comps), 4):
        lines.append("  " + " ".join(f"{{0x{k:X}ull, 0x{c:X}}}," for k, c in comps[i:i + 4]))
    lines.append("};")
    lines.append(f"const std::size_t kCompositionCount = {len(comps)};")
    lines.append("")
    lines.append("}  // namespace fp4serve::tokenizer::nfc_data")
    with open(OUT, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def main():
    decomp, ccc, compose = build_tables()
    bad = validate(decomp, ccc, compose)
    print(f"decompositions {len(decomp)}, combining classes {len(ccc)}, compositions {len(compose)}, "
          f"mismatches vs HF NFC {bad}")
    if bad:
        sys.exit("refusing to write tables that disagree with HF")
    write_cpp(decomp, ccc, compose)
    print("wrote", OUT)


if __name__ == "__main__":
    main()
