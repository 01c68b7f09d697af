#!/usr/bin/env python3
"""Writes the GPU check's report (scripts/gpu-check.sh's last phase): OUT/report.md from what the earlier
phases left in OUT (device.txt, ctest.log, cuda_ops_bench.json/.md) and the phase times.

  - the device, and each phase's time and status;
  - the gpu tests: the ctest summary, the failures, the batch-invariance tests;
  - the per-op NMSE of the CUDA column, read from the op harness's table (FP4SERVE_BACKEND_OPS_TABLE=1
    prints it; ctest -V prefixes each line with the test's number);
  - the op benchmark's table, with the issue's headline figures first (NVFP4 GEMV at M = 1, attention
    decode at 32k context);
  - serving (issue 16, point 6; OUT/serving.json from scripts/gpu_serve_check.py): batch-1 decode as a
    fraction of the HBM roofline, start to ready scaled to 40 layers, the load test's figures and its
    step-time distribution, each beside the issue's target; and the device-parametrized e2e tests
    (point 5: pytest's result lines in OUT/serving.log).
Python 3 standard library only.
  scripts/gpu_report.py --out DIR [--phases phases.tsv] [--total-s N] [--column cuda]
  scripts/gpu_report.py --self-test
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import unittest

# "12:   attention(Hq=4 ... hf-eager) seed=123 (45 ms on all backends)"
CASE_RE = re.compile(r"^(?:(\d+): )?  (\w+)\((.*)\) seed=(\d+) \(\d+ ms on all backends\)$")
# "12:     cuda               out        nmse=1.2e-05   max=0.0005   bits differ            OK"
ROW_RE = re.compile(r"^(?:(\d+): )?    (.{18}) (.+?)\s+nmse=(\S+)\s+max=(\S+)\s+(bits same(?: \(required\))?|"
                    r"bits differ(?: \(required\))?|-)\s+(.*)$")
# "  5/40 Test  #5: cuda.BackendOps.AttentionBatchInvariance .......   Passed    2.31 sec"
RESULT_RE = re.compile(r"^\s*\d+/\d+ Test\s+#\d+: (\S+) \.*\s*(?:\*\*\*)?(Passed|Failed|Timeout|Not Run|Exception|"
                       r"Skipped|Subprocess aborted|SEGFAULT)")


def parse_harness(text: str, column: str):
    """Rows (op, shape, output, nmse, max, bits, verdict) of `column` in the harness's tables."""
    current: dict[str, tuple[str, str]] = {}  # test number -> the case its next rows belong to
    rows = []
    for line in text.splitlines():
        m = CASE_RE.match(line)
        if m:
            current[m.group(1) or ""] = (m.group(2), m.group(3))
            continue
        m = ROW_RE.match(line)
        if m and m.group(2).strip() == column:
            op, shape = current.get(m.group(1) or "", ("?", "?"))
            rows.append((op, shape, m.group(3), m.group(4), m.group(5), m.group(6), m.group(7).strip()))
    return rows


def parse_results(text: str):
    return [(m.group(1), m.group(2)) for m in map(RESULT_RE.match, text.splitlines()) if m]


# "12: C++ exception with description "..." thrown in the test body." / "12: ...cpp:40: Failure"
START_RE = re.compile(r"^\s*Start\s+(\d+): (\S+)$")


def first_failures(text: str) -> dict[str, str]:
    """The first failure message of each test (by name), from ctest -V's numbered output lines."""
    names: dict[str, str] = {}
    out: dict[str, str] = {}
    pending: dict[str, list[str]] = {}  # lines after a "Failure" line, up to the test's [  FAILED  ]
    for line in text.splitlines():
        m = START_RE.match(line)
        if m:
            names[m.group(1)] = m.group(2)
            continue
        m = re.match(r"^(\d+): (.*)$", line)
        if not m or m.group(1) not in names:
            continue
        num, body = m.groups()
        name = names[num]
        if name in out:
            continue
        if "C++ exception with description" in body and name not in pending:
            out[name] = body.strip()
        elif name in pending:
            if body.startswith("[  FAILED  ]") or len(pending[name]) == 6:
                out[name] = " / ".join(pending[name])
            else:
                pending[name].append(body.strip())
        elif body.rstrip().endswith("Failure"):
            pending[name] = []
    for name, lines in pending.items():  # a log cut off before the test's [  FAILED  ]
        out.setdefault(name, " / ".join(lines))
    return {k: (v if len(v) <= 240 else v[:237] + "...") for k, v in out.items()}


