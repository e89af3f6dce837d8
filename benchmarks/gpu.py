"""One prepared GPU session: ``python -m benchmarks.gpu [--dry-run]`` (or ``bash benchmarks/gpu_run.sh``).

On a CUDA machine, in well under 10 minutes:

1. the ``gpu``-marked tests (``pytest -m gpu``), log in ``benchmarks/results/gpu_tests.txt``;
2. ``python -m benchmarks --quick --device cuda`` in bf16: the SDPA kernel that ran (flash,
   memory-efficient or cuDNN), GPT-2-small forward against HF, a training step with and without
   ``torch.compile`` (TFLOP/s and MFU), decode tokens/s and the cache speedup; written to
   ``benchmarks/results/quick_cuda.json`` (the ``gpu`` block of book/benchmarks.md reads it);
3. the page's generated blocks re-rendered (``python -m benchmarks.report``).

``--dry-run`` runs the same steps on the CPU at smoke size into a temporary folder (the gpu tests
are collected and skip; the training step runs eager only), to check the code paths without a GPU.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from . import models
from .__main__ import main as bench_main, settings_for
from .report import DEFAULT_JSON, DEFAULT_PAGE, GPU_JSON, render_gpu_doc, render_page

ROOT = Path(__file__).resolve().parents[1]
BUDGET_S = {"tests": 150, "benchmarks": 390}  # of the 10 minutes; the rest is start-up and slack


def run_tests(log_path: Path, timeout: int) -> int:
    """``pytest -m gpu`` in a subprocess, its output kept in ``log_path``; returns its exit code."""
    cmd = [sys.executable, "-m", "pytest", "tests", "-m", "gpu", "-q", "-p", "no:cacheprovider",
           "--ignore=tests/test_book_browser.py", "--ignore=tests/test_book_build.py"]
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        text, rc = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as e:
        text, rc = f"{e.stdout or ''}\ntimed out after {timeout} s\n", 124
    log_path.write_text(text)
    print(text[-2000:], flush=True)
    return rc


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu", description=__doc__.split("\n")[0])
    p.add_argument("--dry-run", action="store_true", help="CPU, smoke sizes, temporary output")
    args = p.parse_args(argv)
    t0 = time.time()
    if not args.dry_run and not torch.cuda.is_available():
        print("no CUDA device: use --dry-run to check the code paths on the CPU", file=sys.stderr)
        return 2
    out_dir = Path(tempfile.mkdtemp(prefix="gpu_dry_")) if args.dry_run else GPU_JSON.parent
    rc_tests = run_tests(out_dir / "gpu_tests.txt", BUDGET_S["tests"])
    print(f"gpu tests: exit {rc_tests} ({time.time() - t0:.0f} s)", flush=True)
    json_path = out_dir / ("smoke_cpu.json" if args.dry_run else GPU_JSON.name)
    bench_args = ["--smoke", "--device", "cpu"] if args.dry_run else ["--quick", "--device", "cuda"]
    bench_main([*bench_args, "--out", str(json_path)])
    doc = json.loads(json_path.read_text())
    if args.dry_run:  # the CUDA-only training step, eager, at smoke size on the CPU
        doc["benchmarks"]["models"]["train_step"] = models.train_step(settings_for("smoke", "cpu", 1),
                                                                      compile_too=False)
        json_path.write_text(json.dumps(doc, indent=1) + "\n")
    doc["tests"] = {"exit_code": rc_tests, "log": str(out_dir / "gpu_tests.txt")}
    json_path.write_text(json.dumps(doc, indent=1) + "\n")
    block = render_gpu_doc(doc)
    print(block)
    if not args.dry_run:
        page = DEFAULT_PAGE.read_text()
        DEFAULT_PAGE.write_text(render_page(page, json.loads(DEFAULT_JSON.read_text())))
        print(f"updated {DEFAULT_PAGE}")
    print(f"done in {time.time() - t0:.0f} s; results in {json_path}")
    return 0 if rc_tests == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
