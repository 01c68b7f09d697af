#!/usr/bin/env python3
"""Checks the compiled CUDA kernels without a GPU (CI's "cuda-build" test; docs/ARCHITECTURE.md, "How the
CUDA code is checked without a GPU").

Reads cuobjdump's report of the built library (libfp4serve_cuda.a) and fails when
  - a kernel has a stack frame or local memory (STACK > 0 or LOCAL > 0: register spills, per-thread
    arrays indexed at run time), unless the allowlist names it with a reason and a byte bound;
  - a kernel's static shared memory exceeds the per-block limit of its architecture (cuda_limits.h:
    99 KB on sm_120a, the seeds' crash class, and 227 KB on sm_90a). The figure is cuobjdump's SHARED,
    which on these architectures includes 1 KB reserved per block by the system once a kernel uses shared
    memory (a 1 KB tile reads 2048), so the check errs on the safe side; dynamic shared memory is not in
    it (each kernel static_asserts that against cuda_limits.h);
  - a kernel or an object file lacks SASS for one of the architectures the fatbinary must hold
    (sm_90a and sm_120a);
  - cuobjdump's output cannot be parsed (an unknown line, a function without its resource line, no
    kernel at all): a check that passes because it read nothing is worse than none.
It prints one row per kernel and architecture: registers, shared memory, stack, local memory.

  scripts/cuda_resource_check.py build/src/kernels/cuda/libfp4serve_cuda.a
  scripts/cuda_resource_check.py --self-test        the parser and the checks on captured output
                                                      (tests/data/cuda/, a real spill among it)
Python 3 standard library only. cuobjdump: $CUOBJDUMP, the toolkit's bin/, PATH, or the copy
scripts/setup.sh installs into .cache/tools/cuobjdump (PyPI's nvidia-cuda-cuobjdump).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shutil
import subprocess
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_ARCHES = ("sm_90a", "sm_120a")
DEFAULT_LIMITS = os.path.join(ROOT, "src", "kernels", "cuda", "cuda_limits.h")
DEFAULT_ALLOWLIST = os.path.join(ROOT, "src", "kernels", "cuda", "cuda_resource_allowlist.txt")
SAMPLE_DIR = os.path.join(ROOT, "tests", "data", "cuda")
# The header constant that bounds each architecture's shared memory per block.
LIMIT_CONSTANTS = {"sm_90a": "kMaxSmemPerBlockSm90", "sm_120a": "kMaxSmemPerBlockSm120"}
PIP_CUOBJDUMP = os.path.join(ROOT, ".cache", "tools", "cuobjdump", "nvidia", "cu13", "bin", "cuobjdump")


class ParseError(Exception):
    """cuobjdump's output is not what this script understands: the check fails."""


@dataclasses.dataclass
class Kernel:
    member: str  # object file inside the archive
    arch: str    # sm_90a, sm_120a
    name: str    # mangled
    reg: int
    stack: int
    shared: int
    local: int


# ---- parsing ------------------------------------------------------------------------------------

MEMBER_RE = re.compile(r"^member (.*):([^:]+):$")
HEADER_RE = re.compile(r"^[A-Za-z_][\w ]*= ?.*$")  # "arch = sm_90a", "ptxasOptions = ..."
RESOURCE_RE = re.compile(r"^([A-Z_]+(?:\[\d+\])?):(\d+)$")


def _resources(line: str, lineno: int) -> dict[str, int]:
    out = {}
    for tok in line.split():
        m = RESOURCE_RE.match(tok)
        if not m:
            raise ParseError(f"line {lineno}: unrecognised resource field {tok!r} in {line.strip()!r}")
        out[m.group(1)] = int(m.group(2))
    return out


