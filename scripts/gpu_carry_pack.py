#!/usr/bin/env python3
"""Packs the full fp4serve for the GPU machine (scripts/gpu-carry.sh): the stripped binary, the shared
libraries it loads that a glibc + libstdc++ base lacks (from ldd: boost's, curl's, zmq's, OpenSSL's, the
image codecs', fmt's, spdlog's, OpenMP's ...), the real tokenizer and the Qwen3.6 chat template, and a
wrapper that points LD_LIBRARY_PATH at the libraries. The tar.xz unpacks to fp4serve/:

  fp4serve/fp4serve          the wrapper (sh): what scripts/gpu-check.sh and the e2e tests run
  fp4serve/bin/fp4serve      the binary (CUDA runtime linked statically; libcuda comes from the driver)
  fp4serve/lib/              the carried libraries
  fp4serve/tokenizer/        tokenizer.json, tokenizer_config.json, chat_template.jinja
  fp4serve/MANIFEST          what was carried and the glibc / libstdc++ symbol versions the binary needs

--check unpacks the archive and runs `fp4serve --help` and `fp4serve doctor` in a chroot holding only
the base libraries and the archive, with an empty environment: a library the archive lacks fails there.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What every Linux machine that runs a g++-built program has: glibc's libraries, the loader, the GCC
# runtime and libstdc++; libcuda is the NVIDIA driver's own (never carried: it must match the kernel
# module). Everything else ldd lists is carried.
BASE = re.compile(r"^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread\.so|libdl\.so|librt\.so|libresolv\.so|"
                  r"libstdc\+\+\.so|libgcc_s\.so|libcuda\.so)")
WRAPPER = """#!/bin/sh
# fp4serve with the libraries carried beside it (scripts/gpu_carry_pack.py).
here=$(cd "$(dirname "$0")" && pwd)
LD_LIBRARY_PATH=$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec "$here/bin/fp4serve" "$@"
"""


def ldd(binary: Path) -> list[tuple[str, str | None]]:
    """(soname, resolved path or None when not found) of every library the binary loads."""
    out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=True).stdout
    libs = []
    for line in out.splitlines():
        line = line.strip()
        m = re.match(r"^(\S+) => (not found|(\S+) \(0x[0-9a-f]+\))$", line)
        if m:
            libs.append((m.group(1), m.group(3)))
        elif line.startswith("/"):  # the loader itself
            libs.append((os.path.basename(line.split()[0]), line.split()[0]))
    return libs


def symbol_versions(binary: Path) -> dict[str, str]:
    """The newest GLIBC_ and GLIBCXX_ / CXXABI_ versions the binary's dynamic symbols need."""
    out = subprocess.run(["objdump", "-T", str(binary)], capture_output=True, text=True, check=True).stdout
    newest: dict[str, tuple[int, ...]] = {}
    for prefix, ver in re.findall(r"\b(GLIBC|GLIBCXX|CXXABI)_([0-9.]+)\b", out):
        v = tuple(int(x) for x in ver.split("."))
        newest[prefix] = max(newest.get(prefix, v), v)
    return {k: ".".join(map(str, v)) for k, v in sorted(newest.items())}


def pack(binary: Path, tokenizer: Path, out: Path) -> None:
    stage = Path(tempfile.mkdtemp(prefix="fp4serve-carry-"))
    try:
        top = stage / "fp4serve"
        (top / "bin").mkdir(parents=True)
        (top / "lib").mkdir()
        (top / "tokenizer").mkdir()
        subprocess.run(["strip", "-o", str(top / "bin" / "fp4serve"), str(binary)], check=True)
        carried, missing = [], []
        for soname, path in ldd(binary):
            if BASE.match(soname):
                continue
            if path is None:
                missing.append(soname)
                continue
            shutil.copy2(os.path.realpath(path), top / "lib" / soname)
            carried.append(soname)
        if missing:
            sys.exit(f"gpu_carry_pack: ldd finds no {', '.join(missing)} for {binary}")
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy2(tokenizer / name, top / "tokenizer" / name)
        shutil.copy2(ROOT / "tests" / "data" / "chat_templates" / "qwen3.6.jinja", top / "tokenizer" / "chat_template.jinja")
        (top / "fp4serve").write_text(WRAPPER)
        (top / "fp4serve").chmod(0o755)
        needs = symbol_versions(binary)
        (top / "MANIFEST").write_text(
            f"binary: {binary} ({(top / 'bin' / 'fp4serve').stat().st_size} bytes stripped)\n"
            f"needs from the machine: {', '.join(f'{k} {v}' for k, v in needs.items())}; libcuda (the driver)\n"
            f"carried libraries: {' '.join(carried)}\n")
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp")
        subprocess.run(["tar", "-C", str(stage), "-cf", str(tmp), "-I", "xz -T0 -6", "fp4serve"], check=True)
        tmp.replace(out)
        print((top / "MANIFEST").read_text(), end="")
        print(f"{out}: {out.stat().st_size / 1048576:.1f} MiB")
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def check(archive: Path, binary: Path) -> None:
    """Runs the archive's binary in a chroot that holds the base libraries and nothing else."""
    root = Path(tempfile.mkdtemp(prefix="fp4serve-chroot-"))
    try:
        subprocess.run(["tar", "-xJf", str(archive), "-C", str(root)], check=True)
        for soname, path in ldd(binary):
            if BASE.match(soname) and path:
                dest = root / path.lstrip("/")
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(os.path.realpath(path), dest)
        # /proc for doctor's host checks (mounted where this machine allows it, skipped otherwise).
        (root / "proc").mkdir()
        proc = subprocess.run(["mount", "-t", "proc", "proc", str(root / "proc")], capture_output=True).returncode == 0
        (root / "tmp").mkdir()
        env = {"LD_LIBRARY_PATH": "/fp4serve/lib", "HOME": "/tmp", "FP4SERVE_CACHE": "/tmp"}
        try:
            for argv in (["--help"], ["doctor"]):
                r = subprocess.run([shutil.which("chroot") or "/usr/sbin/chroot", str(root), "/fp4serve/bin/fp4serve", *argv], env=env,
                                   capture_output=True, text=True, timeout=120)
                print(f"chroot check: fp4serve {' '.join(argv)} -> exit {r.returncode}" + ("" if proc else " (no /proc)"))
                text = (r.stdout + r.stderr).strip()
                if r.returncode != 0 or "error while loading shared libraries" in text:
                    # doctor exits 1 when a check warns (no GPU here): only a loader error fails the check.
                    if argv == ["--help"] or "error while loading" in text:
                        sys.exit(f"gpu_carry_pack --check: fp4serve {' '.join(argv)} failed:\n{text}")
                print("  " + "\n  ".join(text.splitlines()[:6]))
        finally:
            if proc:
                subprocess.run(["umount", str(root / "proc")], check=False)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--binary", required=True, type=Path)
    p.add_argument("--tokenizer", required=True, type=Path, help="directory with tokenizer.json")
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--check", action="store_true", help="then run it in a chroot with only the base libraries")
    p.add_argument("--check-only", action="store_true", help="check an archive packed before")
    a = p.parse_args()
    if not a.check_only:
        pack(a.binary, a.tokenizer, a.out)
    if a.check or a.check_only:
        check(a.out, a.binary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