def md_escape(s: str) -> str:
    return s.replace("|", "\\|")


def read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def headline(bench: dict) -> list[str]:
    out = []
    for c in bench.get("cases", []):
        if c["m"] == 1 and c["op"].startswith("linear") and c["format"] == "nvfp4" and "in_proj" in c["op"]:
            out.append(("NVFP4 GEMV, M=1 (" + c["shape"] + ")", c))
        if c["m"] == 1 and c["op"] == "attention decode":
            out.append((f"attention decode, 32k context, {c['format']} KV, 1 sequence", c))
    lines = []
    for what, c in out:
        if c["status"] == "ok":
            lines.append(f"- {what}: {c['gbs']:.0f} GB/s = {100 * c['copy_fraction']:.0f}% of the measured copy "
                         f"bandwidth ({c['us']:.1f} us/call)")
        else:
            lines.append(f"- {what}: {c['status']}")
    return lines


# Issue 16's targets (on an H200, in one gpu-check run).
TARGET_ROOFLINE = 0.50     # batch-1 decode >= 50% of the HBM roofline on the NVFP4 synth
TARGET_READY_S = 60.0      # process start to /health 200 < 60 s for 40 layers
TARGET_SLOW_STEPS = 0      # no step above 3x the median step time during the load test


def fmt_range(r, scale=1e3, unit="ms") -> str:
    lo, hi = r
    return f"{lo * scale:.3g}..{hi * scale:.3g} {unit}" if hi != float("inf") else f"> {lo * scale:.3g} {unit}"


def serving_section(out_dir: str) -> list[str]:
    r = ["## Serving (scripts/gpu_serve_check.py)", ""]
    text = read(os.path.join(out_dir, "serving.json"))
    if text is None:
        return r + ["(not run)", ""]
    try:
        j = json.loads(text)
    except json.JSONDecodeError as e:
        return r + [f"(serving.json unreadable: {e})", ""]
    layers = j.get("layers", 0)
    r.append(f"NVFP4 synth, {layers} of {40} layers, on {j.get('device')}" +
             (f"; synthesized in {j['synth_s']:.0f} s" if j.get("synth_s") is not None else "") + ".")
    r += ["", "| figure | measured | target | verdict |", "|---|---|---|---|"]
    bm = j.get("bench_model") or {}
    if "roofline_fraction" in bm:
        frac = bm["roofline_fraction"]
        r.append(f"| batch-1 decode | {bm['decode_tok_s']:.1f} tok/s ({bm['decode_ms_per_step']:.2f} ms/token) = "
                 f"{100 * frac:.1f}% of the roofline ({bm['active_bytes_per_token'] / 1e9:.2f} GB active/token, "
                 f"{bm['bandwidth_gbs']:.0f} GB/s {'copy' if bm.get('device_copy_gbs') else 'host read'} bandwidth) | "
                 f">= {100 * TARGET_ROOFLINE:.0f}% | "
                 f"{verdict(frac >= TARGET_ROOFLINE, f'{100 * (TARGET_ROOFLINE - frac):.1f} points short')} |")
    else:
        r.append(f"| batch-1 decode | not measured | >= {100 * TARGET_ROOFLINE:.0f}% | - |")
    if "ready_s" in j:
        r40 = j["ready_s_40_layers"]
        r.append(f"| start to /health 200 | {j['ready_s']:.1f} s for {layers} layers = {r40:.1f} s scaled to 40 | "
                 f"< {TARGET_READY_S:.0f} s | {verdict(r40 < TARGET_READY_S, f'{r40 - TARGET_READY_S:.1f} s over')} |")
    else:
        r.append(f"| start to /health 200 | not measured | < {TARGET_READY_S:.0f} s | - |")
    st = j.get("steps") or {}
    if st.get("steps"):
        lo, hi = st["above_3x_median"]
        slow = str(lo) if lo == hi else f"{lo}..{hi}"
        r.append(f"| steps above 3x the median (load test) | {slow} of {st['steps']} (p50 {fmt_range(st['p50_s'])}, "
                 f"p99 {fmt_range(st['p99_s'])}, max {fmt_range(st['max_s'])}) | {TARGET_SLOW_STEPS} | "
                 f"{verdict(hi <= TARGET_SLOW_STEPS, f'{lo}..{hi} slow steps') if lo == 0 or hi == 0 else verdict(False, f'at least {lo} slow steps')} |")
    else:
        r.append(f"| steps above 3x the median (load test) | not measured | {TARGET_SLOW_STEPS} | - |")
    r.append("")
    bs = j.get("bench_serve")
    if bs:
        kv = bs.get("peak_kv_cache_usage")
        r += [f"Load test (`fp4serve bench serve`: {bs['concurrency']} concurrent, {bs['num_prompts']} random prompts of "
              f"{bs['input_len']} tokens, {bs['output_len']} out, --ignore-eos): {bs.get('completed')} completed, "
              f"{bs.get('failed')} failed in {num(bs.get('duration'), '.1f')} s; TTFT median "
              f"{num(bs.get('median_ttft_ms'), '.0f')} / p99 {num(bs.get('p99_ttft_ms'), '.0f')} ms; TPOT median "
              f"{num(bs.get('median_tpot_ms'), '.1f')} / p99 {num(bs.get('p99_tpot_ms'), '.1f')} ms; ITL p99 "
              f"{num(bs.get('p99_itl_ms'), '.1f')} ms; output {num(bs.get('output_throughput'), '.0f')} tok/s, total "
              f"{num(bs.get('total_token_throughput'), '.0f')} tok/s; peak KV cache usage "
              f"{'n/a' if kv is None else f'{100 * kv:.1f}%'}.", ""]
    if bm:
        r += [f"bench model: prefill {num(bm.get('prefill_tok_s'), '.0f')} tok/s ({bm.get('prefill_tokens')} tokens); "
              f"{bm.get('device_line')}", ""]
    for e in j.get("errors", []):
        r.append(f"- error: {e}")
    if j.get("errors"):
        r.append("")
    return r


