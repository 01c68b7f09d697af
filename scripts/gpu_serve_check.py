#!/usr/bin/env python3
"""The serving section of scripts/gpu-check.sh (issue 16, point 6), on a model `fp4serve synth` wrote:

  1. bench model  `fp4serve bench model --device D`: batch-1 decode tok/s and its fraction of the
                  roofline (active bytes per token x tok/s / the device's measured copy bandwidth)
  2. start        `fp4serve serve --device D`: seconds from the process start to the first /health 200
  3. load test    `fp4serve bench serve` at a scaled-down version of the seeds' load test (32 concurrent
                  clients, long random prompts, 256 output tokens, --ignore-eos): TTFT, TPOT, throughput,
                  peak KV cache usage (the client's /metrics sampler)
  4. step times   fp4serve:engine_step_duration_seconds read from /metrics before and after the load
                  test: p50, p99, max and the steps above 3x the median, from the histogram's buckets
                  (2^(1/4) apart: each figure is a bucket's bounds, never finer)

Writes OUT/serving.json (what scripts/gpu_report.py's "Serving" section reads) and appends every
command's output to OUT/serving.log. Each step has its own time limit within --budget-s; a step that
fails is recorded and the later ones still run where they can. The same commands run on the CPU with a
tiny synth model (--device cpu: scripts/gpu-check.sh's dry run), so they and their parsing are tested
without a GPU. Python 3 standard library only.

  scripts/gpu_serve_check.py --binary FP4SERVE --model DIR --tokenizer DIR --device cuda --out OUT
      [--layers N] [--synth-s S] [--input-len 2048] [--output-len 256] [--num-prompts 64]
      [--concurrency 32] [--budget-s 150]
  scripts/gpu_serve_check.py --self-test
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import time
import unittest
import urllib.request

STEP_METRIC = "fp4serve:engine_step_duration_seconds"
FULL_LAYERS = 40  # Qwen3.6-35B-A3B


# ---- the step-time histogram ------------------------------------------------------------------------

BUCKET_RE = re.compile(r'^' + re.escape(STEP_METRIC) + r'_bucket\{(?:[^}]*,)?le="([^"]+)"(?:,[^}]*)?\} (\S+)$')


def parse_step_buckets(metrics_text: str) -> dict[float, float]:
    """{upper bound: cumulative count} of the step-time histogram (summed over label sets)."""
    out: dict[float, float] = {}
    for line in metrics_text.splitlines():
        m = BUCKET_RE.match(line)
        if m:
            le = math.inf if m.group(1) == "+Inf" else float(m.group(1))
            out[le] = out.get(le, 0.0) + float(m.group(2))
    return out


def step_stats(before: dict[float, float], after: dict[float, float]) -> dict:
    """The steps between two scrapes, from cumulative bucket counts: count, p50, p99 and max as
    (lower, upper] bucket bounds, and the steps above 3x the median as [at least, at most]."""
    bounds = sorted(after)
    cum = [after[b] - before.get(b, 0.0) for b in bounds]
    counts = [c - (cum[i - 1] if i else 0.0) for i, c in enumerate(cum)]
    total = cum[-1] if cum else 0.0
    res: dict = {"steps": int(total)}
    if total <= 0:
        return res
    lower = [0.0] + bounds[:-1]

    def quantile(q):
        i = next(i for i, c in enumerate(cum) if c >= q * total)
        return [lower[i], bounds[i]]

    res["p50_s"] = quantile(0.5)
    res["p99_s"] = quantile(0.99)
    top = max(i for i, n in enumerate(counts) if n > 0)
    res["max_s"] = [lower[top], bounds[top]]
    med_lo, med_hi = res["p50_s"]
    # Surely above 3x the median: a bucket whose lower bound is past 3x the median's upper bound;
    # perhaps above: a bucket whose upper bound is past 3x the median's lower bound.
    res["above_3x_median"] = [int(sum(n for n, lo in zip(counts, lower) if lo >= 3 * med_hi)),
                              int(sum(n for n, hi in zip(counts, bounds) if hi > 3 * med_lo))]
    return res


# ---- the steps ----------------------------------------------------------------------------------------

class Run:
    def __init__(self, args):
        self.a = args
        self.t0 = time.time()
        self.deadline = self.t0 + args.budget_s
        self.log = open(os.path.join(args.out, "serving.log"), "a", encoding="utf-8")
        self.result: dict = {"device": args.device, "layers": args.layers, "model": args.model, "errors": []}
        if args.synth_s is not None:
            self.result["synth_s"] = args.synth_s
        self.env = dict(os.environ, OMP_WAIT_POLICY="passive")

    def say(self, text: str):
        line = f"[gpu_serve_check {time.time() - self.t0:5.0f}s] {text}"
        print(line, flush=True)
        self.log.write(line + "\n")
        self.log.flush()

    def left(self, reserve: float = 0.0) -> float:
        return self.deadline - time.time() - reserve

    def error(self, what: str):
        self.say("ERROR " + what)
        self.result["errors"].append(what)

    def command(self, name: str, argv: list[str], limit: float) -> subprocess.CompletedProcess | None:
        self.say(f"{name}: {' '.join(argv)} (limit {limit:.0f} s)")
        self.log.write(f"---- {name} ----\n")
        self.log.flush()
        try:
            r = subprocess.run(argv, stdout=self.log, stderr=subprocess.STDOUT, env=self.env, timeout=max(limit, 5))
        except subprocess.TimeoutExpired:
            self.error(f"{name}: stopped at its limit of {limit:.0f} s")
            return None
        if r.returncode != 0:
            self.error(f"{name}: exit status {r.returncode} (serving.log has its output)")
        return r

    def bench_model(self):
        path = os.path.join(self.a.work, "bench_model.json")
        r = self.command("bench model", [self.a.binary, "bench", "model", "--model", self.a.model, "--device",
                                         self.a.device, "--batch", "1", "--prompt-len", str(self.a.bench_prompt_len),
                                         "--decode-prompt-len", "16", "--decode-steps", str(self.a.decode_steps),
                                         "--json", path], max(min(0.35 * self.a.budget_s, self.left()), 5))
        if r is None or r.returncode != 0:
            return
        j = json.load(open(path))
        d1 = next((d for d in j["decode"] if d["batch"] == 1), None)
        bm = {"device_line": j.get("device"), "description": j.get("description"),
              "active_bytes_per_token": j.get("active_bytes_per_token"),
              "bandwidth_gbs": j["roofline"].get("bandwidth_gbs"),
              "device_copy_gbs": j["roofline"].get("device_copy_gbs"),
              "prefill_tok_s": j["prefill"]["tok_s"], "prefill_tokens": j["prefill"]["prompt_len"]}
        if d1:
            bm.update(decode_tok_s=d1["tok_s"], decode_ms_per_step=1000.0 * d1["seconds"] / d1["steps"],
                      roofline_fraction=d1["efficiency"], decode_steps=d1["steps"])
        self.result["bench_model"] = bm

    def serve_and_load(self):
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        argv = [self.a.binary, "serve", self.a.model, "--device", self.a.device, "--host", "127.0.0.1", "--port",
                str(port), "--tokenizer", self.a.tokenizer, "--max-model-len",
                str(self.a.input_len + self.a.output_len + 64), "--max-num-seqs", str(self.a.concurrency)]
        argv += self.a.serve_arg
        self.say("serve: " + " ".join(argv))
        self.log.write("---- serve ----\n")
        self.log.flush()
        started = time.time()
        proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        try:
            ready = self.wait_ready(proc, url, started, min(self.left(reserve=0.3 * self.a.budget_s), 300))
            if ready is None:
                return
            self.result["ready_s"] = ready
            self.result["ready_s_40_layers"] = ready * FULL_LAYERS / max(1, self.a.layers)
            before = self.scrape(url)
            self.load_test(url)
            after = self.scrape(url)
            if before is not None and after is not None:
                self.result["steps"] = step_stats(parse_step_buckets(before), parse_step_buckets(after))
                if not parse_step_buckets(after):
                    self.error(f"/metrics has no {STEP_METRIC}")
        finally:
            stop(proc)

    def wait_ready(self, proc, url, started, limit) -> float | None:
        while time.time() - started < limit:
            if proc.poll() is not None:
                self.error(f"serve exited with {proc.returncode} before /health answered 200")
                return None
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as r:
                    if r.status == 200:
                        t = time.time() - started
                        self.say(f"serve: /health 200 after {t:.1f} s")
                        return t
            except OSError:
                pass
            time.sleep(0.1)
        self.error(f"serve: no /health 200 within {limit:.0f} s")
        return None

    def scrape(self, url) -> str | None:
        try:
            with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
                return r.read().decode()
        except OSError as e:
            self.error(f"/metrics: {e}")
            return None

    def load_test(self, url):
        name = "bench_serve.json"
        r = self.command("bench serve", [
            self.a.binary, "bench", "serve", "--base-url", url, "--dataset-name", "random", "--random-input-len",
            str(self.a.input_len), "--random-output-len", str(self.a.output_len), "--num-prompts",
            str(self.a.num_prompts), "--max-concurrency", str(self.a.concurrency), "--ignore-eos", "--seed", "0",
            "--tokenizer", self.a.tokenizer, "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles",
            "50,99", "--kv-sample-interval", "0.5", "--save-result", "--result-dir", self.a.work, "--result-filename",
            name], max(self.left(reserve=10), 10))
        if r is None or r.returncode != 0:
            return
        j = json.load(open(os.path.join(self.a.work, name)))
        keep = ("completed", "failed", "duration", "total_input_tokens", "total_output_tokens", "request_throughput",
                "output_throughput", "total_token_throughput", "max_output_tokens_per_s", "peak_kv_cache_usage",
                "median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms", "median_itl_ms", "p99_itl_ms",
                "median_e2el_ms", "p99_e2el_ms")
        self.result["bench_serve"] = {k: j.get(k) for k in keep}
        self.result["bench_serve"].update(input_len=self.a.input_len, output_len=self.a.output_len,
                                          num_prompts=self.a.num_prompts, concurrency=self.a.concurrency)

    def run(self) -> int:
        self.bench_model()
        if self.left() > 20:
            self.serve_and_load()
        else:
            self.error("no time left for serve and the load test")
        self.result["seconds"] = round(time.time() - self.t0, 1)
        with open(os.path.join(self.a.out, "serving.json"), "w") as f:
            json.dump(self.result, f, indent=2)
        self.say(f"done in {self.result['seconds']} s, {len(self.result['errors'])} error(s)")
        return 1 if self.result["errors"] else 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc: subprocess.Popen):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


# ---- self-test -----------------------------------------------------------------------------------------

class SelfTest(unittest.TestCase):
    @staticmethod
    def page(counts: dict[float, int]) -> str:
        """A /metrics page with these cumulative bucket counts (and other metrics around them)."""
        lines = ["# HELP vllm:iteration_tokens_total x", 'vllm:iteration_tokens_total_bucket{engine="0",le="8.0"} 3']
        for le, n in counts.items():
            label = "+Inf" if le == math.inf else repr(le)
            lines.append(f'{STEP_METRIC}_bucket{{engine="0",le="{label}",model_name="m"}} {float(n)}')
        lines.append(f'{STEP_METRIC}_count{{engine="0",model_name="m"}} 1.0')
        return "\n".join(lines) + "\n"

    def test_buckets_are_read_by_their_bound(self):
        b = parse_step_buckets(self.page({0.25: 1, 0.5: 4, math.inf: 5}))
        self.assertEqual(b, {0.25: 1.0, 0.5: 4.0, math.inf: 5.0})

    def test_stats_of_the_steps_between_two_scrapes(self):
        before = parse_step_buckets(self.page({0.01: 5, 0.02: 5, 0.04: 5, 0.08: 5, 0.16: 5, math.inf: 5}))
        # 100 steps in (0.01, 0.02], 2 in (0.04, 0.08], 1 in (0.08, 0.16]: the median bucket is
        # (0.01, 0.02]; 3x its bounds is (0.03, 0.06]: the (0.04, 0.08] bucket may or may not be above
        # it, the (0.08, 0.16] one surely is.
        after = parse_step_buckets(self.page({0.01: 5, 0.02: 105, 0.04: 105, 0.08: 107, 0.16: 108, math.inf: 108}))
        s = step_stats(before, after)
        self.assertEqual(s["steps"], 103)
        self.assertEqual(s["p50_s"], [0.01, 0.02])
        self.assertEqual(s["p99_s"], [0.04, 0.08])
        self.assertEqual(s["max_s"], [0.08, 0.16])
        self.assertEqual(s["above_3x_median"], [1, 3])

    def test_no_steps_no_figures(self):
        b = parse_step_buckets(self.page({0.5: 2, math.inf: 2}))
        self.assertEqual(step_stats(b, b), {"steps": 0})

    def test_uniform_steps_have_none_above_3x_the_median(self):
        after = parse_step_buckets(self.page({0.01: 0, 0.02: 50, 0.04: 50, math.inf: 50}))
        self.assertEqual(step_stats({}, after)["above_3x_median"], [0, 0])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--binary")
    p.add_argument("--model")
    p.add_argument("--tokenizer")
    p.add_argument("--device", default="cuda")
    p.add_argument("--out")
    p.add_argument("--work", help="scratch directory for the JSON results (default: OUT)")
    p.add_argument("--layers", type=int, default=FULL_LAYERS, help="the synth model's layer count")
    p.add_argument("--synth-s", type=float, help="how long the synth took (reported)")
    p.add_argument("--input-len", type=int, default=2048)
    p.add_argument("--output-len", type=int, default=256)
    p.add_argument("--num-prompts", type=int, default=64)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--decode-steps", type=int, default=64)
    p.add_argument("--bench-prompt-len", type=int, default=512)
    p.add_argument("--serve-arg", action="append", default=[], help="one more argument for serve (repeatable)")
    p.add_argument("--budget-s", type=float, default=150)
    p.add_argument("--self-test", action="store_true")
    a = p.parse_args()
    if a.self_test:
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(SelfTest)
        return 0 if unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful() else 1
    for need in ("binary", "model", "tokenizer", "out"):
        if not getattr(a, need):
            p.error(f"--{need} is required")
    a.work = a.work or a.out
    os.makedirs(a.out, exist_ok=True)
    os.makedirs(a.work, exist_ok=True)
    return Run(a).run()


if __name__ == "__main__":
    sys.exit(main())
