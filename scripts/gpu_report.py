#!/usr/bin/env python3
"""Writes the GPU check's report (scripts/gpu-check.sh's last phase): OUT/report.md from what the earlier
phases left in OUT (device.txt, ctest.log, cuda_ops_bench.json/.md) and the phase times.

  - the device, and each phase's time and status;
  - the gpu tests: the ctest summary, the failures, the batch-invariance tests;
  - the per-op NMSE of the CUDA column, read from the op harness's table (FP4SERVE_BACKEND_OPS_TABLE=1
    prints it; ctest -V prefixes each line with the test's number);
  - the op benchmark's table, with the issue's headline figures first (NVFP4 GEMV at M = 1, attention
    decode at 32k context).
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
    last = [sec for sec in sections if sec[0].startswith(("## Phases", "## Headline"))]
    return "\n".join(line for sec in [s for s in sections if s not in last] + last for line in sec)


if __name__ == "__main__":
    sys.exit(main())