def verdict(ok: bool, gap: str) -> str:
    return "met" if ok else f"MISSED ({gap})"


def num(v, spec: str) -> str:
    return "n/a" if v is None else format(v, spec)


# pytest -rA: "PASSED tests/e2e/x.py::test_y[bf16]", "FAILED ... - AssertionError: ...", "ERROR ...".
PYTEST_RE = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)(?: - (.*))?$")
# "=== 1 failed, 9 passed in 51.36s ===", or without the rules under -q.
PYTEST_SUMMARY_RE = re.compile(r"^(?:=+ )?(\d+ (?:passed|failed|error|skipped|deselected).* in [0-9.]+s(?: \([0-9:]+\))?)"
                               r"(?: =+)?$|"
                               r"^=+ (no tests ran.*) =+$")


def e2e_section(out_dir: str) -> list[str]:
    text = read(os.path.join(out_dir, "serving.log"))
    start = text.find("---- e2e (pytest") if text else -1
    m = re.match(r"---- e2e \(pytest, (FP4SERVE_TEST_DEVICE=\w+)\)", text[start:]) if start >= 0 else None
    r = [f"## Device-parametrized e2e tests (pytest, {m.group(1) if m else 'FP4SERVE_TEST_DEVICE=cuda'})", ""]
    if start < 0:
        return r + ["(not run)", ""]
    results, summary_line = [], None
    for line in text[start:].splitlines():
        m = PYTEST_RE.match(line.strip())
        if m:
            results.append(m.groups())
        m = PYTEST_SUMMARY_RE.match(line.strip())
        if m:
            summary_line = m.group(1) or m.group(2)
    r += [summary_line or f"(no pytest summary: {len(results)} results read; the run was cut off?)", ""]
    r += [f"- {name}: {status}" + (f": `{why[:200]}`" if why else "") for status, name, why in results]
    return r + [""]