def parse_resource_usage(text: str, default_member: str = "<input>") -> list[Kernel]:
    """Kernels of `cuobjdump --dump-resource-usage` output, one per (member, arch, function)."""
    kernels: list[Kernel] = []
    member = default_member
    section = None  # "elf" or "ptx": the fatbin entry being described
    arch = None     # the elf entry's architecture
    in_resources = False
    pending = None  # a function name whose resource line comes next
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if pending is not None:
            if not line.startswith("  ") or "REG:" not in line:
                raise ParseError(f"line {lineno}: function {pending} has no resource line (got {line!r})")
            res = _resources(line, lineno)
            missing = [k for k in ("REG", "STACK", "SHARED", "LOCAL") if k not in res]
            if missing:
                raise ParseError(f"line {lineno}: function {pending} lacks {', '.join(missing)}")
            kernels.append(Kernel(member, arch, pending, res["REG"], res["STACK"], res["SHARED"], res["LOCAL"]))
            pending = None
            continue
        if not line.strip():
            continue
        m = MEMBER_RE.match(line)
        if m:
            member, section, arch, in_resources = m.group(2), None, None, False
            continue
        if line in ("Fatbin elf code:", "Fatbin ptx code:"):
            section, arch, in_resources = ("elf" if "elf" in line else "ptx"), None, False
            continue
        if re.fullmatch(r"=+", line):
            continue
        if line == "Resource usage:":
            if section != "elf" or arch is None:
                raise ParseError(f"line {lineno}: 'Resource usage:' outside an elf entry with an arch")
            in_resources = True
            continue
        if in_resources:
            if line == " Common:":
                continue
            if line.startswith(" Function ") and line.endswith(":"):
                pending = line[len(" Function "):-1]
                continue
            if line.startswith("  ") and ":" in line:  # the Common line: GLOBAL:0 CONSTANT[3]:64
                _resources(line, lineno)
                continue
            raise ParseError(f"line {lineno}: unrecognised line in a resource block: {line!r}")
        if section is not None and (HEADER_RE.match(line) or line == "compressed"):
            if section == "elf" and line.startswith("arch = "):
                arch = line[len("arch = "):].strip()
            continue
        raise ParseError(f"line {lineno}: unrecognised line: {line!r}")
    if pending is not None:
        raise ParseError(f"end of output: function {pending} has no resource line")
    return kernels


ELF_RE = re.compile(r"^ELF file\s+\d+: (\S+)$")
CUBIN_ARCH_RE = re.compile(r"\.(sm_\d+[af]?)\.cubin$")


def parse_list_elf(text: str, default_member: str = "<input>") -> dict[str, set[str]]:
    """Architectures of the SASS (cubins) each member holds, from `cuobjdump --list-elf` output."""
    out: dict[str, set[str]] = {}
    member = default_member
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not line.strip():
            continue
        m = MEMBER_RE.match(line)
        if m:
            member = m.group(2)
            continue
        m = ELF_RE.match(line)
        if not m:
            raise ParseError(f"list-elf line {lineno}: unrecognised line: {line!r}")
        a = CUBIN_ARCH_RE.search(m.group(1))
        if not a:
            raise ParseError(f"list-elf line {lineno}: no architecture in cubin name {m.group(1)!r}")
        out.setdefault(member, set()).add(a.group(1))
    return out


def parse_limits(header_text: str, arches) -> dict[str, int]:
    """Shared memory per block of each arch, read from cuda_limits.h ("kName = 99 * 1024;")."""
    limits = {}
    for arch in arches:
        const = LIMIT_CONSTANTS.get(arch)
        if const is None:
            raise ParseError(f"no shared-memory limit is known for {arch} (LIMIT_CONSTANTS)")
        m = re.search(rf"\b{const}\s*=\s*([0-9]+)\s*(?:\*\s*([0-9]+))?\s*;", header_text)
        if not m:
            raise ParseError(f"cuda_limits.h: cannot read {const}")
        limits[arch] = int(m.group(1)) * (int(m.group(2)) if m.group(2) else 1)
    return limits


@dataclasses.dataclass
class AllowEntry:
    pattern: re.Pattern
    max_bytes: int
    reason: str
    used: bool = False


def parse_allowlist(text: str) -> list[AllowEntry]:
    """Lines "REGEX MAX_BYTES REASON...": kernels whose demangled name matches REGEX may have a stack
    frame and local memory of up to MAX_BYTES each. '#' starts a comment line."""
    out = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 2)
        if len(parts) < 3 or not parts[1].isdigit():
            raise ParseError(f"allowlist line {lineno}: want 'REGEX MAX_BYTES REASON', got {line!r}")
        out.append(AllowEntry(re.compile(parts[0]), int(parts[1]), parts[2]))
    return out


# ---- checking -----------------------------------------------------------------------------------

