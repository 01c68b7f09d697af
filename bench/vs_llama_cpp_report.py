#!/usr/bin/env python3
"""The table of bench/vs_llama_cpp.sh: reads one results directory it wrote and prints engine, format,
pp512 and tg128 tok/s and the fp4serve / llama.cpp ratios. Standard library only.

Each figure is the best of the runs, with the median beside it: other work on the machine only ever
slows a run down (on a shared 2-core machine by up to 10x), so the fastest run is the least disturbed
one; the ratios use the best runs. A median far below the best says the machine was busy.

    python3 bench/vs_llama_cpp_report.py .cache/llama.cpp/results/<stamp>

Files read (whichever exist):
    llama.cpp-<LABEL>[-<r>].json  llama-bench -o json: one object per test (n_prompt/n_gen, samples_ts)
    fp4serve-<fmt>-bench-<r>.json `fp4serve bench model --json`: prefill.tok_s, decode[batch 1].tok_s
    fp4serve-<fmt>-pp-<r>.log     `fp4serve generate` stderr: "prefill: N tokens in S s (X tok/s)"
    fp4serve-<fmt>-tg-<r>.log     `fp4serve generate` stderr: "decode: N tokens in S s (X tok/s)"
"""
import glob
import json
import os
import re
import statistics
import sys

# What each row's weights are (the synthetic model's layout: see bench/vs_llama_cpp.sh).
FORMATS = {
    ("fp4serve", "nvfp4"): "ModelOpt NVFP4 experts/shared/lm_head, FP8 attn+GDN proj",
    ("fp4serve", "bf16"): "BF16",
    ("llama.cpp", "NVFP4"): "GGUF NVFP4 (same bytes), Q8_0 attn+GDN proj (from FP8)",
    ("llama.cpp", "MXFP4_MOE"): "GGUF MXFP4 experts, Q8_0 everything else",
    ("llama.cpp", "BF16"): "GGUF BF16",
}
# fp4serve format -> the llama.cpp rows it is compared with (also the order of the table's rows).
COMPARE = {"nvfp4": ["NVFP4", "MXFP4_MOE"], "bf16": ["BF16"]}
LLAMA_ORDER = [label for labels in COMPARE.values() for label in labels]


def ordered(rows, order):
    return sorted(rows.items(), key=lambda kv: (order.index(kv[0]) if kv[0] in order else len(order), kv[0]))


def llama_rows(results):
    samples = {}  # label -> ([pp samples], [tg samples])
    for path in sorted(glob.glob(os.path.join(results, "llama.cpp-*.json"))):
        m = re.match(r"llama\.cpp-(.+?)(?:-\d+)?\.json$", os.path.basename(path))
        with open(path) as f:
            tests = json.load(f)
        pp, tg = samples.setdefault(m.group(1), ([], []))
        for t in tests:
            if t["n_prompt"] == 512 and t["n_gen"] == 0:
                pp.extend(t["samples_ts"])
            elif t["n_prompt"] == 0 and t["n_gen"] == 128:
                tg.extend(t["samples_ts"])
    return {label: (summary(pp), summary(tg)) for label, (pp, tg) in samples.items()}


def _numbers(paths, pattern):
    out = []
    for p in paths:
        with open(p) as f:
            m = re.search(pattern, f.read())
        if not m:
            raise SystemExit(f"vs_llama_cpp_report.py: no match for {pattern!r} in {p}")
        out.append(float(m.group(1)))
    return out


def fp4serve_rows(results):
    rows = {}
    names = os.listdir(results)
    fmts = sorted({m.group(1) for n in names if (m := re.match(r"fp4serve-(\w+?)-(bench|pp|tg)-\d+\.", n))})
    for fmt in fmts:
        bench = sorted(glob.glob(os.path.join(results, f"fp4serve-{fmt}-bench-*.json")))
        if bench:
            pp, tg = [], []
            for p in bench:
                with open(p) as f:
                    j = json.load(f)
                pp.append(j["prefill"]["tok_s"])
                tg.append(next(d["tok_s"] for d in j["decode"] if d["batch"] == 1))
        else:
            pp = _numbers(sorted(glob.glob(os.path.join(results, f"fp4serve-{fmt}-pp-*.log"))),
                          r"prefill: \d+ tokens in [\d.]+ s \(([\d.]+) tok/s\)")
            tg = _numbers(sorted(glob.glob(os.path.join(results, f"fp4serve-{fmt}-tg-*.log"))),
                          r"decode: \d+ tokens in [\d.]+ s \(([\d.]+) tok/s\)")
        rows[fmt] = (summary(pp), summary(tg))
    return rows


def summary(samples):
    """(best, median, count) of tok/s samples, or None."""
    return (max(samples), statistics.median(samples), len(samples)) if samples else None


def fmt_num(s):
    return "-" if s is None else f"{s[0]:.2f} ({s[1]:.2f})"


def ratio(a, b):
    return "-" if a is None or b is None or b[0] == 0 else f"{a[0] / b[0]:.2f}x"


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    results = sys.argv[1]
    llama = llama_rows(results)
    ours = fp4serve_rows(results)
    table = [("engine", "format", "pp512 tok/s best (median)", "tg128 tok/s best (median)")]
    for fmt, (pp, tg) in ordered(ours, list(COMPARE)):
        table.append(("fp4serve", FORMATS.get(("fp4serve", fmt), fmt), fmt_num(pp), fmt_num(tg)))
    for label, (pp, tg) in ordered(llama, LLAMA_ORDER):
        table.append(("llama.cpp", FORMATS.get(("llama.cpp", label), label), fmt_num(pp), fmt_num(tg)))
    widths = [max(len(r[i]) for r in table) for i in range(4)]
    for i, r in enumerate(table):
        print(f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:>{widths[2]}}  {r[3]:>{widths[3]}}")
        if i == 0:
            print("  ".join("-" * w for w in widths))
    print()
    print("fp4serve / llama.cpp (higher: fp4serve faster)")
    for fmt, (pp, tg) in ordered(ours, list(COMPARE)):
        for label in COMPARE.get(fmt, []):
            if label in llama:
                lpp, ltg = llama[label]
                print(f"  fp4serve {fmt} vs llama.cpp {label}: pp512 {ratio(pp, lpp)}, tg128 {ratio(tg, ltg)}")


if __name__ == "__main__":
    main()