def build_report(out_dir: str, phases_path: str | None, total_s: float | None, column: str) -> str:
    r = ["# GPU check report", ""]
    device = read(os.path.join(out_dir, "device.txt"))
    r += ["## Device", "", "```", (device or "(no device.txt)").strip(), "```", ""]
    phases = read(phases_path) if phases_path else None
    if phases:
        r += ["## Phases", "", "| phase | seconds | status |", "|---|---:|---|"]
        for line in phases.strip().splitlines():
            name, secs, status = (line.split("\t") + ["", ""])[:3]
            r.append(f"| {name} | {secs} | {'ok' if status == '0' else status} |")
        if total_s is not None:
            r.append(f"| **total** | {total_s:.0f} | |")
        r.append("")
    bench = None
    bench_text = read(os.path.join(out_dir, "cuda_ops_bench.json"))
    if bench_text:
        try:
            bench = json.loads(bench_text)
        except json.JSONDecodeError as e:
            r += [f"(cuda_ops_bench.json unreadable: {e})", ""]
    if bench:
        r += ["## Headline figures", ""] + (headline(bench) or ["- (not measured)"]) + [""]
    ctest = read(os.path.join(out_dir, "ctest.log"))
    r += ["## gpu tests (ctest -L gpu)", ""]
    if ctest is None:
        r += ["(not run)", ""]
    else:
        summary = [l.strip() for l in ctest.splitlines() if re.search(r"tests passed|No tests were found", l)]
        results = parse_results(ctest)
        failed = [(n, s) for n, s in results if s != "Passed"]
        r += [summary[-1] if summary else f"(no ctest summary: {len(results)} results read)", ""]
        if failed:
            why = first_failures(ctest)
            r += ["Failed (with the first failure message):", ""]
            r += [f"- {n}: {s}" + (f": `{why[n]}`" if n in why else "") for n, s in failed] + [""]
        inv = [(n, s) for n, s in results if "Invariance" in n or "invariance" in n]
        r += ["### Batch invariance (bit for bit)", ""]
        r += [f"- {n}: {s}" for n, s in inv] or ["- (no invariance test ran)"]
        r.append("")
        rows = parse_harness(ctest, column)
        bad = sum(1 for row in rows if not row[6].startswith("OK"))
        r += [f"### Per-op NMSE, {column} column ({len(rows)} outputs, {bad} failing)", ""]
        if rows:
            r += ["| op | shape | output | NMSE | max | bits | verdict |", "|---|---|---|---:|---:|---|---|"]
            r += ["| " + " | ".join(md_escape(c) for c in row) + " |" for row in rows]
        else:
            r.append("(no table rows for this column: FP4SERVE_BACKEND_OPS_TABLE=1 unset, or the harness did not run)")
        r.append("")
    md = read(os.path.join(out_dir, "cuda_ops_bench.md"))
    r += ["## Op benchmark (bench/cuda_ops_bench.cpp)", ""]
    if md:
        r += [l for l in md.splitlines() if not l.startswith("# ")]
    else:
        r.append("(not run)")
    r.append("")
    r += serving_section(out_dir)
    r += e2e_section(out_dir)
    return "\n".join(r)