def demangle(names) -> dict[str, str]:
    names = sorted(set(names))
    tool = shutil.which("c++filt")
    if not tool or not names:
        return {n: n for n in names}
    r = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True, text=True, check=False)
    lines = r.stdout.splitlines()
    if r.returncode != 0 or len(lines) != len(names):
        return {n: n for n in names}
    return dict(zip(names, lines))


def short_name(demangled: str) -> str:
    s = demangled.replace("(anonymous namespace)::", "")
    s = s[len("void "):] if s.startswith("void ") else s  # a template kernel's return type
    for prefix in ("fp4serve::kernels::cuda::", "fp4serve::cuda::", "fp4serve::"):
        s = s.replace(prefix, "")
    return s if len(s) <= 110 else s[:107] + "..."


def check(kernels: list[Kernel], elves: dict[str, set[str]], arches, limits: dict[str, int],
          allow: list[AllowEntry], out=sys.stdout) -> list[str]:
    """The failures (empty: pass); prints the table to `out`."""
    failures = []
    if not kernels:
        failures.append("no kernel found: cuobjdump's output held no function (nothing was checked)")
    names = demangle(k.name for k in kernels)
    # Every kernel in every architecture, every device object with SASS for each.
    seen: dict[tuple[str, str], set[str]] = {}
    for k in kernels:
        seen.setdefault((k.member, k.name), set()).add(k.arch)
    for (member, name), have in sorted(seen.items()):
        for arch in arches:
            if arch not in have:
                failures.append(f"{short_name(names[name])} ({member}): no {arch} SASS")
    for member in sorted({k.member for k in kernels} | set(elves)):
        have = elves.get(member, set())
        for arch in arches:
            if arch not in have:
                failures.append(f"{member}: the fatbinary holds no {arch} cubin (--list-elf)")
    rows = []
    for k in sorted(kernels, key=lambda k: (names[k.name], k.arch)):
        verdict = []
        if k.stack > 0 or k.local > 0:
            entry = next((e for e in allow if e.pattern.search(names[k.name])), None)
            if entry and max(k.stack, k.local) <= entry.max_bytes:
                entry.used = True
                verdict.append(f"allowed: {entry.reason}")
            else:
                what = f"stack {k.stack} B, local {k.local} B"
                if entry:
                    what += f" (allowlist bound {entry.max_bytes} B)"
                failures.append(f"{short_name(names[k.name])} ({k.member}, {k.arch}): {what}: register spills or a "
                                "stack frame")
                verdict.append("FAIL stack/local")
        limit = limits.get(k.arch)
        if limit is not None and k.shared > limit:
            failures.append(f"{short_name(names[k.name])} ({k.member}, {k.arch}): {k.shared} B of static shared "
                            f"memory, above the {limit // 1024} KB per block of {k.arch}")
            verdict.append("FAIL smem")
        rows.append((short_name(names[k.name]), k.arch, str(k.reg), str(k.shared), str(k.stack), str(k.local),
                     "; ".join(verdict) or "ok"))
    head = ("kernel", "arch", "regs", "smem", "stack", "local", "")
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    for r in [head] + rows:
        print("  ".join(c.ljust(w) if i in (0, 1, 6) else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))),
              file=out)
    for e in allow:
        if not e.used:
            print(f"note: allowlist entry {e.pattern.pattern!r} matched no kernel with a stack (stale?)", file=out)
    return failures


# ---- the tool -----------------------------------------------------------------------------------

def find_cuobjdump(explicit: str | None = None) -> str:
    candidates = [explicit, os.environ.get("CUOBJDUMP"), "/usr/local/cuda/bin/cuobjdump", shutil.which("cuobjdump"),
                  PIP_CUOBJDUMP]
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    raise SystemExit("cuda_resource_check: cuobjdump not found ($CUOBJDUMP, /usr/local/cuda/bin, PATH, "
                     f"{os.path.relpath(PIP_CUOBJDUMP, ROOT)}); scripts/setup.sh installs it from PyPI "
                     "(nvidia-cuda-cuobjdump)")