class SelfTest(unittest.TestCase):
    LOG = """\
12: [backend_ops] cuda: no device, column skipped
12:   attention(Hq=4 Hkv=2 D=64 bf16 paged/16 pos0+T=0+7 (x) hf-eager) seed=123 (45 ms on all backends)
12:     cpu scalar         k cache    nmse=0          max=0        bits same (required)   OK
12:     cuda               out        nmse=1.2e-05    max=0.0005   bits differ            OK
13:   linear(M=1 K=64 nvfp4) seed=9 (3 ms on all backends)
12:     cuda               extra      nmse=-          max=0.0005   -                      FAIL: threw not implemented
13:     cuda               out        nmse=0.01       max=0.0005   bits differ            FAIL
  1/3 Test  #12: cuda.BackendOps.Attention ........................   Passed    2.31 sec
  2/3 Test  #13: cuda.BackendOps.Linear ...........................***Failed    0.50 sec
  3/3 Test  #14: cuda.BackendOps.AttentionBatchInvariance .........   Passed    1.00 sec

67% tests passed, 1 tests failed out of 3
"""

    def test_harness_rows_follow_their_test_number(self):
        rows = parse_harness(self.LOG, "cuda")
        self.assertEqual(rows[0], ("attention", "Hq=4 Hkv=2 D=64 bf16 paged/16 pos0+T=0+7 (x) hf-eager", "out",
                                   "1.2e-05", "0.0005", "bits differ", "OK"))
        self.assertEqual(rows[1][:3], ("attention", "Hq=4 Hkv=2 D=64 bf16 paged/16 pos0+T=0+7 (x) hf-eager", "extra"))
        self.assertEqual(rows[1][6], "FAIL: threw not implemented")
        self.assertEqual(rows[2][:4], ("linear", "M=1 K=64 nvfp4", "out", "0.01"))
        self.assertEqual(parse_harness(self.LOG, "cpu scalar")[0][2:], ("k cache", "0", "0", "bits same (required)", "OK"))

    def test_first_failure_message_per_test(self):
        log = ("      Start  2: cuda.BackendOpsLayout.Embedding\n2: [ RUN      ] BackendOpsLayout.Embedding\n"
               "2: unknown file: Failure\n2: C++ exception with description \"no device\" thrown in the test body.\n"
               "      Start  3: cuda.BackendOps.Moe\n3: x.cpp:40: Failure\n3: Expected equality of these values:\n"
               "3:   err\n3: [  FAILED  ] BackendOps.Moe (1 ms)\n")
        self.assertEqual(first_failures(log), {
            "cuda.BackendOpsLayout.Embedding": 'C++ exception with description "no device" thrown in the test body.',
            "cuda.BackendOps.Moe": "Expected equality of these values: / err"})

    def test_report_headline_and_summary(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            case = {"op": "linear gdn in_proj_qkvz", "shape": "12288x2048", "m": 1, "format": "nvfp4",
                    "status": "ok", "us": 10.0, "bytes": 1.4e7, "flops": 5e7, "gbs": 1400.0,
                    "copy_fraction": 0.35, "tflops": 0.005}
            dec = dict(case, op="attention decode", format="fp8", status="not implemented: attention")
            with open(os.path.join(d, "cuda_ops_bench.json"), "w") as f:
                json.dump({"device": "x", "copy_bandwidth_gbs": 4000, "cases": [case, dec]}, f)
            with open(os.path.join(d, "cuda_ops_bench.md"), "w") as f:
                f.write("# CUDA op benchmark\n\n| op | shape | M | format | us/call | GB/s | %copy | TFLOP/s | status |\n"
                        "| linear | 1x1 | 1 | nvfp4 | 1.0 | 1 | 1% | - | ok |\n"
                        "| sample | V | 1 | f32 | - | - | - | - | not implemented: sample |\n")
            with open(os.path.join(d, "ctest.log"), "w") as f:
                f.write(self.LOG)
            with open(os.path.join(d, "phases.tsv"), "w") as f:
                f.write("build\t100\t0\ntests\t20\t8\n")
            text = build_report(d, os.path.join(d, "phases.tsv"), 130, "cuda")
        self.assertIn("- NVFP4 GEMV, M=1 (12288x2048): 1400 GB/s = 35% of the measured copy bandwidth", text)
        self.assertIn("attention decode, 32k context, fp8 KV, 1 sequence: not implemented: attention", text)
        self.assertIn("| tests | 20 | 8 |", text)
        short = summary(text)
        self.assertNotIn("| linear | 1x1 |", short)         # a bench row that ran: full report only
        self.assertIn("| sample | V |", short)              # one that did not: kept
        self.assertIn("| linear | M=1 K=64 nvfp4 | out | 0.01 |", short)  # a failing NMSE row is kept
        self.assertNotIn("| 1.2e-05 |", short)              # a passing one is not
        tail = short.rstrip().splitlines()  # phases, then the headline figures, end the summary
        self.assertTrue(tail[-1].startswith("- attention decode"))
        self.assertGreater(short.index("## Headline"), short.index("## Phases"))
        self.assertGreater(short.index("## Phases"), short.index("## Op benchmark"))

    def test_serving_figures_beside_the_targets(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            serving = {"device": "cuda", "layers": 20, "synth_s": 31.0, "errors": ["bench serve: exit status 1"],
                       "bench_model": {"decode_tok_s": 250.0, "decode_ms_per_step": 4.0, "roofline_fraction": 0.42,
                                       "active_bytes_per_token": 7.2e9, "bandwidth_gbs": 4300.0,
                                       "device_copy_gbs": 4300.0,
                                       "prefill_tok_s": 9000.0, "prefill_tokens": 512, "device_line": "device: cuda"},
                       "ready_s": 20.0, "ready_s_40_layers": 40.0,
                       "steps": {"steps": 300, "p50_s": [0.0189, 0.0225], "p99_s": [0.107, 0.127],
                                 "max_s": [0.213, 0.254], "above_3x_median": [4, 6]},
                       "bench_serve": {"completed": 64, "failed": 0, "duration": 41.5, "median_ttft_ms": 900.0,
                                       "p99_ttft_ms": 5000.0, "median_tpot_ms": 30.0, "p99_tpot_ms": 45.0,
                                       "p99_itl_ms": 120.0, "output_throughput": 400.0,
                                       "total_token_throughput": 3600.0, "peak_kv_cache_usage": 0.125,
                                       "input_len": 2048, "output_len": 256, "num_prompts": 64, "concurrency": 32}}
            with open(os.path.join(d, "serving.json"), "w") as f:
                json.dump(serving, f)
            with open(os.path.join(d, "serving.log"), "w") as f:
                f.write("serve noise\n---- e2e (pytest, FP4SERVE_TEST_DEVICE=cuda) ----\nPASSED tests/e2e/test_device_parity.py::test_goldens[bf16]\n"
                        "FAILED tests/e2e/test_device_parity.py::test_goldens[fp8] - AssertionError: prompt 1 step 3\n"
                        "1 failed, 1 passed in 12.50s\n")
            text = build_report(d, None, None, "cuda")
        self.assertIn("= 42.0% of the roofline (7.20 GB active/token, 4300 GB/s copy bandwidth) | >= 50% | "
                      "MISSED (8.0 points short) |", text)
        self.assertIn("| start to /health 200 | 20.0 s for 20 layers = 40.0 s scaled to 40 | < 60 s | met |", text)
        self.assertIn("| 4..6 of 300 (p50 18.9..22.5 ms, p99 107..127 ms, max 213..254 ms) | 0 | "
                      "MISSED (at least 4 slow steps) |", text)
        self.assertIn("peak KV cache usage 12.5%", text)
        self.assertIn("- error: bench serve: exit status 1", text)
        self.assertIn("## Device-parametrized e2e tests (pytest, FP4SERVE_TEST_DEVICE=cuda)\n\n1 failed, 1 passed in 12.50s",
                      text)
        self.assertEqual(PYTEST_SUMMARY_RE.match("===== 3 passed, 7 deselected in 40.13s =====").group(1),
                         "3 passed, 7 deselected in 40.13s")
        self.assertEqual(PYTEST_SUMMARY_RE.match("10 passed in 70.27s (0:01:10)").group(1), "10 passed in 70.27s (0:01:10)")
        self.assertIn("- tests/e2e/test_device_parity.py::test_goldens[fp8]: FAILED: `AssertionError: prompt 1 step 3`", text)
        short = summary(text)
        self.assertGreater(short.index("## Phases") if "## Phases" in short else len(short), 0)
        self.assertIn("## Serving", short)

    def test_serving_not_run(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            text = build_report(d, None, None, "cuda")
        self.assertIn("## Serving (scripts/gpu_serve_check.py)\n\n(not run)", text)

    def test_results(self):
        self.assertEqual(parse_results(self.LOG), [("cuda.BackendOps.Attention", "Passed"),
                                                   ("cuda.BackendOps.Linear", "Failed"),
                                                   ("cuda.BackendOps.AttentionBatchInvariance", "Passed")])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", help="the GPU check's output directory")
    p.add_argument("--phases", help="phase<TAB>seconds<TAB>status lines")
    p.add_argument("--total-s", type=float)
    p.add_argument("--column", default="cuda", help="the harness column to report")
    p.add_argument("--print-summary", action="store_true", help="print the report without its long tables")
    p.add_argument("--self-test", action="store_true")
    a = p.parse_args()
    if a.self_test:
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(SelfTest)
        return 0 if unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful() else 1
    if not a.out:
        p.error("--out DIR")
    text = build_report(a.out, a.phases, a.total_s, a.column)
    with open(os.path.join(a.out, "report.md"), "w", encoding="utf-8") as f:
        f.write(text)
    if a.print_summary:
        print(summary(text))
    return 0


def summary(report: str) -> str:
    """The report without its long tables (the per-op NMSE rows, the bench rows): what a terminal whose
    last lines are all that comes back should end with. Failing NMSE rows and bench rows are kept."""
    keep = []
    section = ""
    for line in report.splitlines():
        if line.startswith("#"):
            section = line
        if line.startswith("| ") and ("NMSE" in section or "benchmark" in section):
            if "NMSE" in section and ("| OK |" in line or line.startswith("| op ")):
                continue
            if "benchmark" in section and not line.startswith("| op ") and "| ok |" in line:
                continue
        keep.append(line)
    # The phase times and the headline figures last, where a cut-off output still shows them.
    sections, current = [], []
    for line in keep:
        if line.startswith("## ") and current:
            sections.append(current)
            current = []
        current.append(line)
    sections.append(current)
    # In this order: the serving figures, the e2e tests, the phases, the ops' headline figures last.
    order = ("## Serving", "## Device-parametrized", "## Phases", "## Headline")
    last = [sec for prefix in order for sec in sections if sec[0].startswith(prefix)]
    return "\n".join(line for sec in [s for s in sections if s not in last] + last for line in sec)


if __name__ == "__main__":
    sys.exit(main())