def run_cuobjdump(tool: str, flag: str, lib: str) -> str:
    r = subprocess.run([tool, flag, lib], capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise SystemExit(f"cuda_resource_check: {tool} {flag} {lib} failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout


def check_library(lib: str, arches, limits_path: str, allowlist_path: str, tool: str) -> int:
    if not os.path.isfile(lib):
        print(f"cuda_resource_check: {lib}: no such file (build fp4serve_cuda first)", file=sys.stderr)
        return 1
    try:
        default = os.path.basename(lib)
        kernels = parse_resource_usage(run_cuobjdump(tool, "--dump-resource-usage", lib), default)
        elves = parse_list_elf(run_cuobjdump(tool, "--list-elf", lib), default)
        with open(limits_path, encoding="utf-8") as f:
            limits = parse_limits(f.read(), arches)
        allow = []
        if allowlist_path and os.path.exists(allowlist_path):
            with open(allowlist_path, encoding="utf-8") as f:
                allow = parse_allowlist(f.read())
    except ParseError as e:
        print(f"cuda_resource_check: FAILED: cannot parse: {e}", file=sys.stderr)
        return 1
    print(f"{lib} ({tool}): {len({(k.member, k.name) for k in kernels})} kernels, "
          f"limits {', '.join(f'{a} {limits[a] // 1024} KB smem' for a in arches)}")
    failures = check(kernels, elves, arches, limits, allow)
    if failures:
        print(f"cuda_resource_check: FAILED ({len(failures)}):", file=sys.stderr)
        for f in failures:
            print(f"  {f}", file=sys.stderr)
        return 1
    print(f"cuda_resource_check: OK: no stack, no local memory, shared memory within limits, SASS for {' and '.join(arches)}")
    return 0


# ---- self-test: the parser and the checks on captured output (tests/data/cuda/) ----------------------

def _sample(name: str) -> str:
    with open(os.path.join(SAMPLE_DIR, name), encoding="utf-8") as f:
        return f.read()


class SelfTest(unittest.TestCase):
    LIMITS = {"sm_90a": 227 * 1024, "sm_120a": 99 * 1024}

    def setUp(self):
        self.usage = _sample("resource_usage_sample.txt")
        self.elf = _sample("list_elf_sample.txt")

    def run_check(self, usage=None, elf=None, allow=()):
        kernels = parse_resource_usage(self.usage if usage is None else usage)
        elves = parse_list_elf(self.elf if elf is None else elf)
        with open(os.devnull, "w") as devnull:
            return check(kernels, elves, DEFAULT_ARCHES, self.LIMITS, list(allow), out=devnull)

    def test_parses_every_kernel_of_the_capture(self):
        kernels = parse_resource_usage(self.usage)
        by = {(k.member, k.arch, k.name): k for k in kernels}
        self.assertEqual(len(kernels), 7)  # 3 kernels x 2 arches + the one-arch kernel
        spill = by[("spill.cu.o", "sm_90a", "_Z15spilling_kernelPKfPfi")]
        self.assertGreater(spill.stack, 0)  # ptxas: 196 bytes spill stores
        self.assertEqual(spill.reg, 32)     # the __launch_bounds__ cap
        clean = by[("spill.cu.o", "sm_120a", "_Z12clean_kernelPKfPf")]
        self.assertEqual((clean.stack, clean.local), (0, 0))
        self.assertGreaterEqual(clean.shared, 1024)  # its 256-float tile
        self.assertEqual(parse_list_elf(self.elf),
                         {"spill.cu.o": {"sm_90a", "sm_120a"}, "one_arch.cu.o": {"sm_90a"}})

    def test_the_spill_and_the_stack_frame_fail(self):
        failures = self.run_check()
        text = "\n".join(failures)
        for arch in DEFAULT_ARCHES:
            self.assertRegex(text, rf"spilling_kernel.*{arch}.*stack")
            self.assertRegex(text, rf"local_array_kernel.*{arch}.*stack")
        self.assertNotIn("clean_kernel", text)

    def test_a_missing_architecture_fails(self):
        text = "\n".join(self.run_check())
        self.assertIn("one_arch_kernel(float const*, float*) (one_arch.cu.o): no sm_120a SASS", text)
        self.assertIn("one_arch.cu.o: the fatbinary holds no sm_120a cubin", text)

    def test_the_allowlist_admits_a_bounded_stack_only(self):
        allow = parse_allowlist("# kernel  bytes  reason\nlocal_array_kernel 256 per-thread table (test)\n"
                                "spilling_kernel 64 too small a bound\n")
        text = "\n".join(self.run_check(allow=allow))
        self.assertNotIn("local_array_kernel", text)
        self.assertRegex(text, r"spilling_kernel.*allowlist bound 64 B")
        with self.assertRaises(ParseError):
            parse_allowlist("local_array_kernel 256\n")  # no reason

    def test_clean_code_passes(self):
        clean = re.sub(r"STACK:\d+", "STACK:0", self.usage)
        elf = re.sub(r"(ELF file +3: libsample.3.sm_90a.cubin)", r"\1\nELF file    4: libsample.4.sm_120a.cubin", self.elf)
        self.assertNotEqual(elf, self.elf)
        kernels = parse_resource_usage(clean)
        # the one-arch kernel's resource block, copied as if it had been built for sm_120a too
        kernels += [dataclasses.replace(k, arch="sm_120a") for k in kernels if k.member == "one_arch.cu.o"]
        with open(os.devnull, "w") as devnull:
            self.assertEqual(check(kernels, parse_list_elf(elf), DEFAULT_ARCHES, self.LIMITS, [], out=devnull), [])

    def test_shared_memory_above_the_sm120_limit_fails_there_only(self):
        big = self.usage.replace("SHARED:2048", f"SHARED:{100 * 1024}")
        text = "\n".join(self.run_check(usage=big))
        self.assertRegex(text, r"clean_kernel.*sm_120a\): 102400 B of static shared memory, above the 99 KB")
        self.assertNotRegex(text, r"clean_kernel.*sm_90a\): .*shared")

    def test_unparseable_output_fails_loudly(self):
        with self.assertRaises(ParseError):  # a function whose resource line is gone
            parse_resource_usage(re.sub(r"\n  REG:[^\n]*", "", self.usage, count=1))
        with self.assertRaises(ParseError):  # a field that is not KEY:number
            parse_resource_usage(self.usage.replace("STACK:0", "STACK:zero", 1))
        with self.assertRaises(ParseError):  # a line of a format this script does not know
            parse_resource_usage(self.usage.replace("Resource usage:", "Resource usage:\n Registers per thread", 1))
        with self.assertRaises(ParseError):
            parse_list_elf(self.elf + "\nsomething else\n")
        with self.assertRaises(ParseError):
            parse_limits("inline constexpr int kWarpSize = 32;", DEFAULT_ARCHES)
        # No kernel at all is a failure, not a pass.
        self.assertTrue(self.run_check(usage="", elf=""))

    def test_limits_come_from_cuda_limits_h(self):
        with open(DEFAULT_LIMITS, encoding="utf-8") as f:
            self.assertEqual(parse_limits(f.read(), DEFAULT_ARCHES), self.LIMITS)

    def test_the_committed_allowlist_parses(self):
        with open(DEFAULT_ALLOWLIST, encoding="utf-8") as f:
            for e in parse_allowlist(f.read()):
                self.assertTrue(e.reason.strip())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("library", nargs="?", help="libfp4serve_cuda.a (or any object with device code)")
    p.add_argument("--arch", action="append", help=f"architectures required (default: {', '.join(DEFAULT_ARCHES)})")
    p.add_argument("--limits", default=DEFAULT_LIMITS, help="cuda_limits.h")
    p.add_argument("--allowlist", default=DEFAULT_ALLOWLIST, help="kernels allowed a stack frame")
    p.add_argument("--cuobjdump", help="the cuobjdump to run")
    p.add_argument("--self-test", action="store_true", help="test the parser and checks on tests/data/cuda/")
    p.add_argument("--print-cuobjdump", action="store_true", help="print the cuobjdump this script would run")
    a = p.parse_args()
    if a.print_cuobjdump:
        print(find_cuobjdump(a.cuobjdump))
        return 0
    if a.self_test:
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(SelfTest)
        return 0 if unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful() else 1
    if not a.library:
        p.error("a library to check, or --self-test")
    return check_library(a.library, tuple(a.arch or DEFAULT_ARCHES), a.limits, a.allowlist, find_cuobjdump(a.cuobjdump))


if __name__ == "__main__":
    sys.exit(main())
